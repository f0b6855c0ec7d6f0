// Kernel family 1 (Hopper): the synced MLP, and the plain GEMM, on the
// persistent wgmma + TMA GEMM-chain kernel (sm90_chain_kernel.cuh).
//
//   serial   each GEMM on its own launch in stream order: producer tiles,
//            then consumer tiles; no waits (the StreamSync baseline). Either
//            GEMM may run stream-K (cusync/stream_k.h): where its tiles fill
//            the SMs badly, equal ranges of k-blocks instead of whole tiles.
//   fused    one launch; the placed schedule (cusync/placed_schedule.h; the
//            atomic counter with clusters) hands out every producer tile,
//            then the consumer tiles, which wait on the policy's semaphores.
//   streams  the paper's form: the producer tiles on XLA's stream, the
//            consumer tiles on a side stream behind a wait kernel, both
//            persistent. Once one producer CTA runs, it works through every
//            producer tile left, so waiting consumers cannot starve it.
//
// Serial and streams launch each GEMM on its own, so each may take its own
// tile width (the widths that fill the SMs differ between the two GEMMs); the
// fused kernel runs both with one.
//
// SwiGLU: a producer tile multiplies x by the same columns of w1's gate and
// up halves and stores silu(gate) * up, so h is a plain [T, F] matrix and
// the consumer a plain GEMM; the producer stage is re-tiled to match.
//
// 128x128 and 96x128 tiles run pingpong, or cooperative where a launch gives
// a CTA at most two tiles (runs_cooperative); the plan may name the form.
//
// cluster_m = 2 (opt-in, 128x128 without SwiGLU): 2x1 clusters that share
// each B tile through TMA multicast; a schedule position is a pair of row
// tiles (sm90_chain_kernel.cuh).
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/gemm_sm90.h"
#include "cuda/mlp_launch.h"
#include "cuda/sm90_chain_instances.h"
#include "cuda/two_streams.h"
#include "cusync/optimizations.h"
#include "cusync/sync_layout.h"

namespace cusync_cuda {
namespace {

using xla::ffi::Error;
using cusync_ffi::MlpSpec;
using namespace cusync_sm90;

template <class Cfg>
Error check_device(const DeviceInfo& device) {
  if (device.max_smem_per_block < Cfg::kSmemBytes) {
    return Error::InvalidArgument("cusync_jax: kernel family 1 needs " + std::to_string(Cfg::kSmemBytes) +
                                  " bytes of shared memory per block; this GPU offers " +
                                  std::to_string(device.max_smem_per_block));
  }
  return Error::Success();
}

// Schedule units (CTAs, or clusters) that fit the device at once.
template <class Cfg>
int resident_units(const DeviceInfo& device) {
  if constexpr (Cfg::kClusterM == 1) return device.sm_count;
  else return max_active_clusters<Cfg>(device.sm_count);
}

template <class Cfg>
Error launch(const ChainParams<Cfg>& p, const DeviceInfo& device, cudaStream_t stream, const char* what) {
  return cuda_error(launch_chain(p, device.sm_count, stream), what);
}

// The producer as the kernel tiles it. SwiGLU: a producer tile stores
// silu(gate) * up for tile_cols / 2 columns of h, now a plain [T, F] matrix
// (packed at the start of the [T, 2F] scratch buffer).
cusync::Stage kernel_producer(const MlpSpec& s) {
  if (s.producer.slices != 2) return s.producer;
  return cusync::Stage{static_cast<int>(s.tokens), static_cast<int>(s.ffn), 1, s.producer.tile_rows,
                       s.producer.tile_cols / 2, s.producer.order, s.producer.group_rows};
}

// StridedSync joins a column's gate and up tiles; one SwiGLU producer tile
// covers both, so it is TileSync.
cusync::Policy kernel_policy(const MlpSpec& s) {
  cusync::Policy policy = s.policy;
  if (s.producer.slices == 2 && policy.kind == cusync::PolicyKind::kStridedSync)
    policy.kind = cusync::PolicyKind::kTileSync;
  return policy;
}

template <class Cfg>
GemmStage<Cfg> producer_gemm(const MlpSpec& s, const MlpBuffers& b) {
  using E = typename Cfg::Element;
  const int T = static_cast<int>(s.tokens), H = static_cast<int>(s.hidden), F = static_cast<int>(s.ffn);
  const auto x = static_cast<const E*>(b.x), w1 = static_cast<const E*>(b.w1), b1 = static_cast<const E*>(b.b1);
  if constexpr (Cfg::kSwiglu) {
    return make_swiglu_producer_stage<Cfg>(x, T, H, w1, F, static_cast<E*>(b.h), b1, kernel_producer(s));
  } else {
    return make_gemm_stage<Cfg>(x, T, H, H, w1, F, static_cast<E*>(b.h), F, b1, s.producer, s.activation);
  }
}

template <class Cfg>
GemmStage<Cfg> consumer_gemm(const MlpSpec& s, const MlpBuffers& b) {
  using E = typename Cfg::Element;
  const int T = static_cast<int>(s.tokens), F = static_cast<int>(s.ffn), O = static_cast<int>(s.out);
  return make_gemm_stage<Cfg>(static_cast<const E*>(b.h), T, F, F, static_cast<const E*>(b.w2), O,
                              static_cast<E*>(b.y), O, static_cast<const E*>(b.b2), s.consumer,
                              cusync::Activation::kIdentity);
}

// What every launch shares: the semaphores and how they are posted.
template <class Cfg>
ChainParams<Cfg> sync_params(const MlpSpec& s, const MlpBuffers& b) {
  ChainParams<Cfg> p{};
  p.semaphores = b.sync + cusync::kSyncHeaderWords;
  p.policy = kernel_policy(s);
  p.release_store =
      cusync::has(s.optimizations, cusync::kReleaseStorePosts) && p.policy.single_poster(kernel_producer(s));
  return p;
}

// One GEMM of the MLP alone on Cfg's kernel (serial and streams modes).
// synced: the producer posts, the consumer waits (streams).
template <class Cfg>
Error launch_stage(const MlpSpec& s, const MlpBuffers& b, int stage, bool synced, cudaStream_t stream,
                   const DeviceInfo& device) {
  if (auto e = check_device<Cfg>(device); e.failure()) return e;
  if (stage == 0 && (s.producer.slices == 2) != Cfg::kSwiglu)
    return Error::Internal("cusync_jax: the producer's kernel configuration does not match its activation");
  ChainParams<Cfg> p = sync_params<Cfg>(s, b);
  const GemmStage<Cfg> g = stage == 0 ? producer_gemm<Cfg>(s, b) : consumer_gemm<Cfg>(s, b);
  single_stage_schedule(p, g, stage, kernel_producer(s), synced, b.sync);
  // Serial mode: the consumer right behind the producer in stream order.
  p.wait_prior_grid = stage == 1 && !synced && cusync::has(s.optimizations, cusync::kOverlapLaunches);
  if constexpr (Cfg::kStreamK) {
    // Stream-K where the plan asks for it (the dispatch takes a stream-K
    // configuration only then).
    const cusync::SplitLayout layout = cusync_ffi::mlp_sync_layout(s);
    if (stage == 0 && g.tiling.grid_cols() != cusync_ffi::mlp_stream_k_cols1(s))
      return Error::Internal("cusync_jax: the stream-K producer's tile columns (" +
                             std::to_string(g.tiling.grid_cols()) + ") differ from the sync layout's (" +
                             std::to_string(cusync_ffi::mlp_stream_k_cols1(s)) + ")");
    run_stream_k(p,
                 cusync::make_stream_k(g.tiling.grid_rows(), g.tiling.grid_cols(),
                                       stage == 0 ? cusync_ffi::mlp_k_blocks1(s) : cusync_ffi::mlp_k_blocks2(s),
                                       s.stream_k_ctas),
                 stage, layout, b.sync);
  }
  return launch(p, device, stream,
                stage == 0 ? "launching the Hopper producer kernel" : "launching the Hopper consumer kernel");
}

// Both GEMMs in one launch on Cfg's kernel: producer tiles first, consumer
// tiles after, waiting on the producer's posts.
template <class Cfg>
Error launch_fused(const MlpSpec& s, const MlpBuffers& b, cudaStream_t stream, const DeviceInfo& device) {
  if (auto e = check_device<Cfg>(device); e.failure()) return e;
  ChainParams<Cfg> p = sync_params<Cfg>(s, b);
  p.stage[0] = producer_gemm<Cfg>(s, b);
  p.stage[1] = consumer_gemm<Cfg>(s, b);
  const int P = schedule_positions<Cfg>(p.stage[0].tiling), C = schedule_positions<Cfg>(p.stage[1].tiling);
  p.tiles0 = P;
  p.consumer_waits = p.producer_posts = true;
  p.begin = 0;
  p.end = P + C;
  if constexpr (Cfg::kClusterM == 1) {
    // The placed schedule: the static placement the serial kernels get (a
    // counter's arrival order cost 1-9% on the H100, bench/NOTES_sm90.md, stop 50).
    const cusync::SplitLayout layout = cusync_ffi::mlp_sync_layout(s);
    if (layout.flags == 0 || P > s.producer.tile_count() || C > s.consumer.tile_count())
      return Error::Internal("cusync_jax: the fused kernel's " + std::to_string(P + C) +
                             " schedule positions do not fit the sync buffer's flags");
    p.placed_flags = b.sync + layout.flags;
    p.placed_cursors = b.sync + cusync::kPlacedCursors;
  } else {
    p.counter = b.sync + cusync::kFusedCounter;
  }
  return launch(p, device, stream, "launching the Hopper fused kernel");
}

// Whether a launch of `positions` 128x128 schedule positions runs the
// cooperative form (both MMA warpgroups on every tile) rather than pingpong:
// where a CTA gets at most two tiles there is little mainloop to hide an
// epilogue under. Measured in the MLP (bench/NOTES_sm90.md, stop 17): at 256
// tokens cooperative took 0.86-0.95 of pingpong's time in every mode; from
// 1536 tokens on (4-30 tiles a CTA) pingpong took 0.91-0.97 of cooperative's
// in serial and RowSync modes.
bool runs_cooperative(int positions, const DeviceInfo& device) { return positions <= 2 * device.sm_count; }

// 96-row tiles run the product transposed (tokens as N): wgmma's M comes in
// 64s, so only its N can be 96 tokens.
bool tokens_as_n(int tile_rows) { return tile_rows == 96; }

// Whether a GEMM's tiles come in both MMA forms (pingpong and cooperative):
// whole 128x128 and 96x128 tiles (clusters and stream-K have one form each).
bool has_mma_forms(const cusync::Stage& st, bool stream_k, int cluster_m) {
  return cluster_m == 1 && !stream_k && st.tile_cols == 128 && (st.tile_rows == 128 || tokens_as_n(st.tile_rows));
}

// Calls f(Cfg{}) with the compiled configuration for a tile shape, SwiGLU
// form, cluster, stream-K and (see has_mma_forms) cooperative form (checked
// by the caller: one exists).
template <class F>
Error with_config(bool bf16, int rows, int n, bool swiglu, int cluster_m, bool stream_k, bool cooperative, F&& f) {
  if (tokens_as_n(rows)) {
    if (cooperative) {
      if (bf16) return swiglu ? f(ChainBF16x96TokSwigluCoop{}) : f(ChainBF16x96TokCoop{});
      return swiglu ? f(ChainF16x96TokSwigluCoop{}) : f(ChainF16x96TokCoop{});
    }
    if (bf16) return swiglu ? f(ChainBF16x96TokSwiglu{}) : f(ChainBF16x96Tok{});
    return swiglu ? f(ChainF16x96TokSwiglu{}) : f(ChainF16x96Tok{});
  }
  if (stream_k) {
    if (n == 192) return bf16 ? f(ChainBF16x192StreamK{}) : f(ChainF16x192StreamK{});
    if (bf16) return swiglu ? f(ChainBF16x128SwigluStreamK{}) : f(ChainBF16x128StreamK{});
    return swiglu ? f(ChainF16x128SwigluStreamK{}) : f(ChainF16x128StreamK{});
  }
  if (cluster_m == 2) return bf16 ? f(ChainBF16x128Cluster2{}) : f(ChainF16x128Cluster2{});
  switch (n) {
    case 96:
      return bf16 ? f(ChainBF16x96{}) : f(ChainF16x96{});
    case 192:
      return bf16 ? f(ChainBF16x192{}) : f(ChainF16x192{});
    case 128:
      if (cooperative) {
        if (bf16) return swiglu ? f(ChainBF16x128SwigluCoop{}) : f(ChainBF16x128Coop{});
        return swiglu ? f(ChainF16x128SwigluCoop{}) : f(ChainF16x128Coop{});
      }
      if (bf16) return swiglu ? f(ChainBF16x128Swiglu{}) : f(ChainBF16x128{});
      return swiglu ? f(ChainF16x128Swiglu{}) : f(ChainF16x128{});
    default:
      if (bf16) return swiglu ? f(ChainBF16x256Swiglu{}) : f(ChainBF16x256{});
      return swiglu ? f(ChainF16x256Swiglu{}) : f(ChainF16x256{});
  }
}

// The configuration that runs stage 0 (producer) or 1 (consumer) of the plan,
// in a launch of `positions` whole-tile positions (the fused mode: both
// stages'); the plan's MMA schedule, or the rule, picks the form.
template <class F>
Error with_stage_config(const MlpSpec& s, bool bf16, int stage, int positions, const DeviceInfo& device, F&& f) {
  const cusync::Stage& st = stage == 0 ? s.producer : s.consumer;
  const bool cooperative = s.mma_schedule == cusync_ffi::MmaSchedule::kAuto
                               ? runs_cooperative(positions, device)
                               : s.mma_schedule == cusync_ffi::MmaSchedule::kCooperative;
  return with_config(bf16, st.tile_rows, st.tile_cols, stage == 0 && s.producer.slices == 2, s.cluster_m,
                     stage == 0 ? s.stream_k1 : s.stream_k2, cooperative, f);
}

std::string tile_text(const cusync::Stage& st, int k) {
  return std::to_string(st.tile_rows) + "x" + std::to_string(st.tile_cols) + "x" + std::to_string(k);
}

// Whether the plan names tiles, clusters and stream-K that kernel family 1
// was compiled for; every refusal says what to take instead.
Error check_plan(const MlpSpec& s) {
  const cusync::Stage &P = s.producer, &C = s.consumer;
  const bool swiglu = P.slices == 2;
  const auto shape_ok = [](const cusync::Stage& st) {
    if (tokens_as_n(st.tile_rows)) return st.tile_cols == 128;
    return st.tile_rows == 128 && (st.tile_cols == 96 || st.tile_cols == 128 || st.tile_cols == 192 ||
                                   st.tile_cols == 256);
  };
  if (s.tile_k1 != 64 || s.tile_k2 != 64 || !shape_ok(P) || !shape_ok(C)) {
    return Error::InvalidArgument(
        "cusync_jax: kernel family 1 runs tiles 96x128x64, 128x96x64, 128x128x64, 128x192x64 and 128x256x64; the "
        "plan asks for " + tile_text(P, s.tile_k1) + " and " + tile_text(C, s.tile_k2));
  }
  if ((P.tile_rows != C.tile_rows || P.tile_cols != C.tile_cols) && s.mode == cusync_ffi::Mode::kFused) {
    return Error::InvalidArgument("cusync_jax: the fused mode runs both GEMMs in one kernel, so with one tile; the "
                                  "plan asks for " + tile_text(P, s.tile_k1) + " and " + tile_text(C, s.tile_k2) +
                                  " (take mode serial or streams, or one tile)");
  }
  if (swiglu && (P.tile_cols == 96 || P.tile_cols == 192)) {
    return Error::InvalidArgument("cusync_jax: kernel family 1 has no SwiGLU form of its " +
                                  tile_text(P, s.tile_k1) + " tiles; take 128x128x64 or 128x256x64");
  }
  if (s.cluster_m != 1 && (s.cluster_m != 2 || P.tile_rows != 128 || C.tile_rows != 128 || P.tile_cols != 128 ||
                           C.tile_cols != 128 || swiglu)) {
    return Error::InvalidArgument(
        "cusync_jax: kernel family 1 runs cluster_m = 2 only with 128x128x64 tiles and a one-slice "
        "activation (not SwiGLU); the plan asks for cluster_m " + std::to_string(s.cluster_m) + ", tiles " +
        tile_text(P, s.tile_k1) + " and " + tile_text(C, s.tile_k2) + (swiglu ? ", SwiGLU" : ""));
  }
  if (s.mma_schedule != cusync_ffi::MmaSchedule::kAuto) {
    // A chosen schedule must choose something: some GEMM whose tiles come
    // in both forms.
    const bool chooses = has_mma_forms(P, s.stream_k1, s.cluster_m) || has_mma_forms(C, s.stream_k2, s.cluster_m);
    if (!chooses)
      return Error::InvalidArgument("cusync_jax: mma_schedule applies to whole 128x128x64 and 96x128x64 tiles "
                                    "without clusters or stream-K; the plan runs " + tile_text(P, s.tile_k1) + " and " +
                                    tile_text(C, s.tile_k2) + ", cluster_m " + std::to_string(s.cluster_m) +
                                    (s.stream_k1 || s.stream_k2 ? ", stream-K" : ""));
  }
  for (int stage = 0; stage < 2; ++stage) {
    const cusync::Stage& st = stage == 0 ? P : C;
    if (!(stage == 0 ? s.stream_k1 : s.stream_k2)) continue;
    // Stream-K runs on its own 128x128 and 128x192 instances (the others
    // compile without it); decode_mlp_spec already kept it to the serial mode.
    if (st.tile_rows != 128 || (st.tile_cols != 128 && st.tile_cols != 192) || s.cluster_m != 1)
      return Error::InvalidArgument("cusync_jax: kernel family 1 runs stream-K with 128x128x64 or 128x192x64 "
                                    "tiles and cluster_m 1; the plan asks for it on " +
                                    tile_text(st, stage == 0 ? s.tile_k1 : s.tile_k2) + ", cluster_m " +
                                    std::to_string(s.cluster_m));
  }
  // Python sized the semaphores for the [gate | up] tiling (s.producer).
  if (swiglu) {
    const int need = kernel_policy(s).semaphore_count(kernel_producer(s)), have = P.tile_count();
    if (need > have) {
      return Error::InvalidArgument("cusync_jax: kernel family 1's SwiGLU tiling needs " + std::to_string(need) +
                                    " semaphores; the sync buffer holds " + std::to_string(have));
    }
  }
  return Error::Success();
}

}  // namespace

Error launch_mlp_sm90(const MlpSpec& s, const MlpBuffers& b, cudaStream_t stream, const DeviceInfo& device) {
  if (s.hidden % 8 || s.ffn % 8 || s.out % 8) {
    return Error::InvalidArgument(
        "cusync_jax: kernel family 1 loads rows with TMA, which needs 16-byte row strides: hidden, ffn and "
        "out must be multiples of 8; got hidden " + std::to_string(s.hidden) + ", ffn " + std::to_string(s.ffn) +
        ", out " + std::to_string(s.out) + " (pad the weights)");
  }
  if (s.policy.kind == cusync::PolicyKind::kConv2DTileSync)
    return Error::InvalidArgument("cusync_jax: Conv2DTileSync is a conv policy; the MLP takes TileSync, RowSync "
                                  "or StridedSync");
  if (s.producer.slices > 2) return Error::InvalidArgument("cusync_jax: kernel family 1 handles at most 2 slices");
  if (auto e = check_plan(s); e.failure()) return e;
  // Whole-tile positions of each GEMM (a SwiGLU producer tile is one of h's),
  // which pick 128x128's form (clusters and stream-K have one form each).
  const int tiles[2] = {kernel_producer(s).tile_count(), s.consumer.tile_count()};
  const auto stage_launch = [&](int stage, bool synced, cudaStream_t on) {
    return with_stage_config(s, b.bf16, stage, tiles[stage], device, [&](auto cfg) {
      return launch_stage<decltype(cfg)>(s, b, stage, synced, on, device);
    });
  };
  switch (s.mode) {
    case cusync_ffi::Mode::kSerial: {
      if (auto e = stage_launch(0, false, stream); e.failure()) return e;
      return stage_launch(1, false, stream);
    }
    case cusync_ffi::Mode::kFused:
      return with_stage_config(s, b.bf16, 0, tiles[0] + tiles[1], device, [&](auto cfg) {
        return launch_fused<decltype(cfg)>(s, b, stream, device);
      });
    case cusync_ffi::Mode::kStreams:
    default: {
      int dev = 0;
      if (auto e = stream_device(stream, &dev); e.failure()) return e;
      // Both persistent grids resident at once (one CTA per SM each): no
      // consumer CTA can hold an SM a producer CTA needs.
      int positions[2] = {0, 0}, units[2] = {0, 0};
      for (int stage = 0; stage < 2; ++stage) {
        (void)with_stage_config(s, b.bf16, stage, tiles[stage], device, [&](auto cfg) {
          using Cfg = decltype(cfg);
          positions[stage] = schedule_positions<Cfg>(stage == 0 ? kernel_producer(s) : s.consumer);
          units[stage] = resident_units<Cfg>(device);
          return Error::Success();
        });
      }
      const bool fit = persistent_grids_fit(positions[0], positions[1], std::min(units[0], units[1]));
      return run_on_two_streams(
          dev, stream, b.sync + cusync::kProducerStarted, needs_wait_kernel(s.optimizations, fit),
          [&](cudaStream_t on) { return stage_launch(0, true, on); },
          [&](cudaStream_t on) { return stage_launch(1, true, on); });
    }
  }
}

namespace {

template <class Cfg>
Error run_gemm(const void* a, const void* w, void* out, int m, int n, int k, cusync::TileOrder order,
               int group_rows, cudaStream_t stream, const DeviceInfo& device) {
  if (auto e = check_device<Cfg>(device); e.failure()) return e;
  using E = typename Cfg::Element;
  const cusync::Stage tiling{m, n, 1, Cfg::kTileM, Cfg::kTileN, order, group_rows};
  ChainParams<Cfg> p{};
  p.stage[0] = make_gemm_stage<Cfg>(static_cast<const E*>(a), m, k, k, static_cast<const E*>(w), n,
                                    static_cast<E*>(out), n, nullptr, tiling, cusync::Activation::kIdentity);
  p.stage[1] = p.stage[0];
  p.tiles0 = schedule_positions<Cfg>(tiling);
  p.begin = 0;
  p.end = p.tiles0;
  p.counter = nullptr;  // a static schedule: nothing waits
  p.policy = cusync::Policy{cusync::PolicyKind::kTileSync, 0};
  return launch(p, device, stream, "launching the Hopper GEMM");
}

}  // namespace

Error launch_gemm_sm90(const void* a, const void* w, void* out, int m, int n, int k, bool bf16,
                       int tile_n, cusync::TileOrder order, int group_rows, int cluster_m, cudaStream_t stream,
                       const DeviceInfo& device) {
  if (n % 8 || k % 8)
    return Error::InvalidArgument("cusync_jax: gemm needs n and k to be multiples of 8 (16-byte TMA row strides)");
  if (tile_n != 96 && tile_n != 128 && tile_n != 192 && tile_n != 256)
    return Error::InvalidArgument("cusync_jax: gemm tile_n must be 96, 128, 192 or 256, got " +
                                  std::to_string(tile_n));
  if (cluster_m != 1 && (cluster_m != 2 || tile_n != 128))
    return Error::InvalidArgument("cusync_jax: gemm runs cluster_m 1, or 2 with tile_n 128; got cluster_m " +
                                  std::to_string(cluster_m) + ", tile_n " + std::to_string(tile_n));
  const int tiles = cusync::ceil_div(m, 128) * cusync::ceil_div(n, tile_n);
  return with_config(bf16, 128, tile_n, false, cluster_m, false, runs_cooperative(tiles, device), [&](auto cfg) {
    return run_gemm<decltype(cfg)>(a, w, out, m, n, k, order, group_rows, stream, device);
  });
}

}  // namespace cusync_cuda
