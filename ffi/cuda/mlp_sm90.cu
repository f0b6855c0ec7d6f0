// Kernel family 1 (Hopper). Under construction: see the family's own files.
#include "cuda/mlp_launch.h"

namespace cusync_cuda {

xla::ffi::Error launch_mlp_sm90(const cusync_ffi::MlpSpec&, const MlpBuffers&, cudaStream_t,
                                const DeviceInfo&) {
  return xla::ffi::Error(xla::ffi::ErrorCode::kUnimplemented,
                         "cusync_jax: the Hopper kernel family is not built in this version");
}

}  // namespace cusync_cuda
