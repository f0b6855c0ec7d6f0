// XLA FFI handler "cusync_gemm": out = a @ w on the Hopper GEMM-chain kernel,
// the synced MLP's GEMM alone (bench/gemm.py times it against XLA's dot).
#include <cuda_runtime.h>

#include <string>

#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/gemm_sm90.h"
#include "cusync/tile_order.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace cusync_cuda {
namespace {

ffi::Error GemmCuda(cudaStream_t stream, ffi::AnyBuffer a, ffi::AnyBuffer w, ffi::Result<ffi::AnyBuffer> out,
                    int64_t tile_n, int64_t order,
                    int64_t group_rows, int64_t cluster_m) {
  const ffi::DataType dt = a.element_type();
  if ((dt != ffi::DataType::F16 && dt != ffi::DataType::BF16) || w.element_type() != dt)
    return ffi::Error::InvalidArgument("cusync_jax: gemm takes float16 or bfloat16 operands of one dtype");
  auto ad = a.dimensions();
  auto wd = w.dimensions();
  if (ad.size() != 2 || wd.size() != 2 || ad[1] != wd[0])
    return ffi::Error::InvalidArgument("cusync_jax: gemm expects a [m, k] and w [k, n]");
  const int64_t m = ad[0], k = ad[1], n = wd[1];
  if (order != static_cast<int64_t>(cusync::TileOrder::kRowMajor) &&
      order != static_cast<int64_t>(cusync::TileOrder::kColumnMajor) &&
      order != static_cast<int64_t>(cusync::TileOrder::kGrouped))
    return ffi::Error::InvalidArgument("cusync_jax: gemm takes the row-major, column-major or grouped tile order");
  if (group_rows < 1) return ffi::Error::InvalidArgument("cusync_jax: gemm group_rows must be positive");
  if (static_cast<int64_t>(out->element_count()) != m * n)
    return ffi::Error::InvalidArgument("cusync_jax: gemm's result buffer has the wrong size");
  if (m == 0 || n == 0) return ffi::Error::Success();
  int device = 0;
  if (auto e = stream_device(stream, &device); e.failure()) return e;
  DeviceFacts facts{};
  if (auto e = device_facts(device, &facts); e.failure()) return e;
  if (facts.major != 9)
    return ffi::Error::InvalidArgument("cusync_jax: gemm runs the Hopper kernel (compute capability 9.0); this GPU is " +
                                       std::to_string(facts.major) + "." + std::to_string(facts.minor));
  return launch_gemm_sm90(a.untyped_data(), w.untyped_data(), out->untyped_data(),
                          static_cast<int>(m), static_cast<int>(n), static_cast<int>(k), dt == ffi::DataType::BF16,
                          static_cast<int>(tile_n), static_cast<cusync::TileOrder>(order),
                          static_cast<int>(group_rows), static_cast<int>(cluster_m), stream, facts.info);
}

}  // namespace
}  // namespace cusync_cuda

XLA_FFI_DEFINE_HANDLER_SYMBOL(CusyncGemmCuda, cusync_cuda::GemmCuda,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()             // a [m, k]
                                  .Arg<ffi::AnyBuffer>()             // w [k, n]
                                  .Ret<ffi::AnyBuffer>()             // out [m, n]
                                  .Attr<int64_t>("tile_n")
                                  .Attr<int64_t>("order")            // cusync::TileOrder
                                  .Attr<int64_t>("group_rows")
                                  .Attr<int64_t>("cluster_m"));       // 1, or 2: 2x1 clusters (tile_n 128)
