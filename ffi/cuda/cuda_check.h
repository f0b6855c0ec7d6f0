// CUDA runtime errors as XLA FFI errors: handlers never throw, and every
// failure names the call that failed and what a user can do about it.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "xla/ffi/api/ffi.h"

namespace cusync_cuda {

inline xla::ffi::Error cuda_error(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return xla::ffi::Error::Success();
  std::string hint;
  if (err == cudaErrorNoKernelImageForDevice || err == cudaErrorInvalidDeviceFunction) {
    hint = " (cusync_jax's CUDA kernels are built for sm_80 and sm_90a; rebuild with "
           "-C cmake.define.CUSYNC_JAX_CUDA_ARCHS=<your arch> for this GPU)";
  } else if (err == cudaErrorLaunchOutOfResources) {
    hint = " (the kernel needs more registers or shared memory than this GPU offers)";
  }
  return xla::ffi::Error::Internal(std::string("cusync_jax: ") + what + " failed: " +
                                   cudaGetErrorName(err) + ": " + cudaGetErrorString(err) + hint);
}

}  // namespace cusync_cuda

// Returns the FFI error of a failed CUDA call from the enclosing function.
#define CUSYNC_CUDA_RETURN_IF_ERROR(call, what)                                         \
  do {                                                                                  \
    if (auto cusync_err_ = ::cusync_cuda::cuda_error((call), (what)); cusync_err_.failure()) \
      return cusync_err_;                                                               \
  } while (0)
