// Kernel family 1 (Hopper) for the conv pair: each convolution is an
// implicit GEMM over the N*H*W output pixels on the GEMM-chain kernel
// (sm90_chain_kernel.cuh), its A k-blocks (one filter tap's block of 64
// channels) loaded by TMA in im2col mode, so the padding is TMA's zero fill.
//
//   serial   producer launch, then consumer launch, in stream order
//   streams  the producer on XLA's stream, the consumer on the side stream
//            behind the wait kernel (cuda/two_streams.h), both persistent
//   fused    one launch: producer positions, then consumer positions, on the
//            placed schedule (cusync/placed_schedule.h)
//
// In serial mode a conv may be split along k (plan split_k): it runs
// stream-K (cusync/stream_k.h) over tiles x splits CTAs, for the deep layers
// at small batch whose few tiles of long k loops leave most SMs idle.
//
// The consumer's loader waits on the producer tiles its k-block's halo reads
// (cusync::conv_dependency, through the policy), as the MLP's waits on rows.
// Tiles 128x64, pingpong or cooperative as for the MLP (cooperative where a
// launch gives a CTA at most two tiles), and 128x128, cooperative.
#include "cuda/conv_sm90.h"

#include <algorithm>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/sm90_chain_instances.h"
#include "cuda/two_streams.h"
#include "cusync/optimizations.h"
#include "cusync/sync_layout.h"

namespace cusync_cuda {
namespace {

using xla::ffi::Error;
using cusync_ffi::ConvPairSpec;
using namespace cusync_sm90;

// Convolution `stage` (0: x -> h, 1: h -> y) of the pair on Cfg's kernel.
template <class Cfg>
Error conv_stage(const ConvPairSpec& s, const ConvBuffers& b, int stage, GemmStage<Cfg>* g) {
  using E = typename Cfg::Element;
  const bool first = stage == 0;
  const bool ok = make_conv_stage<Cfg>(
      g, static_cast<const E*>(first ? b.x : b.h), static_cast<int>(s.images), static_cast<int>(s.height),
      static_cast<int>(s.width), static_cast<int>(first ? s.in_channels : s.mid_channels),
      first ? s.filter_r1 : s.filter_r2, static_cast<const E*>(first ? b.k1 : b.k2),
      static_cast<int>(first ? s.mid_channels : s.out_channels), static_cast<E*>(first ? b.h : b.y),
      static_cast<const E*>(first ? b.b1 : b.b2), first ? nullptr : static_cast<const E*>(b.residual),
      first ? s.producer : s.consumer, first ? s.activation : cusync::Activation::kIdentity);
  if (!ok)
    return Error::Internal("cusync_jax: the CUDA driver refused the im2col TMA descriptor of conv " +
                           std::to_string(stage + 1));
  return Error::Success();
}

template <class Cfg>
ChainParams<Cfg> sync_params(const ConvPairSpec& s, const ConvBuffers& b) {
  ChainParams<Cfg> p{};
  p.semaphores = b.sync + cusync::kSyncHeaderWords;
  p.policy = s.policy;
  p.release_store = cusync::has(s.optimizations, cusync::kReleaseStorePosts) && p.policy.single_poster(s.producer);
  return p;
}

template <class Cfg>
Error launch(const ChainParams<Cfg>& p, const DeviceInfo& device, cudaStream_t stream, const char* what) {
  if (device.max_smem_per_block < Cfg::kSmemBytes)
    return Error::InvalidArgument("cusync_jax: the Hopper conv needs " + std::to_string(Cfg::kSmemBytes) +
                                  " bytes of shared memory per block; this GPU offers " +
                                  std::to_string(device.max_smem_per_block));
  return cuda_error(launch_chain(p, device.sm_count, stream), what);
}

// One convolution alone (serial and streams modes); synced: the producer
// posts, the consumer waits.
template <class Cfg>
Error launch_stage(const ConvPairSpec& s, const ConvBuffers& b, int stage, bool synced, cudaStream_t stream,
                   const DeviceInfo& device) {
  ChainParams<Cfg> p = sync_params<Cfg>(s, b);
  GemmStage<Cfg> g{};
  if (auto e = conv_stage<Cfg>(s, b, stage, &g); e.failure()) return e;
  single_stage_schedule(p, g, stage, s.producer, synced, b.sync);
  if constexpr (Cfg::kStreamK) {
    // A split conv (serial mode): stream-K over tiles x splits CTAs, its
    // counts and partial sums where the call's layout puts them.
    const int splits = stage == 0 ? s.splits1 : s.splits2;
    const int k_blocks = static_cast<int>(stage == 0 ? s.producer_k_blocks() : s.consumer_k_blocks());
    run_stream_k(p, cusync::conv_stream_k(g.tiling, k_blocks, splits), stage, cusync_ffi::conv_sync_layout(s),
                 b.sync);
  }
  return launch(p, device, stream,
                stage == 0 ? "launching the Hopper conv producer" : "launching the Hopper conv consumer");
}

template <class Cfg>
Error launch_fused(const ConvPairSpec& s, const ConvBuffers& b, cudaStream_t stream, const DeviceInfo& device) {
  ChainParams<Cfg> p = sync_params<Cfg>(s, b);
  if (auto e = conv_stage<Cfg>(s, b, 0, &p.stage[0]); e.failure()) return e;
  if (auto e = conv_stage<Cfg>(s, b, 1, &p.stage[1]); e.failure()) return e;
  p.tiles0 = s.producer.tile_count();
  p.begin = 0;
  p.end = p.tiles0 + s.consumer.tile_count();
  // The placed schedule, as the fused MLP takes it (cusync/placed_schedule.h):
  // the static placement, stealing where a CTA is late.
  const cusync::SplitLayout layout = cusync_ffi::conv_sync_layout(s);
  if (layout.flags == 0)
    return Error::Internal("cusync_jax: the fused Hopper conv pair's sync buffer has no placed-schedule flags");
  p.placed_flags = b.sync + layout.flags;
  p.placed_cursors = b.sync + cusync::kPlacedCursors;
  p.consumer_waits = p.producer_posts = true;
  return launch(p, device, stream, "launching the fused Hopper conv pair");
}

// Calls f(Cfg{}) with the configuration of a tile width and (128x64) form;
// stream_k: the stream-K-capable one (a split conv).
template <class F>
Error with_config(bool bf16, int n, bool cooperative, bool stream_k, F&& f) {
  if (stream_k) {
    if (n == 64) return bf16 ? f(ConvBF16x64StreamK{}) : f(ConvF16x64StreamK{});
    return bf16 ? f(ConvBF16x128CoopStreamK{}) : f(ConvF16x128CoopStreamK{});
  }
  if (n == 64) {
    if (bf16) return cooperative ? f(ConvBF16x64Coop{}) : f(ConvBF16x64{});
    return cooperative ? f(ConvF16x64Coop{}) : f(ConvF16x64{});
  }
  return bf16 ? f(ConvBF16x128Coop{}) : f(ConvF16x128Coop{});  // 128x128: cooperative only
}

std::string tile_text(const cusync::Stage& st, int k) {
  return std::to_string(st.tile_rows) + "x" + std::to_string(st.tile_cols) + "x" + std::to_string(k);
}

}  // namespace

Error check_conv_pair_sm90(const ConvPairSpec& s) {
  const cusync::Stage &P = s.producer, &C = s.consumer;
  const auto tile_ok = [](const cusync::Stage& st, int k) {
    return st.tile_rows == 128 && (st.tile_cols == 64 || st.tile_cols == 128) && k == 64;
  };
  if (!tile_ok(P, s.tile_k1) || !tile_ok(C, s.tile_k2))
    return Error::InvalidArgument("cusync_jax: the Hopper conv runs tiles 128x64x64 and 128x128x64; the plan asks "
                                  "for " + tile_text(P, s.tile_k1) + " and " + tile_text(C, s.tile_k2));
  if (s.mode == cusync_ffi::Mode::kFused && P.tile_cols != C.tile_cols)
    return Error::InvalidArgument("cusync_jax: the fused mode runs both convolutions in one kernel, so with one "
                                  "tile; the plan asks for " + tile_text(P, s.tile_k1) + " and " +
                                  tile_text(C, s.tile_k2));
  // A k-block is one tap's 64 channels; TMA needs 16-byte channel strides.
  if (s.in_channels % 64 || s.mid_channels % 64 || s.out_channels % 8)
    return Error::InvalidArgument("cusync_jax: the Hopper conv needs in and mid channels that are multiples of 64 "
                                  "and out channels a multiple of 8; got " + std::to_string(s.in_channels) + ", " +
                                  std::to_string(s.mid_channels) + ", " + std::to_string(s.out_channels));
  if (s.filter_r1 != s.filter_s1 || s.filter_r2 != s.filter_s2)
    return Error::InvalidArgument("cusync_jax: the Hopper conv runs square 1x1 and 3x3 filters");
  if ((s.splits1 != 1 || s.splits2 != 1) && s.mode != cusync_ffi::Mode::kSerial)
    return Error::InvalidArgument("cusync_jax: the Hopper conv splits k (stream-K, unsynchronized) in serial mode "
                                  "only; the plan asks for splits " + std::to_string(s.splits1) + " and " +
                                  std::to_string(s.splits2) + " in another mode");
  if (s.policy.kind == cusync::PolicyKind::kStridedSync)
    return Error::InvalidArgument("cusync_jax: the conv pair takes TileSync, RowSync or Conv2DTileSync");
  return Error::Success();
}

Error launch_conv_pair_sm90(const ConvPairSpec& s, const ConvBuffers& b, cudaStream_t stream,
                            const DeviceInfo& device) {
  if (auto e = check_conv_pair_sm90(s); e.failure()) return e;
  const int tiles[2] = {s.producer.tile_count(), s.consumer.tile_count()};
  const auto cooperative = [&](int positions) { return positions <= 2 * device.sm_count; };
  const auto stage_launch = [&](int stage, bool synced, cudaStream_t on) {
    const cusync::Stage& st = stage == 0 ? s.producer : s.consumer;
    const bool split = (stage == 0 ? s.splits1 : s.splits2) > 1;
    return with_config(b.bf16, st.tile_cols, cooperative(tiles[stage]), split, [&](auto cfg) {
      return launch_stage<decltype(cfg)>(s, b, stage, synced, on, device);
    });
  };
  switch (s.mode) {
    case cusync_ffi::Mode::kSerial:
      if (auto e = stage_launch(0, false, stream); e.failure()) return e;
      return stage_launch(1, false, stream);
    case cusync_ffi::Mode::kFused:
      return with_config(b.bf16, s.producer.tile_cols, cooperative(tiles[0] + tiles[1]), false, [&](auto cfg) {
        return launch_fused<decltype(cfg)>(s, b, stream, device);
      });
    case cusync_ffi::Mode::kStreams:
    default: {
      int dev = 0;
      if (auto e = stream_device(stream, &dev); e.failure()) return e;
      // Persistent grids of one CTA per SM each.
      const bool fit = persistent_grids_fit(tiles[0], tiles[1], device.sm_count);
      return run_on_two_streams(
          dev, stream, b.sync + cusync::kProducerStarted, needs_wait_kernel(s.optimizations, fit),
          [&](cudaStream_t on) { return stage_launch(0, true, on); },
          [&](cudaStream_t on) { return stage_launch(1, true, on); });
    }
  }
}

}  // namespace cusync_cuda
