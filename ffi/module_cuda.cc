// The nanobind module of the CUDA backend: FFI handler capsules for
// jax.ffi.register_ffi_target(platform="CUDA"), and device facts for tests
// and benchmarks. Importing it makes no driver call.
#include <cuda_runtime.h>
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <stdexcept>
#include <string>

#include "xla/ffi/api/ffi.h"

namespace nb = nanobind;

// Handlers, one per op (ffi/cuda/*.cu).
extern "C" XLA_FFI_Error* CusyncSyncedMlpCuda(XLA_FFI_CallFrame*);
extern "C" XLA_FFI_Error* CusyncSyncedConvPairCuda(XLA_FFI_CallFrame*);
extern "C" XLA_FFI_Error* CusyncGemmCuda(XLA_FFI_CallFrame*);

namespace {

template <typename T>
nb::capsule encapsulate(T* fn) {
  return nb::capsule(reinterpret_cast<void*>(fn), "xla._CUSTOM_CALL_TARGET");
}

int device_attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  if (cudaError_t err = cudaDeviceGetAttribute(&value, attr, device); err != cudaSuccess)
    throw std::runtime_error(std::string("cusync_jax: cudaDeviceGetAttribute failed: ") + cudaGetErrorString(err));
  return value;
}

}  // namespace

NB_MODULE(_cusync_cuda, m) {
  m.doc() = "cusync_jax CUDA backend: XLA FFI handlers";

  m.def("registrations", [] {
    nb::dict d;
    // One line per op handler.
    d["cusync_synced_mlp"] = encapsulate(CusyncSyncedMlpCuda);
    d["cusync_synced_conv_pair"] = encapsulate(CusyncSyncedConvPairCuda);
    d["cusync_gemm"] = encapsulate(CusyncGemmCuda);
    return d;
  });

  m.def(
      "sm_count", [](int device) { return device_attribute(cudaDevAttrMultiProcessorCount, device); },
      nb::arg("device") = 0, "Streaming multiprocessors of a CUDA device.");
  m.def(
      "compute_capability",
      [](int device) {
        return std::to_string(device_attribute(cudaDevAttrComputeCapabilityMajor, device)) + "." +
               std::to_string(device_attribute(cudaDevAttrComputeCapabilityMinor, device));
      },
      nb::arg("device") = 0, "Compute capability of a CUDA device, e.g. '9.0'.");
}
