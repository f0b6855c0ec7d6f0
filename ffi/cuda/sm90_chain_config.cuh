// Compile-time shape of the Hopper GEMM-chain kernel (kernel family 1): tile,
// shared-memory layouts, the wgmma tiling and the TMA descriptor types.
//
// Operands: A [rows, K] row-major (K contiguous, "K-major"); B = a weight
// [K, N] row-major (x @ w), which wgmma reads as an N x K "MN-major" operand.
// Both are staged by TMA into 128-byte-swizzled shared memory, `kStages` deep
// (B of the 128x96 tiles: 64-byte, see BAtom).
// A CTA has three warpgroups: one loads (TMA), two multiply. 128x96 and
// 128x128 tiles run pingpong by default: each MMA warpgroup owns every other
// tile (all 128 rows), and the two take turns on the tensor cores, so one's
// epilogue runs under the other's mainloop. Wider tiles, and the cooperative
// 128x128 form, put both MMA warpgroups on every tile (64 rows each): where a
// CTA runs one or two tiles there is no mainloop to hide an epilogue under,
// and two warpgroups store a tile in 2k cycles where one takes 5k (a 128x256
// fp32 tile does not fit one warpgroup's registers at all).
#pragma once

#include <cute/tensor.hpp>
#include <cute/arch/copy_sm90_tma.hpp>
#include <cute/arch/mma_sm90.hpp>
#include <cute/atom/copy_traits_sm90_tma.hpp>
#include <cute/atom/mma_atom.hpp>
#include <cutlass/numeric_types.h>
#include <cutlass/pipeline/sm90_pipeline.hpp>

#include <type_traits>

// wgmma and setmaxnreg exist only in the sm_90a target; every other pass of
// the build compiles the kernels to an empty body.
#if defined(__CUDA_ARCH__) && (__CUDA_ARCH__ >= 900) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#ifndef CUSYNC_SM90A_DEVICE
#define CUSYNC_SM90A_DEVICE 1
#endif
#endif

namespace cusync_sm90 {

using namespace cute;

// kTileN: tile width (96, 128, 192 or 256; 96 and 192 without SwiGLU). kSwiglu: producer tiles multiply x by
// kTileN/2 gate columns and the same kTileN/2 up columns of w1 (two B views,
// side by side in a stage), and the epilogue stores silu(gate) * up: h is a
// plain [rows, F] matrix and the consumer a plain GEMM.
// kClusterM = 2: CTAs run in 2x1 clusters; the two CTAs of a cluster compute
// vertically adjacent row tiles of one column tile, and each loads half of
// the shared B tile with TMA multicast to both (plain tiles; the package
// builds 128x128, the GEMM harness also 128x192 and 128x256).
// kStreamK: the kernel can also run a stage stream-K (the package builds it
// for 128x128 and 128x192; the other configurations compile without it, so their code
// stays as measured). With 2x1 clusters the two CTAs of a cluster run the
// same range of two adjacent lines (row tiles), sharing each B k-block.
// kEpiBoxes: 16x64 boxes each MMA warp stages per epilogue pass (2; 1 halves
// the epilogue's shared memory, which gives 128x192 a fifth stage).
// kPingpong: each MMA warpgroup owns every other tile (the default up to 128
// columns; false: the cooperative form).
// kConvA: A is an implicit-GEMM convolution's im2col view of an NHWC input,
// loaded by TMA in im2col mode (ConvA below); the epilogue may add a residual.
// kTokensN: the product runs transposed, out^T = B^T A^T: the weight tile is
// wgmma's A (128 columns, MN-major, M) and x's 96-row tile its B (K-major, N),
// so a tile is 96 rows (tokens) by 128 columns. wgmma's M comes in 64s, its N
// in 8s: only this way can a tile be 96 rows high, which fills 132 SMs where
// 128-row tiles cannot (LLaMA's SwiGLU producer at 256 tokens: 3 x 44 = 132
// tiles against 2 x 44). The loads are the plain form's; the MMA swaps its
// operands and the epilogue stores the accumulators transposed. Pingpong, or
// cooperative (each MMA warpgroup one 64-column M atom of every tile): where
// a CTA runs one tile, pingpong leaves one warpgroup alone on the tensor
// cores. A cooperative SwiGLU tile splits gate (warpgroup 0) from up
// (warpgroup 1); they swap half their factors through shared memory.
template <class Element_, int kTileN_, bool kSwiglu_, int kClusterM_ = 1, bool kStreamK_ = false,
          int kEpiBoxes_ = 2, bool kPingpong_ = (kTileN_ <= 128), bool kConvA_ = false,
          bool kTokensN_ = false>
struct ChainConfig {
  using Element = Element_;
  static constexpr bool kTokensN = kTokensN_;
  static_assert(!kTokensN || (kTileN_ == 128 && kClusterM_ == 1 && !kStreamK_ && !kConvA_),
                "tokens as N: 96x128 tiles, without clusters, stream-K or convolution");
  static constexpr int kTileM = kTokensN ? 96 : 128;
  static constexpr int kTileN = kTileN_;
  static constexpr int kTileK = 64;  // 128 bytes of 16-bit elements: one swizzle row
  static constexpr bool kSwiglu = kSwiglu_;
  static constexpr int kClusterM = kClusterM_;
  static constexpr bool kStreamK = kStreamK_;
  static_assert(!kStreamK || kTileN_ % 64 == 0, "stream-K: 64-column multiples");
  static_assert(kClusterM == 1 || (kClusterM == 2 && (kTileN_ == 128 || kTileN_ == 192 || kTileN_ == 256) && !kSwiglu_),
                "2x1 clusters: 128x128, 128x192 and 128x256 plain tiles only");
  static_assert(kTileN_ % 64 == 0 || !kSwiglu_, "SwiGLU tiles split into two halves of whole 32-column atoms");
  using ClusterShape = Shape<Int<kClusterM>, _1, _1>;
  static_assert(!kPingpong_ || kTileN_ <= 128, "pingpong: a whole tile's fp32 accumulators in one warpgroup");
  static constexpr bool kPingpong = kPingpong_;
  static constexpr bool kConvA = kConvA_;
  static_assert(!kConvA || (kClusterM_ == 1 && !kSwiglu_), "convolution A: no clusters or SwiGLU form");
  static constexpr int kGroupsPerTile = kPingpong ? 1 : 2;  // MMA warpgroups on one tile
  static constexpr int kLoadThreads = 128;
  static constexpr int kMmaThreads = 256;
  static constexpr int kThreads = kLoadThreads + kMmaThreads;

  static constexpr int kBytesA = kTileM * kTileK * int(sizeof(Element));
  static constexpr int kBytesB = kTileN * kTileK * int(sizeof(Element));
  static constexpr int kStageBytes = kBytesA + kBytesB;
  // Deepest pipeline that fits next to the barriers (227 KB per block).
  static constexpr int kStagesBudget = (220 * 1024 / kStageBytes) < 8 ? (220 * 1024 / kStageBytes) : 8;
  // The epilogue stages each warp's 16-row band of a tile in shared memory,
  // 128 columns a pass (two 16x64 boxes, 128-byte swizzle, so the 8 rows a
  // warp writes at once fall in different banks), and stores the boxes with
  // TMA. Stores straight from the accumulators (16 bytes into each of 8
  // lines per instruction), and even whole-line 16-byte stores from shared
  // memory, slowed the other warpgroup's mainloop by 5-13 %; CUTLASS's
  // pingpong GEMM shows the same gap between its register and TMA epilogues.
  // 96-wide tiles (boxes of 64 do not divide them) store directly.
  // Tokens as N: a thread's accumulator pairs are two rows of one column, so
  // the epilogue pairs them across lanes and stores directly.
  static constexpr bool kTmaStore = kTileN % 64 == 0 && !kTokensN;
  static constexpr int kEpiBoxCols = 64;
  using EpiBox = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, make_shape(_16{}, Int<kEpiBoxCols>{})));
  static constexpr int kEpiBoxElems = 16 * kEpiBoxCols;
  static constexpr int kEpiBoxes = kEpiBoxes_;
  static_assert(kEpiBoxes == 1 || kEpiBoxes == 2, "one or two epilogue boxes a pass");
  static constexpr int kEpiWarpElems = kTmaStore ? kEpiBoxes * kEpiBoxElems : 8;
  // ... and next to the epilogue's bands and 2 KB of barriers (binds for
  // 128x192 with two boxes a pass: 5 stages of 40 KB leave no room for them).
  // Cooperative SwiGLU tiles with tokens as N: each MMA thread hands the
  // other warpgroup half of its fp32 factors (kTileM / 4 of its kTileM / 2).
  static constexpr bool kGateExchange = kTokensN && kSwiglu && !kPingpong_;
  static constexpr int kExchangeFloats = kGateExchange ? kMmaThreads * kTileM / 4 : 0;
  static constexpr int kStagesFit =
      (227 * 1024 - (kMmaThreads / 32) * kEpiWarpElems * int(sizeof(Element)) - kExchangeFloats * 4 - 2048) /
      kStageBytes;
  static constexpr int kStages = kStagesBudget < kStagesFit ? kStagesBudget : kStagesFit;

  // Scheduled tiles in flight between loader and MMA: pingpong keeps two
  // tiles in the MMA warpgroups while the loader runs ahead on a third.
  static constexpr int kTileSlots = 4;

  using TileM = Int<kTileM>;
  using TileN = Int<kTileN>;
  using TileK = Int<kTileK>;
  using Stages = Int<kStages>;

  using SmemLayoutA = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                             make_shape(TileM{}, TileK{}, Stages{})));
  // B is N-contiguous (MN-major): a swizzle row holds 64 columns with the
  // 128-byte swizzle, 32 with the 64-byte one. A width that is not a multiple
  // of 64 (96) takes the 64-byte one: a TMA box narrower than its swizzle row
  // lands in a smem image wgmma cannot read.
  template <int cols>
  using BAtom = std::conditional_t<cols % 64 == 0, GMMA::Layout_MN_SW128_Atom<Element>,
                                   GMMA::Layout_MN_SW64_Atom<Element>>;
  // B's swizzle atoms are (64 or 32 N) x 8 K; stacking them along K first
  // makes each atom-wide strip of a stage one contiguous TMA box of all 64 K
  // (N-first stacking would cut the stage into one-atom boxes, one TMA
  // instruction each).
  using SmemLayoutB = decltype(tile_to_shape(BAtom<kTileN>{}, make_shape(TileN{}, TileK{}, Stages{}),
                                             Step<_2, _1, _3>{}));
  // One half (kTileN/2 columns) of a B stage: with K-first stacking the two
  // halves of a stage are contiguous, each laid out like this. Only SwiGLU
  // producers and clusters load through it (kTileN 128 or 256); elsewhere it
  // only has to be a well-formed type, so a 96- or 192-wide tile takes a whole one.
  using HalfN = Int<(kTileN % 128 == 0) ? kTileN / 2 : kTileN>;
  // Clusters of 128x192 tiles split each B stage along k instead (a
  // 96-column half is not a whole 64-column swizzle atom): a CTA loads k
  // [0, 32) or [32, 64) of every stage for both. With K-first stacking that
  // half of each 64-column strip is contiguous; the layout is the stage's own,
  // cut to half the k.
  static constexpr bool kClusterSplitK = kClusterM > 1 && kTileN % 128 != 0;
  using HalfK = Int<kClusterSplitK ? kTileK / 2 : kTileK>;
  using SmemLayoutBHalfN = decltype(tile_to_shape(BAtom<HalfN::value>{}, make_shape(HalfN{}, TileK{}),
                                                  Step<_2, _1>{}));
  using SmemLayoutBHalfK = decltype(composition(take<0, 2>(SmemLayoutB{}), make_layout(make_shape(TileN{}, HalfK{}))));
  using SmemLayoutBHalf = cute::conditional_t<kClusterSplitK, SmemLayoutBHalfK, SmemLayoutBHalfN>;

  using MmaAtomPlain = decltype(SM90::GMMA::ss_op_selector<Element, Element, float,
                                                           Shape<_64, TileN, TileK>, GMMA::Major::K,
                                                           GMMA::Major::MN>());
  // kTokensN: A = the weight stage (MN-major), B = the x stage (K-major).
  using MmaAtomTokensN = decltype(SM90::GMMA::ss_op_selector<Element, Element, float,
                                                             Shape<_64, TileM, TileK>, GMMA::Major::MN,
                                                             GMMA::Major::K>());
  using MmaAtom = cute::conditional_t<kTokensN, MmaAtomTokensN, MmaAtomPlain>;
  // The accumulator tile as the MMA sees it: (rows, columns), or (columns,
  // rows) with tokens as N.
  using MmaTile = cute::conditional_t<kTokensN, Shape<TileN, TileM>, Shape<TileM, TileN>>;
  using TiledMma = decltype(make_tiled_mma(MmaAtom{}, Layout<Shape<Int<kGroupsPerTile>, _1, _1>>{}));

  using LoadPipeline = cutlass::PipelineTmaAsync<kStages>;
  using TilePipeline = cutlass::PipelineAsync<kTileSlots>;
  // Pingpong: the MMA warpgroups enter their mainloops in turn.
  using MathOrder = cutlass::OrderedSequenceBarrier<1, 2>;

  // TMA descriptors for A (rows x K, row stride ld) and B (N x K, N
  // contiguous, row stride ld). TMA zero-fills what lies outside the view,
  // so a view of width n never reads the columns that follow it in a row.
  static auto make_tma_a(Element const* ptr, int rows, int k, int ld) {
    auto g = make_tensor(make_gmem_ptr(ptr), make_shape(rows, k), make_stride(ld, _1{}));
    return make_tma_copy(SM90_TMA_LOAD{}, g, take<0, 2>(SmemLayoutA{}));
  }
  static auto make_tma_b(Element const* ptr, int n, int k, int ld) {
    auto g = make_tensor(make_gmem_ptr(ptr), make_shape(n, k), make_stride(_1{}, ld));
    return make_tma_copy(SM90_TMA_LOAD{}, g, take<0, 2>(SmemLayoutB{}));
  }
  // One half (kTileN/2 columns, or half the k with kClusterSplitK) of a B
  // stage. SwiGLU producer: the gate or the up columns of w1. Clusters: the
  // half of B that this CTA loads for both CTAs (multicast; one descriptor
  // serves both halves).
  using HalfOp = cute::conditional_t<(kClusterM > 1), SM90_TMA_LOAD_MULTICAST, SM90_TMA_LOAD>;
  static auto make_tma_b_half(Element const* ptr, int n, int k, int ld) {
    auto g = make_tensor(make_gmem_ptr(ptr), make_shape(n, k), make_stride(_1{}, ld));
    return make_tma_copy(HalfOp{}, g, SmemLayoutBHalf{});
  }
  // The output [rows, n] (row stride ld), stored in the epilogue's boxes.
  static auto make_tma_out(Element* ptr, int rows, int n, int ld) {
    auto g = make_tensor(make_gmem_ptr(ptr), make_shape(rows, n), make_stride(ld, _1{}));
    return make_tma_copy(SM90_TMA_STORE{}, g, EpiBox{});
  }
  using TmaA = decltype(make_tma_a(nullptr, 1, 1, 1));
  // Convolution A (kConvA): the im2col descriptor of x [N, H, W, C] and what
  // turns a tile's first output pixel and a k-block into its coordinates.
  // Output = input spatial size (stride 1, SAME). A k-block is one filter
  // tap's block of kTileK channels (k = tap * C + channel; C % kTileK == 0).
  struct ConvA {
    cute::TmaDescriptor im2col;  // channels per pixel kTileK, pixels per column kTileM
    int height, width, images;
    int channel_blocks;  // C / kTileK: k-blocks per tap
    int filter_s;        // taps per filter row
    int corner;          // lower (= upper) corner of the im2col box: -(filter / 2)
    Element const* residual;  // [pixels, n_all] added in the epilogue, or null
  };
  struct NoConvA {};
  using ConvAField = cute::conditional_t<kConvA, ConvA, NoConvA>;
  using TmaOut = decltype(make_tma_out(nullptr, 1, 1, 1));
  using TmaB = decltype(make_tma_b(nullptr, 1, 1, 1));
  using TmaBHalf = decltype(make_tma_b_half(nullptr, 1, 1, 1));

  struct SharedStorageOne {
    cute::array_aligned<Element, cosize_v<SmemLayoutA>, 1024> a;
    cute::array_aligned<Element, cosize_v<SmemLayoutB>, 1024> b;
    cute::array_aligned<Element, (kMmaThreads / 32) * kEpiWarpElems, 1024> epi;  // one band per MMA warp
    typename LoadPipeline::SharedStorage load_pipeline;
    typename TilePipeline::SharedStorage tile_pipeline;
    typename MathOrder::SharedStorage math_order;
    int tile_slot[kTileSlots];
  };
  // Stream-K: per MMA warpgroup, whether its segment counted last.
  struct SharedStorageStreamK : SharedStorageOne {
    int stream_k_last[2];
  };
  // Clusters: the leader CTA's loader takes the schedule positions and sends
  // each to the peer's mailbox (st.async, which completes the peer's
  // sched_full); the peer frees a slot by arriving on the leader's sched_empty.
  static constexpr int kSchedSlots = 2;
  struct SharedStorageExchange : SharedStorageOne {
    cute::array_aligned<float, (kExchangeFloats > 0 ? kExchangeFloats : 1), 16> exchange;
  };
  using SharedStorageBase =
      cute::conditional_t<kStreamK, SharedStorageStreamK,
                          cute::conditional_t<kGateExchange, SharedStorageExchange, SharedStorageOne>>;
  struct SharedStorageCluster : SharedStorageBase {
    uint64_t sched_full[kSchedSlots];   // mbarriers (cutlass::arch::ClusterBarrier's static API)
    uint64_t sched_empty[kSchedSlots];
    int sched_slot[kSchedSlots];
  };
  using SharedStorage = cute::conditional_t<(kClusterM > 1), SharedStorageCluster, SharedStorageBase>;
  static constexpr int kSmemBytes = int(sizeof(SharedStorage));
  static_assert(kSmemBytes <= 227 * 1024, "shared memory of one block on sm_90");
};

}  // namespace cusync_sm90
