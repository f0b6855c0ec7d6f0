// The conv pair's kernels with cuSync hooks: the producer conv posts each
// finished tile of h, the consumer conv waits before each k-block on the
// producer tiles its halo reads. Which semaphores, and how many posts, comes
// from the core (Policy::post_semaphore, conv_dependency, Policy::for_each_wait).
//
//   producer_kernel / consumer_kernel   one tile per block (serial and streams modes)
//   fused_kernel                        persistent blocks take producer tiles,
//                                       then consumer tiles, from one counter
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

template <class T>
__device__ void producer_tile(const ConvPairParams<T>& p, int index, SharedStorage<T>& sm) {
  const cusync::Stage& P = p.producer;
  const cusync::Tile t = tile_for(P, index, p.optimizations);
  const int row0 = P.row_begin(t), col0 = P.col_begin(t);
  conv_tile(p.conv1, p.x, false, p.k1, row0, col0, false, sm, [](int, int) {});
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
__device__ void consumer_tile(const ConvPairParams<T>& p, int index, SharedStorage<T>& sm) {
  const cusync::Stage& C = p.consumer;
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
  conv_tile(p.conv2, p.h, true, p.k2, row0, col0,
            cusync::has(p.optimizations, cusync::kReorderTileLoads), sm, wait);
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

// Every producer tile is handed out before any consumer tile, and producer
// tiles never wait, so the blocks holding consumer tiles always wait on tiles
// that are running or done: no deadlock for any grid size.
template <class T>
__global__ void __launch_bounds__(kThreads) fused_kernel(ConvPairParams<T> p) {
  __shared__ SharedStorage<T> sm;
  const int n1 = p.producer.tile_count(), n2 = p.consumer.tile_count();
  for (;;) {
    const int i = take_tile(p.sync + cusync::kFusedCounter);
    if (i >= n1 + n2) return;
    if (i < n1) producer_tile(p, i, sm);
    else consumer_tile(p, i - n1, sm);
  }
}

}  // namespace conv
}  // namespace cusync_cuda
