// Kernel instances of the v4 harness, unit 3 (see chain_dev_v4_inst.h).
#include "cuda/sm90_chain_launch.cuh"
#include "v4/sm90_chain_launch.cuh"
#include "chain_dev_v4_inst.h"

CHAIN_DEV_UNIT3(CHAIN_DEV_INSTANCE)
