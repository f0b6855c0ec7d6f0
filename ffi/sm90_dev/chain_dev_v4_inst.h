// The kernel instances the v4 harness uses, split over translation units so
// that a parallel build takes the time of the slowest unit.
#pragma once

#define CHAIN_DEV_INSTANCE(ns, E, N, S)                                          \
  template cudaError_t ns::launch_chain<ns::ChainConfig<E, N, S>>(               \
      const ns::ChainParams<ns::ChainConfig<E, N, S>>&, int, cudaStream_t);

#define CHAIN_DEV_UNIT0(X) X(cusync_sm90, cute::half_t, 128, false) X(cusync_sm90, cute::half_t, 256, false)
#define CHAIN_DEV_UNIT1(X) X(cusync_sm90, cute::half_t, 128, true) X(cusync_sm90_v4, cute::half_t, 256, false)
#define CHAIN_DEV_UNIT2(X) X(cusync_sm90_v4, cute::half_t, 128, false) X(cusync_sm90_v4, cute::half_t, 128, true)
#define CHAIN_DEV_UNIT3(X) X(cusync_sm90_v4, cute::bfloat16_t, 128, false) X(cusync_sm90_v4, cute::bfloat16_t, 256, false)
#define CHAIN_DEV_UNIT4(X) X(cusync_sm90_v4, cute::bfloat16_t, 128, true) X(cusync_sm90_v4, cute::half_t, 256, true)
#define CHAIN_DEV_ALL(X) \
  CHAIN_DEV_UNIT0(X) CHAIN_DEV_UNIT1(X) CHAIN_DEV_UNIT2(X) CHAIN_DEV_UNIT3(X) CHAIN_DEV_UNIT4(X)
