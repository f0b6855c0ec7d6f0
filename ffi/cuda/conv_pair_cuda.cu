// XLA FFI handler: the synced conv pair on a CUDA GPU (f16 / bf16).
//
// Decodes the call (ConvPairSpec), zeroes the sync words on XLA's stream and
// launches the pair in the plan's mode:
//   serial   producer kernel, then consumer kernel, in stream order (StreamSync)
//   streams  the paper's scheme (cuda/two_streams.h): the producer on XLA's
//            stream; on a side stream forked and joined with events, a wait
//            kernel (until the producer has blocks running), then the consumer
//   fused    one persistent kernel (cannot deadlock)
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "common/conv_spec.h"
#include "cuda/conv_pair_kernels.cuh"
#include "cuda/conv_sm90.h"
#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/halo_conv_sm90.h"
#include "cuda/two_streams.h"
#include "cusync/optimizations.h"
#include "cusync/sync_layout.h"
#include "xla/ffi/api/ffi.h"

namespace ffi = xla::ffi;

namespace cusync_cuda {
namespace {

// Blocks of `kernel` that fit on one SM (the kernels use static shared memory only).
template <class K>
ffi::Error blocks_per_sm(K kernel, int* blocks) {
  CUSYNC_CUDA_RETURN_IF_ERROR(cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, kernel, conv::kThreads, 0),
                              "querying the conv kernels' occupancy");
  *blocks = std::max(*blocks, 1);
  return ffi::Error::Success();
}

// The paper's two streams (cuda/two_streams.h): the producer on XLA's stream,
// the wait kernel and the consumer on the side stream.
template <class T>
ffi::Error run_streams(const cusync_ffi::ConvPairSpec& s, const conv::ConvPairParams<T>& params, int slots,
                       int device, cudaStream_t stream) {
  const int n1 = s.producer.tile_count() * s.splits1, n2 = s.consumer.tile_count() * s.splits2;
  return run_on_two_streams(
      device, stream, params.sync + cusync::kProducerStarted, needs_wait_kernel(s.optimizations, n1 + n2 <= slots),
      [&](cudaStream_t on) {
        conv::producer_kernel<T><<<n1, conv::kThreads, 0, on>>>(params);
        return cuda_error(cudaGetLastError(), "launching the conv producer kernel (streams)");
      },
      [&](cudaStream_t on) {
        conv::consumer_kernel<T><<<n2, conv::kThreads, 0, on>>>(params);
        return cuda_error(cudaGetLastError(), "launching the conv consumer kernel (streams)");
      });
}

template <class T>
ffi::Error launch(const cusync_ffi::ConvPairSpec& s, const conv::ConvPairParams<T>& params,
                  cudaStream_t stream) {
  int device = 0;
  if (auto e = stream_device(stream, &device); e.failure()) return e;
  DeviceFacts facts{};
  if (auto e = device_facts(device, &facts); e.failure()) return e;
  const int n1 = s.producer.tile_count() * s.splits1, n2 = s.consumer.tile_count() * s.splits2;
  int per_sm = 0;
  switch (s.mode) {
    case cusync_ffi::Mode::kSerial:
      conv::producer_kernel<T><<<n1, conv::kThreads, 0, stream>>>(params);
      CUSYNC_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "launching the conv producer kernel (serial)");
      conv::consumer_kernel<T><<<n2, conv::kThreads, 0, stream>>>(params);
      CUSYNC_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "launching the conv consumer kernel (serial)");
      return ffi::Error::Success();
    case cusync_ffi::Mode::kStreams:
      if (auto e = blocks_per_sm(conv::consumer_kernel<T>, &per_sm); e.failure()) return e;
      return run_streams(s, params, facts.info.sm_count * per_sm, device, stream);
    case cusync_ffi::Mode::kFused:
    default: {
      if (auto e = blocks_per_sm(conv::fused_kernel<T>, &per_sm); e.failure()) return e;
      const int grid = std::min(n1 + n2, facts.info.sm_count * per_sm);
      conv::fused_kernel<T><<<grid, conv::kThreads, 0, stream>>>(params);
      CUSYNC_CUDA_RETURN_IF_ERROR(cudaGetLastError(), "launching the fused conv-pair kernel");
      return ffi::Error::Success();
    }
  }
}

ffi::Error SyncedConvPairCuda(cudaStream_t stream, ffi::AnyBuffer x, ffi::AnyBuffer k1, ffi::AnyBuffer b1,
                              ffi::AnyBuffer k2, ffi::AnyBuffer b2, ffi::AnyBuffer residual,
                              ffi::Result<ffi::AnyBuffer> y, ffi::Result<ffi::AnyBuffer> h,
                              ffi::Result<ffi::Buffer<ffi::S32>> sync, ffi::Dictionary attrs) {
  cusync_ffi::ConvPairSpec s;
  if (auto e = cusync_ffi::decode_conv_pair_spec(attrs, x, k1, k2, residual, &s); e.failure()) return e;
  const ffi::DataType dt = x.element_type();
  if (dt != ffi::DataType::F16 && dt != ffi::DataType::BF16)
    return ffi::Error::InvalidArgument("cusync_jax: the CUDA conv pair runs float16 and bfloat16");
  // Only the halo conv's epilogue applies an activation after the residual
  // (the Python op applies it after the call for the other kernels).
  if (s.kernel != cusync_ffi::kHaloConvKernel && s.out_activation != cusync::Activation::kIdentity)
    return ffi::Error::InvalidArgument("cusync_jax: out_activation is applied in the epilogue of the halo conv "
                                       "(kernel family 2) only; this plan runs kernel family " +
                                       std::to_string(s.kernel));
  for (const ffi::AnyBuffer* b : {&k1, &b1, &k2, &b2, &residual}) {
    if (b->element_type() != dt)
      return ffi::Error::InvalidArgument("cusync_jax: synced_conv_pair operands must share one dtype");
  }
  if (static_cast<int64_t>(b1.element_count()) != s.mid_channels ||
      static_cast<int64_t>(b2.element_count()) != s.out_channels)
    return ffi::Error::InvalidArgument("cusync_jax: b1/b2 sizes do not match k1/k2 output channels");
  if (static_cast<int64_t>(h->element_count()) != s.pixels() * s.mid_channels ||
      static_cast<int64_t>(y->element_count()) != s.pixels() * s.out_channels)
    return ffi::Error::InvalidArgument("cusync_jax: result buffers have the wrong size");
  const cusync::SplitLayout layout = cusync_ffi::conv_sync_layout(s);
  if (static_cast<int64_t>(sync->element_count()) < layout.words)
    return ffi::Error::InvalidArgument("cusync_jax: sync buffer smaller than the plan needs");
  const cusync::Stage& P = s.producer;
  const cusync::Stage& C = s.consumer;
  if (s.kernel == 1 || s.kernel == cusync_ffi::kHaloConvKernel) {
    // Kernel family 1: the Hopper GEMM-chain kernel with an im2col A; 2: the halo conv.
    const bool halo = s.kernel == cusync_ffi::kHaloConvKernel;
    if (auto e = halo ? check_conv_pair_halo(s) : check_conv_pair_sm90(s); e.failure()) return e;
    int device = 0;
    if (auto e = stream_device(stream, &device); e.failure()) return e;
    DeviceFacts facts{};
    if (auto e = device_facts(device, &facts); e.failure()) return e;
    if (facts.major != 9)
      return ffi::Error::InvalidArgument(std::string("cusync_jax: the Hopper conv (kernel family ") +
                                         (halo ? "2" : "1") + ") runs on compute capability 9.0; this GPU is " +
                                         std::to_string(facts.major) + "." +
                                         std::to_string(facts.minor));
    const long long zeroed =
        cusync::words_to_zero(layout, s.mode == cusync_ffi::Mode::kSerial, s.splits1 > 1 || s.splits2 > 1);
    if (zeroed > 0)
      CUSYNC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(sync->typed_data(), 0, zeroed * sizeof(int), stream),
                                  "zeroing the sync words");
    if (s.pixels() == 0 || s.out_channels == 0) return ffi::Error::Success();
    const ConvBuffers buffers{x.untyped_data(), k1.untyped_data(), b1.untyped_data(), k2.untyped_data(),
                              b2.untyped_data(), s.residual ? residual.untyped_data() : nullptr,
                              h->untyped_data(), y->untyped_data(), sync->typed_data(),
                              dt == ffi::DataType::BF16};
    return halo ? launch_conv_pair_halo(s, buffers, stream, facts.info)
                : launch_conv_pair_sm90(s, buffers, stream, facts.info);
  }
  if (P.tile_rows != conv::kTileM || P.tile_cols != conv::kTileN || s.tile_k1 != conv::kTileK ||
      C.tile_rows != conv::kTileM || C.tile_cols != conv::kTileN || s.tile_k2 != conv::kTileK) {
    return ffi::Error::InvalidArgument(
        "cusync_jax: the CUDA conv pair is compiled for tiles " + std::to_string(conv::kTileM) + "x" +
        std::to_string(conv::kTileN) + "x" + std::to_string(conv::kTileK));
  }
  if (s.pixels() > (int64_t{1} << 30) / std::max<int64_t>({s.in_channels, s.mid_channels, s.out_channels}))
    return ffi::Error::InvalidArgument("cusync_jax: the CUDA conv pair indexes pixels with 32-bit ints");

  // The semaphores and split counts; split-K's partial sums are written before they are read.
  CUSYNC_CUDA_RETURN_IF_ERROR(cudaMemsetAsync(sync->typed_data(), 0, layout.zeroed * sizeof(int), stream),
                              "zeroing the sync words");
  if (s.pixels() == 0 || s.out_channels == 0) return ffi::Error::Success();

  const conv::ConvShape conv1{static_cast<int>(s.images), static_cast<int>(s.height), static_cast<int>(s.width),
                              static_cast<int>(s.in_channels), static_cast<int>(s.mid_channels),
                              s.filter_r1, s.filter_s1};
  const conv::ConvShape conv2{static_cast<int>(s.images), static_cast<int>(s.height), static_cast<int>(s.width),
                              static_cast<int>(s.mid_channels), static_cast<int>(s.out_channels),
                              s.filter_r2, s.filter_s2};
  auto run = [&](auto tag) {
    using T = decltype(tag);
    conv::ConvPairParams<T> p{conv1,
                              conv2,
                              static_cast<const T*>(x.untyped_data()),
                              static_cast<const T*>(k1.untyped_data()),
                              static_cast<const T*>(b1.untyped_data()),
                              static_cast<const T*>(k2.untyped_data()),
                              static_cast<const T*>(b2.untyped_data()),
                              s.residual ? static_cast<const T*>(residual.untyped_data()) : nullptr,
                              static_cast<T*>(h->untyped_data()),
                              static_cast<T*>(y->untyped_data()),
                              sync->typed_data(),
                              P,
                              C,
                              s.splits1,
                              s.splits2,
                              sync->typed_data() + layout.counts1,
                              sync->typed_data() + layout.counts2,
                              reinterpret_cast<float*>(sync->typed_data() + layout.partials1),
                              reinterpret_cast<float*>(sync->typed_data() + layout.partials2),
                              s.policy,
                              s.activation,
                              s.optimizations,
                              s.mode != cusync_ffi::Mode::kSerial};
    return launch<T>(s, p, stream);
  };
  return dt == ffi::DataType::BF16 ? run(__nv_bfloat16{}) : run(__half{});
}

}  // namespace
}  // namespace cusync_cuda

XLA_FFI_DEFINE_HANDLER_SYMBOL(CusyncSyncedConvPairCuda, cusync_cuda::SyncedConvPairCuda,
                              ffi::Ffi::Bind()
                                  .Ctx<ffi::PlatformStream<cudaStream_t>>()
                                  .Arg<ffi::AnyBuffer>()  // x [N, H, W, C0]
                                  .Arg<ffi::AnyBuffer>()  // k1 [R1, S1, C0, C1]
                                  .Arg<ffi::AnyBuffer>()  // b1 [C1]
                                  .Arg<ffi::AnyBuffer>()  // k2 [R2, S2, C1, C2]
                                  .Arg<ffi::AnyBuffer>()  // b2 [C2]
                                  .Arg<ffi::AnyBuffer>()  // residual [N, H, W, C2] or empty
                                  .Ret<ffi::AnyBuffer>()  // y [N, H, W, C2]
                                  .Ret<ffi::AnyBuffer>()  // h [N, H, W, C1] (intermediate)
                                  .Ret<ffi::Buffer<ffi::S32>>()  // sync words (semaphores)
                                  .Attrs());
