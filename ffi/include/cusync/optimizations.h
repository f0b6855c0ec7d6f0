// Optimizations of the paper, each selectable (a bit set passed to kernels).
#pragma once

namespace cusync {

enum Optimization : int {
  // W: skip the wait kernel when both grids fit in one wave (no consumer
  // block can then occupy an SM a producer block needs).
  kAvoidWaitKernel = 1 << 0,
  // R: issue the consumer's B-tile load (no dependency) before waiting on the
  // A tile it reads from the producer.
  kReorderTileLoads = 1 << 1,
  // Post with a release store instead of an atomic add where a semaphore has
  // one poster (TileSync).
  kReleaseStorePosts = 1 << 2,
  // Take tiles in the hardware's block order (blockIdx) instead of from the
  // stage's order counter.
  kHardwareBlockOrder = 1 << 3,
  // Serial mode (Hopper kernel): launch the consumer GEMM as a programmatic
  // dependent of the producer, so its prologue and first B loads overlap the
  // producer's tail; it reads A only once the producer has completed.
  kOverlapLaunches = 1 << 4,
};

inline constexpr bool has(int flags, Optimization o) { return (flags & o) != 0; }

}  // namespace cusync
