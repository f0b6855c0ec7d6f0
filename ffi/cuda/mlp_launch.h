// The interface between the CUDA FFI handler and the kernel families that
// run a synced MLP. The handler decodes the call (MlpSpec), zeroes the sync
// buffer on the stream, and hands the buffers to the family the plan names.
#pragma once

#include <cuda_runtime.h>

#include "common/mlp_spec.h"
#include "xla/ffi/api/ffi.h"

namespace cusync_cuda {

struct MlpBuffers {
  const void* x;   // [T, H]
  const void* w1;  // [H, S*F]
  const void* b1;  // [S*F]
  const void* w2;  // [F, O]
  const void* b2;  // [O]
  void* y;         // [T, O]
  void* h;         // [T, S*F] intermediate
  int* sync;       // sync words (cusync/sync_layout.h), zeroed by the handler where read
  bool bf16;       // element type: bfloat16 if true, else float16
};

struct DeviceInfo {
  int sm_count;
  int max_smem_per_block;  // opt-in limit, bytes
};

// Kernel family 0: the portable mma.sync GEMM (sm_80+), all modes.
xla::ffi::Error launch_mlp_sm80(const cusync_ffi::MlpSpec& spec, const MlpBuffers& buffers,
                                cudaStream_t stream, const DeviceInfo& device);

// Kernel family 1: the Hopper GEMM (wgmma + TMA, sm_90a).
xla::ffi::Error launch_mlp_sm90(const cusync_ffi::MlpSpec& spec, const MlpBuffers& buffers,
                                cudaStream_t stream, const DeviceInfo& device);

}  // namespace cusync_cuda
