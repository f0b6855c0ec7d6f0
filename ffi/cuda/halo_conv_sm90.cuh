// Kernel family 2 (Hopper): the conv pair's 3x3 convolutions, each tile's
// input loaded once as a halo (cusync/halo_tiling.h) and fed to all 9 filter
// taps by shifting the wgmma A descriptor's start, instead of one im2col load
// per tap (kernel family 1): 3.2x fewer bytes into shared memory at W = 56.
//
// Work. A tile is (position tile, output channel block nb of 64): 128 x 64
// outputs of one conv. Conv 1's tiles are numbered first (0 .. tiles0 - 1,
// position tile major), then conv 2's; a launch runs tiles [begin, end) in
// that order, handed out by an atomic counter, so a tile is taken only after
// every lower one: the fused launch (both convs) cannot deadlock, as a
// consumer tile waits only on lower, already taken, producer tiles. A tile is
// CB units, one per input channel block cb of 64: the halo of channels
// [64 cb, +64) and the filter's block (taps x cb x nb, 72 KB).
//
// Pipeline. Persistent CTAs, 3 warpgroups. Warpgroup 0's first thread is the
// producer: it takes tiles, waits (consumer tiles, with waits on) for the
// producer tiles under each unit's halo, and issues every TMA into a ring of
// S stages, one unit each, with a "full" mbarrier (TMA bytes) and an "empty"
// one (an arrival per consumer warp once its wgmmas reading the stage are
// done); a stage's record tells the consumers its tile and unit (or the end).
// B is either resident (every conv of the launch has one input and one output
// channel block: one 72 KB B a conv, reloaded when the CTA moves from conv 1's
// tiles to conv 2's, once every unit issued before has been consumed) or
// streamed (a stage carries its unit's B block). Warpgroups 1 and 2 consume in
// pingpong, a whole tile each (two m64n64k16 chains of 36 wgmmas a unit),
// alternating by a pair of "turn" mbarriers: each hands the tensor cores over
// with its last unit's last tap still queued, so its epilogue (bias, ReLU
// or residual, half stores, then the tile's post) runs under the
// other's MMAs. The turn also passes the unit cursor (where the next tile's
// units start), and orders the consumers' full-barrier waits in ring order,
// which the parity waits on a ring shared by two consumers rely on.
//
// Pixel8 (an RGB image's conv 1, kPixel8 instances): the input padded to 8
// channels, a position 16 bytes. The halo is loaded unswizzled, so each
// position is one row of a K-major core matrix (8 rows x 16 bytes) and one
// tap's 8 channels one core matrix along K: a k16 step reads two taps, the
// descriptor's start at the first's shifted position and its leading byte
// offset the second's distance from it (9 taps: 5 steps, the last one's
// second tap tap 8 again against B rows 72-79, which the TMA fills with
// zeros). B is the filter as (9 x 8) x 64 rows, two TMA boxes of 64 rows.
//
// Layout facts (measured on an H200): with the descriptor's base offset left
// 0, the A start may move by any number of 128-byte rows off the 1024-byte
// swizzle boundary and wgmma reads the right chunks; B is read from HWIO as it
// is (MN-major: a 128-byte row holds 64 output channels of one input channel).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/sm90_chain_config.cuh"  // CUSYNC_SM90A_DEVICE
#include "cuda/sm90_ptx.cuh"
#include "cusync/activation.h"  // Activation
#include "cusync/halo_tiling.h"
#include "cusync/semaphore.h"

namespace cusync_halo {

constexpr int kC = 64;                           // channels of a block (in and out)
constexpr int kTaps = 9;
constexpr int kTileM = cusync::kHaloTileM;       // positions per tile
constexpr int kThreads = 384;                    // producer + two consumer warpgroups
constexpr int kRowBytes = kC * 2;                // one position (or one filter row) in smem
constexpr int kTapBytes = kC * kRowBytes;        // one tap of B: 8 KB
constexpr int kWeightBytes = kTaps * kTapBytes;  // one block of B
constexpr int kEnd = -1;                         // a stage record: no more tiles
// Taps still queued when a consumer hands the turn on (3 and 5 measured the
// same as 1: bench/NOTES.md, stop 27).
constexpr int kHandoffTaps = 1;
// A stage record: its tile (or kEnd), the B loads issued before it, and the
// tile decoded by the producer, so a consumer does no division between
// receiving the turn and its post (the turn to the first wgmma was 10 % of
// conv 1's time at batch 32: bench/NOTES.md, stop 28).
enum RecordSlot : int {
  kRecTile,
  kRecBLoads,
  kRecImage,  // the cusync::HaloTile: image, h0, w0, a0
  kRecH0,
  kRecW0,
  kRecA0,
  kRecOutBlock,  // output channel block
  kRecOutTile,   // output tile: its semaphore and split count
  kRecUnits,     // channel blocks this tile (a split share's)
  kRecShare,     // split share
  kRecordInts
};
static_assert(kWeightBytes % 1024 == 0, "the stages and their B blocks must start on 1024-byte boundaries");
static_assert(kWeightBytes == cusync::kHaloWeightBytes && kRowBytes == cusync::kHaloRowBytes &&
                  kRecordInts == cusync::kHaloRecordInts,
              "cusync/halo_tiling.h sizes the shared memory laid out here");

// One convolution of the launch.
template <class T>
struct HaloConv {
  const T* bias;      // [C_out]
  const T* residual;  // [N, H, W, C_out] or null
  T* out;             // [N, H, W, C_out]
  int cb, nb;         // input and output channel blocks of 64
  int out_channels;
  cusync::Activation activation;
  // Split along the input channel blocks: each output tile (position tile,
  // output block) is `splits` tiles of cb / splits units, each storing its
  // fp32 sums; the last of them to count sums all in share order (so a run
  // repeats bit for bit) and runs the epilogue. 1: no split.
  int splits;
  int pixel8;         // the input has 8 channels (16-byte positions): see the top of the file
  int* counts;        // [output tiles] shares counted (zeroed per call)
  float* partials;    // [output tiles][splits][cusync::kHaloShareFloats]
};

template <class T>
struct HaloParams {
  CUtensorMap x[2];   // each conv's input as (C, W, H, N), box (64, BW, R, 1)
  CUtensorMap w[2];   // each conv's filter as (C_out, 9 C_in), box (64, 64)
  HaloConv<T> conv[2];
  cusync::HaloTiling tiling;
  int tiles0;         // conv 1's tiles: tiling.tiles() * conv[0].nb
  int begin, end;     // the launch's tiles
  int* counter;       // the launch's next tile (zeroed before it); null: a static schedule (no waits)
  int* started;       // streams mode's producer launch: set once a CTA runs (the wait kernel spins on it)
  int* semaphores;    // one per conv 1 tile, 1 once it is stored
  int waits;          // conv 2's units wait on the conv 1 tiles under their halo
  int waits_per_tile; // RowSync: a tile's first unit waits on every channel block
  int posts;          // conv 1's tiles post
  int resident_b;     // see the top of the file
  int wait_prior_grid;  // serial conv 2: launched as a programmatic dependent of conv 1 (see the producer)
  int halo_bytes;       // BW * R rows of 128 bytes: the halo's TMA transaction
  int halo_stage_bytes; // halo_bytes rounded up to 1024: where a stage's B block starts
  int stage_bytes;      // halo_stage_bytes, plus kWeightBytes when B streams
  int stages;
};

// The epilogue's staging: 16 rows x 64 channels of 16-bit values a consumer
// warp (see store_rows).
constexpr int kScratchWarpBytes = 16 * kRowBytes;
constexpr int kScratchBytes = 8 * kScratchWarpBytes;
static_assert(kScratchBytes % 1024 == 0, "the ring after the scratch starts on a 1024-byte boundary");
static_assert(kScratchBytes == cusync::kHaloScratchBytes, "cusync/halo_tiling.h sizes the shared memory laid out here");

#ifdef CUSYNC_HALO_STAMPS
// Diagnostics (bench/halo_pair_probe.cu): 16 words a CTA, in host-mapped
// memory so the host reads them while a launch runs; see STAMP's uses.
__device__ unsigned long long* halo_stamps;
__device__ __forceinline__ unsigned long long halo_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %globaltimer;" : "=l"(t));
  return t;
}
#define CUSYNC_HALO_STAMP(slot, value)                                          \
  do {                                                                          \
    reinterpret_cast<volatile unsigned long long*>(halo_stamps)[blockIdx.x * 16 + (slot)] = (value); \
    __threadfence_system();                                                     \
  } while (0)
#else
#define CUSYNC_HALO_STAMP(slot, value) \
  do {                                 \
  } while (0)
#endif

#if defined(CUSYNC_SM90A_DEVICE)
// ---- PTX wrappers
__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

// Returns once the phase of the given parity has completed; on a fresh barrier
// (in phase 0) parity 1 counts as completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred P1;\n"
      "HALO_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra HALO_DONE;\n"
      "bra HALO_WAIT;\n"
      "HALO_DONE:\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}

__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::
          "r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}

__device__ __forceinline__ void tma_load_4d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                            int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, "
      "%5}], [%6];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
      : "memory");
}

// wgmma descriptor of a 128B-swizzled operand at smem address addr: low word
// start >> 4 and LBO 1 (unused: one 64-element atom along M and N); high word
// SBO = 8 rows of 128 bytes, base offset 0, 128B swizzle. Adding n to the low
// word moves the start by 16 n bytes: smem addresses are below 2^18, so the
// 14-bit field never carries.
constexpr uint32_t kDescHi = (1024 >> 4) | (1u << 30);
__device__ __forceinline__ uint32_t desc_lo(uint32_t addr) { return ((addr & 0x3FFFF) >> 4) | (1u << 16); }
__device__ __forceinline__ uint64_t desc(uint32_t lo) { return (uint64_t(kDescHi) << 32) | lo; }

// Pixel8's A: K-major without swizzle (layout type 0), core matrices of 8
// positions of 16 bytes, the next 8 positions 128 bytes on (SBO); the low
// word's LBO field (bits 16-29, 16-byte units) is set per k16 step.
constexpr int kPixel8RowBytes = cusync::kHaloPixel8Channels * 2;  // a 16-bit position of 8 channels
constexpr uint32_t kDescHiPixel8 = (8 * kPixel8RowBytes) >> 4;
__device__ __forceinline__ uint32_t desc_lo_pixel8(uint32_t addr) { return (addr & 0x3FFFF) >> 4; }

// D = A * B (+ D if accumulate), m64n64k16, A K-major, B MN-major (transposed).
template <class T>
__device__ __forceinline__ void wgmma_64x64x16(float (&d)[32], uint64_t a, uint64_t b, int accumulate) {
#define CUSYNC_HALO_WGMMA(TYPE)                                                                                  \
  asm volatile(                                                                                                  \
      "{\n"                                                                                                      \
      ".reg .pred p;\n"                                                                                          \
      "setp.ne.b32 p, %34, 0;\n"                                                                                 \
      "wgmma.mma_async.sync.aligned.m64n64k16.f32." TYPE "." TYPE " "                                            \
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                                  \
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "                        \
      "%32, %33, p, 1, 1, 0, 1;\n"                                                                               \
      "}\n"                                                                                                      \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),          \
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),    \
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),  \
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])   \
      : "l"(a), "l"(b), "r"(accumulate))
  if constexpr (std::is_same_v<T, __half>)
    CUSYNC_HALO_WGMMA("f16");
  else
    CUSYNC_HALO_WGMMA("bf16");
#undef CUSYNC_HALO_WGMMA
}

__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Taps [kTap0, kTap1) of one 64-row chain; a_lo: the descriptor (low word) of
// the chain's position 0 in the halo, b_lo: that of tap 0 of the block of B;
// acc: whether d already holds earlier channel blocks' sums.
template <class T, int kTap0, int kTap1>
__device__ __forceinline__ void conv_taps(float (&d)[32], uint32_t a_lo, int bw, uint32_t b_lo, int acc) {
#pragma unroll
  for (int tap = kTap0; tap < kTap1; ++tap) {
    const uint32_t a_tap = a_lo + uint32_t((tap / 3) * bw + tap % 3) * (kRowBytes / 16);
    const uint32_t b_tap = b_lo + tap * (kTapBytes / 16);
#pragma unroll
    for (int j = 0; j < kC / 16; ++j)  // A: 16 channels along the row; B: 16 rows of input channels
      wgmma_64x64x16<T>(d, desc(a_tap + 2 * j), desc(b_tap + j * (16 * kRowBytes / 16)), acc | (tap > 0) | (j > 0));
  }
}

// Pixel8: k16 steps [kStep0, kStep1) of one 64-row chain (taps 2 i and
// 2 i + 1 a step; see the top of the file). a_lo: the descriptor (low word,
// no LBO) of the chain's position 0 in the halo; b_lo: B's first row.
template <class T, int kStep0, int kStep1>
__device__ __forceinline__ void conv_steps_pixel8(float (&d)[32], uint32_t a_lo, int bw, uint32_t b_lo, int acc) {
#pragma unroll
  for (int i = kStep0; i < kStep1; ++i) {
    const int t0 = 2 * i, t1 = 2 * i + 1;
    const uint32_t off0 = uint32_t((t0 / 3) * bw + t0 % 3);
    const uint32_t lbo = t1 < kTaps ? uint32_t((t1 / 3) * bw + t1 % 3) - off0 : 0;  // 16-byte units
    const uint64_t a = (uint64_t(kDescHiPixel8) << 32) | ((a_lo + off0) | (lbo << 16));
    wgmma_64x64x16<T>(d, a, desc(b_lo + i * (16 * kRowBytes / 16)), acc | (i > 0));
  }
}
constexpr int kPixel8Steps = (kTaps + 1) / 2;

// One thread: B's barrier and the two turns take one arrival, a stage's full
// barrier the producer's (with the TMA bytes), its empty one an arrival per
// consumer warp that reads the stage (4, or 8 in cooperative launches); then
// visible to the async proxy.
__device__ __forceinline__ void init_barriers(uint32_t wbar, uint32_t turn, uint32_t full, uint32_t empty,
                                              int stages, int empty_arrivals) {
  mbar_init(wbar, 1);
  mbar_init(turn, 1);
  mbar_init(turn + 8, 1);
  for (int s = 0; s < stages; ++s) {
    mbar_init(full + 8 * s, 1);
    mbar_init(empty + 8 * s, empty_arrivals);
  }
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

template <class T>
__device__ __forceinline__ T to_element(float v);
template <>
__device__ __forceinline__ __half to_element<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 to_element<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

__device__ __forceinline__ uint4 lds_128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}

template <class Pair>
__device__ __forceinline__ uint32_t as_word(Pair v) {
  return *reinterpret_cast<uint32_t*>(&v);
}

// The tile's bias in the accumulators' column order (channels nb * 64 +
// 8 i + 2 (lane % 4), + 1), once for both chains. (Loaded under the last
// wgmmas instead, its registers made the kernel spill.)
template <class T, class Pair>
__device__ __forceinline__ void load_bias(const HaloConv<T>& cv, int nb, Pair (&bias)[8]) {
  const T* b = cv.bias + nb * kC + 2 * (threadIdx.x % 4);
#pragma unroll
  for (int i = 0; i < 8; ++i) bias[i] = *reinterpret_cast<const Pair*>(b + 8 * i);
}

// The consumers of one tile meet: both (named barrier 3, 256 threads) in a
// cooperative launch, else consumer c's warpgroup (barrier 1 + c).
template <bool kCoop>
__device__ __forceinline__ void sync_tile_consumers(int c) {
  if constexpr (kCoop)
    asm volatile("bar.sync 3, 256;" ::: "memory");
  else
    asm volatile("bar.sync %0, 128;" ::"r"(1 + c) : "memory");
}

// A split tile's fp32 sums (split conv): thread ctid's accumulators as float4
// number j at j * 128 + ctid, so a warp's stores are 512 contiguous bytes
// (kTwoChains: d1's too, see halo_conv_kernel).
template <bool kTwoChains>
__device__ __forceinline__ void store_share(float* dst, int ctid, const float (&d0)[32], const float (&d1)[32]) {
  float4* out = reinterpret_cast<float4*>(dst);
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    out[j * 128 + ctid] = make_float4(d0[4 * j], d0[4 * j + 1], d0[4 * j + 2], d0[4 * j + 3]);
    if constexpr (kTwoChains)
      out[(8 + j) * 128 + ctid] = make_float4(d1[4 * j], d1[4 * j + 1], d1[4 * j + 2], d1[4 * j + 3]);
  }
}

// The sum of `shares` shares' sums (store_share's layout) in share order,
// read past L1 (other SMs wrote them), into d0 and d1.
template <bool kTwoChains>
__device__ __forceinline__ void sum_shares(const float* src, int shares, int ctid, float (&d0)[32],
                                           float (&d1)[32]) {
  const float4* in = reinterpret_cast<const float4*>(src);
  for (int sh = 0; sh < shares; ++sh, in += cusync::kHaloShareFloats / 4) {
#pragma unroll
    for (int j = 0; j < (kTwoChains ? 16 : 8); ++j) {
      const float4 v = __ldcg(in + j * 128 + ctid);
      float* d = j < 8 ? &d0[4 * j] : &d1[4 * (j - 8)];
      if (sh == 0) {
        d[0] = v.x, d[1] = v.y, d[2] = v.z, d[3] = v.w;
      } else {
        d[0] += v.x, d[1] += v.y, d[2] += v.z, d[3] += v.w;
      }
    }
  }
}

// `bytes` (a multiple of 16) from global address `from` into L2, by the TMA
// engine: no registers, no wait.
__device__ __forceinline__ void prefetch_l2(const void* from, uint32_t bytes) {
  asm volatile(
      "{\n\t.reg .u64 a;\n\tcvta.to.global.u64 a, %0;\n\tcp.async.bulk.prefetch.L2.global [a], %1;\n\t}" ::"l"(from),
      "r"(bytes)
      : "memory");
}

// Conv 2's residual under tile t, every channel of its image rows, into L2
// by the TMA engine (one bulk prefetch a row, a few a tile), issued as the
// producer reaches the tile: read from DRAM by the epilogue, each of its
// passes waited a round trip (ResNet's 56x56x64 pair at batch 32 ran 33 %
// longer with a residual than without, 59.9 against 45.0 us at 489dd28).
template <class T>
__device__ __forceinline__ void prefetch_residual(const cusync::HaloTiling& g, const HaloConv<T>& cv,
                                                  const cusync::HaloTile& t) {
  if (g.paired) {
    // Both images' residual, contiguous.
    const uint32_t bytes = uint32_t(min(2, g.images - t.image)) * g.height * g.width * cv.out_channels * sizeof(T);
    prefetch_l2(cv.residual + size_t(t.image) * g.height * g.width * cv.out_channels, bytes);
    return;
  }
  const int last_row = min((t.a0 + g.span - 1) / g.bw, g.height - 1 - t.h0);
  const int w_end = g.wide ? min(g.width, t.w0 + cusync::kHaloTileM) : g.width;
  const uint32_t bytes = uint32_t(w_end - t.w0) * cv.out_channels * sizeof(T);
  for (int dh = 0; dh <= last_row; ++dh) {
    prefetch_l2(cv.residual + ((size_t(t.image) * g.height + t.h0 + dh) * g.width + t.w0) * cv.out_channels, bytes);
  }
}

// Rows first_row .. first_row + 15 of the tile, a warp's share of one chain
// (D fragment rows lane / 4 (+ 8), columns 8 i + 2 (lane % 4) (+ 1)): bias
// and ReLU in fp32, rounded, written to the warp's scratch by stmatrix, then
// read back a whole position (128 bytes) per 8 lanes and stored 16 bytes a
// lane (the fragment's own 4-byte stores to 8 rows at once kept the
// load/store unit's queue full: ncu, batch 32), the residual added there
// (and then the ReLU: conv 2's out_activation, ResNet's block's last).
// The scratch's 16-byte chunks are swizzled by row (chunk ^ row % 8), so
// neither stmatrix's 8 rows nor a read's 8 lanes meet in one bank.
// cv and g by value, in registers: read through a reference into the kernel's
// parameters, every store (which might alias them) would reload them. kRelu
// (ReLU or nothing, the halo conv's activations: cuda/halo_conv_sm90.cu) and
// kResidual are compile-time choices (a residual tested at run time left
// predicated loads between the stores).
template <class T, class Pair, bool kRelu, bool kResidual>
__device__ __forceinline__ void store_rows(const cusync::HaloTiling g, const HaloConv<T> cv, const cusync::HaloTile& t,
                                           int nb, int first_row, const float (&d)[32], const Pair (&bias)[8],
                                           uint32_t scratch) {
  if (t.image >= g.images) return;  // a paired tile's second image past an odd batch
  const int lane = threadIdx.x % 32;
  uint32_t packed[16];  // chunk i: [2 i] rows lane / 4, [2 i + 1] rows lane / 4 + 8
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const float v0 = d[4 * i + 2 * hi] + float(bias[i].x), v1 = d[4 * i + 2 * hi + 1] + float(bias[i].y);
      Pair o;
      // (With a residual, the ReLU comes after it: below.)
      o.x = to_element<T>(kRelu && !kResidual ? fmaxf(v0, 0.f) : v0);
      o.y = to_element<T>(kRelu && !kResidual ? fmaxf(v1, 0.f) : v1);
      packed[2 * i + hi] = as_word(o);
    }
  {
    // stmatrix x4: matrices (chunk i, rows 0-7), (i, 8-15), (i + 1, 0-7),
    // (i + 1, 8-15); lane 8 m + r gives row r of matrix m.
    const int m = lane / 8, row = (m & 1) * 8 + lane % 8;
#pragma unroll
    for (int i = 0; i < 8; i += 2) {
      const int chunk = i + (m >> 1);
      cusync_cuda::sm90::stmatrix_x4(scratch + row * kRowBytes + ((chunk ^ (row & 7)) * 16), packed[2 * i], packed[2 * i + 1],
                  packed[2 * i + 2], packed[2 * i + 3]);
    }
  }
  __syncwarp();
  const int chunk = lane % 8;
  // The rows the tile owns end at the image's (row tiles: at its own, past
  // which its positions belong to the next tile).
  const int h_end = g.row_tiles ? min(g.height, t.h0 + g.row_tiles) : g.height;
#pragma unroll
  for (int pass = 0; pass < 4; ++pass) {
    const int row = 4 * pass + lane / 8;
    uint4 v = lds_128(scratch + row * kRowBytes + ((chunk ^ (row & 7)) * 16));
    const int q = t.a0 + first_row + row;
    const int dh = q / g.bw;
    const int h = t.h0 + dh, w = t.w0 + q - dh * g.bw;
    if (h >= h_end || w >= g.width) continue;  // a position off the image, or the next tile's
    const size_t at = ((size_t(t.image) * g.height + h) * g.width + w) * cv.out_channels + nb * kC + 8 * chunk;
    if constexpr (kResidual) {
      const uint4 r = *reinterpret_cast<const uint4*>(cv.residual + at);
      Pair* vp = reinterpret_cast<Pair*>(&v);
      const Pair* rp = reinterpret_cast<const Pair*>(&r);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float s0 = float(vp[e].x) + float(rp[e].x), s1 = float(vp[e].y) + float(rp[e].y);
        vp[e].x = to_element<T>(kRelu ? fmaxf(s0, 0.f) : s0);
        vp[e].y = to_element<T>(kRelu ? fmaxf(s1, 0.f) : s1);
      }
    }
    *reinterpret_cast<uint4*>(cv.out + at) = v;
  }
  __syncwarp();  // every lane's reads done before the next chain's stmatrix
}

// The tile's chains: d0 holds chain `chain0` (0, or a cooperative consumer's
// own), d1 chain 1 (with kTwoChains); a chain's rows are those of its own
// tile (HaloTiling::chain_tile: paired, the second image's).
template <class T, class Pair, bool kRelu, bool kResidual, bool kTwoChains>
__device__ __forceinline__ void store_tile(const cusync::HaloTiling g, const HaloConv<T> cv, const cusync::HaloTile& t,
                                           int nb, int chain0, int warp, const float (&d0)[32], const float (&d1)[32],
                                           const Pair (&bias)[8], uint32_t scratch) {
  store_rows<T, Pair, kRelu, kResidual>(g, cv, g.chain_tile(t, chain0), nb, g.chain_first(chain0) + 16 * warp, d0,
                                        bias, scratch);
  if constexpr (kTwoChains)
    store_rows<T, Pair, kRelu, kResidual>(g, cv, g.chain_tile(t, 1), nb, g.chain_first(1) + 16 * warp, d1, bias,
                                          scratch);
}
#endif  // CUSYNC_SM90A_DEVICE

// kTwoChains false: no tile has a pixel in its positions 64..127
// (HaloTiling::one_chain, 7x7 images), so the consumers run the first 64-row
// chain only: half the MMAs, epilogue and split sums. Its commit groups stay
// (empty), so every wait counts the same.
// kCoop: a launch with no more tiles than CTAs, where pingpong would leave one
// consumer idle: both consumers run every tile, consumer c its chain c (rows
// 64 c ..), so a tile's MMAs take half as long. No turn, no cursor: each
// consumer passes every unit; a stage is released by all 8 consumer warps,
// and the two meet at a 256-thread barrier before a split tile's count and
// before the post.
// kSplit: a launch with a conv split along its channel blocks (HaloConv::
// splits); the split's share sums and decoding exist only in these
// instances (they made the others' code 14 % larger: bench/NOTES.md, stop 29).
// kPixel8: a launch with a pixel8 conv's tiles (HaloConv::pixel8); only these
// instances hold its steps, so the other pairs' code is unchanged.
template <class T, class Pair, bool kTwoChains = true, bool kCoop = false, bool kSplit = false, bool kPixel8 = false>
__global__ void __launch_bounds__(kThreads, 1) halo_conv_kernel(const __grid_constant__ HaloParams<T> p) {
  static_assert(kTwoChains || !kCoop, "a cooperative launch gives each consumer one of two chains");
  static_assert(!(kSplit && kPixel8), "a pixel8 conv has one channel block: nothing to split");
#if defined(CUSYNC_SM90A_DEVICE)
  extern __shared__ uint8_t smem_raw[];
  // Every TMA destination on a 1024-byte boundary: the swizzle pattern's start.
  // (Offset from smem_raw, not rounded through an integer: the compiler then
  // knows the records and cursor below are shared memory, and reads them so.)
  uint8_t* smem = smem_raw + ((1024 - (smem_addr(smem_raw) & 1023)) & 1023);
  const uint32_t weights = smem_addr(smem);                          // resident B
  const uint32_t scratch = weights + (p.resident_b ? kWeightBytes : 0);  // the epilogue's, per consumer warp
  const uint32_t ring = scratch + kScratchBytes;                        // stage s at ring + s * stage_bytes
  const uint32_t wbar = ring + p.stages * p.stage_bytes;
  const uint32_t turn = wbar + 8;              // turn[c] at turn + 8 c
  const uint32_t full = turn + 16;             // full[s] at full + 8 s
  const uint32_t empty = full + 8 * p.stages;  // empty[s] at empty + 8 s
  // record[s]: the tile of the stage's unit (or kEnd) and the B loads issued
  // before it (resident B: the consumers wait for that load's phase).
  int* const records = reinterpret_cast<int*>(smem + (empty + 8 * p.stages - weights));
  int* const cursor = records + kRecordInts * p.stages;  // the unit where the next tile starts
  volatile int* const last_share = cursor + 1;           // [consumer]: its split tile counted last
  const cusync::HaloTiling g = p.tiling;

  const int tid = threadIdx.x, wg = tid / 128;
  if (tid == 0) {
    *cursor = 0;
    init_barriers(wbar, turn, full, empty, p.stages, kCoop ? 8 : 4);
  }
  __syncthreads();  // the only CTA-wide barrier: the producer's idle threads exit below
  if (tid == 0) CUSYNC_HALO_STAMP(0, halo_now());

  if (wg == 0) {
    if (tid != 0) return;
    if (p.started != nullptr) atomicExch(p.started, 1);
    // Unit v goes to stage v % S, its u = v / S-th use, which waits for the
    // consumers' release of use u - 1 (the empty barrier's phase u - 1,
    // parity (u & 1) ^ 1; a fresh barrier passes u = 0).
    int v = 0, b_conv = -1, b_loads = 0, taken = 0;
    const auto acquire_stage = [&](int s) { mbar_wait(empty + 8 * s, ((v / p.stages) & 1) ^ 1); };
    // B's 64-row boxes a block: a tap each, or pixel8's two ((9 x 8) rows).
    const auto b_boxes = [&](int ci) { return kPixel8 && p.conv[ci].pixel8 ? 2 : kTaps; };
    const auto load_b = [&](int ci) {
      // The previous load has landed (a reload's units have all been
      // released, but a first guess that missed may still be in flight).
      if (b_loads > 0) mbar_wait(wbar, (b_loads - 1) & 1);
      const int boxes = b_boxes(ci);
      mbar_expect_tx(wbar, boxes * kTapBytes);
      for (int tap = 0; tap < boxes; ++tap) tma_load_2d(weights + tap * kTapBytes, &p.w[ci], wbar, 0, tap * kC);
      b_conv = ci;
      ++b_loads;
    };
    // A launch with a counter and at least 4 tiles a CTA asks for its next
    // tile as soon as it holds one, so the atomic's round trip runs under this
    // tile's waits and loads. With fewer, the CTAs that ask first would hold
    // two tiles each while the last found none (ResNet's 7x7x512 pair at batch
    // 1: 16 tiles on 16 CTAs), so those launches ask when they need one.
    // Tiles are still taken in counter order, and a tile held ahead cannot
    // deadlock the fused launch: a conv 2 tile ahead waits behind its CTA's
    // current one, and a conv 1 tile ahead is behind a lower conv 1 tile (conv
    // 1's are numbered first), which waits for nothing.
    const bool ask_ahead = p.counter && p.end - p.begin >= 4 * int(gridDim.x);
    int ahead = ask_ahead ? atomicAdd(p.counter, 1) : 0;
    // Resident B: the first tile's conv is almost always that of `begin`;
    // its B loads under the counter's round trip (a wrong guess reloads).
    if (p.resident_b && p.begin < p.end) load_b(p.begin < p.tiles0 ? 0 : 1);
    for (;;) {
      // A launch without waits (serial) needs no order across CTAs: the
      // CTA's k-th tile is blockIdx.x + k * gridDim.x, and nothing is zeroed
      // before the launch.
      const int tile = p.begin + (!p.counter ? blockIdx.x + taken * int(gridDim.x)
                                  : ask_ahead ? ahead
                                              : atomicAdd(p.counter, 1));
      ++taken;
      if (v == 0) CUSYNC_HALO_STAMP(1, halo_now());
      if (tile >= p.end) break;
      if (ask_ahead) ahead = atomicAdd(p.counter, 1);
      CUSYNC_HALO_STAMP(2, tile);
      const int ci = tile < p.tiles0 ? 0 : 1;
      const HaloConv<T> cv = p.conv[ci];
      // Tiles of a conv: position tile major, then output block, then share.
      // (Unsplit, the common case, in one division: each costs tens of
      // instructions on the path from the counter to the tile's first load.)
      const int local = tile - (ci ? p.tiles0 : 0);
      int out_tile = local, share = 0, units = cv.cb;
      if (kSplit && cv.splits > 1) {
        out_tile = local / cv.splits;
        share = local - out_tile * cv.splits;
        units = cv.cb / cv.splits;
      }
      const int position = out_tile / cv.nb, nb = out_tile - position * cv.nb, cb0 = share * units;
      const cusync::HaloTile t = g.tile(position);
      if (cv.residual != nullptr && share == 0) prefetch_residual(g, cv, t);
      if (p.resident_b && b_conv != ci) {
        // Every unit issued so far reads the old B: wait for their release
        // (the last use of each stage), then load this conv's.
        for (int i = 1; i <= p.stages && i <= v; ++i)
          mbar_wait(empty + 8 * ((v - i) % p.stages), ((v - i) / p.stages) & 1);
        load_b(ci);
      }
      for (int cb = cb0; cb < cb0 + units; ++cb, ++v) {
        const int s = v % p.stages;
        const uint32_t stage = ring + s * p.stage_bytes;
        acquire_stage(s);
        if (ci == 1 && p.waits && (cb == cb0 || !p.waits_per_tile)) {
          // The conv 1 tiles under this halo: channel block cb of them (RowSync: all blocks, once).
          const int nb1 = p.conv[0].nb;
          g.for_each_dependency(position, [&](int dep) {
            for (int b = p.waits_per_tile ? 0 : cb; b < (p.waits_per_tile ? nb1 : cb + 1); ++b) {
              const int* sem = p.semaphores + dep * nb1 + b;
              while (cusync::semaphore_load_acquire(sem) == 0) {
              }
            }
          });
          // Their generic-proxy stores, before the TMA engine reads them.
          asm volatile("fence.proxy.async.global;" ::: "memory");
        }
        if (p.wait_prior_grid && v == 0) {
          // Launched behind conv 1 while its last tiles ran (serial mode,
          // programmatic launch): B and the barriers are ready; the input
          // is conv 1's output, complete and visible only after this wait.
          asm volatile("griddepcontrol.wait;" ::: "memory");
          asm volatile("fence.proxy.async.global;" ::: "memory");
        }
        CUSYNC_HALO_STAMP(12, v);
        int* const rec = records + kRecordInts * s;
        rec[kRecTile] = tile;
        rec[kRecBLoads] = b_loads;
        rec[kRecImage] = t.image;
        rec[kRecH0] = t.h0;
        rec[kRecW0] = t.w0;
        rec[kRecA0] = t.a0;
        rec[kRecOutBlock] = nb;
        rec[kRecOutTile] = out_tile;
        rec[kRecUnits] = units;
        rec[kRecShare] = share;
        // (Pixel8: 16-byte positions, an eighth of the halo's bytes, and B's rows in two boxes.)
        const bool pixel8 = kPixel8 && cv.pixel8;
        const int boxes = b_boxes(ci);
        const int halo_bytes = pixel8 ? p.halo_bytes / (kRowBytes / kPixel8RowBytes) : p.halo_bytes;
        mbar_expect_tx(full + 8 * s, halo_bytes + (p.resident_b ? 0 : boxes * kTapBytes));
        tma_load_4d(stage, &p.x[ci], full + 8 * s, cb * kC, t.w0 - 1, t.h0 - 1, t.image);
        if (!p.resident_b)
          for (int tap = 0; tap < boxes; ++tap)
            tma_load_2d(stage + p.halo_stage_bytes + tap * kTapBytes, &p.w[ci], full + 8 * s, nb * kC,
                        (pixel8 ? tap : tap * cv.cb + cb) * kC);
      }
    }
    // Every load of this CTA is issued: a launch queued behind this one as
    // its programmatic dependent may start its CTAs (on SMs this grid leaves
    // idle, and as its CTAs exit); no effect without one.
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    // One end record per consumer: each meets one as its next tile.
    for (int i = 0; i < 2; ++i, ++v) {
      const int s = v % p.stages;
      acquire_stage(s);
      records[kRecordInts * s + kRecTile] = kEnd;
      mbar_arrive(full + 8 * s);
    }
    CUSYNC_HALO_STAMP(3, halo_now());
    return;
  }

  const int c = wg - 1, warp = (tid % 128) / 32, lane = tid % 32;
  int b_seen = 0;   // resident B: the loads this consumer has waited for
  int v_next = 0;   // cooperative: the unit where the next tile starts
  for (int k = kCoop ? 0 : c;; k += kCoop ? 1 : 2) {
    // This consumer's j-th tile waits for phase j - 1 + c of its turn barrier,
    // which the other consumer completes with tile k - 1 (consumer 0's first
    // wait, parity 1 on a fresh barrier, passes).
    const int j = k / 2;
    if constexpr (!kCoop) mbar_wait(turn + 8 * c, (j & 1) ^ (c ^ 1));
    const int v0 = kCoop ? v_next : *cursor;
    if (tid % 128 == 0) CUSYNC_HALO_STAMP(13 + c, v0);
    {
      const int s = v0 % p.stages;
      mbar_wait(full + 8 * s, (v0 / p.stages) & 1);
    }
    if (tid == 128 && k == 0) CUSYNC_HALO_STAMP(4, halo_now());
    const int* const rec = records + kRecordInts * (v0 % p.stages);
    const int tile = rec[kRecTile];
    const int b_loads = rec[kRecBLoads];
    // Every warp of the warpgroup has passed its turn wait and read the
    // cursor and the record before any thread hands the turn on (and the
    // other consumer rewrites the cursor): an end record has no wgmma to
    // hold the warps together.
    asm volatile("bar.sync %0, 128;" ::"r"(1 + c) : "memory");
    if (tile == kEnd) {
      // Release the stage (with one stage the producer's second end record
      // waits for it: without this release a one-stage launch never ends),
      // pass the turn (and the cursor past this end record) and leave.
      if (lane == 0) mbar_arrive(empty + 8 * (v0 % p.stages));
      if (!kCoop && tid % 128 == 0) {
        *cursor = v0 + 1;
        mbar_arrive(turn + 8 * (c ^ 1));
        CUSYNC_HALO_STAMP(8 + c, halo_now());
        CUSYNC_HALO_STAMP(10 + c, k / 2);
      }
      return;
    }
    const int ci = tile < p.tiles0 ? 0 : 1;
    const HaloConv<T> cv = p.conv[ci];
    const int out_tile = rec[kRecOutTile], share = rec[kRecShare], nb = rec[kRecOutBlock];
    const cusync::HaloTile t{rec[kRecImage], rec[kRecH0], rec[kRecW0], rec[kRecA0]};
    if (p.resident_b && b_loads != b_seen) {
      mbar_wait(wbar, (b_loads - 1) & 1);  // this conv's B: load b_loads completes phase b_loads - 1
      b_seen = b_loads;
    }
    if (tid == 128 && k == 0) CUSYNC_HALO_STAMP(5, halo_now());
    float d0[32], d1[32];  // rows 0-63 and 64-127 of the tile
    Pair bias[8];
    // The tile's units (channel blocks), warp-uniform as far as ptxas can
    // tell (read from shared memory, they are not): wgmmas stay in flight
    // across this loop's back edge, and a branch ptxas thinks divergent would
    // serialize them.
    const int ncb = __shfl_sync(~0u, rec[kRecUnits], 0);
    for (int cb = 0; cb < ncb; ++cb) {
      // Use u = v / S of the stage waits for the full barrier's phase u,
      // parity u & 1. Units pass their full waits in v order (the turn orders
      // the tiles, and a consumer passes its own units in order), so phase
      // u - 1 has completed here and the parity names phase u.
      const int v = v0 + cb, s = v % p.stages;
      const uint32_t stage = ring + s * p.stage_bytes;
      if (cb > 0) mbar_wait(full + 8 * s, (v / p.stages) & 1);
      // (Cooperative: this consumer's chain c, into d0; paired tiles' second
      // chain is the second image's grid.)
      const uint32_t b_lo = desc_lo(p.resident_b ? weights : stage + p.halo_stage_bytes);
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");  // the last epilogue read d0, d1
      // Three commit groups a unit: d0's taps, d1's but the last, d1's last
      // (one chain: d0's but the last, none, d0's last), so the handoff
      // below leaves the last tap queued either way. (Pixel8: k16 steps for taps.)
      if (kPixel8 && cv.pixel8) {
        constexpr int kLast = kPixel8Steps - 1;
        const uint32_t a_lo = desc_lo_pixel8(stage + (t.a0 + (kCoop ? g.chain_halo_offset(c) : 0)) * kPixel8RowBytes);
        const uint32_t a_lo1 = a_lo + g.chain_halo_offset(1) * (kPixel8RowBytes / 16);
        if constexpr (kTwoChains && !kCoop) {
          conv_steps_pixel8<T, 0, kPixel8Steps>(d0, a_lo, g.bw, b_lo, cb > 0);
          wgmma_commit();
          conv_steps_pixel8<T, 0, kLast>(d1, a_lo1, g.bw, b_lo, cb > 0);
          wgmma_commit();
          conv_steps_pixel8<T, kLast, kPixel8Steps>(d1, a_lo1, g.bw, b_lo, cb > 0);
          wgmma_commit();
        } else {
          conv_steps_pixel8<T, 0, kLast>(d0, a_lo, g.bw, b_lo, cb > 0);
          wgmma_commit();
          wgmma_commit();
          conv_steps_pixel8<T, kLast, kPixel8Steps>(d0, a_lo, g.bw, b_lo, cb > 0);
          wgmma_commit();
        }
      } else {
        const uint32_t a_lo = desc_lo(stage + (t.a0 + (kCoop ? g.chain_halo_offset(c) : 0)) * kRowBytes);
        const uint32_t a_lo1 = a_lo + g.chain_halo_offset(1) * (kRowBytes / 16);
        if constexpr (kTwoChains && !kCoop) {
          conv_taps<T, 0, kTaps>(d0, a_lo, g.bw, b_lo, cb > 0);
          wgmma_commit();
          conv_taps<T, 0, kTaps - kHandoffTaps>(d1, a_lo1, g.bw, b_lo, cb > 0);
          wgmma_commit();
          conv_taps<T, kTaps - kHandoffTaps, kTaps>(d1, a_lo1, g.bw, b_lo, cb > 0);
          wgmma_commit();
        } else {
          conv_taps<T, 0, kTaps - kHandoffTaps>(d0, a_lo, g.bw, b_lo, cb > 0);
          wgmma_commit();
          wgmma_commit();
          conv_taps<T, kTaps - kHandoffTaps, kTaps>(d0, a_lo, g.bw, b_lo, cb > 0);
          wgmma_commit();
        }
      }
      const bool last = cb == ncb - 1;
      // With 3 or more stages the previous unit's stage is released once its
      // 3 groups are done, with this unit's queued behind them: the tensor
      // cores do not drain between a tile's channel blocks. With 2 that would
      // tie each release to the next unit's arrival (one load in flight at a
      // time: 10-20 % slower where B streams, bench/NOTES.md stop 29), so each
      // unit drains and releases its own stage. (With 1 the next unit's stage
      // is this one's.)
      const bool queue_units = p.stages > 2;
      if (queue_units && cb > 0) {
        wgmma_wait<3>();
        if (lane == 0) mbar_arrive(empty + 8 * ((v - 1) % p.stages));
      }
      if (!kCoop && last) {
        // Hand the tensor cores (and the cursor) over with the last tap's 4
        // wgmmas still queued, so the other consumer's queue right behind.
        wgmma_wait<1>();
        if (tid % 128 == 0) {
          *cursor = v0 + ncb;
          mbar_arrive(turn + 8 * (c ^ 1));
        }
      }
      if (last || !queue_units) {
        wgmma_wait<0>();
        if (lane == 0) mbar_arrive(empty + 8 * s);  // this warp's reads of the stage are done
      }
    }
    // Nothing is in flight here (the last unit waited for all); said again
    // for ptxas, which cannot tell and would insert its own wait.
    wgmma_wait<0>();
    v_next = v0 + ncb;
    // The chains this consumer holds: both (pingpong), or its own in d0.
    constexpr bool kBoth = kTwoChains && !kCoop;
    if (kSplit && cv.splits > 1) {
      // This share's sums to memory, then the count; the last share to count
      // takes every share's sums in share order and runs the epilogue.
      // (Cooperative: each consumer its half, both before the one count.)
      const int ctid = tid % 128, half = kCoop ? c * cusync::kHaloShareFloats / 2 : 0;
      store_share<kBoth>(cv.partials + (size_t(out_tile) * cv.splits + share) * cusync::kHaloShareFloats + half, ctid,
                         d0, d1);
      __threadfence();
      const int group = kCoop ? 0 : c;  // the flag and barrier shared by the consumers of this tile
      sync_tile_consumers<kCoop>(c);
      if (ctid == 0 && c == group) last_share[group] = atomicAdd(cv.counts + out_tile, 1) == cv.splits - 1;
      sync_tile_consumers<kCoop>(c);
      if (!last_share[group]) continue;
      __threadfence();  // the other shares' sums, counted before this one's
      sum_shares<kBoth>(cv.partials + size_t(out_tile) * cv.splits * cusync::kHaloShareFloats + half, cv.splits, ctid, d0, d1);
    }
    load_bias<T, Pair>(cv, nb, bias);

    if (tid == 128 && k == 0) CUSYNC_HALO_STAMP(6, halo_now());
    // The pair's epilogues: conv 1's ReLU (or none); conv 2's residual (or none), then its ReLU (or none).
    const bool relu = cv.activation == cusync::Activation::kRelu;
    const uint32_t my_scratch = scratch + (4 * c + warp) * kScratchWarpBytes;
    const int chain0 = kCoop ? c : 0;  // the chain d0 holds
    if (cv.residual == nullptr) {
      if (relu)
        store_tile<T, Pair, true, false, kBoth>(g, cv, t, nb, chain0, warp, d0, d1, bias, my_scratch);
      else
        store_tile<T, Pair, false, false, kBoth>(g, cv, t, nb, chain0, warp, d0, d1, bias, my_scratch);
    } else if (relu) {
      store_tile<T, Pair, true, true, kBoth>(g, cv, t, nb, chain0, warp, d0, d1, bias, my_scratch);
    } else {
      store_tile<T, Pair, false, true, kBoth>(g, cv, t, nb, chain0, warp, d0, d1, bias, my_scratch);
    }
    if (tid == 128 && k == 0) CUSYNC_HALO_STAMP(7, halo_now());
    if (ci == 0 && p.posts) {
      // The warpgroup's stores (cooperative: both), then one release: the tile is done.
      sync_tile_consumers<kCoop>(c);
      if (tid % 128 == 0 && (!kCoop || c == 0)) {
        __threadfence();
        cusync::semaphore_post_store(p.semaphores + out_tile, 1);
      }
    }
  }
#endif  // CUSYNC_SM90A_DEVICE
}

// The instance a launch of `tiles` tiles runs (host side, shared by the FFI
// launch and bench/halo_pair_probe.cu): one 64-row chain a tile where no tile
// has a second (a paired tiling of one image); both consumers on every tile
// where the launch has no more tiles than CTAs (pingpong would leave one of
// them idle); the split's code only in the launches of a split pair; the
// pixel8 steps only in launches that run a pixel8 conv 1's tiles (a split
// pixel8 pair is refused before any launch).
template <class T, class Pair>
auto halo_conv_instance(const HaloParams<T>& p, int tiles, int sms) {
  const bool one_chain = p.tiling.one_chain(), coop = !one_chain && tiles <= sms;
  const bool split = p.conv[0].splits > 1 || p.conv[1].splits > 1;
  const bool pixel8 = p.conv[0].pixel8 && p.begin < p.tiles0;
  const auto pick = [&](auto split_tag, auto pixel8_tag) {
    constexpr bool kSplit = decltype(split_tag)::value, kPixel8 = decltype(pixel8_tag)::value;
    return one_chain ? halo_conv_kernel<T, Pair, false, false, kSplit, kPixel8>
           : coop    ? halo_conv_kernel<T, Pair, true, true, kSplit, kPixel8>
                     : halo_conv_kernel<T, Pair, true, false, kSplit, kPixel8>;
  };
  return split    ? pick(std::true_type{}, std::false_type{})
         : pixel8 ? pick(std::false_type{}, std::true_type{})
                  : pick(std::false_type{}, std::false_type{});
}

}  // namespace cusync_halo
