// Host side of the Hopper GEMM-chain kernel: builds the TMA descriptors of a
// GEMM stage and launches a range of the schedule.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>

#include "sm90_chain_kernel.cuh"

namespace cusync_sm90_v4 {

// out[rows, :] (tiles of `tiling`) = activation(A @ B + bias).
// A: [rows, k] with row stride a_ld; a_up: SwiGLU's up half of h (same
// shape and stride), else null. B: [k, n_all] row-major.
template <class Cfg>
GemmStage<Cfg> make_gemm_stage(typename Cfg::Element const* a, typename Cfg::Element const* a_up,
                               int rows, int k, int a_ld, typename Cfg::Element const* b, int n_all,
                               typename Cfg::Element* out, int out_ld,
                               typename Cfg::Element const* bias, cusync::Stage tiling,
                               cusync::Activation activation) {
  GemmStage<Cfg> g{};
  g.tma_a = Cfg::make_tma_a(a, rows, k, a_ld);
  g.tma_a_up = Cfg::make_tma_a(a_up != nullptr ? a_up : a, rows, k, a_ld);
  g.tma_b = Cfg::make_tma_b(b, n_all, k);
  g.rows = rows;
  g.k = k;
  g.n_all = n_all;
  g.a_ld = a_ld;
  g.out = out;
  g.out_ld = out_ld;
  g.bias = bias;
  g.tiling = tiling;
  g.activation = activation;
  return g;
}

// TMA needs 16-byte aligned bases and row strides.
inline bool tma_compatible(const void* base, long long row_stride_elems, int elem_bytes) {
  return reinterpret_cast<uintptr_t>(base) % 16 == 0 && (row_stride_elems * elem_bytes) % 16 == 0;
}

// Runs schedule positions [p.begin, p.end) on at most one CTA per SM.
// Fails with cudaErrorNoKernelImageForDevice where the build holds no sm_90a
// image: the kernel body of every other target is empty.
template <class Cfg>
cudaError_t launch_chain(const ChainParams<Cfg>& p, int sm_count, cudaStream_t stream) {
  auto kernel = chain_kernel_sm90<Cfg>;
  static const cudaError_t image = [&] {
    cudaFuncAttributes attr{};
    const cudaError_t err = cudaFuncGetAttributes(&attr, kernel);
    if (err != cudaSuccess) return err;
    return attr.binaryVersion == 90 ? cudaSuccess : cudaErrorNoKernelImageForDevice;
  }();
  if (image != cudaSuccess) return image;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       Cfg::kSmemBytes);
  if (e != cudaSuccess) return e;
  const int work = p.end - p.begin;
  if (work <= 0) return cudaSuccess;
  const int grid = std::min(sm_count, work);
  kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace cusync_sm90_v4
