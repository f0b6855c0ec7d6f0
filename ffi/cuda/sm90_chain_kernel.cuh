// The Hopper GEMM-chain kernel: a persistent, warp-specialized wgmma + TMA GEMM
// that runs the tiles of one or two chained GEMMs (the MLP's producer and
// consumer) from one schedule.
//
// Schedule. Position p < tiles0 is producer tile p (stage 0); the rest are
// consumer tiles (stage 1). A launch covers positions [begin, end): the fused
// mode runs [0, tiles0 + tiles1) at once, the serial mode two launches. A
// launch that waits takes positions from the placed schedule
// (cusync/placed_schedule.h: the static placement, with stealing; whole
// tiles: the fused MLP and conv pair) or from a global atomic counter (clusters). Either
// way every producer tile is held before any consumer tile is taken, and a
// CTA's loader finishes issuing a tile's loads before it takes the next one,
// so a consumer tile that waits never holds back a producer tile: no deadlock,
// whatever the residency. A launch without waits takes the static schedule.
//
// cuSync hooks (the rules come from the core: Stage, Policy, gemm_dependency):
//  - the loader thread, before it loads a consumer A k-block, spins (acquire)
//    on the semaphores the policy names, then fences the async proxy so the
//    TMA read sees the producer's stores; B is loaded before the wait (R);
//  - the MMA warpgroups, after storing a producer tile, barrier, fence and
//    post (release add, or release store where a semaphore has one poster).
//
// SwiGLU (Cfg::kSwiglu): a producer tile is kTileN/2 columns of h. Its MMA
// tile is kTileN wide: B = [gate columns | the same up columns] of w1, loaded
// through two views, and the epilogue stores silu(gate + b) * (up + b). The
// consumer is then a plain GEMM on h [rows, F].
//
// Where producer tiles are not a multiple of 64 columns wide (128x96), a
// consumer k-block can read two producer tiles per row: the waits below cover
// every producer tile of a k-block.
//
// Stream-K (configurations with Cfg::kStreamK; a launch with
// ChainParams::stream_k set runs one stage, unsynchronized; see
// cusync/stream_k.h): a CTA takes no positions from the counter; it runs its
// own range of the stage's k-blocks, segment by segment, and the loader
// publishes each segment's first unit as the position. The other
// configurations compile none of it (their code is what it was without it).
// With 2x1 clusters the lines are padded to an even count and CTA c runs line
// c % lines, so the two CTAs of a cluster run the same range of lines 2r and
// 2r + 1: the same columns and k-blocks, B multicast as for whole tiles. No
// mailbox is needed (neither takes positions from the counter).
//
// 2x1 clusters (Cfg::kClusterM == 2): a position is a pair of row tiles
// (2r, 2r+1) of one column tile; (r, col) is the stage's order applied to a
// grid of ceil(rows/2) pair rows (kGrouped bands of ceil(group_rows/2) pair
// rows, the same tile rows as before). The leader CTA's loader takes the
// position and sends it to the peer's loader, so both run the same column
// tile at once; each loads its own A and half of B, multicast to both. The
// schedule argument above holds per cluster: the leader takes the next
// position only after issuing every load of the last one, and the peer reads
// it only after issuing its own. Where 2r+1 is past the last row tile, the
// peer still runs the position (B is shared): it loads the leader's A rows
// without waiting, and stores and posts nothing.
#pragma once

#include <cutlass/arch/barrier.h>
#include <cutlass/arch/reg_reconfig.h>

#include "cuda/sm90_chain_config.cuh"
#include "cuda/sm90_ptx.cuh"
#include "cusync/activation.h"
#include "cusync/dependency.h"
#include "cusync/placed_schedule.h"
#include "cusync/policy.h"
#include "cusync/satisfied_semaphores.h"
#include "cusync/semaphore.h"
#include "cusync/stage.h"
#include "cusync/stream_k.h"

namespace cusync_sm90 {

// One GEMM of the chain: out[rows, n] = epilogue(A @ B).
template <class Cfg>
struct GemmStage {
  typename Cfg::TmaA tma_a;         // A [rows, k]
  typename Cfg::TmaB tma_b;         // B viewed as [n_all, k]
  typename Cfg::TmaBHalf tma_gate;  // SwiGLU producer: w1's gate columns [n_all, k]; clusters: B (multicast)
  typename Cfg::TmaBHalf tma_up;    // SwiGLU producer: w1's up columns [n_all, k]
  typename Cfg::TmaOut tma_out;     // out [rows, n_all], where tma_store
  bool tma_store;                   // the epilogue stores through TMA (aligned out, Cfg::kTmaStore)
  int rows, k, n_all;               // tensor extents of the descriptors
  int a_ld;                         // row stride of A (elements)
  typename Cfg::Element* out;
  int out_ld;
  typename Cfg::Element const* bias;     // [n_all] or null (SwiGLU producer: the gate bias)
  typename Cfg::Element const* bias_up;  // SwiGLU producer: the up bias [n_all], or null
  cusync::Stage tiling;                  // output tiles, their order and slices
  cusync::StageDivisors divisors;        // tiling's, precomputed (set_tiling sets both)
  cusync::Activation activation;
  typename Cfg::ConvAField conv;         // Cfg::kConvA: A through im2col (else empty)
};

template <class Cfg>
struct ChainParams {
  GemmStage<Cfg> stage[2];
  int tiles0;          // positions below this are stage-0 tiles
  int begin, end;      // the schedule positions this launch runs
  // The next schedule position, zeroed before the launch; null (and null
  // placed_flags): a static schedule (a launch without waits), the CTA's i-th
  // position is its index (its cluster's, in clusters) plus i grids, and
  // nothing need be zeroed.
  int* counter;
  // The fused schedule that keeps the static placement (cusync/placed_schedule.h):
  // flags (one a position) and cursors (two), zeroed; null flags: counter or static.
  int* placed_flags;
  int* placed_cursors;
  int* started;        // streams mode: set once a CTA runs (the wait kernel spins on it), else null
  int* semaphores;     // producer semaphores (policy.semaphore_count words)
  cusync::Policy policy;
  bool consumer_waits;  // fused and streams: stage-1 tiles wait on stage-0 posts
  bool producer_posts;  // stage-0 tiles post when stored
  bool release_store;   // single-poster semaphores: post with a release store
  // Launched as a programmatic dependent of the previous kernel in its stream
  // (serial mode's consumer behind its producer): the loader waits for that
  // grid's completion before its first A load (launch_chain sets the launch
  // attribute).
  bool wait_prior_grid;
#ifdef CUSYNC_SM90_PROBE_SIDES
  int probe_side;  // kProbeWhole, kProbeLoadsOnly or kProbeMmaOnly (harness builds only)
#endif
  // Stream-K (Cfg::kStreamK only): on where stream_k.ctas_per_row > 0 (then
  // begin = 0, end = kStreamKDone, and the launch has stream_k.ctas() CTAs).
  cusync::StreamK stream_k;
  int stream_k_stage;       // the stage it runs
  int* stream_k_counts;     // [tiles], segments arrived and stored (finish_stream_k_segment); zeroed before the launch
  float* stream_k_partials; // [tiles][max_segments][tile elements], in the MMA threads' register order
};

// The loader's last position in stream-K: past every unit.
constexpr int kStreamKDone = 0x7fffffff;

// A schedule position resolved to a tile, and the k-blocks [kb0, kb1) of it
// to run (all of them but in stream-K).
struct TileJob {
  int stage;
  cusync::Tile tile;
  int row0, row1, col0, col1, slice;
  int kb0, kb1;
  int index;             // stream-K: row * cols + col, which count and partial sums are the tile's
  int segment, segments; // stream-K: which of the tile's segments, of how many (1: whole)
};

// Schedule positions of a stage: tiles, or row-tile pairs with clusters.
template <class Cfg>
__host__ __device__ __forceinline__ int schedule_positions(const cusync::Stage& s) {
  if constexpr (Cfg::kClusterM == 1) return s.tile_count();
  else return cusync::ceil_div(s.grid_rows(), Cfg::kClusterM) * s.grid_cols();
}

template <class Cfg>
__device__ __forceinline__ TileJob resolve(ChainParams<Cfg> const& p, int pos) {
  TileJob j;
  if (Cfg::kStreamK && p.stream_k.ctas_per_row > 0) {
    // pos: the segment's first unit in this CTA's range of its line.
    const cusync::StreamKSegment seg = p.stream_k.segment(p.stream_k.row_of(blockIdx.x), pos,
                                                  p.stream_k.cta_end(blockIdx.x));
    j.stage = p.stream_k_stage;
    const cusync::Stage& s = p.stage[j.stage].tiling;
    j.tile = seg.tile;
    j.row0 = s.row_begin(j.tile);
    j.row1 = s.row_end(j.tile);
    j.col0 = s.col_begin(j.tile);
    j.col1 = s.col_end(j.tile);
    j.slice = s.slice_of(j.tile);
    j.kb0 = seg.kb0;
    j.kb1 = seg.kb1;
    j.index = seg.index;
    j.segment = seg.slot;
    j.segments = seg.count;
    return j;
  }
  j.stage = pos < p.tiles0 ? 0 : 1;
  j.kb0 = 0;
  j.kb1 = (p.stage[j.stage].k + Cfg::kTileK - 1) / Cfg::kTileK;
  j.index = 0;
  j.segment = 0;
  j.segments = 1;
  const cusync::Stage& s = p.stage[j.stage].tiling;
  const cusync::StageDivisors& d = p.stage[j.stage].divisors;
  if constexpr (Cfg::kClusterM == 1) {
    j.tile = d.tile(s, j.stage == 0 ? pos : pos - p.tiles0);
  } else {
    // This CTA's row tile of the pair; past the last row tile, row_end <=
    // row_begin and the tile is empty.
    constexpr int kM = Cfg::kClusterM;
    const cusync::Tile t = cusync::tile_at(s.order, j.stage == 0 ? pos : pos - p.tiles0,
                                           cusync::ceil_div(s.grid_rows(), kM), s.grid_cols(), s.slices,
                                           cusync::ceil_div(s.group_rows, kM));
    j.tile = cusync::Tile{t.row * kM + int(cute::block_rank_in_cluster()), t.col};
  }
  j.row0 = s.row_begin(j.tile);
  j.row1 = s.row_end(j.tile);
  j.col0 = s.col_begin(j.tile, d.tiles_per_slice);
  j.col1 = s.col_end(j.tile, d.tiles_per_slice);
  j.slice = s.slice_of(j.tile, d.tiles_per_slice);
  return j;
}

// Cluster schedule mailbox. The leader stores a position into the peer's
// slot; st.async completes the peer's barrier with the bytes, so the peer
// sees the value once its wait returns.
__device__ __forceinline__ void send_to_peer(int* slot, uint64_t* full, int value, uint32_t peer) {
  const uint32_t s = cute::cast_smem_ptr_to_uint(slot), b = cute::cast_smem_ptr_to_uint(full);
  asm volatile(
      "{\n\t.reg .b32 rs, rb;\n\t"
      "mapa.shared::cluster.u32 rs, %0, %2;\n\t"
      "mapa.shared::cluster.u32 rb, %1, %2;\n\t"
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [rs], %3, [rb];\n\t}"
      ::"r"(s), "r"(b), "r"(peer), "r"(value) : "memory");
}

// The peer frees its slot: release at cluster scope orders its read of the
// slot before the leader's next store into it.
__device__ __forceinline__ void arrive_on_peer(uint64_t* bar, uint32_t cta) {
  const uint32_t a = cute::cast_smem_ptr_to_uint(bar);
  asm volatile(
      "{\n\t.reg .b32 ra;\n\t"
      "mapa.shared::cluster.u32 ra, %0, %1;\n\t"
      "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n\t}"
      ::"r"(a), "r"(cta) : "memory");
}

// Waits for the phase of `parity` with acquire at cluster scope: the
// arrivals and bytes it waits for come from the other CTA.
__device__ __forceinline__ void wait_cluster(uint64_t* bar, uint32_t parity) {
  const uint32_t a = cute::cast_smem_ptr_to_uint(bar);
  asm volatile(
      "{\n\t.reg .pred P1;\n\t"
      "WAIT_CLUSTER:\n\t"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P1, [%0], %1;\n\t"
      "@!P1 bra WAIT_CLUSTER;\n\t}"
      ::"r"(a), "r"(parity) : "memory");
}

__device__ __forceinline__ int load_shared(const int* p) {
  int v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(cute::cast_smem_ptr_to_uint(p)) : "memory");
  return v;
}

__device__ __forceinline__ void fence_async_proxy_global() {
  asm volatile("fence.proxy.async.global;" ::: "memory");
}

// Barrier among the two MMA warpgroups only (id 0 is __syncthreads').
__device__ __forceinline__ void mma_warpgroups_sync(int threads) {
  asm volatile("bar.sync 1, %0;" ::"r"(threads) : "memory");
}

// Phase stamps of each CTA's first tile, for the harnesses' `phases` modes
// (bench/gemm_vs_cutlass.cu, conv_vs_cutlass.cu, conv_pair_sync.cu, built
// with -DCUSYNC_SM90_PHASE_TIMES): where a launch's cycles go between entry,
// the first TMA data, the mainloop's end and the epilogue's; slot 14 holds
// the first tile's GEMM (1 or 2), not a time; slots 16 and 17 hold cycles
// spent waiting over the first tile (the loader for free stages, the first
// MMA warpgroup for landed data), which tell a mainloop paced by the loader
// from one paced by the tensor cores. Slot 18 holds the clock read first
// thing at entry (slot 0 waits for the load of g_phase_times), 19 the
// loader's after prefetching the descriptors, 20 its entry to the schedule
// loop; 21 the first MMA thread's once it holds its first tile's position,
// 22 once it is about to wait for that tile's first data (which tell a first
// data paced by the MMA side's own path from one paced by the load). The
// package compiles none of it.
#ifdef CUSYNC_SM90_PHASE_TIMES
constexpr int kPhaseSlots = 23;
__device__ long long* g_phase_times;  // [gridDim.x][kPhaseSlots], or null
__device__ __forceinline__ long long global_timer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return (long long)t;
}
// Stamps `now` (clock64() or global_timer()) into this CTA's slot where cond holds.
#define CUSYNC_PHASE_AT(slot, cond, now)                                                   \
  do {                                                                                     \
    if ((cond) && g_phase_times != nullptr) g_phase_times[blockIdx.x * kPhaseSlots + (slot)] = (now); \
  } while (0)
// Runs `stmt`, adding the cycles it took to `total` where cond holds.
#define CUSYNC_PHASE_WAITED(total, cond, stmt)    \
  do {                                            \
    const long long t0_ = clock64();              \
    stmt;                                         \
    if (cond) (total) += clock64() - t0_;         \
  } while (0)
#else
#define CUSYNC_PHASE_AT(slot, cond, now) \
  do {                                   \
  } while (0)
#define CUSYNC_PHASE_WAITED(total, cond, stmt) stmt
#endif
#define CUSYNC_PHASE(slot, cond) CUSYNC_PHASE_AT(slot, cond, clock64())

// Per-tile stamps of a whole launch, for bench/mlp_pair_trace.cu (built with
// -DCUSYNC_SM90_TILE_TRACE; the package compiles none of it): where the
// phase stamps above see each CTA's first tile, these see every tile, so a
// fused launch's cycles can be laid beside its two serial launches' tile by
// tile. Indexed by stage and the tile's position within its stage; slots:
// 0 the SM + 1, 1 the loader's claim (clock64), 2 its first A issue (after
// any wait), 3 its last A issue, 4 the MMA warpgroup's mainloop start (after
// the pingpong order barrier), 5 the first data landed, 6 the mainloop's end,
// 7 the epilogue's end (with its post), 8 and 9 the global timer (ns) at the
// claim and at the epilogue's end, 10 the MMA's cycles waiting for data after
// the first k-block, 11 the MMA warpgroup.
#ifdef CUSYNC_SM90_TILE_TRACE
constexpr int kTraceSlots = 12, kTraceStageTiles = 1 << 14;
__device__ long long* g_tile_trace;  // [2][kTraceStageTiles][kTraceSlots], or null
__device__ __forceinline__ long long trace_timer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return (long long)t;
}
__device__ __forceinline__ long long trace_smid() {
  unsigned s;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
  return (long long)s;
}
// local: the tile's position within its stage.
#define CUSYNC_TRACE(stage, local, slot, value)                                                   \
  do {                                                                                            \
    if (g_tile_trace != nullptr && (local) < kTraceStageTiles)                                    \
      g_tile_trace[((stage) * kTraceStageTiles + (local)) * kTraceSlots + (slot)] = (value);      \
  } while (0)
#else
#define CUSYNC_TRACE(stage, local, slot, value) \
  do {                                          \
  } while (0)
#endif

// Probe builds for the harnesses (-DCUSYNC_SM90_PROBE_SIDES; the package
// compiles none of it): ChainParams::probe_side leaves one side of the
// pipeline out, so a harness times the sides beside the whole GEMM in one
// process: kProbeLoadsOnly, the MMA warpgroups wait for each stage and free it
// without a wgmma (the outputs are the epilogue of zeros); kProbeMmaOnly, the
// loader completes each stage's bytes on its full barrier instead of issuing
// TMA (the wgmmas read whatever shared memory holds). Whole-tile GEMM
// launches without waits (what the GEMM harness runs).
#ifdef CUSYNC_SM90_PROBE_SIDES
constexpr int kProbeWhole = 0, kProbeLoadsOnly = 1, kProbeMmaOnly = 2;
#endif

// The part of the producer's output that k range [k_begin, k_end) of a
// consumer tile reads.
template <class Cfg>
__device__ __forceinline__ cusync::Region consumer_region(ChainParams<Cfg> const& p, const TileJob& job,
                                                          int k_begin, int k_end) {
  if constexpr (Cfg::kConvA) {
    // The consumer conv's k-block reads its pixels' halo in the producer's output.
    const auto& c = p.stage[1].conv;
    const cusync::ConvGeometry geo{c.height, c.width, c.channel_blocks * Cfg::kTileK, 2 * -c.corner + 1,
                                   c.filter_s};
    return cusync::conv_dependency(geo, c.images, job.row0, job.row1, k_begin, k_end);
  } else {
    return cusync::gemm_dependency(job.row0, job.row1, k_begin, k_end);
  }
}

// Spins until every semaphore the policy names for this A k-block has its
// count; `ready` skips the ones this tile has already acquired.
template <class Cfg>
__device__ __forceinline__ void wait_for_producer(ChainParams<Cfg> const& p, const TileJob& job,
                                                  int k_begin, int k_end, cusync::SatisfiedSemaphores& ready) {
  const cusync::Region r = consumer_region(p, job, k_begin, k_end);
  bool acquired = false;
  p.policy.for_each_wait(p.stage[0].tiling, r, [&](int sem, int count) {
    if (ready.has(sem)) return;
    const int* word = p.semaphores + sem;
    while (cusync::semaphore_load_acquire(word) < count) __nanosleep(64);
    ready.add(sem);
    acquired = true;
  });
  // The acquire ordered the producer's generic-proxy stores before us; the
  // TMA engine reads through the async proxy. Only after a new acquire: the
  // fence is not free, and one per k-block stalls the loader.
  if (acquired) fence_async_proxy_global();
}

// TileSync look-ahead: one relaxed load each for the semaphores of the next
// kProbe producer columns (all slices) of the tile's producer row, issued
// together, so one memory latency covers up to kProbe producer tiles instead
// of one acquire round trip per tile. Returns how many columns from `col` on
// are complete (a prefix); the caller orders them with one fence.
// -DCUSYNC_SM90_TILESYNC_PROBE=0 falls back to one acquire per producer tile.
#ifndef CUSYNC_SM90_TILESYNC_PROBE
#define CUSYNC_SM90_TILESYNC_PROBE 1
#endif
template <class Cfg>
__device__ __forceinline__ int probe_ready_columns(ChainParams<Cfg> const& p, int prow, int col) {
  constexpr int kProbe = 8;
  const cusync::Stage& P = p.stage[0].tiling;
  const int per_slice = P.tiles_per_slice();
  const int need = p.policy.posts_per_semaphore(P) - p.policy.under_wait;
  unsigned ok = (1u << kProbe) - 1;
  for (int s = 0; s < P.slices; ++s) {
    const int* base = p.semaphores + prow * P.grid_cols() + s * per_slice;
    int v[kProbe];
    CUTE_UNROLL
    for (int i = 0; i < kProbe; ++i) {
      v[i] = need;
      if (col + i < per_slice)
        asm volatile("ld.relaxed.gpu.global.b32 %0, [%1];" : "=r"(v[i]) : "l"(base + col + i) : "memory");
    }
    CUTE_UNROLL
    for (int i = 0; i < kProbe; ++i)
      if (v[i] < need || col + i >= per_slice) ok &= ~(1u << i);
  }
  return __ffs(~ok) - 1;  // trailing ones
}

// Where convolution A's k-block kb of the tile whose first output pixel is
// row0 starts: that pixel (n0, h0, w0), and the k-block's filter tap (r, s)
// and channel block cb.
struct ConvACursor {
  int n0, h0, w0, r, s, cb;
};
template <class Cfg>
__device__ __forceinline__ ConvACursor conv_a_cursor(const typename Cfg::ConvA& c, int row0, int kb) {
  const int plane = c.height * c.width;
  const int n0 = row0 / plane, rem = row0 - n0 * plane;
  const int h0 = rem / c.width, w0 = rem - h0 * c.width;
  const int tap = kb / c.channel_blocks, cb = kb - tap * c.channel_blocks;
  const int r = tap / c.filter_s, s = tap - r * c.filter_s;
  return {n0, h0, w0, r, s, cb};
}
// The next k-block's cursor: channel blocks within a tap, taps in row order.
template <class Cfg>
__device__ __forceinline__ void advance(const typename Cfg::ConvA& c, ConvACursor& k) {
  if (++k.cb == c.channel_blocks) {
    k.cb = 0;
    if (++k.s == c.filter_s) {
      k.s = 0;
      ++k.r;
    }
  }
}

// Convolution A: the k-block at `k` through TMA's im2col mode into `stage`.
// The box's 128 pixels run on from the tile's first in (w, h, n) order across
// row and image ends; taps that fall in the padding, and pixels past the
// last image, are zero-filled.
template <class Cfg>
__device__ __forceinline__ void load_conv_a(const typename Cfg::ConvA& c, const ConvACursor& k,
                                            typename Cfg::Element* stage, uint64_t* bar) {
  SM90_TMA_LOAD_IM2COL_4D::copy(&c.im2col, bar, stage, k.cb * Cfg::kTileK, k.w0 + c.corner, k.h0 + c.corner, k.n0,
                                static_cast<uint16_t>(k.s), static_cast<uint16_t>(k.r));
}

// The descriptors into the TMA unit's cache before the first tile (the
// first issue of each would otherwise fetch its descriptor).
template <class Cfg>
__device__ __forceinline__ void prefetch_descriptors(ChainParams<Cfg> const& p) {
  for (int s = 0; s < 2; ++s) {
    const GemmStage<Cfg>& g = p.stage[s];
    cute::prefetch_tma_descriptor(g.tma_a.get_tma_descriptor());
    cute::prefetch_tma_descriptor(g.tma_b.get_tma_descriptor());
    // The gate and up views exist for the SwiGLU producer (stage 0), and for
    // every stage of a cluster (its multicast B).
    if (Cfg::kClusterM > 1 || (Cfg::kSwiglu && s == 0)) cute::prefetch_tma_descriptor(g.tma_gate.get_tma_descriptor());
    if (Cfg::kSwiglu && s == 0) cute::prefetch_tma_descriptor(g.tma_up.get_tma_descriptor());
    if constexpr (Cfg::kConvA) cute::prefetch_tma_descriptor(&g.conv.im2col);
  }
}

// The unit's (a CTA's, or a cluster's) `taken`-th schedule position, counted
// from p.begin. The counter hands positions out in the order units claim
// them, which a launch with waits needs (a tile may wait only on tiles claimed
// before it, so the first unit to claim always progresses). Without waits the
// units step through the positions a grid apart, and no counter need be
// zeroed before the launch (a ~1 us memset beside a ~20 us GEMM).
template <class Cfg>
__device__ __forceinline__ int next_position(ChainParams<Cfg> const& p, int unit, int units, int taken) {
#ifdef CUSYNC_SM90_UNIT_STRIDE
  // Probe build (the package compiles none of it): the static schedule with
  // units permuted, unit u stepping through unit (u * STRIDE) % units's
  // positions (a permutation when STRIDE and units are coprime), so that
  // tiles next to each other in the order land on SMs far apart.
  unit = int((long long)unit * CUSYNC_SM90_UNIT_STRIDE % units);
#endif
  return p.counter != nullptr ? atomicAdd(p.counter, 1) : unit + taken * units;
}

// The loader: one thread takes schedule positions, publishes each to the MMA
// warpgroups, and streams the tile's k-blocks into the pipeline.
template <class Cfg>
__device__ __forceinline__ void load_loop(ChainParams<Cfg> const& p, typename Cfg::SharedStorage& smem,
                          typename Cfg::LoadPipeline& pipeline,
                          typename Cfg::TilePipeline& tile_pipeline) {
  using Element = typename Cfg::Element;
  auto write = cutlass::make_producer_start_state<typename Cfg::LoadPipeline>();
  auto tile_write = cutlass::make_producer_start_state<typename Cfg::TilePipeline>();
  if (p.started != nullptr) atomicExch(p.started, 1);
  // wait_prior_grid: this launch may run before the previous kernel in its
  // stream has finished (programmatic dependent launch); A may be that
  // kernel's output, so the first A load waits for its completion. B, the
  // counter and the semaphores are not written by it.
  bool prior_grid_done = !p.wait_prior_grid;

  Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), typename Cfg::SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), typename Cfg::SmemLayoutB{});
  const auto tile_mk = make_shape(typename Cfg::TileM{}, typename Cfg::TileK{});
  const auto tile_nk = make_shape(typename Cfg::TileN{}, typename Cfg::TileK{});
  // SwiGLU producer: the gate half and the up half of every B stage.
  const auto half_nks = make_shape(typename Cfg::HalfN{}, typename Cfg::TileK{}, typename Cfg::Stages{});
  Tensor sB_gate = local_tile(sB, half_nks, make_coord(0, 0, 0));
  Tensor sB_up = local_tile(sB, half_nks, make_coord(1, 0, 0));
  const auto half_nk = make_shape(typename Cfg::HalfN{}, typename Cfg::TileK{});
  // Clusters: this CTA's rank; its B half goes to both CTAs.
  [[maybe_unused]] const int rank = Cfg::kClusterM > 1 ? int(cute::block_rank_in_cluster()) : 0;
  [[maybe_unused]] int mail = 0;
  [[maybe_unused]] uint32_t mail_phase = 0;
  // Stream-K: this CTA's next unit and the end of its range.
  const bool stream_k = Cfg::kStreamK && p.stream_k.ctas_per_row > 0;
  [[maybe_unused]] int unit = stream_k ? p.stream_k.cta_begin(blockIdx.x) : 0;
  [[maybe_unused]] const int unit_end = stream_k ? p.stream_k.cta_end(blockIdx.x) : 0;
  [[maybe_unused]] long long waited_free = 0;  // phase stamps: first tile's cycles in producer_acquire
  CUSYNC_PHASE(20, true);
  const cusync::PlacedSchedule placed{p.placed_flags, p.placed_cursors, p.tiles0, p.end - p.begin, int(gridDim.x)};
  [[maybe_unused]] cusync::PlacedClaim claim = cusync::placed_start(placed, int(blockIdx.x));

  for (;;) {
    int pos;
    if (Cfg::kStreamK && stream_k) {
      pos = unit < unit_end ? unit : kStreamKDone;
    } else if constexpr (Cfg::kClusterM == 1) {
      pos = p.placed_flags != nullptr
                ? p.begin + cusync::placed_next(placed, claim)
                : p.begin + next_position(p, int(blockIdx.x), int(gridDim.x), int(tile_write.count()));
    } else if (rank == 0) {
      // Take the slot first: a position is claimed only when it can be sent.
      wait_cluster(&smem.sched_empty[mail], mail_phase ^ 1);
      pos = p.begin + next_position(p, int(blockIdx.x) / Cfg::kClusterM, int(gridDim.x) / Cfg::kClusterM,
                                    int(tile_write.count()));
      send_to_peer(&smem.sched_slot[mail], &smem.sched_full[mail], pos, 1);
    } else {
      cutlass::arch::ClusterTransactionBarrier::arrive_and_expect_tx(&smem.sched_full[mail], sizeof(int));
      wait_cluster(&smem.sched_full[mail], mail_phase);
      pos = load_shared(&smem.sched_slot[mail]);
      arrive_on_peer(&smem.sched_empty[mail], 0);
    }
    if constexpr (Cfg::kClusterM > 1) {
      if (++mail == Cfg::kSchedSlots) {
        mail = 0;
        mail_phase ^= 1;
      }
    }
    CUSYNC_PHASE(1, tile_write.count() == 0);
    tile_pipeline.producer_acquire(tile_write);
    smem.tile_slot[tile_write.index()] = pos;
    tile_pipeline.producer_commit(tile_write);
    ++tile_write;
    if (pos >= p.end) break;

    const TileJob job = resolve(p, pos);
    if constexpr (Cfg::kStreamK) unit += job.kb1 - job.kb0;
    [[maybe_unused]] const int trace_local = job.stage == 0 ? pos : pos - p.tiles0;
    CUSYNC_TRACE(job.stage, trace_local, 0, trace_smid() + 1);
    CUSYNC_TRACE(job.stage, trace_local, 1, clock64());
    CUSYNC_TRACE(job.stage, trace_local, 8, trace_timer());
    const GemmStage<Cfg>& g = p.stage[job.stage];
    // Clusters: an empty peer tile (past the last row tile) loads the
    // leader's A rows, unsynchronized: its results are never stored.
    const bool active = Cfg::kClusterM == 1 || job.row0 < job.row1;
    const bool waits = job.stage == 1 && p.consumer_waits && active;
    const bool gated = Cfg::kSwiglu && job.stage == 0;
    const int a_row0 = active ? job.row0 : job.row0 - Cfg::kTileM;

    Tensor mA = g.tma_a.get_tma_tensor(make_shape(g.rows, g.k));
    Tensor mB = g.tma_b.get_tma_tensor(make_shape(g.n_all, g.k));
    Tensor gA = local_tile(domain_offset(make_coord(a_row0, 0), mA), tile_mk, make_coord(0, _));
    Tensor gB = local_tile(domain_offset(make_coord(job.col0, 0), mB), tile_nk, make_coord(0, _));
    auto [tAgA, tAsA] = tma_partition(g.tma_a, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sA),
                                      group_modes<0, 2>(gA));
    auto [tBgB, tBsB] = tma_partition(g.tma_b, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sB),
                                      group_modes<0, 2>(gB));
    // SwiGLU producer: h columns [col0, col0 + kTileN/2) need the same
    // columns of both views (the views share a shape, so one coordinate
    // tensor serves both).
    Tensor mH = g.tma_gate.get_tma_tensor(make_shape(g.n_all, g.k));
    Tensor gH = local_tile(domain_offset(make_coord(job.col0, 0), mH), half_nk, make_coord(0, _));
    auto [tGgG, tGsG] = tma_partition(g.tma_gate, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sB_gate),
                                      group_modes<0, 2>(gH));
    auto [tUgU, tUsU] = tma_partition(g.tma_up, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sB_up),
                                      group_modes<0, 2>(gH));
    // Clusters: B columns [col0 + rank kTileN/2, + kTileN/2) into the same
    // half of the stage in both CTAs. A half that starts past the last
    // column feeds only accumulator columns that are never stored: it loads
    // the first half again rather than a box wholly out of bounds.
    // kClusterSplitK: k [32 rank, 32 rank + 32) of every stage instead, all columns.
    auto cluster_half = [&] {
      if constexpr (Cfg::kClusterSplitK) {
        const auto khalf_nk = make_shape(typename Cfg::TileN{}, typename Cfg::HalfK{});
        Tensor gM = local_tile(domain_offset(make_coord(job.col0, 0), mH), khalf_nk, make_coord(0, _));
        Tensor sB_mine = local_tile(sB, make_shape(typename Cfg::TileN{}, typename Cfg::HalfK{}, typename Cfg::Stages{}),
                                    make_coord(0, rank, 0));
        return tma_partition(g.tma_gate, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sB_mine), group_modes<0, 2>(gM));
      } else {
        int m_col0 = job.col0 + rank * (Cfg::kTileN / 2);
        if (m_col0 >= g.n_all) m_col0 = job.col0;
        Tensor gM = local_tile(domain_offset(make_coord(m_col0, 0), mH), half_nk, make_coord(0, _));
        Tensor sB_mine = local_tile(sB, half_nks, make_coord(rank, 0, 0));
        return tma_partition(g.tma_gate, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sB_mine), group_modes<0, 2>(gM));
      }
    };
    auto [tMgM, tMsM] = cluster_half();

    CUSYNC_PHASE(13, tile_write.count() == 1);
    CUSYNC_PHASE_AT(14, tile_write.count() == 1, job.stage + 1);  // which GEMM the first tile is of
    const int kb_begin = Cfg::kStreamK ? job.kb0 : 0;
    const int kb_end = Cfg::kStreamK ? job.kb1 : (g.k + Cfg::kTileK - 1) / Cfg::kTileK;
    auto ready = cusync::SatisfiedSemaphores::none();
    // TileSync, one producer row: producer columns below ready_col are known
    // complete (and ordered before our TMA reads).
    const cusync::Stage& P = p.stage[0].tiling;
    // (Divided only where a tile waits: a division is ~20 instructions on
    // the loader's path to its first TMA issue.)
    const int prow = waits ? job.row0 / P.tile_rows : 0;
    const bool probe = CUSYNC_SM90_TILESYNC_PROBE && !Cfg::kConvA && waits &&
                       p.policy.kind == cusync::PolicyKind::kTileSync &&
                       prow == (job.row1 - 1) / P.tile_rows;
    // Elsewhere, where the tile's semaphores fit the memo's 32-index window
    // (so none it adds is evicted), the loader stops waiting once the memo
    // holds them all. Building each k-block's region and walking its
    // semaphores costs ten or so integer divisions on the loader's one
    // thread, which paced the conv's TileSync mainloop (bench/NOTES_sm90.md,
    // stop 22). -1: wait every k-block.
    int tile_semaphores = -1;
    if (waits && !probe && !p.policy.waits_once_per_tile()) {
      const auto span = p.policy.wait_span(P, consumer_region(p, job, 0, g.k));
      if (span.hi - span.lo < 32) tile_semaphores = span.count;
    }
    int ready_col = 0;
    // Convolution A: the next k-block's cursor, divided out once a tile and
    // stepped from k-block to k-block. Four divisions a k-block on the
    // loader's one thread had paced the conv's mainloop (about 940 cycles a
    // k-block against 630 stepped; bench/NOTES_sm90.md, stop 22).
    [[maybe_unused]] ConvACursor conv_a{};
    if constexpr (Cfg::kConvA) conv_a = conv_a_cursor<Cfg>(g.conv, job.row0, kb_begin);
    // Called once per k-block, for kb_begin, kb_begin + 1, ... in order.
    auto next_conv_a = [&] {
      const ConvACursor k = conv_a;
      if constexpr (Cfg::kConvA) advance<Cfg>(g.conv, conv_a);
      return k;
    };
    // B of k-block kb into a stage (its barrier expects A's bytes too).
    auto load_b = [&](int kb, int stage, uint64_t* bar) {
      if constexpr (Cfg::kClusterM > 1) {
        // Each full barrier expects the whole B tile: its own half and the
        // peer's, both multicast.
        constexpr uint16_t kBoth = (1u << Cfg::kClusterM) - 1;
        copy(g.tma_gate.with(*bar, kBoth), tMgM(_, Cfg::kClusterSplitK ? 2 * kb + rank : kb), tMsM(_, stage));
      } else if (gated) {
        copy(g.tma_gate.with(*bar), tGgG(_, kb), tGsG(_, stage));
        copy(g.tma_up.with(*bar), tUgU(_, kb), tUsU(_, stage));
      } else {
        copy(g.tma_b.with(*bar), tBgB(_, kb), tBsB(_, stage));
      }
    };
    int kb = kb_begin;
    if (!prior_grid_done) {
      // B of the first stages while the previous kernel finishes (B is not
      // its output), then A once it has completed.
      const int ahead = min(kb_end - kb_begin, Cfg::kStages);
      auto w = write;
      for (int i = 0; i < ahead; ++i, ++w) {
        pipeline.producer_acquire(w);
        load_b(kb + i, w.index(), pipeline.producer_get_barrier(w));
      }
      asm volatile("griddepcontrol.wait;" ::: "memory");
      fence_async_proxy_global();  // its stores, before our TMA reads
      prior_grid_done = true;
      CUSYNC_TRACE(job.stage, trace_local, 2, clock64());
      for (int i = 0; i < ahead; ++i, ++write) {
        if constexpr (Cfg::kConvA)
          load_conv_a<Cfg>(g.conv, next_conv_a(), smem.a.data() + write.index() * (Cfg::kTileM * Cfg::kTileK),
                           pipeline.producer_get_barrier(write));
        else
          copy(g.tma_a.with(*pipeline.producer_get_barrier(write)), tAgA(_, kb + i), tAsA(_, write.index()));
      }
      kb += ahead;
    }
    for (; kb < kb_end; ++kb) {
      CUSYNC_PHASE_WAITED(waited_free, tile_write.count() == 1, pipeline.producer_acquire(write));
      auto* bar = pipeline.producer_get_barrier(write);
      const int stage = write.index();
#ifdef CUSYNC_SM90_PROBE_SIDES
      if (p.probe_side == kProbeMmaOnly) {
        cutlass::arch::ClusterTransactionBarrier::complete_transaction(bar, cute::block_rank_in_cluster(),
                                                                     Cfg::kBytesA + Cfg::kBytesB, 1);
        ++write;
        continue;
      }
#endif
      load_b(kb, stage, bar);
      if (waits && (kb == 0 || !p.policy.waits_once_per_tile())) {
        const int k0 = kb * Cfg::kTileK;
        const int k1 = p.policy.waits_once_per_tile() ? g.k : min(g.k, k0 + Cfg::kTileK);
        if (probe) {
          const int last_col = (k1 - 1) / P.tile_cols;
          if (last_col >= ready_col) {
            const int n = probe_ready_columns(p, prow, ready_col);
            ready_col += n;
            if (last_col < ready_col) {
              // Relaxed loads that saw the posts, then a fence: an acquire.
              asm volatile("fence.acq_rel.gpu;" ::: "memory");
              fence_async_proxy_global();
            } else {
              wait_for_producer(p, job, k0, k1, ready);
              ready_col = last_col + 1;  // every column up to this k-block is complete
            }
          }
        } else if (tile_semaphores < 0 || __popc(ready.bits) < tile_semaphores) {
          wait_for_producer(p, job, k0, k1, ready);
        }
      }
      if (kb == kb_begin) CUSYNC_TRACE(job.stage, trace_local, 2, clock64());
      // A: through im2col for a convolution, else the tiled view.
      if constexpr (Cfg::kConvA)
        load_conv_a<Cfg>(g.conv, next_conv_a(), smem.a.data() + stage * (Cfg::kTileM * Cfg::kTileK), bar);
      else
        copy(g.tma_a.with(*bar), tAgA(_, kb), tAsA(_, stage));
      CUSYNC_PHASE(2, write.count() == 0);
      CUSYNC_PHASE(15, tile_write.count() == 1 && kb + 1 == kb_end);  // the first tile's last A issued
      ++write;
    }
    CUSYNC_PHASE(3, tile_write.count() == 1);
    CUSYNC_PHASE_AT(16, tile_write.count() == 1, waited_free);
    CUSYNC_TRACE(job.stage, trace_local, 3, clock64());
  }
  // Every load of this CTA is issued: a kernel launched behind this one with
  // ChainParams::wait_prior_grid may start once every CTA is here (on SMs
  // this grid leaves idle, and as its CTAs exit), so its prologue and first B
  // loads overlap this grid's last k-blocks and epilogues; it reads A only
  // after this grid completes. Triggered at the start instead, its CTAs
  // waited through the whole producer on idle SMs, and the 256-token MLPs
  // ran 2 % slower (power). No effect without such a kernel.
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  // Clusters: wait until both CTAs' MMA warpgroups have freed every stage,
  // so no consumer arrival from the peer is still on its way here.
  if constexpr (Cfg::kClusterM > 1) pipeline.producer_tail(write);
}

// Two adjacent output columns, rounded once: one 32-bit store where both
// exist and the address is 4-byte aligned.
template <class Element>
__device__ __forceinline__ void store_pair(Element* dst, float v0, float v1, bool has1, bool pair_ok) {
  if (has1 && pair_ok) {
    alignas(4) Element two[2] = {Element(v0), Element(v1)};
    *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(two);
  } else {
    dst[0] = Element(v0);
    if (has1) dst[1] = Element(v1);
  }
}

// The epilogue walks a thread's accumulators as the wgmma layout holds them:
// (2 adjacent columns, 2 rows 8 apart, N/8 groups of 8 columns) per M atom;
// each warp owns a 16-row band of each M atom. `values(m, r, v, col)` gives
// the two outputs of value group v at row half r of atom m, whose first
// column in the full output is `col`; kOutGroups is how many 8-column groups
// the output tile has (N/8, or N/16 for the SwiGLU producer).
template <class Accum>
constexpr int accum_atoms_m() {
  return decltype(size<1>(std::declval<Accum>()))::value;
}

// Straight from the accumulators: for 96-wide tiles and for outputs whose
// base or row stride is not 16-byte aligned (TMA cannot store those).
template <int kOutGroups, class Cfg, class Accum, class Coords, class Values>
__device__ __forceinline__ void store_tile_direct(GemmStage<Cfg> const& g, const TileJob& job, Coords const& coords,
                                                  Values&& values) {
  const bool pair_ok = (g.out_ld % 2 == 0) && (job.col0 % 2 == 0);
  CUTE_UNROLL
  for (int m = 0; m < accum_atoms_m<Accum>(); ++m) {
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      CUTE_UNROLL
      for (int v = 0; v < kOutGroups; ++v) {
        const auto c = make_coord(make_coord(0, r, v), m, 0);
        const int row = job.row0 + get<0>(coords(c));
        const int col = job.col0 + get<1>(coords(c));
        if (row >= job.row1 || col >= job.col1) continue;
        const float2 out = values(m, r, v, col);
        store_pair(g.out + row * g.out_ld + col, out.x, out.y, col + 1 < job.col1, pair_ok);
      }
    }
  }
}

// Two outputs as one 32-bit pair of Elements.
template <class Element>
__device__ __forceinline__ uint32_t pack_pair(float2 v) {
  alignas(4) Element two[2] = {Element(v.x), Element(v.y)};
  return *reinterpret_cast<const uint32_t*>(two);
}

// Through the warp's band in shared memory and TMA: the warp writes its 16
// rows of up to kEpiBoxes * 64 columns (swizzled 16x64 boxes) with
// `stmatrix`, one lane stores the boxes. TMA clips what lies past the
// output's last row or column. The band is rewritten only once the previous
// boxes have been read out of it.
template <int kOutGroups, class Cfg, class Accum, class Coords, class Values>
__device__ __forceinline__ void store_tile_tma(GemmStage<Cfg> const& g, const TileJob& job,
                                               typename Cfg::Element* band, Coords const& coords,
                                               Values&& values) {
  using Element = typename Cfg::Element;
  constexpr int kBoxGroups = Cfg::kEpiBoxCols / 8;
  constexpr int kPassGroups = Cfg::kEpiBoxes * kBoxGroups;
  constexpr int kPasses = (kOutGroups + kPassGroups - 1) / kPassGroups;
  static_assert(kOutGroups % kBoxGroups == 0, "the output tile is whole boxes wide");
  static_assert(kBoxGroups % 2 == 0, "value groups go to stmatrix in pairs within a box");
  const int lane = threadIdx.x % 32;
  // One stmatrix.x4 takes value groups v and v + 1 (v even) of both row
  // halves: matrix j = 2 (group - v) + r, rows 8 r .. 8 r + 7 of the band.
  // Lane i gives the address of row i % 8 of matrix i / 8: band row
  // i % 8 + 8 ((i / 8) % 2), whose 16-byte chunk for group c of its box sits
  // at chunk c ^ (row % 8) under the 128-byte swizzle; with c = v + i / 16 (v
  // even) that is (v ^ (i / 16) ^ (i % 8)) % 8.
  const uint32_t lane_row = cute::cast_smem_ptr_to_uint(band) + ((lane % 8) + 8 * ((lane / 8) % 2)) * 128;
  const int lane_chunk = (lane / 16) ^ (lane % 8);
  Tensor mO = g.tma_out.get_tma_tensor(make_shape(g.rows, g.n_all));
  CUTE_UNROLL
  for (int m = 0; m < accum_atoms_m<Accum>(); ++m) {
    const int band_row = get<0>(coords(make_coord(make_coord(0, 0, 0), m, 0))) & ~15;
    CUTE_UNROLL
    for (int pass = 0; pass < kPasses; ++pass) {
      constexpr int kLastGroups = kOutGroups - (kPasses - 1) * kPassGroups;
      const int groups = pass + 1 < kPasses ? kPassGroups : kLastGroups;
      if (lane == 0) tma_store_wait<0>();
      __syncwarp();
      CUSYNC_PHASE(11, threadIdx.x == Cfg::kLoadThreads && m + 1 == accum_atoms_m<Accum>() && pass + 1 == kPasses);
      CUTE_UNROLL
      for (int vv = 0; vv < kPassGroups; vv += 2) {
        if (vv >= groups) continue;
        const int v = pass * kPassGroups + vv;
        auto pair = [&](int r, int group) {
          return pack_pair<Element>(
              values(m, r, group, job.col0 + get<1>(coords(make_coord(make_coord(0, r, group), m, 0)))));
        };
        const uint32_t m0 = pair(0, v), m1 = pair(1, v), m2 = pair(0, v + 1), m3 = pair(1, v + 1);
        const int box = vv / kBoxGroups;
        const uint32_t at = lane_row + box * Cfg::kEpiBoxElems * int(sizeof(Element)) + (((vv ^ lane_chunk) & 7) << 4);
        cusync_cuda::sm90::stmatrix_x4(at, m0, m1, m2, m3);
      }
      tma_store_fence();  // this thread's writes, before the async proxy reads them
      __syncwarp();
      if (lane == 0) {
        CUTE_UNROLL
        for (int box = 0; box < Cfg::kEpiBoxes; ++box) {
          if (box * kBoxGroups >= groups) continue;
          Tensor sO = make_tensor(make_smem_ptr(band + box * Cfg::kEpiBoxElems), typename Cfg::EpiBox{});
          Tensor gO = local_tile(mO, make_shape(_16{}, Int<Cfg::kEpiBoxCols>{}),
                                 make_coord((job.row0 + band_row) / 16,
                                            (job.col0 + pass * Cfg::kEpiBoxes * Cfg::kEpiBoxCols) /
                                                    Cfg::kEpiBoxCols + box));
          auto [tOgO, tOsO] = tma_partition(g.tma_out, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sO),
                                            group_modes<0, 2>(gO));
          copy(g.tma_out, tOsO, tOgO);
        }
        tma_store_arrive();
        CUSYNC_PHASE(10, threadIdx.x == Cfg::kLoadThreads && m == 0 && pass == 0);
      }
    }
  }
}

// SwiGLU's output from its two fp32 factors (biases added): silu(gate) * up.
__device__ __forceinline__ float swiglu(float gate, float up) { return gate / (1.f + expf(-gate)) * up; }

// Tokens as N (Cfg::kTokensN): accumulator (i, r, v) of M atom m is output
// column coords.0 and row (token) coords.1 + i, so a thread holds two rows of
// one column. Lanes l and l ^ 4 hold adjacent columns of the same rows: each
// sends the partner the value it lacks, and the even column's lane stores
// (c, c + 1) of the first row, the odd one's of the second, 4 bytes a store.
// `values(m, r, v, i, col)` gives output (token i, column col) of group v at
// row half r of atom m; kOutAtoms M atoms are stored (SwiGLU: the gate ones),
// value groups [kV0, kV1) of each (-1: all). Accumulator column c is output
// column col0 + c - col_shift (a cooperative SwiGLU tile's up warpgroup: 64).
template <int kOutAtoms, class Cfg, class Accum, int kV0 = 0, int kV1 = -1, class Coords, class Values>
__device__ __forceinline__ void store_tile_tokens_n(GemmStage<Cfg> const& g, const TileJob& job,
                                                    Coords const& coords, Values&& values, int col_shift = 0) {
  static_assert(Cfg::kTokensN);
  constexpr int kGroups = kV1 < 0 ? decltype(size<0, 2>(std::declval<Accum>()))::value : kV1;
  const bool pair_ok = (g.out_ld % 2 == 0) && (job.col0 % 2 == 0);
  CUTE_UNROLL
  for (int m = 0; m < kOutAtoms; ++m) {
    CUTE_UNROLL
    for (int r = 0; r < 2; ++r) {
      CUTE_UNROLL
      for (int v = kV0; v < kGroups; ++v) {
        const auto c = make_coord(make_coord(0, r, v), m, 0);
        const int col = job.col0 + get<0>(coords(c)) - col_shift;
        const int row = job.row0 + get<1>(coords(c));
        const float a0 = values(m, r, v, 0, col), a1 = values(m, r, v, 1, col);
        const bool odd = (get<0>(coords(c)) & 1) != 0;
        const float got = __shfl_xor_sync(0xffffffffu, odd ? a0 : a1, 4);
        if (!odd) {
          if (row < job.row1 && col < job.col1)
            store_pair(g.out + size_t(row) * g.out_ld + col, a0, got, col + 1 < job.col1, pair_ok);
        } else if (row + 1 < job.row1 && col - 1 < job.col1) {
          store_pair(g.out + size_t(row + 1) * g.out_ld + (col - 1), got, a1, col < job.col1, pair_ok);
        }
      }
    }
  }
}

// TMA where the stage allows it (Cfg::kTmaStore, an aligned output), else
// direct. An empty tile (a cluster peer past the last row tile) stores
// nothing.
template <int kOutGroups, class Cfg, class Accum, class Coords, class Values>
__device__ __forceinline__ void store_tile_with(GemmStage<Cfg> const& g, const TileJob& job,
                                                typename Cfg::Element* band, Coords const& coords,
                                                Values&& values) {
  if (job.row0 >= job.row1) return;
  if constexpr (Cfg::kTmaStore) {
    if (g.tma_store) {
      store_tile_tma<kOutGroups, Cfg, Accum>(g, job, band, coords, values);
      return;
    }
  }
  store_tile_direct<kOutGroups, Cfg, Accum>(g, job, coords, values);
}

// The tile's TMA stores have written global memory (not only read their
// shared memory): before a post.
__device__ __forceinline__ void wait_tma_stores_written() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}

// Bias, activation and conversion of one tile. The activation is a template
// argument: a run-time switch per element made the unrolled epilogue ten
// thousand instructions long.
template <cusync::Activation kAct, class Cfg, class Accum, class Coords>
__device__ __forceinline__ void store_tile_as(ChainParams<Cfg> const& p, const TileJob& job, Accum const& accum,
                                              Coords const& coords, typename Cfg::Element* band) {
  const GemmStage<Cfg>& g = p.stage[job.stage];
  auto const* const bias = g.bias;
  const int col1 = job.col1, slice = job.slice;
  if constexpr (Cfg::kTokensN) {
    constexpr int kAtoms = decltype(size<1>(accum))::value;
    store_tile_tokens_n<kAtoms, Cfg, Accum>(g, job, coords, [&](int m, int r, int v, int i, int col) {
      float a = accum(make_coord(make_coord(i, r, v), m, 0));
      if (bias != nullptr && col < col1) a += float(bias[col]);
      return cusync::activate(kAct, slice, a);
    });
  } else {
    constexpr int kGroups = decltype(size<0, 2>(accum))::value;
    store_tile_with<kGroups, Cfg, Accum>(g, job, band, coords, [&](int m, int r, int v, int col) {
      float v0 = accum(make_coord(make_coord(0, r, v), m, 0));
      float v1 = accum(make_coord(make_coord(1, r, v), m, 0));
      if (bias != nullptr) {
        if (col < col1) v0 += float(bias[col]);
        if (col + 1 < col1) v1 += float(bias[col + 1]);
      }
      float2 out = make_float2(cusync::activate(kAct, slice, v0), cusync::activate(kAct, slice, v1));
      if constexpr (Cfg::kConvA) {
        // A ResNet block's shortcut, after the activation (the consumer's is the identity).
        if (g.conv.residual != nullptr) {
          const int row = job.row0 + get<0>(coords(make_coord(make_coord(0, r, v), m, 0)));
          if (row < job.row1) {
            const auto* res = g.conv.residual + size_t(row) * g.out_ld;
            if (col < col1) out.x += float(res[col]);
            if (col + 1 < col1) out.y += float(res[col + 1]);
          }
        }
      }
      return out;
    });
  }
}

// The SwiGLU producer with tokens as N (Cfg::kTokensN): the gate columns are
// M atom 0 of the weight tile, the same up columns atom 1, so each thread
// holds both factors of its outputs.
template <class Cfg, class Accum, class Coords>
__device__ __forceinline__ void store_gated_tile_tokens_n(ChainParams<Cfg> const& p, const TileJob& job,
                                                          Accum const& accum, Coords const& coords) {
  static_assert(decltype(size<1>(accum))::value == 2, "tokens as N: one gate and one up M atom");
  const GemmStage<Cfg>& g = p.stage[0];
  auto const* const bias = g.bias;
  auto const* const bias_up = g.bias_up;
  const int col1 = job.col1;
  store_tile_tokens_n<1, Cfg, Accum>(g, job, coords, [&](int m, int r, int v, int i, int col) {
    float gate = accum(make_coord(make_coord(i, r, v), m, 0));
    float up = accum(make_coord(make_coord(i, r, v), m + 1, 0));
    if (bias != nullptr && col < col1) gate += float(bias[col]);
    if (bias_up != nullptr && col < col1) up += float(bias_up[col]);
    return swiglu(gate, up);
  });
}

// The same, cooperative (Cfg::kGateExchange): warpgroup 0 holds the gate
// atom, warpgroup 1 the same up columns, thread t of each at the same
// positions. Each stores half the tile's value groups (0 the first half, 1
// the second) and first hands the other, through shared memory, its factors
// of the other half, so the two store in parallel. The arithmetic is the
// pingpong form's, so the outputs are bitwise equal.
template <class Cfg, class Accum, class Coords>
__device__ __forceinline__ void store_gated_tile_tokens_n_coop(ChainParams<Cfg> const& p, const TileJob& job,
                                                               Accum const& accum, Coords const& coords,
                                                               float* exchange) {
  static_assert(Cfg::kGateExchange && decltype(size<1>(accum))::value == 1, "one M atom a warpgroup");
  constexpr int kGroups = decltype(size<0, 2>(accum))::value;
  constexpr int kHalf = kGroups / 2;
  constexpr int kSent = 4 * kHalf;  // (i, r, v) values a thread sends
  static_assert(2 * kSent * 128 == Cfg::kExchangeFloats, "the exchange holds both warpgroups' halves");
  const GemmStage<Cfg>& g = p.stage[0];
  const int mma_thread = int(threadIdx.x) - Cfg::kLoadThreads;
  const int group = mma_thread / 128, t = mma_thread % 128;
  auto const* const bias = group == 0 ? g.bias : g.bias_up;
  const int col1 = job.col1, shift = group * 64;
  // This warpgroup's factor (gate or up, bias added) at (i, r, v).
  auto factor = [&](int r, int v, int i) {
    float a = accum(make_coord(make_coord(i, r, v), 0, 0));
    const int col = job.col0 + get<0>(coords(make_coord(make_coord(0, r, v), 0, 0))) - shift;
    if (bias != nullptr && col < col1) a += float(bias[col]);
    return a;
  };
  float* const sent = exchange + group * kSent * 128;
  float* const got = exchange + (1 - group) * kSent * 128;
  // The half the other warpgroup stores (a compile-time offset: a run-time
  // one would index the accumulators dynamically, through local memory).
  auto send = [&](auto send0) {
    CUTE_UNROLL
    for (int v = 0; v < kHalf; ++v)
      CUTE_UNROLL
      for (int r = 0; r < 2; ++r)
        CUTE_UNROLL
        for (int i = 0; i < 2; ++i) sent[((v * 2 + r) * 2 + i) * 128 + t] = factor(r, decltype(send0)::value + v, i);
  };
  if (group == 0) send(Int<kHalf>{});
  else send(Int<0>{});
  mma_warpgroups_sync(Cfg::kMmaThreads);
  auto gated = [&](int, int r, int v, int i, int) {
    const float other = got[(((v % kHalf) * 2 + r) * 2 + i) * 128 + t];
    const float mine = factor(r, v, i);
    const float gate = group == 0 ? mine : other, up = group == 0 ? other : mine;
    return swiglu(gate, up);
  };
  if (group == 0) store_tile_tokens_n<1, Cfg, Accum, 0, kHalf>(g, job, coords, gated, 0);
  else store_tile_tokens_n<1, Cfg, Accum, kHalf, kGroups>(g, job, coords, gated, 64);
  // Both have read the exchange before either writes the next tile's.
  mma_warpgroups_sync(Cfg::kMmaThreads);
}

// SwiGLU producer epilogue: h[r, col0 + c] = silu(gate + b_gate) * (up + b_up)
// for c < kTileN/2, where accumulator column c is gate column col0 + c and
// column c + kTileN/2 the same up column: value group v + N/16 is v's column
// + N/2, so each thread holds both factors of its outputs. fp32 math, one
// rounding at the end.
template <class Cfg, class Accum, class Coords>
__device__ __forceinline__ void store_gated_tile(ChainParams<Cfg> const& p, const TileJob& job, Accum const& accum,
                                                 Coords const& coords, typename Cfg::Element* band) {
  constexpr int kGroups = Cfg::kTileN / 8;  // 8-column groups of the MMA tile
  static_assert(decltype(rank<0>(accum))::value == 3 && decltype(size<0, 0>(accum))::value == 2 &&
                    decltype(size<0, 1>(accum))::value == 2 && decltype(size<0, 2>(accum))::value == kGroups &&
                    decltype(size<2>(accum))::value == 1,
                "SwiGLU epilogue expects 64xN wgmma accumulators, one atom along N");
  const GemmStage<Cfg>& g = p.stage[0];
  auto const* const bias = g.bias;
  auto const* const bias_up = g.bias_up;
  const int col1 = job.col1;
  store_tile_with<kGroups / 2, Cfg, Accum>(g, job, band, coords, [&](int m, int r, int v, int col) {
    float g0 = accum(make_coord(make_coord(0, r, v), m, 0));
    float g1 = accum(make_coord(make_coord(1, r, v), m, 0));
    float x0 = accum(make_coord(make_coord(0, r, v + kGroups / 2), m, 0));
    float x1 = accum(make_coord(make_coord(1, r, v + kGroups / 2), m, 0));
    if (bias != nullptr) {
      if (col < col1) g0 += float(bias[col]);
      if (col + 1 < col1) g1 += float(bias[col + 1]);
    }
    if (bias_up != nullptr) {
      if (col < col1) x0 += float(bias_up[col]);
      if (col + 1 < col1) x1 += float(bias_up[col + 1]);
    }
    return make_float2(swiglu(g0, x0), swiglu(g1, x1));
  });
}

template <class Cfg, class Accum, class Coords>
__device__ __forceinline__ void store_tile(ChainParams<Cfg> const& p, const TileJob& job, Accum const& accum,
                                           Coords const& coords, typename Cfg::Element* band,
                                           [[maybe_unused]] float* exchange) {
  using A = cusync::Activation;
  if constexpr (Cfg::kSwiglu) {
    // The SwiGLU configurations run only the SwiGLU MLP: a gated producer
    // and a consumer without activation.
    if (job.stage != 0) store_tile_as<A::kIdentity>(p, job, accum, coords, band);
    else if constexpr (Cfg::kGateExchange) store_gated_tile_tokens_n_coop(p, job, accum, coords, exchange);
    else if constexpr (Cfg::kTokensN) store_gated_tile_tokens_n(p, job, accum, coords);
    else store_gated_tile(p, job, accum, coords, band);
    return;
  }
  // (SwiGLU has two slices, so it never runs on these configurations.)
  switch (p.stage[job.stage].activation) {
    case A::kRelu: store_tile_as<A::kRelu>(p, job, accum, coords, band); break;
    case A::kGelu: store_tile_as<A::kGelu>(p, job, accum, coords, band); break;
    case A::kGeluTanh: store_tile_as<A::kGeluTanh>(p, job, accum, coords, band); break;
    case A::kSilu: store_tile_as<A::kSilu>(p, job, accum, coords, band); break;
    default: store_tile_as<A::kIdentity>(p, job, accum, coords, band); break;
  }
}

// Stream-K, a segment of a tile cut between CTAs. A tile's count word holds
// two counts: arrivals (low 16 bits) and segments whose sums are stored (high
// 16 bits). A segment arrives first. If others are still to come, it stores
// its fp32 sums (each thread's accumulators, float4-interleaved across the
// tile's threads so a warp writes 512 contiguous bytes), counts them stored
// (release) and returns false. The segment that arrives last keeps its own
// sums in registers: it waits until every other segment's are stored (all of
// those have arrived, so they are running and wait for nothing: the schedule
// stays free of deadlock), adds them in segment order (so the result does not
// depend on which segment came last), all of one segment's loads in flight at
// once, and returns true (it stores the tile). Only where its own segment is
// neither the first nor one of two does it store its sums and reload them, to
// keep that order.
template <class Cfg, class Accum>
__device__ __forceinline__ bool finish_stream_k_segment(ChainParams<Cfg> const& p, const TileJob& job, Accum& accum,
                                                        int tile_thread, int group,
                                                        typename Cfg::SharedStorage& smem) {
  constexpr int kThreadsPerTile = Cfg::kPingpong ? 128 : Cfg::kMmaThreads;
  constexpr int kValues = decltype(size(accum))::value;
  static_assert(kValues % 4 == 0, "partial sums are stored as float4");
  constexpr int kTileFloats = kThreadsPerTile * kValues;
  constexpr int kStored = 1 << 16;  // one segment's sums stored, in the count word
  auto tile_sync = [&] {
    if constexpr (Cfg::kPingpong) asm volatile("bar.sync %0, 128;" ::"r"(4 + group) : "memory");
    else mma_warpgroups_sync(Cfg::kMmaThreads);
  };
  float4* const sums = reinterpret_cast<float4*>(
      p.stream_k_partials + size_t(job.index) * p.stream_k.max_segments() * kTileFloats);
  auto store_mine = [&] {
    float4* const mine = sums + size_t(job.segment) * (kTileFloats / 4);
    CUTE_UNROLL
    for (int v = 0; v < kValues / 4; ++v)
      mine[v * kThreadsPerTile + tile_thread] =
          make_float4(accum(4 * v), accum(4 * v + 1), accum(4 * v + 2), accum(4 * v + 3));
  };
  // Adds segment s's stored sums to accum (s's sums first: a + b == b + a).
  auto add_segment = [&](int s) {
    const float4* const theirs = sums + size_t(s) * (kTileFloats / 4) + tile_thread;
    CUTE_UNROLL
    for (int v = 0; v < kValues / 4; ++v) {
      const float4 t = __ldcg(theirs + v * kThreadsPerTile);
      accum(4 * v) = t.x + accum(4 * v);
      accum(4 * v + 1) = t.y + accum(4 * v + 1);
      accum(4 * v + 2) = t.z + accum(4 * v + 2);
      accum(4 * v + 3) = t.w + accum(4 * v + 3);
    }
  };
  int* const count = p.stream_k_counts + job.index;
  int* const verdict = &smem.stream_k_last[Cfg::kPingpong ? group : 0];
  if (tile_thread == 0) {
    int before;
    asm volatile("atom.relaxed.gpu.global.add.s32 %0, [%1], 1;" : "=r"(before) : "l"(count) : "memory");
    *verdict = (before & (kStored - 1)) == job.segments - 1;
  }
  tile_sync();  // the verdict
  const bool is_last = *verdict;
  tile_sync();  // every thread has read the verdict before the word is reused
  const bool reload_mine = job.segment > 0 && job.segments > 2;
  if (!is_last || reload_mine) {
    store_mine();
    tile_sync();  // every thread of the tile has stored its sums
    if (tile_thread == 0) {
      __threadfence();
      asm volatile("red.release.gpu.global.add.s32 [%0], %1;" ::"l"(count), "r"(kStored) : "memory");
    }
    if (!is_last) return false;
  }
  if (tile_thread == 0) {
    // Every other segment has arrived and stores its sums now (this one's too,
    // where it reloads them).
    const int stored = (job.segments - (reload_mine ? 0 : 1)) * kStored;
    while ((cusync::semaphore_load_acquire(count) & ~(kStored - 1)) != stored) {
    }
  }
  tile_sync();  // the acquire before every thread's reads
  // ((0 + s0) + s1) + ...: with two segments, this one's sums are s0 or s1
  // and one add makes the same sum; beyond two, a first segment adds the rest
  // in order, and a later one reloads its own (stored above).
  if (reload_mine) {
    clear(accum);
    for (int s = 0; s < job.segments; ++s) add_segment(s);
  } else {
    for (int s = 0; s < job.segments; ++s)
      if (s != job.segment) add_segment(s);
  }
  return true;
}

// The MMA warpgroups: for each published tile, the k-loop on wgmma (one
// batch in flight while the next stage is awaited), then the epilogue.
// Pingpong: both warpgroups read every published tile; the i-th tile of the
// CTA belongs to warpgroup i % 2, and the other one skips its k-blocks in the
// stage sequence. The mainloops take turns (order barrier), the epilogues do
// not need to: they touch no shared memory.
template <class Cfg>
__device__ __forceinline__ void mma_loop(ChainParams<Cfg> const& p, typename Cfg::SharedStorage& smem,
                         typename Cfg::LoadPipeline& pipeline,
                         typename Cfg::TilePipeline& tile_pipeline,
                         typename Cfg::MathOrder& math_order, int mma_thread) {
  constexpr bool kPingpong = Cfg::kPingpong;
  const int group = mma_thread / 128;
  const int tile_thread = kPingpong ? mma_thread % 128 : mma_thread;
  typename Cfg::TiledMma tiled_mma;
  auto thr_mma = tiled_mma.get_thread_slice(tile_thread);
  // Shared-memory operands' descriptors depend only on the warpgroup: taking
  // them from its first thread, broadcast from lane 0, lets the compiler see
  // them as warp-uniform and build them in uniform registers (not one R2UR
  // per descriptor per wgmma).
  auto wg_mma = tiled_mma.get_thread_slice(__shfl_sync(~0u, tile_thread & ~127, 0));
  Tensor sA = make_tensor(make_smem_ptr(smem.a.data()), typename Cfg::SmemLayoutA{});
  Tensor sB = make_tensor(make_smem_ptr(smem.b.data()), typename Cfg::SmemLayoutB{});
  // Tokens as N: the weight stage is wgmma's A, x's its B.
  auto operands = [&] {
    if constexpr (Cfg::kTokensN) return cute::make_tuple(sB, sA);
    else return cute::make_tuple(sA, sB);
  }();
  Tensor tCsA = wg_mma.partition_A(get<0>(operands));
  Tensor tCsB = wg_mma.partition_B(get<1>(operands));
  Tensor tCrA = wg_mma.make_fragment_A(tCsA);  // smem descriptors
  Tensor tCrB = wg_mma.make_fragment_B(tCsB);
  Tensor accum = partition_fragment_C(tiled_mma, typename Cfg::MmaTile{});
  Tensor coords = thr_mma.partition_C(make_identity_tensor(typename Cfg::MmaTile{}));
  constexpr int kBlocks = size<2>(decltype(tCrA){});

  cutlass::PipelineState<Cfg::kStages> read;
  cutlass::PipelineState<Cfg::kTileSlots> tile_read;
  int seen = 0;  // tiles published to this CTA so far
  [[maybe_unused]] long long waited_data = 0;  // phase stamps: first tile's cycles in consumer_wait after its first k-block

  for (;;) {
    tile_pipeline.consumer_wait(tile_read);
    const int pos = smem.tile_slot[tile_read.index()];
    CUSYNC_PHASE(21, mma_thread == 0 && tile_read.count() == 0);
    tile_pipeline.consumer_release(tile_read);
    ++tile_read;
    if (pos >= p.end) break;
    if constexpr (kPingpong) {
      const bool mine = (seen++ & 1) == group;
      if (!mine) {
        if constexpr (Cfg::kStreamK) {
          const TileJob other = resolve(p, pos);
          read.advance(other.kb1 - other.kb0);
        } else {
          const int k_other = p.stage[pos < p.tiles0 ? 0 : 1].k;
          read.advance((k_other + Cfg::kTileK - 1) / Cfg::kTileK);
        }
        continue;
      }
    }
    const TileJob job = resolve(p, pos);
    const int k_tiles =
        Cfg::kStreamK ? job.kb1 - job.kb0 : (p.stage[job.stage].k + Cfg::kTileK - 1) / Cfg::kTileK;

    if constexpr (kPingpong) math_order.wait();
    [[maybe_unused]] const int trace_local = job.stage == 0 ? pos : pos - p.tiles0;
    [[maybe_unused]] long long trace_waited = 0;
    if (tile_thread == 0) {
      CUSYNC_TRACE(job.stage, trace_local, 4, clock64());
      CUSYNC_TRACE(job.stage, trace_local, 11, group);
    }
    auto release = read;
    tiled_mma.accumulate_ = GMMA::ScaleOut::Zero;
    warpgroup_fence_operand(accum);
    [[maybe_unused]] const bool first_tile = mma_thread == 0 && read.count() == 0;
    CUSYNC_PHASE(22, first_tile);
    // k-blocks through the wgmmas: all of them, but in a loads-only probe.
    int mma_blocks = k_tiles;
#ifdef CUSYNC_SM90_PROBE_SIDES
    if (p.probe_side == kProbeLoadsOnly) {
      for (; mma_blocks > 0; --mma_blocks, ++read) {
        pipeline.consumer_wait(read);
        pipeline.consumer_release(read);
      }
      release = read;
    }
#endif
    for (int kb = 0; kb < mma_blocks; ++kb) {
#ifdef CUSYNC_SM90_TILE_TRACE
      const long long trace_t0 = clock64();
#endif
      CUSYNC_PHASE_WAITED(waited_data, first_tile && kb > 0, pipeline.consumer_wait(read));
#ifdef CUSYNC_SM90_TILE_TRACE
      if (tile_thread == 0) {
        if (kb == 0) CUSYNC_TRACE(job.stage, trace_local, 5, clock64());
        else trace_waited += clock64() - trace_t0;
      }
#endif
      CUSYNC_PHASE(4, first_tile && kb == 0);
      // Warp-uniform by construction; the broadcast lets the compiler know.
      const int stage = __shfl_sync(~0u, read.index(), 0);
      warpgroup_arrive();
      CUTE_UNROLL
      for (int b = 0; b < kBlocks; ++b) {
        cute::gemm(tiled_mma, tCrA(_, _, b, stage), tCrB(_, _, b, stage), accum);
        tiled_mma.accumulate_ = GMMA::ScaleOut::One;
      }
      warpgroup_commit_batch();
      // Keep this batch in flight; the previous one is done with its stage.
      warpgroup_wait<1>();
      if (kb > 0) {
        pipeline.consumer_release(release);
        ++release;
      }
      ++read;
    }
    // Hand the tensor cores over while the last batch drains: the other
    // warpgroup's first wgmma queues right behind it.
    if constexpr (kPingpong) math_order.arrive();
    warpgroup_wait<0>();
    if (mma_blocks > 0) {
      pipeline.consumer_release(release);
    }
    warpgroup_fence_operand(accum);
    if (mma_blocks == 0) clear(accum);
    CUSYNC_PHASE(5, first_tile);
    CUSYNC_PHASE_AT(17, first_tile, waited_data);
    if (tile_thread == 0) {
      CUSYNC_TRACE(job.stage, trace_local, 6, clock64());
      CUSYNC_TRACE(job.stage, trace_local, 10, trace_waited);
    }

    // Stream-K: a tile cut between CTAs is stored by its last segment only;
    // a padded line's tile (clusters) neither counts nor stores.
    if constexpr (Cfg::kStreamK) {
      if (job.segments > 1 &&
          (job.row0 >= job.row1 || !finish_stream_k_segment(p, job, accum, tile_thread, group, smem)))
        continue;
    }

    float* exchange = nullptr;
    if constexpr (Cfg::kGateExchange) exchange = smem.exchange.data();
    store_tile(p, job, accum, coords, smem.epi.data() + (mma_thread / 32) * Cfg::kEpiWarpElems, exchange);
    CUSYNC_PHASE(6, first_tile);

    // Clusters: an empty peer tile stored nothing and posts nothing.
    const bool active = Cfg::kClusterM == 1 || job.row0 < job.row1;
    if (job.stage == 0 && p.producer_posts && active) {
      if (Cfg::kTmaStore && mma_thread % 32 == 0) wait_tma_stores_written();
      fence_async_proxy_global();
      // Every thread that stored this tile has stored it.
      if constexpr (kPingpong) asm volatile("bar.sync %0, 128;" ::"r"(4 + group) : "memory");
      else mma_warpgroups_sync(Cfg::kMmaThreads);
      if (tile_thread == 0) {
        __threadfence();
        int* sem = p.semaphores + p.policy.post_semaphore(p.stage[0].tiling, job.tile);
        if (p.release_store) cusync::semaphore_post_store(sem, 1);
        else cusync::semaphore_post_add(sem);
      }
    }
    if (tile_thread == 0) {
      CUSYNC_TRACE(job.stage, trace_local, 7, clock64());
      CUSYNC_TRACE(job.stage, trace_local, 9, trace_timer());
    }
  }
  // Before the CTA exits, its last boxes must have been read out of shared
  // memory; their writes need not have landed (the grid's completion covers
  // them, for the next kernel in the stream and for a programmatic
  // dependent's griddepcontrol.wait). Posts waited for the writes above.
  if (Cfg::kTmaStore && mma_thread % 32 == 0) tma_store_wait<0>();
  CUSYNC_PHASE(7, mma_thread == 0);
  CUSYNC_PHASE_AT(9, mma_thread == 0, global_timer());
}

template <class Cfg>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    chain_kernel_sm90(CUTE_GRID_CONSTANT ChainParams<Cfg> const p) {
#if defined(CUSYNC_SM90A_DEVICE)
#ifdef CUSYNC_SM90_PHASE_TIMES
  const long long entry_clock = clock64();
#endif
  extern __shared__ __align__(1024) char smem_raw[];
  auto& smem = *reinterpret_cast<typename Cfg::SharedStorage*>(smem_raw);
  // The 128-byte swizzle patterns repeat every 1024 bytes.
  if (threadIdx.x == 0 && (cute::cast_smem_ptr_to_uint(smem_raw) & 1023u) != 0) __trap();
  const int warp_group = threadIdx.x / 128;
  CUSYNC_PHASE(0, threadIdx.x == 0);
  CUSYNC_PHASE_AT(18, threadIdx.x == 0, entry_clock);
  CUSYNC_PHASE_AT(8, threadIdx.x == 0, global_timer());
  using LoadPipeline = typename Cfg::LoadPipeline;
  typename LoadPipeline::Params lp;
  lp.transaction_bytes = Cfg::kBytesA + Cfg::kBytesB;
  lp.role = warp_group == 0 ? LoadPipeline::ThreadCategory::Producer
                            : LoadPipeline::ThreadCategory::Consumer;
  lp.is_leader = threadIdx.x == 0;
  // Pingpong: one warpgroup consumes (and frees) each stage.
  lp.num_consumers = Cfg::kMmaThreads / (Cfg::kPingpong ? 2 : 1);
  // Clusters: a consumer warpgroup frees each stage in both CTAs (the peer
  // multicasts into it), so every empty barrier counts two arrivals.
  LoadPipeline pipeline(smem.load_pipeline, lp, typename Cfg::ClusterShape{});

  using TilePipeline = typename Cfg::TilePipeline;
  typename TilePipeline::Params tp;
  tp.role = warp_group == 0 ? TilePipeline::ThreadCategory::Producer
                            : TilePipeline::ThreadCategory::Consumer;
  tp.producer_arv_count = 1;
  tp.consumer_arv_count = Cfg::kMmaThreads;
  tp.dst_blockid = 0;
  // Clusters: the MMA warpgroups free tile slots of their own CTA (the
  // pipeline arrives on the empty barrier of CTA dst_blockid).
  if constexpr (Cfg::kClusterM > 1) tp.dst_blockid = cute::block_rank_in_cluster();
  TilePipeline tile_pipeline(smem.tile_pipeline, tp);

  typename Cfg::MathOrder::Params op;
  op.group_id = warp_group == 2 ? 1 : 0;
  op.group_size = 128;
  typename Cfg::MathOrder math_order(smem.math_order, op);
  if constexpr (Cfg::kClusterM > 1) {
    if (threadIdx.x == 0) {
      for (int i = 0; i < Cfg::kSchedSlots; ++i) {
        // full: the peer's own arrive (plus 4 bytes from the leader);
        // empty: the peer's read of the slot.
        cutlass::arch::ClusterBarrier::init(&smem.sched_full[i], 1);
        cutlass::arch::ClusterBarrier::init(&smem.sched_empty[i], 1);
      }
      cutlass::arch::fence_barrier_init();
    }
    // Both CTAs' barriers exist before any remote arrive, multicast or st.async.
    cute::cluster_sync();
  } else {
    __syncthreads();
  }
  CUSYNC_PHASE(12, threadIdx.x == 0);

  // 56 + 2 x 224 registers a thread (x 128) = the 168 x 384 the CTA starts
  // with. ptxas holds the loader to its 56: at 40, the TileSync look-ahead
  // spilled; 224 leave the 128 accumulators room.
  if (warp_group == 0) {
    cutlass::arch::warpgroup_reg_dealloc<56>();
    // The loader's warp enters together and elects its thread, so the
    // compiler knows one thread runs the loop. Under `threadIdx.x == 0` it
    // could not, and wrapped every TMA issue in a loop over the warp's
    // distinct operands (ELECT, an R2UR per operand, BRA.U.ANY on the issue's
    // scoreboard): 128x128's k-block took 680-710 cycles against 514-520 so
    // (bench/NOTES_sm90.md, stop 23). The pipelines' leader (the expect_tx
    // arrive) is thread 0, the lane elect.sync picks in a converged warp.
    if (threadIdx.x < 32 && cute::elect_one_sync()) {
      if (threadIdx.x != 0) __trap();
      prefetch_descriptors(p);
      CUSYNC_PHASE(19, true);
      load_loop(p, smem, pipeline, tile_pipeline);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<224>();
    mma_loop(p, smem, pipeline, tile_pipeline, math_order, threadIdx.x - Cfg::kLoadThreads);
  }
  if constexpr (Cfg::kClusterM > 1) {
    // Neither CTA exits while the other may still touch its shared memory.
    // Not .aligned: the loader thread arrives apart from its warp.
    asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
  }
#endif
}

}  // namespace cusync_sm90
