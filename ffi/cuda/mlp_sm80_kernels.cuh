// The compiled kernels of family 0: which tile shapes exist, and one table
// entry per (dtype, tile shape, SwiGLU or not) that the launcher looks up.
// Each tile shape is instantiated in its own translation unit
// (mlp_sm80_tile<M>x<N>.cu) so the shapes compile in parallel.
#pragma once

#include <cuda_runtime.h>

#include <type_traits>
#include <vector>

#include "cuda/mlp_sm80_kernel.cuh"

namespace cusync_cuda::sm80 {

// Tile shapes (M x N x K, warps, pipeline stages, blocks per SM), chosen with
// the wave model for 132 SMs: 128x128 runs two blocks per SM (264 slots), the
// wide shapes one. Keep in step with kernels.CUDA_CONFIGS (family 0).
using Tile128x128 = TileConfig<128, 128, 32, 2, 2, 4, 2>;
using Tile128x256 = TileConfig<128, 256, 32, 2, 4, 4, 1>;
using Tile256x128 = TileConfig<256, 128, 32, 4, 2, 4, 1>;

struct KernelEntry {
  int tile_m, tile_n, tile_k;
  bool bf16;
  bool swiglu;  // consumer tiles read A = silu(gate) * up
  int threads;
  int smem_bytes;
  const void* function;  // for occupancy queries and attributes
  cudaError_t (*launch)(const MlpKernelParams& params, int grid, cudaStream_t stream);
};

template <class T, class Cfg, bool kSwiglu>
cudaError_t launch_kernel(const MlpKernelParams& params, int grid, cudaStream_t stream) {
  mlp_sm80_kernel<T, Cfg, kSwiglu><<<grid, Cfg::kThreads, Cfg::smem_bytes(kSwiglu), stream>>>(params);
  return cudaGetLastError();
}

template <class T, class Cfg, bool kSwiglu>
KernelEntry make_entry() {
  return KernelEntry{Cfg::kM,
                     Cfg::kN,
                     Cfg::kK,
                     std::is_same_v<T, __nv_bfloat16>,
                     kSwiglu,
                     Cfg::kThreads,
                     Cfg::smem_bytes(kSwiglu),
                     reinterpret_cast<const void*>(&mlp_sm80_kernel<T, Cfg, kSwiglu>),
                     &launch_kernel<T, Cfg, kSwiglu>};
}

// Both dtypes, with and without the SwiGLU consumer, of one tile shape.
template <class Cfg>
std::vector<KernelEntry> entries_for_tile() {
  return {make_entry<__half, Cfg, false>(), make_entry<__half, Cfg, true>(),
          make_entry<__nv_bfloat16, Cfg, false>(), make_entry<__nv_bfloat16, Cfg, true>()};
}

// Defined in mlp_sm80_tile128x128.cu, mlp_sm80_tile128x256.cu and
// mlp_sm80_tile256x128.cu.
std::vector<KernelEntry> kernels_128x128();
std::vector<KernelEntry> kernels_128x256();
std::vector<KernelEntry> kernels_256x128();

}  // namespace cusync_cuda::sm80
