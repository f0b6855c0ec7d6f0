// Family-0 kernels of the 128x256 tile (see mlp_sm80_kernels.cuh).
#include "cuda/mlp_sm80_kernels.cuh"

namespace cusync_cuda::sm80 {
std::vector<KernelEntry> kernels_128x256() { return entries_for_tile<Tile128x256>(); }
}  // namespace cusync_cuda::sm80
