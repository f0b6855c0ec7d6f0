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

#include <mutex>

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

}  // namespace cusync_cuda
