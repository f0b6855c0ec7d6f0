// Semaphore post and wait, host and device.
//
// Host (the CPU tile executor): std::atomic_ref with release/acquire.
// Device: a post is ordered after the tile's global stores by the caller's
// barrier plus a gpu-scope fence, then published with a release add (or a
// release store where the semaphore has a single poster); a wait spins on an
// acquire load, so the producer's stores are visible to the waiting block.
#pragma once

#include "defs.h"

#if !defined(__CUDA_ARCH__)
#include <atomic>
#endif

namespace cusync {

CUSYNC_HD int semaphore_load_acquire(const int* sem) {
#if defined(__CUDA_ARCH__)
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(sem) : "memory");
  return v;
#else
  return std::atomic_ref<const int>(*sem).load(std::memory_order_acquire);
#endif
}

CUSYNC_HD void semaphore_post_add(int* sem) {
#if defined(__CUDA_ARCH__)
  asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(sem) : "memory");
#else
  std::atomic_ref<int>(*sem).fetch_add(1, std::memory_order_release);
#endif
}

CUSYNC_HD void semaphore_post_store(int* sem, int value) {
#if defined(__CUDA_ARCH__)
  asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(sem), "r"(value) : "memory");
#else
  std::atomic_ref<int>(*sem).store(value, std::memory_order_release);
#endif
}

}  // namespace cusync
