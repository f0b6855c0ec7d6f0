// Kernel family 2 (Hopper) for the conv pair: both 3x3 convolutions on the
// halo conv (cuda/halo_conv_sm90.cuh), one kernel for every mode; conv 1's
// input has channels in blocks of 64, or 8 (pixel8: an RGB image padded):
//
//   serial   conv 1's tiles, then conv 2's, two launches in stream order
//            (conv 2 a programmatic dependent: its prologue under conv 1's tail)
//   streams  conv 1 on XLA's stream, conv 2 on the side stream behind the
//            wait kernel (cuda/two_streams.h); conv 2's units wait
//   fused    one launch of both convs' tiles in order (cannot deadlock)
//
// Every launch is persistent (a CTA per SM at most). Launches that wait or
// post take their tiles from a counter in the call's sync header; serial
// ones take every grid-th tile from their block index.
#include "cuda/halo_conv_sm90.h"

#include <cutlass/cuda_host_adapter.hpp>

#include <algorithm>
#include <string>

#include "cuda/cuda_check.h"
#include "cuda/device_info.h"
#include "cuda/halo_conv_sm90.cuh"
#include "cuda/two_streams.h"
#include "cusync/sync_layout.h"

namespace cusync_cuda {
namespace {

using xla::ffi::Error;
using cusync_ffi::ConvPairSpec;
using namespace cusync_halo;

bool encode(CUtensorMap* map, bool bf16, const void* ptr, int rank, const cuuint64_t* dims,
            const cuuint64_t* strides, const cuuint32_t* box,
            CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B) {
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  const CUresult r = CUTLASS_CUDA_DRIVER_WRAPPER_CALL(cuTensorMapEncodeTiled)(
      map, bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, rank, const_cast<void*>(ptr),
      dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
      CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

// Conv `ci` of the pair: its input's halo map (TMA fills the box's parts off
// the image with zeros: the SAME padding), its filter's map, epilogue and split
// (its counts and sums in the call's sync buffer, laid out by `layout`).
template <class T>
Error set_conv(const ConvPairSpec& s, const ConvBuffers& b, const cusync::SplitLayout& layout, int ci,
               HaloParams<T>* p) {
  const auto& g = p->tiling;
  const int cin = static_cast<int>(ci == 0 ? s.in_channels : s.mid_channels);
  const int cout = static_cast<int>(ci == 0 ? s.mid_channels : s.out_channels);
  const bool pixel8 = cin == cusync::kHaloPixel8Channels;  // (conv 1 only: check_conv_pair_halo)
  const cuuint64_t pix = cuuint64_t(cin) * sizeof(T);
  // The input as (C, W, H, N), innermost first; strides in bytes of dims 1..3.
  const cuuint64_t xdims[4] = {cuuint64_t(cin), cuuint64_t(s.width), cuuint64_t(s.height), cuuint64_t(s.images)};
  const cuuint64_t xstrides[3] = {pix, cuuint64_t(s.width) * pix, cuuint64_t(s.height) * s.width * pix};
  // (Pixel8: a position's 16 bytes, unswizzled: the wgmma's K-major core matrix rows.)
  const cuuint32_t xbox[4] = {pixel8 ? cuuint32_t(cin) : kC, cuuint32_t(g.bw), cuuint32_t(g.rows),
                              g.paired ? 2u : 1u};  // paired: two images
  // The HWIO filter as (C_out, 9 C_in): a box is one tap's 64 x 64 block
  // (pixel8: rows 0-63 or 64-127 of its 72, the rest zeros).
  const cuuint64_t wdims[2] = {cuuint64_t(cout), cuuint64_t(kTaps) * cin};
  const cuuint64_t wstrides[1] = {cuuint64_t(cout) * sizeof(T)};
  const cuuint32_t wbox[2] = {kC, kC};
  const bool bf16 = std::is_same_v<T, __nv_bfloat16>;
  if (!encode(&p->x[ci], bf16, ci == 0 ? b.x : b.h, 4, xdims, xstrides, xbox,
              pixel8 ? CU_TENSOR_MAP_SWIZZLE_NONE : CU_TENSOR_MAP_SWIZZLE_128B) ||
      !encode(&p->w[ci], bf16, ci == 0 ? b.k1 : b.k2, 2, wdims, wstrides, wbox))
    return Error::Internal("cusync_jax: the CUDA driver refused a TMA descriptor of halo conv " +
                           std::to_string(ci + 1));
  HaloConv<T>& cv = p->conv[ci];
  cv.bias = static_cast<const T*>(ci == 0 ? b.b1 : b.b2);
  cv.residual = ci == 0 ? nullptr : static_cast<const T*>(b.residual);
  cv.out = static_cast<T*>(ci == 0 ? b.h : b.y);
  cv.cb = pixel8 ? 1 : cin / kC;
  cv.pixel8 = pixel8;
  cv.nb = cout / kC;
  cv.out_channels = cout;
  cv.activation = ci == 0 ? s.activation : s.out_activation;  // conv 2's: after its residual
  cv.splits = ci == 0 ? s.splits1 : s.splits2;
  cv.counts = b.sync + (ci == 0 ? layout.counts1 : layout.counts2);
  cv.partials = reinterpret_cast<float*>(b.sync + (ci == 0 ? layout.partials1 : layout.partials2));
  return Error::Success();
}

// p.wait_prior_grid: a programmatic dependent of the stream's previous
// kernel (serial conv 2 behind conv 1): its CTAs may start as conv 1's CTAs
// have issued their loads, set up and load B, and wait for conv 1's
// completion before their first halo.
template <class T, class Pair>
Error launch(const HaloParams<T>& p, int tiles, size_t smem, cudaStream_t stream, const DeviceInfo& device,
             const char* what) {
  auto kernel = halo_conv_instance<T, Pair>(p, tiles, device.sm_count);
  CUSYNC_CUDA_RETURN_IF_ERROR(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
      "raising the halo conv's shared memory limit");
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(std::min(tiles, device.sm_count), 1, 1);
  config.blockDim = dim3(kThreads, 1, 1);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  config.attrs = &attr;
  config.numAttrs = p.wait_prior_grid ? 1 : 0;
  CUSYNC_CUDA_RETURN_IF_ERROR(cudaLaunchKernelEx(&config, kernel, p), what);
  return cuda_error(cudaGetLastError(), what);
}

template <class T, class Pair>
Error run(const ConvPairSpec& s, const ConvBuffers& b, cudaStream_t stream, const DeviceInfo& device) {
  HaloParams<T> p{};
  p.tiling = s.halo_tiling();
  const cusync::SplitLayout layout = cusync_ffi::conv_sync_layout(s);
  if (auto e = set_conv<T>(s, b, layout, 0, &p); e.failure()) return e;
  if (auto e = set_conv<T>(s, b, layout, 1, &p); e.failure()) return e;
  const int positions = p.tiling.tiles();
  p.tiles0 = positions * p.conv[0].nb * p.conv[0].splits;
  const int tiles1 = positions * p.conv[1].nb * p.conv[1].splits;
  p.semaphores = b.sync + cusync::kSyncHeaderWords;
  p.waits_per_tile = s.policy.kind == cusync::PolicyKind::kRowSync;
  // Resident B where each conv has one block of it, so a CTA loads it at
  // most twice; else every stage carries its unit's block.
  p.resident_b = cusync::halo_resident_b(static_cast<int>(s.in_channels), static_cast<int>(s.mid_channels),
                                         static_cast<int>(s.out_channels));
  p.halo_bytes = p.tiling.box_positions() * kRowBytes;
  p.halo_stage_bytes = p.tiling.halo_stage_bytes();
  p.stage_bytes = p.tiling.stage_bytes(p.resident_b);
  p.stages = cusync::halo_stages(p.tiling, p.resident_b, device.max_smem_per_block);  // as many as fit
  if (p.stages < 1)
    return Error::InvalidArgument("cusync_jax: the halo conv needs " +
                                  std::to_string(cusync::halo_smem_bytes(p.resident_b, p.stage_bytes, 1)) +
                                  " bytes of shared memory per block for a " + std::to_string(s.width) +
                                  "-wide image; this GPU offers " + std::to_string(device.max_smem_per_block));
  const size_t smem = cusync::halo_smem_bytes(p.resident_b, p.stage_bytes, p.stages);

  const auto stage_params = [&](int stage, bool synced) {
    HaloParams<T> q = p;
    q.begin = stage == 0 ? 0 : p.tiles0;
    q.end = stage == 0 ? p.tiles0 : p.tiles0 + tiles1;
    // Serial launches schedule their tiles statically: no counter to zero.
    q.counter = synced ? b.sync + (stage == 0 ? cusync::kProducerCounter : cusync::kConsumerCounter) : nullptr;
    q.posts = synced && stage == 0;
    q.waits = synced && stage == 1;
    q.started = synced && stage == 0 ? b.sync + cusync::kProducerStarted : nullptr;
    q.wait_prior_grid = !synced && stage == 1;  // serial conv 2 behind conv 1
    return q;
  };
  switch (s.mode) {
    case cusync_ffi::Mode::kSerial:
      if (auto e = launch<T, Pair>(stage_params(0, false), p.tiles0, smem, stream, device,
                                   "launching the halo conv 1");
          e.failure())
        return e;
      return launch<T, Pair>(stage_params(1, false), tiles1, smem, stream, device, "launching the halo conv 2");
    case cusync_ffi::Mode::kFused: {
      HaloParams<T> q = p;
      q.begin = 0;
      q.end = p.tiles0 + tiles1;
      q.counter = b.sync + cusync::kFusedCounter;
      q.posts = q.waits = 1;
      return launch<T, Pair>(q, q.end, smem, stream, device, "launching the fused halo conv pair");
    }
    case cusync_ffi::Mode::kStreams:
    default: {
      int dev = 0;
      if (auto e = stream_device(stream, &dev); e.failure()) return e;
      const bool fit = persistent_grids_fit(p.tiles0, tiles1, device.sm_count);
      return run_on_two_streams(
          dev, stream, b.sync + cusync::kProducerStarted, needs_wait_kernel(s.optimizations, fit),
          [&](cudaStream_t on) {
            return launch<T, Pair>(stage_params(0, true), p.tiles0, smem, on, device, "launching the halo conv 1");
          },
          [&](cudaStream_t on) {
            return launch<T, Pair>(stage_params(1, true), tiles1, smem, on, device, "launching the halo conv 2");
          });
    }
  }
}

}  // namespace

Error check_conv_pair_halo(const ConvPairSpec& s) {
  const cusync::Stage &P = s.producer, &C = s.consumer;
  const auto tile_ok = [](const cusync::Stage& st, int k) {
    return st.tile_rows == kTileM && st.tile_cols == kC && k == cusync_ffi::kHaloTileK;
  };
  if (!tile_ok(P, s.tile_k1) || !tile_ok(C, s.tile_k2))
    return Error::InvalidArgument("cusync_jax: the halo conv runs tiles 128x64x576 (128 positions, 64 output "
                                  "channels, a 64-channel block's 9 taps); the plan asks for " +
                                  std::to_string(P.tile_rows) + "x" + std::to_string(P.tile_cols) + "x" +
                                  std::to_string(s.tile_k1) + " and " + std::to_string(C.tile_rows) + "x" +
                                  std::to_string(C.tile_cols) + "x" + std::to_string(s.tile_k2));
  if (s.filter_r1 != 3 || s.filter_s1 != 3 || s.filter_r2 != 3 || s.filter_s2 != 3)
    return Error::InvalidArgument("cusync_jax: the halo conv runs 3x3 filters; got " +
                                  std::to_string(s.filter_r1) + "x" + std::to_string(s.filter_s1) + " and " +
                                  std::to_string(s.filter_r2) + "x" + std::to_string(s.filter_s2));
  const bool pixel8 = s.in_channels == cusync::kHaloPixel8Channels;
  if ((s.in_channels % kC && !pixel8) || s.mid_channels % kC || s.out_channels % kC)
    return Error::InvalidArgument("cusync_jax: the halo conv needs channels that are multiples of 64 (in "
                                  "channels also 8: an image padded to 8); got " +
                                  std::to_string(s.in_channels) + ", " + std::to_string(s.mid_channels) + ", " +
                                  std::to_string(s.out_channels));
  // A split divides a conv's input channel blocks evenly (every share the same units).
  if (s.splits1 < 1 || (s.in_channels / kC) % s.splits1 || s.splits2 < 1 || (s.mid_channels / kC) % s.splits2)
    return Error::InvalidArgument("cusync_jax: the halo conv splits a conv along its input channel blocks of 64 "
                                  "evenly; got split_k (" + std::to_string(s.splits1) + ", " +
                                  std::to_string(s.splits2) + ") for " + std::to_string(s.in_channels / kC) +
                                  " and " + std::to_string(s.mid_channels / kC) + " blocks");
  if (pixel8 && s.splits1 > 1)
    return Error::InvalidArgument("cusync_jax: the halo conv does not split a conv over 8 input channels "
                                  "(one channel block); got split_k (" + std::to_string(s.splits1) + ", " +
                                  std::to_string(s.splits2) + ")");
  if (s.policy.kind == cusync::PolicyKind::kStridedSync)
    return Error::InvalidArgument("cusync_jax: the conv pair takes TileSync, RowSync or Conv2DTileSync");
  if (s.activation != cusync::Activation::kRelu && s.activation != cusync::Activation::kIdentity)
    return Error::InvalidArgument("cusync_jax: the halo conv's epilogue applies 'relu' or 'identity' (ResNet's and "
                                  "VGG's); take another kernel for other activations");
  if (s.out_activation != cusync::Activation::kRelu && s.out_activation != cusync::Activation::kIdentity)
    return Error::InvalidArgument("cusync_jax: the halo conv applies out_activation 'relu' or 'identity'");
  if (s.policy.under_wait != 0)
    return Error::InvalidArgument("cusync_jax: the halo conv waits for every tile it reads (no under_wait)");
  if (s.images * s.height * s.width * std::max(s.in_channels, std::max(s.mid_channels, s.out_channels)) >=
      (int64_t{1} << 40))
    return Error::InvalidArgument("cusync_jax: the halo conv's tensors are too large");
  return Error::Success();
}

Error launch_conv_pair_halo(const ConvPairSpec& s, const ConvBuffers& b, cudaStream_t stream,
                            const DeviceInfo& device) {
  if (auto e = check_conv_pair_halo(s); e.failure()) return e;
  if (b.bf16) return run<__nv_bfloat16, __nv_bfloat162>(s, b, stream, device);
  return run<__half, __half2>(s, b, stream, device);
}

}  // namespace cusync_cuda
