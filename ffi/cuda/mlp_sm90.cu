// Kernel family 1 (Hopper): the synced MLP, and the plain GEMM, on the
// persistent wgmma + TMA GEMM-chain kernel (sm90_chain_kernel.cuh).
//
//   serial   the kernel twice in stream order: producer positions, then
//            consumer positions; no waits (the StreamSync baseline). Either
//            GEMM may run stream-K (cusync/stream_k.h): where its tiles fill
//            the SMs badly, equal ranges of k-blocks instead of whole tiles.
//   fused    one launch; the atomic counter hands out every producer tile,
//            then the consumer tiles, which wait on the policy's semaphores.
//   streams  the paper's form: the producer positions on XLA's stream, the
//            consumer positions on a side stream behind a wait kernel, both
//            persistent. Once one producer CTA runs, it works through every
//            producer tile left, so waiting consumers cannot starve it.
//
// SwiGLU: a producer tile multiplies x by the same columns of w1's gate and
// up halves and stores silu(gate) * up, so h is a plain [T, F] matrix and
// the consumer a plain GEMM; the producer stage is re-tiled to match.
//
// cluster_m = 2 (opt-in, 128x128 without SwiGLU): 2x1 clusters that share
// each B tile through TMA multicast; a schedule position is a pair of row
// tiles (sm90_chain_kernel.cuh).
#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>
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

template <class Cfg>
Error run_mlp(const cusync_ffi::MlpSpec& s, const MlpBuffers& b, cudaStream_t stream, const DeviceInfo& device) {
  if (auto e = check_device<Cfg>(device); e.failure()) return e;
  using E = typename Cfg::Element;
  const int T = static_cast<int>(s.tokens), H = static_cast<int>(s.hidden), F = static_cast<int>(s.ffn),
            O = static_cast<int>(s.out);
  E* h = static_cast<E*>(b.h);
  ChainParams<Cfg> p{};
  cusync::Stage producer = s.producer;
  cusync::Policy policy = s.policy;
  if constexpr (Cfg::kSwiglu) {
    // A producer tile stores silu(gate) * up for kTileN/2 columns of h, now a
    // plain [T, F] matrix (packed at the start of the [T, 2F] scratch buffer).
    producer = cusync::Stage{T, F, 1, Cfg::kTileM, Cfg::kTileN / 2, s.producer.order, s.producer.group_rows};
    // StridedSync joins a column's gate and up tiles; one producer tile now
    // covers both, so it is TileSync.
    if (policy.kind == cusync::PolicyKind::kStridedSync) policy.kind = cusync::PolicyKind::kTileSync;
    // Python sized the semaphores for the [gate | up] tiling (s.producer).
    const int need = policy.semaphore_count(producer), have = s.producer.tile_count();
    if (need > have) {
      return Error::InvalidArgument("cusync_jax: kernel family 1's SwiGLU tiling needs " + std::to_string(need) +
                                    " semaphores; the sync buffer holds " + std::to_string(have));
    }
    p.stage[0] = make_swiglu_producer_stage<Cfg>(static_cast<const E*>(b.x), T, H, static_cast<const E*>(b.w1), F,
                                                 h, static_cast<const E*>(b.b1), producer);
  } else {
    p.stage[0] = make_gemm_stage<Cfg>(static_cast<const E*>(b.x), T, H, H, static_cast<const E*>(b.w1), F, h, F,
                                      static_cast<const E*>(b.b1), producer, s.activation);
  }
  p.stage[1] = make_gemm_stage<Cfg>(h, T, F, F, static_cast<const E*>(b.w2), O, static_cast<E*>(b.y), O,
                                    static_cast<const E*>(b.b2), s.consumer, cusync::Activation::kIdentity);
  // Schedule positions: tiles, or row-tile pairs with clusters.
  const int P = schedule_positions<Cfg>(producer), C = schedule_positions<Cfg>(s.consumer);
  p.tiles0 = P;
  p.semaphores = b.sync + cusync::kSyncHeaderWords;
  p.policy = policy;
  p.release_store = cusync::has(s.optimizations, cusync::kReleaseStorePosts) && policy.single_poster(producer);

  if (Cfg::kStreamK && s.stream_k1 && producer.grid_cols() != cusync_ffi::mlp_stream_k_cols1(s))
    return Error::Internal("cusync_jax: the stream-K producer's tile columns (" +
                           std::to_string(producer.grid_cols()) + ") differ from the sync layout's (" +
                           std::to_string(cusync_ffi::mlp_stream_k_cols1(s)) + ")");
  switch (s.mode) {
    case cusync_ffi::Mode::kSerial: {
      const cusync::SplitLayout layout = cusync_ffi::mlp_sync_layout(s);
      // Stream-K for stage `stage` where the plan asks for it.
      const auto with_stream_k = [&](ChainParams<Cfg> q, int stage, bool on, int k_blocks, long long counts,
                                     long long partials) {
        if (!Cfg::kStreamK || !on) return q;
        // (The producer as the kernel tiles it: its columns are mlp_stream_k_cols1's.)
        const cusync::Stage& st = stage == 0 ? producer : s.consumer;
        q.stream_k = cusync::make_stream_k(st.grid_rows(), st.grid_cols(), k_blocks, s.stream_k_ctas);
        q.stream_k_stage = stage;
        q.stream_k_counts = b.sync + counts;
        q.stream_k_partials = reinterpret_cast<float*>(b.sync + partials);
        q.begin = 0;
        q.end = kStreamKDone;
        return q;
      };
      p.begin = 0;
      p.end = P;
      p.counter = b.sync + cusync::kProducerCounter;
      if (auto e = launch(with_stream_k(p, 0, s.stream_k1, cusync_ffi::mlp_k_blocks1(s), layout.counts1,
                                        layout.partials1),
                          device, stream, "launching the Hopper producer kernel (serial)");
          e.failure())
        return e;
      p.begin = P;
      p.end = P + C;
      p.counter = b.sync + cusync::kConsumerCounter;
      return launch(with_stream_k(p, 1, s.stream_k2, cusync_ffi::mlp_k_blocks2(s), layout.counts2, layout.partials2),
                    device, stream, "launching the Hopper consumer kernel (serial)");
    }
    case cusync_ffi::Mode::kFused: {
      p.consumer_waits = p.producer_posts = true;
      p.begin = 0;
      p.end = P + C;
      p.counter = b.sync + cusync::kFusedCounter;
      return launch(p, device, stream, "launching the Hopper fused kernel");
    }
    case cusync_ffi::Mode::kStreams:
    default: {
      int dev = 0;
      if (auto e = stream_device(stream, &dev); e.failure()) return e;
      SideStream* side = nullptr;
      if (auto e = side_stream_for(dev, &side); e.failure()) return e;
      p.consumer_waits = p.producer_posts = true;
      // Both persistent grids resident at once (one CTA per SM each): no
      // consumer CTA can hold an SM a producer CTA needs.
      const int units = resident_units<Cfg>(device);
      const bool one_wave = std::min(P, units) + std::min(C, units) <= units;
      const bool wait_kernel = !(cusync::has(s.optimizations, cusync::kAvoidWaitKernel) && one_wave);
      std::lock_guard<std::mutex> lock(side->mu);
      CUSYNC_CUDA_RETURN_IF_ERROR(cudaEventRecord(side->fork, stream), "recording the fork event");
      CUSYNC_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(side->stream, side->fork, 0), "forking the side stream");
      ChainParams<Cfg> pp = p;
      pp.begin = 0;
      pp.end = P;
      pp.counter = b.sync + cusync::kProducerCounter;
      pp.started = b.sync + cusync::kProducerStarted;
      if (auto e = launch(pp, device, stream, "launching the Hopper producer kernel (streams)"); e.failure())
        return e;
      if (wait_kernel) {
        if (auto e = launch_wait_for_flag(b.sync + cusync::kProducerStarted, side->stream); e.failure()) return e;
      }
      ChainParams<Cfg> cp = p;
      cp.begin = P;
      cp.end = P + C;
      cp.counter = b.sync + cusync::kConsumerCounter;
      if (auto e = launch(cp, device, side->stream, "launching the Hopper consumer kernel (streams)"); e.failure())
        return e;
      CUSYNC_CUDA_RETURN_IF_ERROR(cudaEventRecord(side->join, side->stream), "recording the join event");
      CUSYNC_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, side->join, 0), "joining the side stream");
      return Error::Success();
    }
  }
}

std::string tile_text(const cusync::Stage& st, int k) {
  return std::to_string(st.tile_rows) + "x" + std::to_string(st.tile_cols) + "x" + std::to_string(k);
}

}  // namespace

Error launch_mlp_sm90(const cusync_ffi::MlpSpec& s, const MlpBuffers& b, cudaStream_t stream,
                      const DeviceInfo& device) {
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
  const cusync::Stage &P = s.producer, &C = s.consumer;
  const bool same = P.tile_rows == C.tile_rows && P.tile_cols == C.tile_cols && s.tile_k1 == s.tile_k2;
  const bool swiglu = P.slices == 2;
  const int n = P.tile_cols;
  if (!same || P.tile_rows != 128 || s.tile_k1 != 64 || (n != 96 && n != 128 && n != 256)) {
    return Error::InvalidArgument(
        "cusync_jax: kernel family 1 runs tiles 128x96x64, 128x128x64 and 128x256x64, the same for both GEMMs; "
        "the plan asks for " + tile_text(P, s.tile_k1) + " and " + tile_text(C, s.tile_k2));
  }
  if (s.stream_k1 || s.stream_k2) {
    // Stream-K runs on its own 128x128 instances (the others compile without it).
    if (n != 128 || s.cluster_m != 1)
      return Error::InvalidArgument("cusync_jax: kernel family 1 runs stream-K with 128x128x64 tiles and cluster_m "
                                    "1; the plan asks for " + tile_text(P, s.tile_k1) + ", cluster_m " +
                                    std::to_string(s.cluster_m));
    if (b.bf16)
      return swiglu ? run_mlp<ChainBF16x128SwigluStreamK>(s, b, stream, device)
                    : run_mlp<ChainBF16x128StreamK>(s, b, stream, device);
    return swiglu ? run_mlp<ChainF16x128SwigluStreamK>(s, b, stream, device)
                  : run_mlp<ChainF16x128StreamK>(s, b, stream, device);
  }
  if (n == 96) {
    if (swiglu)
      return Error::InvalidArgument("cusync_jax: kernel family 1 has no SwiGLU form of its 128x96x64 tiles; "
                                    "take 128x128x64 or 128x256x64");
    return b.bf16 ? run_mlp<ChainBF16x96>(s, b, stream, device) : run_mlp<ChainF16x96>(s, b, stream, device);
  }
  if (s.cluster_m != 1) {
    if (s.cluster_m != 2 || n != 128 || swiglu) {
      return Error::InvalidArgument(
          "cusync_jax: kernel family 1 runs cluster_m = 2 only with 128x128x64 tiles and a one-slice "
          "activation (not SwiGLU); the plan asks for cluster_m " + std::to_string(s.cluster_m) + ", tiles " +
          tile_text(P, s.tile_k1) + (swiglu ? ", SwiGLU" : ""));
    }
    return b.bf16 ? run_mlp<ChainBF16x128Cluster2>(s, b, stream, device)
                  : run_mlp<ChainF16x128Cluster2>(s, b, stream, device);
  }
  if (b.bf16) {
    if (n == 128)
      return swiglu ? run_mlp<ChainBF16x128Swiglu>(s, b, stream, device) : run_mlp<ChainBF16x128>(s, b, stream, device);
    return swiglu ? run_mlp<ChainBF16x256Swiglu>(s, b, stream, device) : run_mlp<ChainBF16x256>(s, b, stream, device);
  }
  if (n == 128)
    return swiglu ? run_mlp<ChainF16x128Swiglu>(s, b, stream, device) : run_mlp<ChainF16x128>(s, b, stream, device);
  return swiglu ? run_mlp<ChainF16x256Swiglu>(s, b, stream, device) : run_mlp<ChainF16x256>(s, b, stream, device);
}

namespace {

template <class Cfg>
Error run_gemm(const void* a, const void* w, void* out, int* counter, int m, int n, int k, cusync::TileOrder order,
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
  p.counter = counter;
  p.policy = cusync::Policy{cusync::PolicyKind::kTileSync, 0};
  return launch(p, device, stream, "launching the Hopper GEMM");
}

}  // namespace

Error launch_gemm_sm90(const void* a, const void* w, void* out, int* counter, int m, int n, int k, bool bf16,
                       int tile_n, cusync::TileOrder order, int group_rows, int cluster_m, cudaStream_t stream,
                       const DeviceInfo& device) {
  if (n % 8 || k % 8)
    return Error::InvalidArgument("cusync_jax: gemm needs n and k to be multiples of 8 (16-byte TMA row strides)");
  if (tile_n != 96 && tile_n != 128 && tile_n != 256)
    return Error::InvalidArgument("cusync_jax: gemm tile_n must be 96, 128 or 256, got " + std::to_string(tile_n));
  if (cluster_m != 1) {
    if (cluster_m != 2 || tile_n != 128)
      return Error::InvalidArgument("cusync_jax: gemm runs cluster_m 1, or 2 with tile_n 128; got cluster_m " +
                                    std::to_string(cluster_m) + ", tile_n " + std::to_string(tile_n));
    return bf16 ? run_gemm<ChainBF16x128Cluster2>(a, w, out, counter, m, n, k, order, group_rows, stream, device)
                : run_gemm<ChainF16x128Cluster2>(a, w, out, counter, m, n, k, order, group_rows, stream, device);
  }
  if (tile_n == 96) {
    return bf16 ? run_gemm<ChainBF16x96>(a, w, out, counter, m, n, k, order, group_rows, stream, device)
                : run_gemm<ChainF16x96>(a, w, out, counter, m, n, k, order, group_rows, stream, device);
  }
  if (bf16) {
    return tile_n == 128 ? run_gemm<ChainBF16x128>(a, w, out, counter, m, n, k, order, group_rows, stream, device)
                         : run_gemm<ChainBF16x256>(a, w, out, counter, m, n, k, order, group_rows, stream, device);
  }
  return tile_n == 128 ? run_gemm<ChainF16x128>(a, w, out, counter, m, n, k, order, group_rows, stream, device)
                       : run_gemm<ChainF16x256>(a, w, out, counter, m, n, k, order, group_rows, stream, device);
}

}  // namespace cusync_cuda
