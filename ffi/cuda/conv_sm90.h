// The conv pair on kernel family 1 (Hopper): both convolutions as implicit
// GEMMs on the GEMM-chain kernel, A read through TMA's im2col mode.
#pragma once

#include <cuda_runtime.h>

#include "common/conv_spec.h"
#include "cuda/mlp_launch.h"
#include "xla/ffi/api/ffi.h"

namespace cusync_cuda {

struct ConvBuffers {
  const void* x;         // [N, H, W, C0]
  const void* k1;        // [R1, S1, C0, C1]
  const void* b1;        // [C1]
  const void* k2;        // [R2, S2, C1, C2]
  const void* b2;        // [C2]
  const void* residual;  // [N, H, W, C2] or null
  void* h;               // [N, H, W, C1] intermediate
  void* y;               // [N, H, W, C2]
  int* sync;             // sync words (cusync/sync_layout.h), zeroed by the handler where read
  bool bf16;
};

// Whether the plan's shapes and tiles fit the Hopper conv (InvalidArgument
// saying what to change where not).
xla::ffi::Error check_conv_pair_sm90(const cusync_ffi::ConvPairSpec& spec);

xla::ffi::Error launch_conv_pair_sm90(const cusync_ffi::ConvPairSpec& spec, const ConvBuffers& buffers,
                                      cudaStream_t stream, const DeviceInfo& device);

}  // namespace cusync_cuda
