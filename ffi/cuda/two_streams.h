// The paper's two-stream execution inside one XLA op: the producer runs on
// XLA's stream, the consumer on a side stream, forked from and joined back to
// XLA's stream with events, so XLA sees a single op on a single stream.
//
//   XLA stream:  ...memset sync... record(fork)  producer ............ wait(join) ...
//   side stream:             wait(fork)  [wait kernel]  consumer  record(join)
//
// The wait kernel spins until the first producer block has set a flag, so no
// consumer block can take an SM before the producer's blocks are queued
// (otherwise consumers that spin on unfinished producer tiles could fill the
// GPU and deadlock).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>

#include "cuda/cuda_check.h"
#include "cusync/optimizations.h"
#include "xla/ffi/api/ffi.h"

namespace cusync_cuda {

// One side stream (non-blocking) and its fork/join events, per device,
// created on first use and kept for the process.
struct SideStream {
  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;
  std::mutex mu;  // a fork..join sequence is enqueued by one host thread at a time
};

xla::ffi::Error side_stream_for(int device, SideStream** out);

// Enqueues on `stream` a one-thread kernel that returns once *flag != 0.
xla::ffi::Error launch_wait_for_flag(const int* flag, cudaStream_t stream);

// True when `stream` is being captured into a CUDA graph.
xla::ffi::Error stream_is_capturing(cudaStream_t stream, bool* capturing);

// Optimization W skips the wait kernel, but only where both grids are
// resident at once: then no consumer block can keep a producer block from an SM.
inline bool needs_wait_kernel(int optimizations, bool both_grids_resident) {
  return !(cusync::has(optimizations, cusync::kAvoidWaitKernel) && both_grids_resident);
}

// Two persistent grids (each at most `resident` CTAs, one per resident unit)
// resident at once.
inline bool persistent_grids_fit(int units0, int units1, int resident) {
  return std::min(units0, resident) + std::min(units1, resident) <= resident;
}

// The fork, producer(stream), [wait kernel on `started`], consumer(side
// stream) and join of one two-stream op (every kernel family's streams
// mode); each callable launches on the stream it is given and returns an
// ffi::Error.
template <class Producer, class Consumer>
xla::ffi::Error run_on_two_streams(int device, cudaStream_t stream, const int* started, bool wait_kernel,
                                   Producer&& producer, Consumer&& consumer) {
  SideStream* side = nullptr;
  if (auto e = side_stream_for(device, &side); e.failure()) return e;
  std::lock_guard<std::mutex> lock(side->mu);
  CUSYNC_CUDA_RETURN_IF_ERROR(cudaEventRecord(side->fork, stream), "recording the fork event");
  CUSYNC_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(side->stream, side->fork, 0), "forking the side stream");
  if (auto e = producer(stream); e.failure()) return e;
  if (wait_kernel) {
    if (auto e = launch_wait_for_flag(started, side->stream); e.failure()) return e;
  }
  if (auto e = consumer(side->stream); e.failure()) return e;
  CUSYNC_CUDA_RETURN_IF_ERROR(cudaEventRecord(side->join, side->stream), "recording the join event");
  CUSYNC_CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(stream, side->join, 0), "joining the side stream");
  return xla::ffi::Error::Success();
}

}  // namespace cusync_cuda
