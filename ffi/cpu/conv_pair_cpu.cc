// XLA FFI handler: the synced conv pair on the CPU tile executor.
//
// h = act(conv(x, k1) + b1) is written by producer tiles (implicit GEMM over
// output pixels x mid channels); y = conv(h, k2) + b2 (+ residual) is computed
// by consumer tiles that run at the same time. Before each k-block (one filter
// tap's channel block) a consumer tile waits, through the policy, on the
// producer tiles of the pixels its halo reads (cusync::conv_dependency).
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/conv_spec.h"
#include "cpu/numeric.h"
#include "cpu/tile_executor.h"
#include "cusync/dependency.h"
#include "cusync/optimizations.h"
#include "cusync/policy.h"
#include "cusync/satisfied_semaphores.h"
#include "cusync/sync_layout.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace cusync_cpu {
namespace {

// An output pixel of the flattened (n, h, w) grid.
struct Pixel {
  int64_t image, row, col;
};

Pixel pixel_at(const cusync_ffi::ConvPairSpec& s, int64_t p) {
  const int64_t per_image = s.height * s.width;
  const int64_t within = p % per_image;
  return Pixel{p / per_image, within / s.width, within % s.width};
}

// The flattened index of the input pixel that filter tap (dr, ds) of an
// r x s filter reads for output pixel `px` (SAME padding), or -1 in the padding.
int64_t tap_source(const cusync_ffi::ConvPairSpec& s, Pixel px, int r, int sw, int dr, int ds) {
  const int64_t ih = px.row + dr - r / 2;
  const int64_t iw = px.col + ds - sw / 2;
  if (ih < 0 || ih >= s.height || iw < 0 || iw >= s.width) return -1;
  return (px.image * s.height + ih) * s.width + iw;
}

ffi::Error SyncedConvPairCpu(ffi::AnyBuffer x, ffi::AnyBuffer k1, ffi::AnyBuffer b1, ffi::AnyBuffer k2,
                             ffi::AnyBuffer b2, ffi::AnyBuffer residual, ffi::Result<ffi::AnyBuffer> y,
                             ffi::Result<ffi::AnyBuffer> h, ffi::Result<ffi::Buffer<ffi::S32>> sync,
                             ffi::Dictionary attrs) {
  cusync_ffi::ConvPairSpec s;
  if (auto e = cusync_ffi::decode_conv_pair_spec(attrs, x, k1, k2, residual, &s); e.failure()) return e;
  const ffi::DataType dt = x.element_type();
  for (const ffi::AnyBuffer* b : {&k1, &b1, &k2, &b2, &residual}) {
    if (b->element_type() != dt)
      return ffi::Error::InvalidArgument("cusync_jax: synced_conv_pair operands must share one dtype");
  }
  if (!supported_dtype(dt))
    return ffi::Error::InvalidArgument("cusync_jax: the CPU backend supports float32, float16 and bfloat16");
  const int64_t C0 = s.in_channels, C1 = s.mid_channels, C2 = s.out_channels;
  const int64_t pixels = s.pixels();
  if (static_cast<int64_t>(b1.element_count()) != C1 || static_cast<int64_t>(b2.element_count()) != C2)
    return ffi::Error::InvalidArgument("cusync_jax: b1/b2 sizes do not match k1/k2 output channels");
  if (static_cast<int64_t>(h->element_count()) != pixels * C1 ||
      static_cast<int64_t>(y->element_count()) != pixels * C2)
    return ffi::Error::InvalidArgument("cusync_jax: result buffers have the wrong size");
  const cusync::Stage& P = s.producer;
  const cusync::Stage& C = s.consumer;
  if (static_cast<int64_t>(sync->element_count()) < cusync::sync_words(P))
    return ffi::Error::InvalidArgument("cusync_jax: sync buffer smaller than the plan needs");
  // The header and semaphores (the buffer may be longer: split-K's room, which
  // the CUDA kernel uses and this executor, running unsplit, does not).
  std::memset(sync->typed_data(), 0, cusync::sync_words(P) * sizeof(int));
  if (pixels == 0 || C2 == 0) return ffi::Error::Success();
  int* sems = sync->typed_data() + cusync::kSyncHeaderWords;

  const std::vector<float> xf = to_float(x), k1f = to_float(k1), b1f = to_float(b1), k2f = to_float(k2),
                           b2f = to_float(b2);
  const std::vector<float> resf = s.residual ? to_float(residual) : std::vector<float>();
  void* hbuf = h->untyped_data();
  void* ybuf = y->untyped_data();
  if (s.delay_us > 0) {
    // Under test delays, poison h so a consumer that reads a tile before it
    // is written sees NaN instead of a plausible stale value.
    for (int64_t i = 0; i < pixels * C1; ++i)
      store_from_float(dt, hbuf, i, std::numeric_limits<float>::quiet_NaN());
  }

  const bool release_store = cusync::has(s.optimizations, cusync::kReleaseStorePosts) &&
                             s.policy.single_poster(P);
  const bool hw_order = cusync::has(s.optimizations, cusync::kHardwareBlockOrder);
  const bool waits = s.mode != cusync_ffi::Mode::kSerial;
  auto tile_of = [&](const cusync::Stage& st, int index) {
    // Hardware block order: the row-major tile at this position, whatever
    // order the stage asks for.
    return hw_order ? cusync::tile_at(cusync::TileOrder::kRowMajor, index, st.grid_rows(), st.grid_cols(), 1)
                    : st.tile(index);
  };

  auto producer_tile = [&](int index) {
    const cusync::Tile t = tile_of(P, index);
    const int r0 = P.row_begin(t), r1 = P.row_end(t), c0 = P.col_begin(t), c1 = P.col_end(t);
    std::vector<float> acc(c1 - c0);
    for (int r = r0; r < r1; ++r) {
      std::fill(acc.begin(), acc.end(), 0.f);
      const Pixel px = pixel_at(s, r);
      for (int dr = 0; dr < s.filter_r1; ++dr) {
        for (int ds = 0; ds < s.filter_s1; ++ds) {
          const int64_t src = tap_source(s, px, s.filter_r1, s.filter_s1, dr, ds);
          if (src < 0) continue;
          const float* xp = &xf[src * C0];
          const float* wtap = &k1f[(dr * s.filter_s1 + ds) * C0 * C1];
          for (int64_t ci = 0; ci < C0; ++ci) {
            const float a = xp[ci];
            const float* w = wtap + ci * C1;
            for (int c = c0; c < c1; ++c) acc[c - c0] += a * w[c];
          }
        }
      }
      for (int c = c0; c < c1; ++c)
        store_from_float(dt, hbuf, r * C1 + c, cusync::activate(s.activation, 0, acc[c - c0] + b1f[c]));
    }
    int* sem = sems + s.policy.post_semaphore(P, t);
    if (release_store) cusync::semaphore_post_store(sem, 1);
    else cusync::semaphore_post_add(sem);
  };

  const cusync::ConvGeometry geometry = s.consumer_geometry();
  const int images = static_cast<int>(s.images);
  const int64_t K2 = s.consumer_k();
  CallState state(s.wait_timeout_ms);
  auto consumer_tile = [&](int index) -> bool {
    const cusync::Tile t = tile_of(C, index);
    const int r0 = C.row_begin(t), r1 = C.row_end(t), c0 = C.col_begin(t), c1 = C.col_end(t);
    std::vector<float> acc(static_cast<size_t>(r1 - r0) * (c1 - c0), 0.f);
    auto ready = cusync::SatisfiedSemaphores::none();  // as the kernels: each semaphore acquired once a tile
    for (int64_t k0 = 0; k0 < K2; k0 += s.tile_k2) {
      const int64_t kend = std::min<int64_t>(K2, k0 + s.tile_k2);
      if (waits && (k0 == 0 || !s.policy.waits_once_per_tile())) {
        // RowSync: the first wait covers every tap and channel of the halo.
        const cusync::Region region = cusync::conv_dependency(
            geometry, images, r0, r1, static_cast<int>(k0),
            static_cast<int>(s.policy.waits_once_per_tile() ? K2 : kend));
        bool ok = true;
        s.policy.for_each_wait(P, region, [&](int sem, int count) {
          if (!ok || ready.has(sem)) return;
          ok = state.wait(sems + sem, count, "a consumer conv tile");
          if (ok) ready.add(sem);
        });
        if (!ok) return false;
      }
      for (int r = r0; r < r1; ++r) {
        float* accr = &acc[static_cast<size_t>(r - r0) * (c1 - c0)];
        const Pixel px = pixel_at(s, r);
        // The k-block in runs of one filter tap: one source pixel per run.
        for (int64_t k = k0; k < kend;) {
          const int64_t tap = k / C1;
          const int64_t run_end = std::min(kend, (tap + 1) * C1);
          const int dr = static_cast<int>(tap / s.filter_s2), ds = static_cast<int>(tap % s.filter_s2);
          const int64_t src = tap_source(s, px, s.filter_r2, s.filter_s2, dr, ds);
          if (src >= 0) {
            for (int64_t kk = k; kk < run_end; ++kk) {
              const float a = load_as_float(dt, hbuf, src * C1 + (kk - tap * C1));
              const float* w = &k2f[kk * C2];
              for (int c = c0; c < c1; ++c) accr[c - c0] += a * w[c];
            }
          }
          k = run_end;
        }
      }
    }
    for (int r = r0; r < r1; ++r) {
      for (int c = c0; c < c1; ++c) {
        const int64_t i = r * C2 + c;
        float v = acc[static_cast<size_t>(r - r0) * (c1 - c0) + (c - c0)] + b2f[c];
        if (s.residual) v += resf[i];
        store_from_float(dt, ybuf, i, cusync::activate(s.out_activation, 0, v));
      }
    }
    return true;
  };

  run_two_stages(exec_options_of(s), state, P.tile_count(), C.tile_count(), producer_tile,
                 consumer_tile);
  if (state.failed()) return ffi::Error::Internal(state.error());
  return ffi::Error::Success();
}

}  // namespace
}  // namespace cusync_cpu

XLA_FFI_DEFINE_HANDLER_SYMBOL(CusyncSyncedConvPairCpu, cusync_cpu::SyncedConvPairCpu,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()  // x [N, H, W, C0]
                                  .Arg<ffi::AnyBuffer>()  // k1 [R1, S1, C0, C1]
                                  .Arg<ffi::AnyBuffer>()  // b1 [C1]
                                  .Arg<ffi::AnyBuffer>()  // k2 [R2, S2, C1, C2]
                                  .Arg<ffi::AnyBuffer>()  // b2 [C2]
                                  .Arg<ffi::AnyBuffer>()  // residual [N, H, W, C2] or empty
                                  .Ret<ffi::AnyBuffer>()  // y [N, H, W, C2]
                                  .Ret<ffi::AnyBuffer>()  // h [N, H, W, C1] (intermediate)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // sync words (semaphores)
                                  .Attrs());
