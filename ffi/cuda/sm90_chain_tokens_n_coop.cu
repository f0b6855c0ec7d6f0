// Cooperative 96x128 instances with tokens as N (float16 and bfloat16, plain
// and SwiGLU) of the Hopper GEMM-chain kernel (see sm90_chain_instances.h).
#include "cuda/sm90_chain_instances.h"

namespace cusync_sm90 {
CUSYNC_SM90_CHAIN_TOKENS_N_COOP_INSTANCES()
}  // namespace cusync_sm90
