// The conv pair on kernel family 2 (Hopper): both 3x3 convolutions on the
// halo conv (cuda/halo_conv_sm90.cuh), serial, streams or fused.
#pragma once

#include <cuda_runtime.h>

#include "common/conv_spec.h"
#include "cuda/conv_sm90.h"
#include "cuda/mlp_launch.h"
#include "xla/ffi/api/ffi.h"

namespace cusync_cuda {

// Whether the plan's shapes and tiles fit the halo conv (InvalidArgument
// saying what to change where not).
xla::ffi::Error check_conv_pair_halo(const cusync_ffi::ConvPairSpec& spec);

xla::ffi::Error launch_conv_pair_halo(const cusync_ffi::ConvPairSpec& spec, const ConvBuffers& buffers,
                                      cudaStream_t stream, const DeviceInfo& device);

}  // namespace cusync_cuda
