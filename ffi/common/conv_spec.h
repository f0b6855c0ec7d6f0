// The plain C++ description of one synced conv-pair call, decoded from the FFI
// attributes and operand shapes. Shared by the CPU and CUDA handlers.
//
//   h = act(conv(x, k1) + b1)            x [N, H, W, C0], k1 [R1, S1, C0, C1]
//   y = conv(h, k2) + b2 (+ residual)    k2 [R2, S2, C1, C2], y [N, H, W, C2]
//
// NHWC activations, HWIO filters, stride 1, SAME padding. Both convolutions
// are implicit GEMMs over the N*H*W output pixels: the producer stage is h
// as [N*H*W, C1], the consumer stage y as [N*H*W, C2], and the consumer's
// k dimension is R2*S2*C1, tap-major (k = tap * C1 + channel).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/plan_attrs.h"
#include "cusync/activation.h"
#include "cusync/dependency.h"
#include "cusync/halo_tiling.h"
#include "cusync/policy.h"
#include "cusync/stage.h"
#include "cusync/sync_layout.h"
#include "xla/ffi/api/ffi.h"

namespace cusync_ffi {

// Kernel family 2: the Hopper halo conv (cusync/halo_tiling.h), tiles of 128
// positions x 64 output channels whose k-block is one input channel block's 9
// taps (tile k 9 x 64).
constexpr int kHaloConvKernel = 2;
constexpr int kHaloTileK = 9 * 64;

struct ConvPairSpec {
  int64_t images = 0, height = 0, width = 0;
  int64_t in_channels = 0, mid_channels = 0, out_channels = 0;  // C0, C1, C2
  int filter_r1 = 0, filter_s1 = 0, filter_r2 = 0, filter_s2 = 0;
  bool residual = false;  // y gets a residual [N, H, W, C2] added
  cusync::Activation activation = cusync::Activation::kIdentity;
  // Applied to y last, after b2 and the residual (ResNet's block ends in a
  // ReLU): the CPU executor takes any, the halo conv ReLU, the others none.
  cusync::Activation out_activation = cusync::Activation::kIdentity;
  cusync::Stage producer{};  // h as [N*H*W, C1]
  cusync::Stage consumer{};  // y as [N*H*W, C2]
  int tile_k1 = 0, tile_k2 = 0;
  cusync::Policy policy{};
  Mode mode = Mode::kFused;
  int optimizations = 0;
  int kernel = 0;
  // CUDA kernels: CTAs sharing each output tile's k-blocks, producer and
  // consumer (1: none; the CPU executor runs the same math unsplit). The
  // Hopper kernel (1) runs a split conv stream-K (cusync/sync_layout.h).
  int splits1 = 1, splits2 = 1;
  // CPU executor controls (ignored on GPU), as in MlpSpec.
  int threads = 0;
  int delay_us = 0;
  int64_t seed = 0;
  int64_t wait_timeout_ms = 0;
  int resident = 0;  // fused: threads running at once (0: all)

  int64_t pixels() const { return images * height * width; }
  int64_t producer_k() const { return int64_t{filter_r1} * filter_s1 * in_channels; }
  int64_t consumer_k() const { return int64_t{filter_r2} * filter_s2 * mid_channels; }
  // k-blocks of each implicit GEMM: a k-block is one tap's block of tile_k channels.
  int64_t producer_k_blocks() const {
    return int64_t{filter_r1} * filter_s1 * ((in_channels + tile_k1 - 1) / tile_k1);
  }
  int64_t consumer_k_blocks() const {
    return int64_t{filter_r2} * filter_s2 * ((mid_channels + tile_k2 - 1) / tile_k2);
  }
  // The halo conv's tiling of this pair (its semaphores and its kernel's tiles).
  cusync::HaloTiling halo_tiling() const {
    return cusync::plan_halo_tiling(static_cast<int>(images), static_cast<int>(height), static_cast<int>(width),
                                    static_cast<int>(in_channels), static_cast<int>(mid_channels),
                                    static_cast<int>(out_channels));
  }
  cusync::ConvGeometry consumer_geometry() const {
    return cusync::ConvGeometry{static_cast<int>(height), static_cast<int>(width),
                                static_cast<int>(mid_channels), filter_r2, filter_s2};
  }
};

namespace internal {
inline std::string dims_string(xla::ffi::AnyBuffer::Dimensions d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

inline bool supported_filter(int64_t r, int64_t s) { return (r == 1 && s == 1) || (r == 3 && s == 3); }
}  // namespace internal

// Decodes attributes and shapes; every inconsistency is an InvalidArgument
// naming the operand (Python validates first; this is the second line).
// `residual` is either empty (no residual) or [N, H, W, C2].
inline xla::ffi::Error decode_conv_pair_spec(const xla::ffi::Dictionary& attrs,
                                             const xla::ffi::AnyBuffer& x,
                                             const xla::ffi::AnyBuffer& k1,
                                             const xla::ffi::AnyBuffer& k2,
                                             const xla::ffi::AnyBuffer& residual, ConvPairSpec* spec) {
  using xla::ffi::Error;
  using internal::dims_string;
  auto xd = x.dimensions();
  auto k1d = k1.dimensions();
  auto k2d = k2.dimensions();
  if (xd.size() != 4 || k1d.size() != 4 || k2d.size() != 4) {
    return Error::InvalidArgument("cusync_jax: synced_conv_pair expects x [N, H, W, C] and HWIO k1, k2; got x " +
                                  dims_string(xd) + ", k1 " + dims_string(k1d) + ", k2 " + dims_string(k2d));
  }
  if (!internal::supported_filter(k1d[0], k1d[1]) || !internal::supported_filter(k2d[0], k2d[1]) ||
      k1d[2] != xd[3] || k2d[2] != k1d[3]) {
    return Error::InvalidArgument(
        "cusync_jax: synced_conv_pair needs 1x1 or 3x3 HWIO filters that chain: x " + dims_string(xd) +
        ", k1 " + dims_string(k1d) + ", k2 " + dims_string(k2d));
  }
  if (xd[3] <= 0 || k1d[3] <= 0 || k2d[3] <= 0)
    return Error::InvalidArgument("cusync_jax: synced_conv_pair needs at least one channel in x, k1 and k2");
  int act = 0, out_act = 0, policy = 0, under = 0, order1 = 0, order2 = 0, mode = 0;
  int tm1 = 0, tn1 = 0, tm2 = 0, tn2 = 0;
#define CUSYNC_GET(name, dst)                                              \
  if (auto e = internal::get_attr(attrs, name, dst); e.failure()) return e;
  CUSYNC_GET("activation", &act)
  CUSYNC_GET("out_activation", &out_act)
  CUSYNC_GET("policy", &policy)
  CUSYNC_GET("under_wait", &under)
  CUSYNC_GET("tile_m1", &tm1)
  CUSYNC_GET("tile_n1", &tn1)
  CUSYNC_GET("tile_k1", &spec->tile_k1)
  CUSYNC_GET("tile_m2", &tm2)
  CUSYNC_GET("tile_n2", &tn2)
  CUSYNC_GET("tile_k2", &spec->tile_k2)
  CUSYNC_GET("order1", &order1)
  CUSYNC_GET("order2", &order2)
  CUSYNC_GET("mode", &mode)
  CUSYNC_GET("optimizations", &spec->optimizations)
  CUSYNC_GET("kernel", &spec->kernel)
  CUSYNC_GET("splits1", &spec->splits1)
  CUSYNC_GET("splits2", &spec->splits2)
  CUSYNC_GET("threads", &spec->threads)
  CUSYNC_GET("delay_us", &spec->delay_us)
  CUSYNC_GET("seed", &spec->seed)
  CUSYNC_GET("wait_timeout_ms", &spec->wait_timeout_ms)
  CUSYNC_GET("resident", &spec->resident)
#undef CUSYNC_GET
  // SwiGLU needs two column slices of h; a conv pair has one.
  if (act < 0 || act > 4) return Error::InvalidArgument("cusync_jax: unknown conv-pair activation code");
  if (out_act < 0 || out_act > 4) return Error::InvalidArgument("cusync_jax: unknown conv-pair out_activation code");
  // StridedSync groups column slices, which a conv pair does not have.
  if (policy != static_cast<int>(cusync::PolicyKind::kTileSync) &&
      policy != static_cast<int>(cusync::PolicyKind::kRowSync) &&
      policy != static_cast<int>(cusync::PolicyKind::kConv2DTileSync))
    return Error::InvalidArgument("cusync_jax: the conv pair supports TileSync, RowSync and Conv2DTileSync");
  if (mode < 0 || mode > 2) return Error::InvalidArgument("cusync_jax: unknown mode code");
  if (order1 < 0 || order1 > 1 || order2 < 0 || order2 > 1)
    return Error::InvalidArgument("cusync_jax: the conv pair takes row- or column-major tile orders");
  if (tm1 <= 0 || tn1 <= 0 || tm2 <= 0 || tn2 <= 0 || spec->tile_k1 <= 0 || spec->tile_k2 <= 0)
    return Error::InvalidArgument("cusync_jax: tile sizes must be positive");

  spec->images = xd[0];
  spec->height = xd[1];
  spec->width = xd[2];
  spec->in_channels = xd[3];
  spec->mid_channels = k1d[3];
  spec->out_channels = k2d[3];
  spec->filter_r1 = static_cast<int>(k1d[0]);
  spec->filter_s1 = static_cast<int>(k1d[1]);
  spec->filter_r2 = static_cast<int>(k2d[0]);
  spec->filter_s2 = static_cast<int>(k2d[1]);
  const int64_t y_elements = spec->pixels() * spec->out_channels;
  if (residual.element_count() != 0 && static_cast<int64_t>(residual.element_count()) != y_elements) {
    return Error::InvalidArgument("cusync_jax: residual " + dims_string(residual.dimensions()) +
                                  " must be empty or [" + std::to_string(xd[0]) + ", " +
                                  std::to_string(xd[1]) + ", " + std::to_string(xd[2]) + ", " +
                                  std::to_string(k2d[3]) + "]");
  }
  spec->residual = residual.element_count() != 0 && y_elements != 0;
  if (spec->splits1 < 1 || spec->splits2 < 1 || spec->splits1 > std::max<int64_t>(1, spec->producer_k_blocks()) ||
      spec->splits2 > std::max<int64_t>(1, spec->consumer_k_blocks()))
    return Error::InvalidArgument("cusync_jax: conv-pair split_k (" + std::to_string(spec->splits1) + ", " +
                                  std::to_string(spec->splits2) + ") must be from 1 to the k-block counts (" +
                                  std::to_string(spec->producer_k_blocks()) + ", " +
                                  std::to_string(spec->consumer_k_blocks()) + ")");
  spec->activation = static_cast<cusync::Activation>(act);
  spec->out_activation = static_cast<cusync::Activation>(out_act);
  spec->policy = cusync::Policy{static_cast<cusync::PolicyKind>(policy), under};
  spec->mode = static_cast<Mode>(mode);
  const int rows = static_cast<int>(spec->pixels());
  spec->producer = cusync::Stage{rows, static_cast<int>(spec->mid_channels), 1, tm1, tn1,
                                 static_cast<cusync::TileOrder>(order1)};
  spec->consumer = cusync::Stage{rows, static_cast<int>(spec->out_channels), 1, tm2, tn2,
                                 static_cast<cusync::TileOrder>(order2)};
  return Error::Success();
}

// The call's sync buffer (cusync/sync_layout.h), as the CPU module sizes it.
inline cusync::SplitLayout conv_sync_layout(const ConvPairSpec& s) {
  if (s.kernel == kHaloConvKernel) {
    // A semaphore per conv 1 output tile of the halo tiling (which has more
    // positions than pixels: a row's two padding columns). Split along its
    // channel blocks (cuda/halo_conv_sm90.cuh), a conv also has a count per
    // output tile (zeroed with the semaphores) and, not zeroed, every
    // share's fp32 sums (128 x 64 a share).
    const long long positions = s.halo_tiling().tiles();
    const long long out1 = positions * cusync::ceil_div(static_cast<int>(s.mid_channels), 64);
    const long long out2 = positions * cusync::ceil_div(static_cast<int>(s.out_channels), 64);
    cusync::SplitLayout l{};
    l.zeroed = l.words = cusync::kSyncHeaderWords + out1;
    if (s.splits1 <= 1 && s.splits2 <= 1) return l;
    l.counts1 = l.zeroed;
    l.counts2 = l.counts1 + out1;
    l.zeroed = l.counts2 + out2;
    l.partials1 = (l.zeroed + 3) / 4 * 4;
    l.partials2 = l.partials1 + (s.splits1 > 1 ? s.splits1 * out1 * cusync::kHaloShareFloats : 0);
    l.words = l.partials2 + (s.splits2 > 1 ? s.splits2 * out2 * cusync::kHaloShareFloats : 0);
    return l;
  }
  return cusync::conv_split_layout(s.producer, s.consumer, static_cast<int>(s.producer_k_blocks()),
                                   static_cast<int>(s.consumer_k_blocks()), s.splits1, s.splits2, s.kernel == 1,
                                   s.kernel == 1 && s.mode == Mode::kFused);  // the Hopper fused kernel's placed schedule
}

}  // namespace cusync_ffi
