#include "cuda/two_streams.h"

#include <memory>
#include <unordered_map>

#include "cuda/cuda_check.h"
#include "cusync/semaphore.h"

namespace cusync_cuda {

namespace {

__global__ void wait_for_flag_kernel(const int* flag) {
  while (cusync::semaphore_load_acquire(flag) == 0) __nanosleep(64);
}

}  // namespace

xla::ffi::Error side_stream_for(int device, SideStream** out) {
  static std::mutex mu;
  static std::unordered_map<int, std::unique_ptr<SideStream>> streams;
  std::lock_guard<std::mutex> lock(mu);
  auto& slot = streams[device];
  if (!slot) {
    auto s = std::make_unique<SideStream>();
    int previous = 0;
    CUSYNC_CUDA_RETURN_IF_ERROR(cudaGetDevice(&previous), "reading the current device");
    CUSYNC_CUDA_RETURN_IF_ERROR(cudaSetDevice(device), "selecting the device for the side stream");
    cudaError_t err = cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking);
    if (err == cudaSuccess) err = cudaEventCreateWithFlags(&s->fork, cudaEventDisableTiming);
    if (err == cudaSuccess) err = cudaEventCreateWithFlags(&s->join, cudaEventDisableTiming);
    cudaSetDevice(previous);
    CUSYNC_CUDA_RETURN_IF_ERROR(err, "creating the side stream and its events for streams mode");
    slot = std::move(s);
  }
  *out = slot.get();
  return xla::ffi::Error::Success();
}

xla::ffi::Error launch_wait_for_flag(const int* flag, cudaStream_t stream) {
  wait_for_flag_kernel<<<1, 1, 0, stream>>>(flag);
  CUSYNC_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "launching the wait kernel");
  return xla::ffi::Error::Success();
}

xla::ffi::Error stream_is_capturing(cudaStream_t stream, bool* capturing) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUSYNC_CUDA_RETURN_IF_ERROR(cudaStreamIsCapturing(stream, &status), "querying stream capture");
  *capturing = status != cudaStreamCaptureStatusNone;
  return xla::ffi::Error::Success();
}

}  // namespace cusync_cuda
