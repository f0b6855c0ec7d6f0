#include "cuda/device_info.h"

#include <mutex>
#include <unordered_map>

#include "cuda/cuda_check.h"

namespace cusync_cuda {

xla::ffi::Error device_facts(int device, DeviceFacts* out) {
  static std::mutex mu;
  static std::unordered_map<int, DeviceFacts> cache;
  std::lock_guard<std::mutex> lock(mu);
  if (auto it = cache.find(device); it != cache.end()) {
    *out = it->second;
    return xla::ffi::Error::Success();
  }
  DeviceFacts f{};
  CUSYNC_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&f.info.sm_count, cudaDevAttrMultiProcessorCount, device),
                              "querying the SM count");
  CUSYNC_CUDA_RETURN_IF_ERROR(
      cudaDeviceGetAttribute(&f.info.max_smem_per_block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
      "querying the shared-memory limit");
  CUSYNC_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&f.major, cudaDevAttrComputeCapabilityMajor, device),
                              "querying the compute capability");
  CUSYNC_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(&f.minor, cudaDevAttrComputeCapabilityMinor, device),
                              "querying the compute capability");
  cache.emplace(device, f);
  *out = f;
  return xla::ffi::Error::Success();
}

xla::ffi::Error stream_device(cudaStream_t stream, int* device) {
  CUSYNC_CUDA_RETURN_IF_ERROR(cudaStreamGetDevice(stream, device), "finding the device of XLA's stream");
  return xla::ffi::Error::Success();
}

}  // namespace cusync_cuda
