// Per-device facts the launchers need (SM count, shared-memory limit,
// compute capability), queried once per device and cached.
#pragma once

#include <cuda_runtime.h>

#include "cuda/mlp_launch.h"
#include "xla/ffi/api/ffi.h"

namespace cusync_cuda {

struct DeviceFacts {
  DeviceInfo info;
  int major, minor;  // compute capability
};

// The facts of `device` (a CUDA ordinal), cached after the first query.
xla::ffi::Error device_facts(int device, DeviceFacts* out);

// The device a stream belongs to.
xla::ffi::Error stream_device(cudaStream_t stream, int* device);

}  // namespace cusync_cuda
