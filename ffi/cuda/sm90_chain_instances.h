// The compiled configurations of the Hopper GEMM-chain kernel. Each is
// instantiated once, in sm90_chain_f16.cu or sm90_chain_bf16.cu (two files so
// a two-core build compiles them side by side), the 128x96 ones in
// sm90_chain_n96.cu, the 96x128 ones (tokens as N) in sm90_chain_tokens_n.cu (cooperative: sm90_chain_tokens_n_coop.cu), the 128x192 ones in sm90_chain_n192.cu, the 2x1-cluster ones in sm90_chain_cluster.cu, the
// stream-K ones in sm90_chain_stream_k.cu (128x192: sm90_chain_stream_k192.cu), the
// cooperative 128x128 ones in sm90_chain_coop.cu, the convolution ones in
// sm90_conv_f16.cu and sm90_conv_bf16.cu; users see
// only the declarations below.
// cusync_jax/kernels.py lists the same tiles (kernel 1).
#pragma once

#include "cuda/sm90_chain_launch.cuh"

namespace cusync_sm90 {

// 128x96 (no SwiGLU form): at few tokens, 96-wide tiles fill 132 SMs where
// 128-wide ones leave a quarter idle (GPT-3 at 256 tokens: 128 tiles, not 96).
using ChainF16x96 = ChainConfig<cute::half_t, 96, false>;
using ChainBF16x96 = ChainConfig<cute::bfloat16_t, 96, false>;
// 96x128, tokens as N (kTokensN: the product transposed, so a tile can be 96
// rows high), plain and SwiGLU (64 gate + 64 up columns a tile): where 96-row
// tiles fill the SMs in whole waves and 128-row ones do not (LLaMA's SwiGLU
// producer: 3 x 44 = 132 tiles at 256 tokens, 6 x 44 = 2 x 132 at 512).
using ChainF16x96Tok = ChainConfig<cute::half_t, 128, false, 1, false, 2, true, false, true>;
using ChainBF16x96Tok = ChainConfig<cute::bfloat16_t, 128, false, 1, false, 2, true, false, true>;
using ChainF16x96TokSwiglu = ChainConfig<cute::half_t, 128, true, 1, false, 2, true, false, true>;
using ChainBF16x96TokSwiglu = ChainConfig<cute::bfloat16_t, 128, true, 1, false, 2, true, false, true>;
// The same, cooperative (both MMA warpgroups on every tile): where a launch
// gives a CTA at most two tiles (runs_cooperative in mlp_sm90.cu).
using ChainF16x96TokCoop = ChainConfig<cute::half_t, 128, false, 1, false, 2, false, false, true>;
using ChainBF16x96TokCoop = ChainConfig<cute::bfloat16_t, 128, false, 1, false, 2, false, false, true>;
using ChainF16x96TokSwigluCoop = ChainConfig<cute::half_t, 128, true, 1, false, 2, false, false, true>;
using ChainBF16x96TokSwigluCoop = ChainConfig<cute::bfloat16_t, 128, true, 1, false, 2, false, false, true>;
// 128x192 (cooperative, no SwiGLU form): where 192-wide tiles fill the SMs in
// whole waves and 128-wide ones do not (GPT-3, 256 tokens, second GEMM: 128
// tiles instead of 192; 512 tokens, first GEMM: 128 instead of 192).
using ChainF16x192 = ChainConfig<cute::half_t, 192, false>;
using ChainBF16x192 = ChainConfig<cute::bfloat16_t, 192, false>;
using ChainF16x128 = ChainConfig<cute::half_t, 128, false>;
using ChainF16x256 = ChainConfig<cute::half_t, 256, false>;
using ChainF16x128Swiglu = ChainConfig<cute::half_t, 128, true>;
using ChainF16x256Swiglu = ChainConfig<cute::half_t, 256, true>;
using ChainBF16x128 = ChainConfig<cute::bfloat16_t, 128, false>;
using ChainBF16x256 = ChainConfig<cute::bfloat16_t, 256, false>;
using ChainBF16x128Swiglu = ChainConfig<cute::bfloat16_t, 128, true>;
using ChainBF16x256Swiglu = ChainConfig<cute::bfloat16_t, 256, true>;
// 128x128 cooperative: where a launch gives a CTA at most two tiles
// (mlp_sm90.cu, runs_cooperative).
using ChainF16x128Coop = ChainConfig<cute::half_t, 128, false, 1, false, 2, false>;
using ChainBF16x128Coop = ChainConfig<cute::bfloat16_t, 128, false, 1, false, 2, false>;
using ChainF16x128SwigluCoop = ChainConfig<cute::half_t, 128, true, 1, false, 2, false>;
using ChainBF16x128SwigluCoop = ChainConfig<cute::bfloat16_t, 128, true, 1, false, 2, false>;
// Opt-in (cluster_m = 2): 2x1 clusters sharing B through TMA multicast.
using ChainF16x128Cluster2 = ChainConfig<cute::half_t, 128, false, 2>;
using ChainBF16x128Cluster2 = ChainConfig<cute::bfloat16_t, 128, false, 2>;
// Opt-in (stream_k): 128x128 and 128x192 tiles that can also run a stage stream-K.
using ChainF16x128StreamK = ChainConfig<cute::half_t, 128, false, 1, true>;
using ChainBF16x128StreamK = ChainConfig<cute::bfloat16_t, 128, false, 1, true>;
using ChainF16x128SwigluStreamK = ChainConfig<cute::half_t, 128, true, 1, true>;
using ChainBF16x128SwigluStreamK = ChainConfig<cute::bfloat16_t, 128, true, 1, true>;
using ChainF16x192StreamK = ChainConfig<cute::half_t, 192, false, 1, true>;
using ChainBF16x192StreamK = ChainConfig<cute::bfloat16_t, 192, false, 1, true>;

// Convolution A (kConvA, the conv pair): 128x64 tiles (64-channel layers),
// pingpong and cooperative (conv_sm90.cu picks as the MLP does), and 128x128
// cooperative (its pingpong form spilled 104 bytes: 128 accumulators a thread
// beside the residual's addressing).
using ConvF16x64 = ChainConfig<cute::half_t, 64, false, 1, false, 2, true, true>;
using ConvF16x64Coop = ChainConfig<cute::half_t, 64, false, 1, false, 2, false, true>;
using ConvF16x128Coop = ChainConfig<cute::half_t, 128, false, 1, false, 2, false, true>;
using ConvBF16x64 = ChainConfig<cute::bfloat16_t, 64, false, 1, false, 2, true, true>;
using ConvBF16x64Coop = ChainConfig<cute::bfloat16_t, 64, false, 1, false, 2, false, true>;
using ConvBF16x128Coop = ChainConfig<cute::bfloat16_t, 128, false, 1, false, 2, false, true>;
// The same two tile shapes stream-K capable (a conv split along k in serial
// mode: deep layers at small batch have a few tiles of long k loops).
using ConvF16x64StreamK = ChainConfig<cute::half_t, 64, false, 1, true, 2, true, true>;
using ConvF16x128CoopStreamK = ChainConfig<cute::half_t, 128, false, 1, true, 2, false, true>;
using ConvBF16x64StreamK = ChainConfig<cute::bfloat16_t, 64, false, 1, true, 2, true, true>;
using ConvBF16x128CoopStreamK = ChainConfig<cute::bfloat16_t, 128, false, 1, true, 2, false, true>;

#define CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, Cfg) \
  EXTERN template cudaError_t launch_chain<Cfg>(const ChainParams<Cfg>&, int, cudaStream_t);

#define CUSYNC_SM90_CHAIN_F16_INSTANCES(EXTERN)          \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainF16x128)       \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainF16x256)       \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainF16x128Swiglu) \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainF16x256Swiglu)

#define CUSYNC_SM90_CHAIN_BF16_INSTANCES(EXTERN)          \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainBF16x128)       \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainBF16x256)       \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainBF16x128Swiglu) \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainBF16x256Swiglu)

// (max_active_clusters names the kernel: instantiated once here too, so the
// host dispatch does not compile the kernel again.)
#define CUSYNC_SM90_CHAIN_CLUSTER_INSTANCE(EXTERN, Cfg) \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, Cfg)               \
  EXTERN template int max_active_clusters<Cfg>(int);

#define CUSYNC_SM90_CHAIN_CLUSTER_INSTANCES(EXTERN)               \
  CUSYNC_SM90_CHAIN_CLUSTER_INSTANCE(EXTERN, ChainF16x128Cluster2) \
  CUSYNC_SM90_CHAIN_CLUSTER_INSTANCE(EXTERN, ChainBF16x128Cluster2)

#define CUSYNC_SM90_CHAIN_STREAM_K_INSTANCES(EXTERN)           \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainF16x128StreamK)       \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainBF16x128StreamK)      \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainF16x128SwigluStreamK) \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainBF16x128SwigluStreamK)

#define CUSYNC_SM90_CHAIN_STREAM_K192_INSTANCES(EXTERN)  \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainF16x192StreamK) \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainBF16x192StreamK)

#define CUSYNC_SM90_CHAIN_COOP_INSTANCES(EXTERN)             \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainF16x128Coop)        \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainBF16x128Coop)       \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainF16x128SwigluCoop)  \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainBF16x128SwigluCoop)

#define CUSYNC_SM90_CHAIN_N96_INSTANCES(EXTERN) \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainF16x96) \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainBF16x96)

#define CUSYNC_SM90_CHAIN_TOKENS_N_INSTANCES(EXTERN)         \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainF16x96Tok)        \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainBF16x96Tok)       \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainF16x96TokSwiglu)  \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainBF16x96TokSwiglu)

#define CUSYNC_SM90_CHAIN_TOKENS_N_COOP_INSTANCES(EXTERN)         \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainF16x96TokCoop)        \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainBF16x96TokCoop)       \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainF16x96TokSwigluCoop)  \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainBF16x96TokSwigluCoop)

#define CUSYNC_SM90_CHAIN_N192_INSTANCES(EXTERN) \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainF16x192) \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ChainBF16x192)

#define CUSYNC_SM90_CONV_F16_INSTANCES(EXTERN)      \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ConvF16x64)      \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ConvF16x64Coop)  \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ConvF16x128Coop)

#define CUSYNC_SM90_CONV_BF16_INSTANCES(EXTERN)      \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ConvBF16x64)     \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ConvBF16x64Coop) \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ConvBF16x128Coop)

#define CUSYNC_SM90_CONV_F16_STREAM_K_INSTANCES(EXTERN)    \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ConvF16x64StreamK)     \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ConvF16x128CoopStreamK)

#define CUSYNC_SM90_CONV_BF16_STREAM_K_INSTANCES(EXTERN)   \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ConvBF16x64StreamK)    \
  CUSYNC_SM90_CHAIN_INSTANCE(EXTERN, ConvBF16x128CoopStreamK)

CUSYNC_SM90_CHAIN_F16_INSTANCES(extern)
CUSYNC_SM90_CONV_F16_INSTANCES(extern)
CUSYNC_SM90_CONV_F16_STREAM_K_INSTANCES(extern)
CUSYNC_SM90_CONV_BF16_STREAM_K_INSTANCES(extern)
CUSYNC_SM90_CONV_BF16_INSTANCES(extern)
CUSYNC_SM90_CHAIN_N96_INSTANCES(extern)
CUSYNC_SM90_CHAIN_TOKENS_N_INSTANCES(extern)
CUSYNC_SM90_CHAIN_TOKENS_N_COOP_INSTANCES(extern)
CUSYNC_SM90_CHAIN_N192_INSTANCES(extern)
CUSYNC_SM90_CHAIN_BF16_INSTANCES(extern)
CUSYNC_SM90_CHAIN_CLUSTER_INSTANCES(extern)
CUSYNC_SM90_CHAIN_STREAM_K_INSTANCES(extern)
CUSYNC_SM90_CHAIN_STREAM_K192_INSTANCES(extern)
CUSYNC_SM90_CHAIN_COOP_INSTANCES(extern)

}  // namespace cusync_sm90
