// Stream-K-capable 128x192 instances (float16 and bfloat16; no SwiGLU form) of
// the Hopper GEMM-chain kernel (see sm90_chain_instances.h).
#include "cuda/sm90_chain_instances.h"

namespace cusync_sm90 {
CUSYNC_SM90_CHAIN_STREAM_K192_INSTANCES()
}  // namespace cusync_sm90
