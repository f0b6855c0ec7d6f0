// A plain GEMM on the Hopper GEMM-chain kernel (one stage, no epilogue
// activation): out[m, n] = a[m, k] @ w[k, n], row-major. The synced MLP's
// GEMMs alone, for benchmarks against XLA's dot.
#pragma once

#include <cuda_runtime.h>

#include "cuda/mlp_launch.h"
#include "cusync/tile_order.h"
#include "xla/ffi/api/ffi.h"

namespace cusync_cuda {

// A static schedule (no counter: nothing to zero before the launch).
// tile_n: 96, 128, 192 or 256.
// cluster_m: 1, or 2 (tile_n 128) for 2x1 clusters sharing B by multicast.
xla::ffi::Error launch_gemm_sm90(const void* a, const void* w, void* out, int m, int n, int k,
                                 bool bf16, int tile_n, cusync::TileOrder order, int group_rows, int cluster_m,
                                 cudaStream_t stream, const DeviceInfo& device);

}  // namespace cusync_cuda
