// The synced-MLP kernel of family 0: producer tiles (h = act(x @ w1 + b1))
// and consumer tiles (y = h @ w2 + b2, h read as silu(gate) * up for SwiGLU)
// on the sm_80 GEMM tile, with cuSync's hooks:
//   schedule  a block takes its position from a sync-buffer counter (or
//             blockIdx); positions [0, P) are producer tiles and [P, P + C)
//             consumer tiles, each mapped through its stage's tile order;
//   post      after a producer tile's stores: barrier, then thread 0 fences
//             and releases the policy's semaphore;
//   wait      before a consumer k-block's A load: thread 0 spins on the
//             policy's semaphores (acquire), then a barrier.
// Every "which semaphore" question is answered by the cuSync core
// (Policy::post_semaphore / for_each_wait / waits_once_per_tile).
#pragma once

#include <climits>

#include "cuda/gemm_sm80_tile.cuh"
#include "cusync/activation.h"
#include "cusync/dependency.h"
#include "cusync/optimizations.h"
#include "cusync/policy.h"
#include "cusync/semaphore.h"
#include "cusync/stage.h"
#include "cusync/sync_layout.h"

namespace cusync_cuda::sm80 {

// One launch's view of a call. Element pointers are untyped so one struct
// serves both dtypes; the kernel casts them.
struct MlpKernelParams {
  const void* x;   // [T, H]
  const void* w1;  // [H, S*F]
  const void* b1;  // [S*F]
  const void* w2;  // [F, O]
  const void* b2;  // [O]
  void* y;         // [T, O]
  void* h;         // [T, S*F]
  int* sync;       // sync words (cusync/sync_layout.h)
  cusync::Stage producer, consumer;
  cusync::Policy policy;
  cusync::Activation activation;
  int hidden, ffn, out;
  int optimizations;
  bool synced;      // posts and waits on (off in serial mode)
  int* counter;     // sync word handing out positions; null: blockIdx.x
  int first, end;   // positions this launch serves: [first, end)
  bool persistent;  // keep taking positions until they run out (fused mode)
};

__device__ __forceinline__ cusync::Tile tile_for(const cusync::Stage& s, int index, bool hardware_order) {
  return hardware_order ? cusync::tile_at(cusync::TileOrder::kRowMajor, index, s.grid_rows(),
                                          s.grid_cols(), s.slices)
                        : s.tile(index);
}

// Waits of one consumer tile, from the policy. A k-block whose semaphores are
// the ones the previous k-block waited on needs no wait of its own (TileSync
// reads one producer tile over several k-blocks), so `active` compares the
// first and last semaphore of consecutive k-blocks.
struct PolicyWaiter {
  const cusync::Stage* producer;
  cusync::Policy policy;
  const int* semaphores;
  int row_begin, row_end, k_total, tile_k;
  bool enabled;
  int previous_first = -1, previous_last = -1;

  __device__ __forceinline__ cusync::Region region(int kb) const {
    const int k0 = kb * tile_k;
    // RowSync: one wait before the first k-block covers all of k.
    const int k1 = policy.waits_once_per_tile() ? k_total : cusync::min_int(k_total, k0 + tile_k);
    return cusync::gemm_dependency(row_begin, row_end, k0, k1);
  }

  __device__ __forceinline__ bool active(int kb) {
    if (!enabled) return false;
    if (policy.waits_once_per_tile()) return kb == 0 && policy.posts_per_semaphore(*producer) > policy.under_wait;
    int first = -1, last = -1;
    policy.for_each_wait(*producer, region(kb), [&](int sem, int) {
      if (first < 0) first = sem;
      last = sem;
    });
    const bool fresh = first != previous_first || last != previous_last;
    previous_first = first;
    previous_last = last;
    return first >= 0 && fresh;
  }

  __device__ __forceinline__ void wait(int kb) const {
    policy.for_each_wait(*producer, region(kb), [&](int sem, int count) {
      while (cusync::semaphore_load_acquire(semaphores + sem) < count) __nanosleep(32);
    });
  }
};

template <class T, class Cfg>
__device__ __forceinline__ void producer_tile(const MlpKernelParams& p, int index, char* smem) {
  const cusync::Stage& stage = p.producer;
  const bool hardware_order = cusync::has(p.optimizations, cusync::kHardwareBlockOrder);
  const cusync::Tile t = tile_for(stage, index, hardware_order);
  if (p.synced && threadIdx.x == 0) {
    // The wait kernel of streams mode releases the consumer once any
    // producer block runs.
    cusync::semaphore_post_store(p.sync + cusync::kProducerStarted, 1);
  }
  const int width = stage.slices * stage.cols;
  TileOperands<T> g{static_cast<const T*>(p.x) + static_cast<int64_t>(stage.row_begin(t)) * p.hidden,
                    nullptr,
                    p.hidden,
                    static_cast<const T*>(p.w1),
                    width,
                    p.hidden,
                    0,
                    stage.row_end(t) - stage.row_begin(t),
                    stage.col_begin(t),
                    stage.col_end(t)};
  Accumulators<Cfg> acc = {};
  NoWait no_wait;
  gemm_tile_mainloop<Cfg, T, false>(g, smem, acc, no_wait, false);
  const int slice = stage.slice_of(t);
  const cusync::Activation act = p.activation;
  store_tile<Cfg, T>(acc, static_cast<T*>(p.h), width, static_cast<const T*>(p.b1), stage.row_begin(t),
                     stage.row_end(t), g.col0, g.col_end,
                     [&](float v) { return cusync::activate(act, slice, v); });
  if (p.synced) {
    __syncthreads();  // every thread's stores of the tile happen before the post
    if (threadIdx.x == 0) {
      __threadfence();
      int* sem = p.sync + cusync::kSyncHeaderWords + p.policy.post_semaphore(stage, t);
      if (cusync::has(p.optimizations, cusync::kReleaseStorePosts) && p.policy.single_poster(stage)) {
        cusync::semaphore_post_store(sem, 1);
      } else {
        cusync::semaphore_post_add(sem);
      }
    }
  }
}

template <class T, class Cfg, bool kSwiglu>
__device__ __forceinline__ void consumer_tile(const MlpKernelParams& p, int index, char* smem) {
  const cusync::Stage& stage = p.consumer;
  const bool hardware_order = cusync::has(p.optimizations, cusync::kHardwareBlockOrder);
  const cusync::Tile t = tile_for(stage, index, hardware_order);
  const int width = p.producer.slices * p.ffn;  // h's row length
  const int row0 = stage.row_begin(t), row1 = stage.row_end(t);
  const T* a = static_cast<const T*>(p.h) + static_cast<int64_t>(row0) * width;
  TileOperands<T> g{a,      kSwiglu ? a + p.ffn : nullptr,
                    width,  static_cast<const T*>(p.w2),
                    p.out,  p.ffn,
                    0,      row1 - row0,
                    stage.col_begin(t), stage.col_end(t)};
  PolicyWaiter waiter{&p.producer, p.policy, p.sync + cusync::kSyncHeaderWords, row0, row1, p.ffn, Cfg::kK,
                      p.synced};
  Accumulators<Cfg> acc = {};
  gemm_tile_mainloop<Cfg, T, kSwiglu>(g, smem, acc, waiter,
                                      cusync::has(p.optimizations, cusync::kReorderTileLoads));
  store_tile<Cfg, T>(acc, static_cast<T*>(p.y), p.out, static_cast<const T*>(p.b2), row0, row1, g.col0,
                     g.col_end, [](float v) { return v; });
}

// kSwiglu: consumer tiles read A as silu(gate) * up (two A tiles per stage).
template <class T, class Cfg, bool kSwiglu>
__global__ void __launch_bounds__(Cfg::kThreads, Cfg::kMinBlocks) mlp_sm80_kernel(const MlpKernelParams p) {
  extern __shared__ __align__(128) char smem[];
  __shared__ int position;
  const int producer_tiles = p.producer.tile_count();
  for (bool first = true;; first = false) {
    // The barrier after the broadcast also keeps the previous tile's last
    // shared-memory reads ahead of this tile's first cp.async writes.
    if (threadIdx.x == 0) {
      position = p.counter ? p.first + atomicAdd(p.counter, 1)
                           : (first ? p.first + static_cast<int>(blockIdx.x) : INT_MAX);
    }
    __syncthreads();
    const int pos = position;
    if (pos >= p.end) return;
    if (pos < producer_tiles) {
      producer_tile<T, Cfg>(p, pos, smem);
    } else {
      consumer_tile<T, Cfg, kSwiglu>(p, pos - producer_tiles, smem);
    }
    if (!p.persistent) return;
  }
}

}  // namespace cusync_cuda::sm80
