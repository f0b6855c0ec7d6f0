// Family-0 kernels of the 256x128 tile (see mlp_sm80_kernels.cuh).
#include "cuda/mlp_sm80_kernels.cuh"

namespace cusync_cuda::sm80 {
std::vector<KernelEntry> kernels_256x128() { return entries_for_tile<Tile256x128>(); }
}  // namespace cusync_cuda::sm80
