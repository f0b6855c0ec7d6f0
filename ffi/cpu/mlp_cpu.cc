// XLA FFI handler: the synced MLP on the CPU tile executor.
//
// y = act(x @ w1 + b1) @ w2 + b2, with the intermediate h written by producer
// tiles and read by consumer tiles that run at the same time and wait on the
// policy's semaphores (which live in the call's own `sync` output buffer).
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "common/mlp_spec.h"
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

ffi::Error SyncedMlpCpu(ffi::AnyBuffer x, ffi::AnyBuffer w1, ffi::AnyBuffer b1, ffi::AnyBuffer w2,
                        ffi::AnyBuffer b2, ffi::Result<ffi::AnyBuffer> y,
                        ffi::Result<ffi::AnyBuffer> h, ffi::Result<ffi::Buffer<ffi::S32>> sync,
                        ffi::Dictionary attrs) {
  cusync_ffi::MlpSpec s;
  if (auto e = cusync_ffi::decode_mlp_spec(attrs, x, w1, w2, &s); e.failure()) return e;
  const ffi::DataType dt = x.element_type();
  for (const ffi::AnyBuffer* b : {&w1, &b1, &w2, &b2}) {
    if (b->element_type() != dt)
      return ffi::Error::InvalidArgument("cusync_jax: synced_mlp operands must share one dtype");
  }
  if (!supported_dtype(dt))
    return ffi::Error::InvalidArgument("cusync_jax: the CPU backend supports float32, float16 and bfloat16");
  const int slices = s.producer.slices;
  const int64_t T = s.tokens, H = s.hidden, F = s.ffn, O = s.out;
  if (static_cast<int64_t>(b1.element_count()) != slices * F ||
      static_cast<int64_t>(b2.element_count()) != O)
    return ffi::Error::InvalidArgument("cusync_jax: bias sizes do not match w1/w2 columns");
  if (static_cast<int64_t>(h->element_count()) != T * slices * F ||
      static_cast<int64_t>(y->element_count()) != T * O)
    return ffi::Error::InvalidArgument("cusync_jax: result buffers have the wrong size");
  const cusync::Stage& P = s.producer;
  const cusync::Stage& C = s.consumer;
  // (A stream-K plan sizes the buffer for the CUDA kernel's partial sums;
  // the executor here runs the same math whole and zeroes only the words
  // before them.)
  const cusync::SplitLayout layout = cusync_ffi::mlp_sync_layout(s);
  if (static_cast<int64_t>(sync->element_count()) < layout.words)
    return ffi::Error::InvalidArgument("cusync_jax: sync buffer of " + std::to_string(sync->element_count()) +
                                       " words; the plan needs " + std::to_string(layout.words));
  if (T == 0 || O == 0) return ffi::Error::Success();

  std::memset(sync->typed_data(), 0, layout.zeroed * sizeof(int));
  int* sems = sync->typed_data() + cusync::kSyncHeaderWords;

  const std::vector<float> xf = to_float(x), w1f = to_float(w1), b1f = to_float(b1),
                           w2f = to_float(w2), b2f = to_float(b2);
  void* hbuf = h->untyped_data();
  void* ybuf = y->untyped_data();
  if (s.delay_us > 0) {
    // Under test delays, poison h so a consumer that reads a tile before it
    // is written sees NaN instead of a plausible stale value.
    for (int64_t i = 0; i < T * slices * F; ++i)
      store_from_float(dt, hbuf, i, std::numeric_limits<float>::quiet_NaN());
  }

  const bool release_store = cusync::has(s.optimizations, cusync::kReleaseStorePosts) &&
                             s.policy.single_poster(P);
  const bool hw_order = cusync::has(s.optimizations, cusync::kHardwareBlockOrder);
  const bool waits = s.mode != cusync_ffi::Mode::kSerial;

  auto producer_tile = [&](int index) {
    // Hardware block order: the tile is the row-major one at this position,
    // whatever order the stage asks for.
    const cusync::Tile t = hw_order ? cusync::tile_at(cusync::TileOrder::kRowMajor, index, P.grid_rows(),
                                                      P.grid_cols(), P.slices)
                                    : P.tile(index);
    const int r0 = P.row_begin(t), r1 = P.row_end(t), c0 = P.col_begin(t), c1 = P.col_end(t);
    const int slice = P.slice_of(t);
    std::vector<float> acc(c1 - c0);
    for (int r = r0; r < r1; ++r) {
      std::fill(acc.begin(), acc.end(), 0.f);
      const float* xr = &xf[static_cast<size_t>(r) * H];
      for (int64_t k = 0; k < H; ++k) {
        const float a = xr[k];
        const float* wk = &w1f[static_cast<size_t>(k) * slices * F];
        for (int c = c0; c < c1; ++c) acc[c - c0] += a * wk[c];
      }
      for (int c = c0; c < c1; ++c) {
        store_from_float(dt, hbuf, static_cast<int64_t>(r) * slices * F + c,
                         cusync::activate(s.activation, slice, acc[c - c0] + b1f[c]));
      }
    }
    int* sem = sems + s.policy.post_semaphore(P, t);
    if (release_store) cusync::semaphore_post_store(sem, 1);
    else cusync::semaphore_post_add(sem);
  };

  CallState state(s.wait_timeout_ms);
  auto consumer_tile = [&](int index) -> bool {
    const cusync::Tile t = hw_order ? cusync::tile_at(cusync::TileOrder::kRowMajor, index, C.grid_rows(),
                                                      C.grid_cols(), 1)
                                    : C.tile(index);
    const int r0 = C.row_begin(t), r1 = C.row_end(t), c0 = C.col_begin(t), c1 = C.col_end(t);
    std::vector<float> acc(static_cast<size_t>(r1 - r0) * (c1 - c0), 0.f);
    auto ready = cusync::SatisfiedSemaphores::none();  // as the kernels: each semaphore acquired once a tile
    for (int k0 = 0; k0 < F; k0 += s.tile_k2) {
      const int k1 = static_cast<int>(std::min<int64_t>(F, k0 + s.tile_k2));
      if (waits && (k0 == 0 || !s.policy.waits_once_per_tile())) {
        // RowSync: the first wait covers the whole row (all of k).
        const cusync::Region region = cusync::gemm_dependency(
            r0, r1, k0, s.policy.waits_once_per_tile() ? static_cast<int>(F) : k1);
        bool ok = true;
        s.policy.for_each_wait(P, region, [&](int sem, int count) {
          if (!ok || ready.has(sem)) return;
          ok = state.wait(sems + sem, count, "a consumer tile");
          if (ok) ready.add(sem);
        });
        if (!ok) return false;
      }
      for (int r = r0; r < r1; ++r) {
        float* accr = &acc[static_cast<size_t>(r - r0) * (c1 - c0)];
        for (int k = k0; k < k1; ++k) {
          const int64_t hi = static_cast<int64_t>(r) * slices * F + k;
          float a = load_as_float(dt, hbuf, hi);
          if (slices == 2) a *= load_as_float(dt, hbuf, hi + F);  // SwiGLU: silu(gate) * up
          const float* wk = &w2f[static_cast<size_t>(k) * O];
          for (int c = c0; c < c1; ++c) accr[c - c0] += a * wk[c];
        }
      }
    }
    for (int r = r0; r < r1; ++r)
      for (int c = c0; c < c1; ++c)
        store_from_float(dt, ybuf, static_cast<int64_t>(r) * O + c,
                         acc[static_cast<size_t>(r - r0) * (c1 - c0) + (c - c0)] + b2f[c]);
    return true;
  };

  run_two_stages(exec_options_of(s), state, P.tile_count(), C.tile_count(), producer_tile,
                 consumer_tile);
  if (state.failed()) return ffi::Error::Internal(state.error());
  return ffi::Error::Success();
}

}  // namespace
}  // namespace cusync_cpu

XLA_FFI_DEFINE_HANDLER_SYMBOL(CusyncSyncedMlpCpu, cusync_cpu::SyncedMlpCpu,
                              ffi::Ffi::Bind()
                                  .Arg<ffi::AnyBuffer>()  // x [T, H]
                                  .Arg<ffi::AnyBuffer>()  // w1 [H, S*F]
                                  .Arg<ffi::AnyBuffer>()  // b1 [S*F]
                                  .Arg<ffi::AnyBuffer>()  // w2 [F, O]
                                  .Arg<ffi::AnyBuffer>()  // b2 [O]
                                  .Ret<ffi::AnyBuffer>()  // y [T, O]
                                  .Ret<ffi::AnyBuffer>()  // h [T, S*F] (intermediate)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // sync words (semaphores)
                                  .Attrs());
