// The plain C++ description of one synced-MLP call, decoded from the FFI
// attributes that the Python plan lowers to. Shared by the CPU and CUDA
// handlers so both read the plan the same way.
#pragma once

#include <cstdint>
#include <string>

#include "common/plan_attrs.h"
#include "cusync/activation.h"
#include "cusync/policy.h"
#include "cusync/stage.h"
#include "cusync/stream_k.h"
#include "cusync/sync_layout.h"
#include "xla/ffi/api/ffi.h"

namespace cusync_ffi {

struct MlpSpec {
  int64_t tokens = 0, hidden = 0, ffn = 0, out = 0;  // x [T,H] w1 [H,S*F] w2 [F,O]
  cusync::Activation activation = cusync::Activation::kIdentity;
  cusync::Stage producer{};  // [T, S*F] intermediate
  cusync::Stage consumer{};  // [T, O] output
  int tile_k1 = 0, tile_k2 = 0;
  cusync::Policy policy{};
  Mode mode = Mode::kFused;
  int optimizations = 0;
  int kernel = 0;  // GPU kernel family (0 = default for the device)
  int cluster_m = 1;  // kernel family 1: CTAs per cluster along M (1, or 2 for 2x1 clusters)
  // Kernel family 1, serial mode: run the producer (1) / consumer (2) GEMM
  // stream-K on stream_k_ctas CTAs (cusync/stream_k.h); the CPU executor runs
  // the same math without it.
  bool stream_k1 = false, stream_k2 = false;
  int stream_k_ctas = 0;
  // Kernel family 1, whole 128x128 tiles: how the two MMA warpgroups share
  // them (the CPU executor runs the same math either way).
  MmaSchedule mma_schedule = MmaSchedule::kAuto;
  // CPU executor controls (ignored on GPU): worker threads (0 = all cores),
  // random per-tile delay bound and its seed (testing), wait timeout.
  int threads = 0;
  int delay_us = 0;
  int64_t seed = 0;
  int64_t wait_timeout_ms = 0;
  int resident = 0;  // fused: threads running at once (0: all)
};

// Decodes the attributes and the operand shapes; every inconsistency is an
// InvalidArgument naming what was wrong (Python validates first; this is the
// second line for callers that bypass it).
inline xla::ffi::Error decode_mlp_spec(const xla::ffi::Dictionary& attrs, const xla::ffi::AnyBuffer& x,
                                       const xla::ffi::AnyBuffer& w1, const xla::ffi::AnyBuffer& w2,
                                       MlpSpec* spec) {
  using xla::ffi::Error;
  auto xd = x.dimensions();
  auto w1d = w1.dimensions();
  auto w2d = w2.dimensions();
  if (xd.size() != 2 || w1d.size() != 2 || w2d.size() != 2) {
    return Error::InvalidArgument("cusync_jax: synced_mlp expects 2-D x, w1 and w2");
  }
  int act = 0, policy = 0, under = 0, order1 = 0, order2 = 0, mode = 0, group_rows = 0;
  int tm1 = 0, tn1 = 0, tm2 = 0, tn2 = 0;
#define CUSYNC_GET(name, dst)                                              \
  if (auto e = internal::get_attr(attrs, name, dst); e.failure()) return e;
  CUSYNC_GET("activation", &act)
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
  CUSYNC_GET("group_rows", &group_rows)
  CUSYNC_GET("mode", &mode)
  CUSYNC_GET("optimizations", &spec->optimizations)
  CUSYNC_GET("kernel", &spec->kernel)
  CUSYNC_GET("cluster_m", &spec->cluster_m)
  int sk1 = 0, sk2 = 0;
  CUSYNC_GET("stream_k1", &sk1)
  CUSYNC_GET("stream_k2", &sk2)
  CUSYNC_GET("stream_k_ctas", &spec->stream_k_ctas)
  int mma = 0;
  CUSYNC_GET("mma_schedule", &mma)
  CUSYNC_GET("threads", &spec->threads)
  CUSYNC_GET("delay_us", &spec->delay_us)
  CUSYNC_GET("seed", &spec->seed)
  CUSYNC_GET("wait_timeout_ms", &spec->wait_timeout_ms)
  CUSYNC_GET("resident", &spec->resident)
#undef CUSYNC_GET
  if (act < 0 || act > 5) return Error::InvalidArgument("cusync_jax: unknown activation code");
  if (policy < 0 || policy > 3) return Error::InvalidArgument("cusync_jax: unknown policy code");
  if (mode < 0 || mode > 2) return Error::InvalidArgument("cusync_jax: unknown mode code");
  if (order1 < 0 || order1 > 3 || order2 < 0 || order2 > 3)
    return Error::InvalidArgument("cusync_jax: unknown tile order code");
  if (group_rows < 1) return Error::InvalidArgument("cusync_jax: group_rows must be positive");
  if (spec->cluster_m != 1 && spec->cluster_m != 2)
    return Error::InvalidArgument("cusync_jax: cluster_m must be 1 or 2, got " + std::to_string(spec->cluster_m));
  if ((sk1 || sk2) && (spec->stream_k_ctas < 1 || mode != static_cast<int>(Mode::kSerial)))
    return Error::InvalidArgument("cusync_jax: stream-K runs in serial mode on a positive CTA budget; got mode " +
                                  std::to_string(mode) + ", stream_k_ctas " + std::to_string(spec->stream_k_ctas));
  spec->stream_k1 = sk1 != 0;
  spec->stream_k2 = sk2 != 0;
  if (mma < 0 || mma > 2)
    return Error::InvalidArgument("cusync_jax: unknown mma_schedule code " + std::to_string(mma));
  spec->mma_schedule = static_cast<MmaSchedule>(mma);
  if (tm1 <= 0 || tn1 <= 0 || tm2 <= 0 || tn2 <= 0 || spec->tile_k1 <= 0 || spec->tile_k2 <= 0)
    return Error::InvalidArgument("cusync_jax: tile sizes must be positive");

  spec->activation = static_cast<cusync::Activation>(act);
  const int slices = cusync::activation_slices(spec->activation);
  spec->tokens = xd[0];
  spec->hidden = xd[1];
  spec->ffn = w1d[1] / slices;
  spec->out = w2d[1];
  if (w1d[0] != spec->hidden || w1d[1] != spec->ffn * slices || w2d[0] != spec->ffn) {
    return Error::InvalidArgument(
        "cusync_jax: synced_mlp shapes do not chain: x [" + std::to_string(xd[0]) + ", " +
        std::to_string(xd[1]) + "], w1 [" + std::to_string(w1d[0]) + ", " + std::to_string(w1d[1]) +
        "], w2 [" + std::to_string(w2d[0]) + ", " + std::to_string(w2d[1]) + "]");
  }
  spec->policy = cusync::Policy{static_cast<cusync::PolicyKind>(policy), under};
  spec->mode = static_cast<Mode>(mode);
  spec->producer = cusync::Stage{static_cast<int>(spec->tokens), static_cast<int>(spec->ffn), slices,
                                 tm1, tn1, static_cast<cusync::TileOrder>(order1), group_rows};
  spec->consumer = cusync::Stage{static_cast<int>(spec->tokens), static_cast<int>(spec->out), 1,
                                 tm2, tn2, static_cast<cusync::TileOrder>(order2), group_rows};
  return Error::Success();
}

// The sync buffer's layout for a decoded call: with stream-K, each tile of a
// stage gets as many partial-sum slots as the most segments a tile has; in
// fused mode, a flag per tile (the placed schedule).
inline int mlp_k_blocks1(const MlpSpec& s) { return static_cast<int>((s.hidden + s.tile_k1 - 1) / s.tile_k1); }
inline int mlp_k_blocks2(const MlpSpec& s) { return static_cast<int>((s.ffn + s.tile_k2 - 1) / s.tile_k2); }

// The producer's tile columns as stream-K lays them out: the Hopper kernel
// runs a SwiGLU producer as one slice of half-width tiles (silu(gate) * up of
// tile_cols / 2 columns each), which can be fewer than the [gate | up]
// tiling's columns.
inline int mlp_stream_k_cols1(const MlpSpec& s) {
  return s.producer.slices == 2 ? cusync::ceil_div(static_cast<int>(s.ffn), s.producer.tile_cols / 2)
                                : s.producer.grid_cols();
}

inline cusync::SplitLayout mlp_sync_layout(const MlpSpec& s) {
  const auto segments = [&](int rows, int cols, bool on, int k_blocks) {
    // (No slots for a stage that runs whole tiles.)
    return on ? cusync::make_stream_k(rows, cols, k_blocks, s.stream_k_ctas).max_segments() : 0;
  };
  // (Counts and slots are sized per tile of s.producer, at least as many as
  // the half-width tiling has.)
  return cusync::split_layout(
      s.producer, s.consumer,
      segments(s.producer.grid_rows(), mlp_stream_k_cols1(s), s.stream_k1, mlp_k_blocks1(s)),
      segments(s.consumer.grid_rows(), s.consumer.grid_cols(), s.stream_k2, mlp_k_blocks2(s)),
      s.mode == Mode::kFused);  // the Hopper fused kernel's placed schedule
}

}  // namespace cusync_ffi
