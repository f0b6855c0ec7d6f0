// The conv pair's kernels with cuSync hooks: the producer conv posts each
// finished tile of h, the consumer conv waits before each k-block on the
// producer tiles its halo reads. Which semaphores, and how many posts, comes
// from the core (Policy::post_semaphore, conv_dependency, Policy::for_each_wait).
//
//   producer_kernel / consumer_kernel   one schedule position per block (serial and streams modes)
//   fused_kernel                        persistent blocks take producer positions,
//                                       then consumer positions, from one counter
//
// Split-K: a stage's tile is `splits` consecutive schedule positions, each
// a share of its k-blocks. Every share stores its fp32 sums and counts
// itself; the share that counts last adds the others' and runs the epilogue
// (and, in the producer, the post). No share waits for another.
#pragma once

#include "cuda/conv_implicit_gemm.cuh"
#include "cusync/activation.h"
#include "cusync/dependency.h"
#include "cusync/optimizations.h"
#include "cusync/policy.h"
#include "cusync/semaphore.h"
#include "cusync/stage.h"
#include "cusync/sync_layout.h"

namespace cusync_cuda {
namespace conv {

template <class T>
struct ConvPairParams {
  ConvShape conv1, conv2;  // x -> h, h -> y
  const T* x;
  const T* k1;
  const T* b1;
  const T* k2;
  const T* b2;
  const T* residual;  // nullptr when there is none
  T* h;
  T* y;
  int* sync;  // header words then semaphores (cusync/sync_layout.h), zeroed
  cusync::Stage producer, consumer;
  int splits1, splits2;          // shares per producer / consumer tile (1: none)
  int* counts1;                  // split-K: shares done per producer tile (zeroed)
  int* counts2;                  //   ... per consumer tile
  float* partials1;              // split-K: [tiles][splits][kTileM * kTileN] fp32 sums
  float* partials2;
  cusync::Policy policy;
  cusync::Activation activation;
  int optimizations;
  bool waits;  // false in serial mode (stream order already synchronizes)
};

// The next schedule position of a stage, shared with the whole block.
__device__ __forceinline__ int take_tile(int* counter) {
  __shared__ int index;
  __syncthreads();  // the previous value has been read by every thread
  if (threadIdx.x == 0) index = atomicAdd(counter, 1);
  __syncthreads();
  return index;
}

__device__ __forceinline__ cusync::Tile tile_for(const cusync::Stage& st, int index, int optimizations) {
  return cusync::has(optimizations, cusync::kHardwareBlockOrder)
             ? cusync::tile_at(cusync::TileOrder::kRowMajor, index, st.grid_rows(), st.grid_cols(), 1)
             : st.tile(index);
}

// Share `split` of k-blocks [0, k_blocks): the same cut the host and the
// other shares of the tile make.
__device__ __forceinline__ int share_begin(int split, int splits, int k_blocks) {
  return static_cast<int>(static_cast<long long>(split) * k_blocks / splits);
}

// Split-K: stores this share's sums (sm.c) in its slot and counts it; the
// share that counts last adds every other slot into sm.c and returns true.
template <class T>
__device__ bool combine_shares(float* partials, int* count, int split, int splits, SharedStorage<T>& sm) {
  __shared__ int last;
  constexpr int kVec = kTileM * kTileN / 4;  // float4s per tile
  float4* const slots = reinterpret_cast<float4*>(partials);
  for (int i = threadIdx.x; i < kVec; i += kThreads) {
    const int r = i / (kTileN / 4), c = (i % (kTileN / 4)) * 4;
    slots[static_cast<int64_t>(split) * kVec + i] = make_float4(sm.c[r][c], sm.c[r][c + 1], sm.c[r][c + 2],
                                                                sm.c[r][c + 3]);
  }
  __syncthreads();  // every thread's sums are stored
  if (threadIdx.x == 0) {
    __threadfence();
    int before;
    asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], 1;" : "=r"(before) : "l"(count) : "memory");
    last = before == splits - 1;
  }
  __syncthreads();  // the verdict, and for the last share the acquire, before every thread's reads
  if (!last) return false;
  for (int s = 0; s < splits; ++s) {
    if (s == split) continue;
    for (int i = threadIdx.x; i < kVec; i += kThreads) {
      const int r = i / (kTileN / 4), c = (i % (kTileN / 4)) * 4;
      const float4 v = __ldcg(slots + static_cast<int64_t>(s) * kVec + i);  // written on other SMs
      sm.c[r][c] += v.x;
      sm.c[r][c + 1] += v.y;
      sm.c[r][c + 2] += v.z;
      sm.c[r][c + 3] += v.w;
    }
  }
  __syncthreads();
  return true;
}

template <class T>
__device__ void producer_tile(const ConvPairParams<T>& p, int position, SharedStorage<T>& sm) {
  const cusync::Stage& P = p.producer;
  const int index = position / p.splits1, split = position % p.splits1;
  const cusync::Tile t = tile_for(P, index, p.optimizations);
  const int row0 = P.row_begin(t), col0 = P.col_begin(t);
  const int k_blocks = conv_k_blocks(p.conv1);
  conv_tile(p.conv1, p.x, false, p.k1, row0, col0, share_begin(split, p.splits1, k_blocks),
            share_begin(split + 1, p.splits1, k_blocks), false, sm, [](int, int) {});
  if (p.splits1 > 1 &&
      !combine_shares(p.partials1 + static_cast<int64_t>(index) * p.splits1 * kTileM * kTileN,
                      p.counts1 + index, split, p.splits1, sm))
    return;
  const int rows = P.row_end(t) - row0, C1 = p.conv1.out_channels;
  for (int i = threadIdx.x; i < kTileM * kTileN; i += kThreads) {
    const int r = i / kTileN, c = i % kTileN;
    if (r < rows && col0 + c < C1) {
      const float v = sm.c[r][c] + to_float(p.b1[col0 + c]);
      p.h[static_cast<int64_t>(row0 + r) * C1 + col0 + c] = from_float<T>(cusync::activate(p.activation, 0, v));
    }
  }
  // post: every thread's stores, then one fenced release by thread 0.
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    int* sem = p.sync + cusync::kSyncHeaderWords + p.policy.post_semaphore(P, t);
    if (cusync::has(p.optimizations, cusync::kReleaseStorePosts) && p.policy.single_poster(P))
      cusync::semaphore_post_store(sem, 1);
    else
      cusync::semaphore_post_add(sem);
  }
}

template <class T>
__device__ void consumer_tile(const ConvPairParams<T>& p, int position, SharedStorage<T>& sm) {
  const cusync::Stage& C = p.consumer;
  const int index = position / p.splits2, split = position % p.splits2;
  const cusync::Tile t = tile_for(C, index, p.optimizations);
  const int row0 = C.row_begin(t), row1 = C.row_end(t), col0 = C.col_begin(t);
  const cusync::ConvGeometry g{p.conv2.height, p.conv2.width, p.conv2.in_channels, p.conv2.filter_r,
                               p.conv2.filter_s};
  const int K = p.conv2.filter_r * p.conv2.filter_s * p.conv2.in_channels;
  const bool once = p.policy.waits_once_per_tile();
  bool waited = false;
  auto wait = [&](int k_begin, int k_end) {
    if (!p.waits || (once && waited)) return;
    waited = true;
    if (threadIdx.x == 0) {
      // RowSync: the first wait covers every tap and channel of the halo.
      const cusync::Region region =
          cusync::conv_dependency(g, p.conv2.images, row0, row1, once ? 0 : k_begin, once ? K : k_end);
      const int* sems = p.sync + cusync::kSyncHeaderWords;
      p.policy.for_each_wait(p.producer, region, [&](int sem, int count) {
        while (cusync::semaphore_load_acquire(sems + sem) < count) __nanosleep(64);
      });
    }
    __syncthreads();
  };
  const int k_blocks = conv_k_blocks(p.conv2);
  conv_tile(p.conv2, p.h, true, p.k2, row0, col0, share_begin(split, p.splits2, k_blocks),
            share_begin(split + 1, p.splits2, k_blocks), cusync::has(p.optimizations, cusync::kReorderTileLoads),
            sm, wait);
  if (p.splits2 > 1 &&
      !combine_shares(p.partials2 + static_cast<int64_t>(index) * p.splits2 * kTileM * kTileN,
                      p.counts2 + index, split, p.splits2, sm))
    return;
  const int rows = row1 - row0, C2 = p.conv2.out_channels;
  for (int i = threadIdx.x; i < kTileM * kTileN; i += kThreads) {
    const int r = i / kTileN, c = i % kTileN;
    if (r < rows && col0 + c < C2) {
      const int64_t o = static_cast<int64_t>(row0 + r) * C2 + col0 + c;
      float v = sm.c[r][c] + to_float(p.b2[col0 + c]);
      if (p.residual != nullptr) v += to_float(p.residual[o]);
      p.y[o] = from_float<T>(v);
    }
  }
}

template <class T>
__global__ void __launch_bounds__(kThreads) producer_kernel(ConvPairParams<T> p) {
  __shared__ SharedStorage<T> sm;
  const int index = cusync::has(p.optimizations, cusync::kHardwareBlockOrder)
                        ? static_cast<int>(blockIdx.x)
                        : take_tile(p.sync + cusync::kProducerCounter);
  // Tells the wait kernel the producer has blocks on the SMs.
  if (index == 0 && threadIdx.x == 0) cusync::semaphore_post_store(p.sync + cusync::kProducerStarted, 1);
  producer_tile(p, index, sm);
}

template <class T>
__global__ void __launch_bounds__(kThreads) consumer_kernel(ConvPairParams<T> p) {
  __shared__ SharedStorage<T> sm;
  const int index = cusync::has(p.optimizations, cusync::kHardwareBlockOrder)
                        ? static_cast<int>(blockIdx.x)
                        : take_tile(p.sync + cusync::kConsumerCounter);
  consumer_tile(p, index, sm);
}

// Every producer position is handed out before any consumer position, and
// producer positions never wait (nor do shares wait for each other), so the
// blocks holding consumer tiles always wait on tiles that are running or
// done: no deadlock for any grid size.
template <class T>
__global__ void __launch_bounds__(kThreads) fused_kernel(ConvPairParams<T> p) {
  __shared__ SharedStorage<T> sm;
  const int n1 = p.producer.tile_count() * p.splits1, n2 = p.consumer.tile_count() * p.splits2;
  for (;;) {
    const int i = take_tile(p.sync + cusync::kFusedCounter);
    if (i >= n1 + n2) return;
    if (i < n1) producer_tile(p, i, sm);
    else consumer_tile(p, i - n1, sm);
  }
}

}  // namespace conv
}  // namespace cusync_cuda
