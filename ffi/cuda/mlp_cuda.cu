// XLA FFI handler: the synced MLP on a CUDA GPU.
//
// Same operands, results and attributes as the CPU handler (ffi/cpu/mlp_cpu.cc,
// the reference for semantics), plus XLA's stream. The handler checks the
// call, zeroes the sync buffer on the stream, and hands the buffers to the
// kernel family the plan names.
#include <cuda_runtime.h>

#include <string>

#include "common/mlp_spec.h"
#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/mlp_launch.h"
#include "cusync/sync_layout.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace cusync_cuda {
namespace {

ffi::Error SyncedMlpCuda(cudaStream_t stream, ffi::AnyBuffer x, ffi::AnyBuffer w1, ffi::AnyBuffer b1,
                         ffi::AnyBuffer w2, ffi::AnyBuffer b2, ffi::Result<ffi::AnyBuffer> y,
                         ffi::Result<ffi::AnyBuffer> h, ffi::Result<ffi::Buffer<ffi::S32>> sync,
                         ffi::Dictionary attrs) {
  cusync_ffi::MlpSpec s;
  if (auto e = cusync_ffi::decode_mlp_spec(attrs, x, w1, w2, &s); e.failure()) return e;
  const ffi::DataType dt = x.element_type();
  if (dt != ffi::DataType::F16 && dt != ffi::DataType::BF16) {
    return ffi::Error::InvalidArgument(
        "cusync_jax: the CUDA backend runs float16 and bfloat16 (float32 accumulation); cast x, w1, w2 "
        "and the biases to one of them (float32 operands run on the CPU backend)");
  }
  for (const ffi::AnyBuffer* b : {&w1, &b1, &w2, &b2}) {
    if (b->element_type() != dt)
      return ffi::Error::InvalidArgument("cusync_jax: synced_mlp operands must share one dtype");
  }
  const int slices = s.producer.slices;
  const int64_t T = s.tokens, F = s.ffn, O = s.out;
  if (static_cast<int64_t>(b1.element_count()) != slices * F || static_cast<int64_t>(b2.element_count()) != O)
    return ffi::Error::InvalidArgument("cusync_jax: bias sizes do not match w1/w2 columns");
  if (static_cast<int64_t>(h->element_count()) != T * slices * F ||
      static_cast<int64_t>(y->element_count()) != T * O)
    return ffi::Error::InvalidArgument("cusync_jax: result buffers have the wrong size");
  const cusync::SplitLayout layout = cusync_ffi::mlp_sync_layout(s);
  if (static_cast<int64_t>(sync->element_count()) < layout.words)
    return ffi::Error::InvalidArgument("cusync_jax: sync buffer of " + std::to_string(sync->element_count()) +
                                       " words; the plan needs " + std::to_string(layout.words));
  if (T == 0 || O == 0) return ffi::Error::Success();

  const long long zeroed =
      cusync::words_to_zero(layout, s.mode == cusync_ffi::Mode::kSerial, s.stream_k1 || s.stream_k2);
  if (zeroed > 0)
    CUSYNC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(sync->untyped_data(), 0, zeroed * sizeof(int32_t), stream),
                                "zeroing the sync buffer");

  int device = 0;
  if (auto e = stream_device(stream, &device); e.failure()) return e;
  DeviceFacts facts{};
  if (auto e = device_facts(device, &facts); e.failure()) return e;
  if (facts.major < 8) {
    return ffi::Error::InvalidArgument("cusync_jax: the CUDA backend needs compute capability 8.0 or newer; "
                                       "this GPU is " + std::to_string(facts.major) + "." +
                                       std::to_string(facts.minor));
  }

  const MlpBuffers buffers{x.untyped_data(),  w1.untyped_data(), b1.untyped_data(),
                           w2.untyped_data(), b2.untyped_data(), y->untyped_data(),
                           h->untyped_data(), sync->typed_data(), dt == ffi::DataType::BF16};
  switch (s.kernel) {
    case 0:
      if (s.stream_k1 || s.stream_k2)
        return ffi::Error::InvalidArgument("cusync_jax: stream-K runs on kernel family 1 (Hopper) only");
      if (s.cluster_m != 1)
        return ffi::Error::InvalidArgument("cusync_jax: cluster_m = 2 runs on kernel family 1 (Hopper) only");
      return launch_mlp_sm80(s, buffers, stream, facts.info);
    case 1:
      if (facts.major != 9) {
        return ffi::Error::InvalidArgument("cusync_jax: kernel family 1 (wgmma + TMA) needs a Hopper GPU "
                                           "(compute capability 9.0); use kernel 0 on this one");
      }
      return launch_mlp_sm90(s, buffers, stream, facts.info);
    default:
      return ffi::Error::InvalidArgument("cusync_jax: unknown kernel family " + std::to_string(s.kernel) +
                                         " (0: sm80 mma.sync, 1: sm90 wgmma)");
  }
}

}  // namespace
}  // namespace cusync_cuda

// Registered without the command-buffer trait: XLA runs it outside CUDA
// graphs, which streams mode needs (see mlp_sm80.cu).
XLA_FFI_DEFINE_HANDLER_SYMBOL(CusyncSyncedMlpCuda, cusync_cuda::SyncedMlpCuda,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()  // x [T, H]
                                  .Arg<ffi::AnyBuffer>()  // w1 [H, S*F]
                                  .Arg<ffi::AnyBuffer>()  // b1 [S*F]
                                  .Arg<ffi::AnyBuffer>()  // w2 [F, O]
                                  .Arg<ffi::AnyBuffer>()  // b2 [O]
                                  .Ret<ffi::AnyBuffer>()  // y [T, O]
                                  .Ret<ffi::AnyBuffer>()  // h [T, S*F] (intermediate)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // sync words
                                  .Attrs());
