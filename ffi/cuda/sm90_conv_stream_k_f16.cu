// Stream-K-capable float16 convolution instances of the Hopper GEMM-chain
// kernel (see sm90_chain_instances.h).
#include "cuda/sm90_chain_instances.h"

namespace cusync_sm90 {
CUSYNC_SM90_CONV_F16_STREAM_K_INSTANCES()
}  // namespace cusync_sm90
