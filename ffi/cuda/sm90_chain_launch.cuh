// Host side of the Hopper GEMM-chain kernel: builds the TMA descriptors of a
// GEMM stage and launches a range of the schedule.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <mutex>

#include "cuda/sm90_chain_kernel.cuh"
#include "cusync/sync_layout.h"

namespace cusync_sm90 {

// TMA needs 16-byte aligned bases and row strides.
inline bool tma_compatible(const void* base, long long row_stride_elems, int elem_bytes) {
  return reinterpret_cast<uintptr_t>(base) % 16 == 0 && (row_stride_elems * elem_bytes) % 16 == 0;
}

// A stage's tiling and its precomputed divisors, set together so that the
// kernel never maps positions through a stale copy of either.
template <class Cfg>
void set_tiling(GemmStage<Cfg>& g, const cusync::Stage& tiling) {
  g.tiling = tiling;
  g.divisors = cusync::StageDivisors(tiling);
}

// out[rows, :] (tiles of `tiling`) = activation(A @ B + bias).
// A: [rows, k] with row stride a_ld. B: [k, n_all] row-major.
template <class Cfg>
GemmStage<Cfg> make_gemm_stage(typename Cfg::Element const* a, int rows, int k, int a_ld,
                               typename Cfg::Element const* b, int n_all, typename Cfg::Element* out,
                               int out_ld, typename Cfg::Element const* bias, cusync::Stage tiling,
                               cusync::Activation activation) {
  GemmStage<Cfg> g{};
  g.tma_a = Cfg::make_tma_a(a, rows, k, a_ld);
  g.tma_b = Cfg::make_tma_b(b, n_all, k, n_all);
  // Clusters: each CTA multicasts one half of the B tile through this view.
  if constexpr (Cfg::kClusterM > 1) g.tma_gate = Cfg::make_tma_b_half(b, n_all, k, n_all);
  g.rows = rows;
  g.k = k;
  g.n_all = n_all;
  g.a_ld = a_ld;
  g.out = out;
  g.out_ld = out_ld;
  // out is [rows, n_all]; elsewhere (unaligned) the epilogue stores directly.
  g.tma_store = Cfg::kTmaStore && tma_compatible(out, out_ld, sizeof(typename Cfg::Element));
  if (g.tma_store) g.tma_out = Cfg::make_tma_out(out, rows, n_all, out_ld);
  g.bias = bias;
  g.bias_up = nullptr;
  set_tiling(g, tiling);
  g.activation = activation;
  return g;
}

// The SwiGLU producer (Cfg::kSwiglu): h[rows, ffn] (row stride ffn) =
// silu(x @ gate + b1[:ffn]) * (x @ up + b1[ffn:]), where w1 = [gate | up] is
// [k, 2 ffn] and b1 is [2 ffn] or null. `tiling` covers h: tiles of
// kTileN/2 columns, one slice.
template <class Cfg>
GemmStage<Cfg> make_swiglu_producer_stage(typename Cfg::Element const* x, int rows, int k,
                                          typename Cfg::Element const* w1, int ffn, typename Cfg::Element* h,
                                          typename Cfg::Element const* b1, cusync::Stage tiling) {
  static_assert(Cfg::kSwiglu);
  // The plain stage's fields, with B replaced by the two half views below
  // (its own B view, w1 read as [k, ffn] of row stride ffn, is never used).
  GemmStage<Cfg> g = make_gemm_stage<Cfg>(x, rows, k, k, w1, ffn, h, ffn, b1, tiling,
                                          cusync::Activation::kSwiglu);
  // Two views of width ffn, row stride 2 ffn: a ragged last tile reads
  // zeros, never the other half's columns.
  g.tma_gate = Cfg::make_tma_b_half(w1, ffn, k, 2 * ffn);
  g.tma_up = Cfg::make_tma_b_half(w1 + ffn, ffn, k, 2 * ffn);
  g.bias_up = b1 != nullptr ? b1 + ffn : nullptr;
  return g;
}

// The schedule of a launch that runs one GEMM of a pair on its own (serial
// and streams modes): stage 0 (producer) or 1 (consumer, whose waits read the
// producer's tiling from stage[0]), on the pair's sync words. synced: the
// producer posts (and flags that it runs, for the wait kernel), the
// consumer waits.
template <class Cfg>
void single_stage_schedule(ChainParams<Cfg>& p, const GemmStage<Cfg>& g, int stage,
                           const cusync::Stage& producer_tiling, bool synced, int* sync) {
  p.stage[0] = p.stage[1] = g;
  if (stage == 1) set_tiling(p.stage[0], producer_tiling);
  const int positions = schedule_positions<Cfg>(g.tiling);
  p.tiles0 = stage == 0 ? positions : 0;
  p.begin = 0;
  p.end = positions;
  // Serial launches wait on nothing: a static schedule, no counter to zero.
  p.counter = synced ? sync + (stage == 0 ? cusync::kProducerCounter : cusync::kConsumerCounter) : nullptr;
  p.producer_posts = p.consumer_waits = synced;
  if (synced && stage == 0) p.started = sync + cusync::kProducerStarted;
}

// A launch of one stage run stream-K on `sk` (a Cfg::kStreamK
// configuration): its tiles' segment counts and fp32 partial sums where the
// call's sync layout puts that stage's.
template <class Cfg>
void run_stream_k(ChainParams<Cfg>& p, const cusync::StreamK& sk, int stage, const cusync::SplitLayout& layout,
                  int* sync) {
  static_assert(Cfg::kStreamK);
  p.stream_k = sk;
  p.stream_k_stage = stage;
  p.stream_k_counts = sync + (stage == 0 ? layout.counts1 : layout.counts2);
  p.stream_k_partials = reinterpret_cast<float*>(sync + (stage == 0 ? layout.partials1 : layout.partials2));
  p.end = kStreamKDone;
}

// The launch attribute of Cfg's 2x1 clusters.
template <class Cfg>
cudaLaunchAttribute cluster_attribute() {
  cudaLaunchAttribute a{};
  a.id = cudaLaunchAttributeClusterDimension;
  a.val.clusterDim.x = Cfg::kClusterM;
  a.val.clusterDim.y = 1;
  a.val.clusterDim.z = 1;
  return a;
}

// One convolution of an implicit-GEMM pair (Cfg::kConvA): out[pixels, n_all]
// = activation(conv(x, w) + bias) (+ residual), x [images, height, width, c]
// NHWC, w [r, s, c, n_all] HWIO viewed as B [r * s * c, n_all], stride 1, SAME.
// c must be a multiple of Cfg::kTileK (a k-block is one tap's channel block)
// and of 8 with n_all (16-byte TMA strides); r = s = 1 or 3. Fails (returns
// false) where the driver refuses the im2col descriptor.
template <class Cfg>
bool make_conv_stage(GemmStage<Cfg>* out_stage, typename Cfg::Element const* x, int images, int height, int width,
                     int c, int filter, typename Cfg::Element const* w, int n_all, typename Cfg::Element* out,
                     typename Cfg::Element const* bias, typename Cfg::Element const* residual,
                     cusync::Stage tiling, cusync::Activation activation) {
  static_assert(Cfg::kConvA);
  using E = typename Cfg::Element;
  const int pixels = images * height * width;
  const int k = filter * filter * c;
  // The epilogue and the schedule are the GEMM's; A's tiled view (x as
  // [pixels, c]) goes unused, and the k loop and B run over every tap.
  GemmStage<Cfg> g = make_gemm_stage<Cfg>(x, pixels, c, c, w, n_all, out, n_all, bias, tiling, activation);
  g.k = k;
  g.tma_b = Cfg::make_tma_b(w, n_all, k, n_all);  // every tap's rows of B, not only the first c
  auto& a = g.conv;
  a.height = height;
  a.width = width;
  a.images = images;
  a.channel_blocks = c / Cfg::kTileK;
  a.filter_s = filter;
  a.corner = -(filter / 2);
  a.residual = residual;
  // dims and strides innermost first: (c, w, h, n); strides in bytes of dims 1..3.
  const cuuint64_t dims[4] = {cuuint64_t(c), cuuint64_t(width), cuuint64_t(height), cuuint64_t(images)};
  const cuuint64_t strides[3] = {cuuint64_t(c) * sizeof(E), cuuint64_t(width) * c * sizeof(E),
                                 cuuint64_t(height) * width * c * sizeof(E)};
  // The box of base pixels (w, h) at offset 0: [corner, extent - 1 + corner],
  // so the output has the input's size and the taps span 0..filter-1.
  const int lower[2] = {a.corner, a.corner}, upper[2] = {a.corner, a.corner};
  const cuuint32_t element_strides[4] = {1, 1, 1, 1};
  const CUresult r = CUTLASS_CUDA_DRIVER_WRAPPER_CALL(cuTensorMapEncodeIm2col)(
      &a.im2col, std::is_same_v<E, cute::half_t> ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
      4, const_cast<E*>(x), dims, strides, lower, upper, cuuint32_t(Cfg::kTileK), cuuint32_t(Cfg::kTileM),
      element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  *out_stage = g;
  return r == CUDA_SUCCESS;
}

// Clusters of Cfg::kClusterM CTAs that fit the device at once (one CTA per
// SM); sm_count / kClusterM where the occupancy query fails. Asked once per
// configuration and SM count.
template <class Cfg>
int max_active_clusters(int sm_count) {
  static std::mutex mu;
  static int cached_sms = -1, cached = 0;
  std::lock_guard<std::mutex> lock(mu);
  if (cached_sms == sm_count) return cached;
  auto kernel = chain_kernel_sm90<Cfg>;
  cudaLaunchConfig_t config{};
  cudaLaunchAttribute attr[1] = {cluster_attribute<Cfg>()};
  config.gridDim = dim3(Cfg::kClusterM * (sm_count / Cfg::kClusterM), 1, 1);
  config.blockDim = dim3(Cfg::kThreads, 1, 1);
  config.dynamicSmemBytes = Cfg::kSmemBytes;
  config.attrs = attr;
  config.numAttrs = 1;
  int n = 0;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes) != cudaSuccess ||
      cudaOccupancyMaxActiveClusters(&n, kernel, &config) != cudaSuccess || n < 1) {
    (void)cudaGetLastError();
    n = sm_count / Cfg::kClusterM;
  }
  cached_sms = sm_count;
  cached = std::min(n, sm_count / Cfg::kClusterM);
  return cached;
}

// Runs schedule positions [p.begin, p.end) on at most one CTA per SM
// (clusters: one cluster per position).
// Fails with cudaErrorNoKernelImageForDevice where the build holds no sm_90a
// image: the kernel body of every other target is empty.
template <class Cfg>
cudaError_t launch_chain(const ChainParams<Cfg>& p, int sm_count, cudaStream_t stream) {
  auto kernel = chain_kernel_sm90<Cfg>;
  static const cudaError_t image = [&] {
    cudaFuncAttributes attr{};
    const cudaError_t err = cudaFuncGetAttributes(&attr, kernel);
    if (err != cudaSuccess) return err;
    return attr.binaryVersion == 90 ? cudaSuccess : cudaErrorNoKernelImageForDevice;
  }();
  if (image != cudaSuccess) return image;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       Cfg::kSmemBytes);
  if (e != cudaSuccess) return e;
  const int work = p.end - p.begin;
  if (work <= 0) return cudaSuccess;
  // A consumer that waits on semaphores runs beside its producer (fused,
  // streams), never as a programmatic dependent launched behind it: its CTAs
  // could hold SMs while the producer's still queue.
  if (p.wait_prior_grid && p.consumer_waits) return cudaErrorInvalidValue;
  // The placed schedule counts positions from 0 (the fused launch) and hands
  // out whole tiles one CTA at a time.
  if (p.placed_flags != nullptr && (p.begin != 0 || Cfg::kClusterM != 1 || p.stream_k.ctas_per_row > 0))
    return cudaErrorInvalidValue;
  // wait_prior_grid: a programmatic dependent of the previous kernel in the
  // stream (it may start once every CTA of that kernel has started; the
  // kernel waits for its completion before reading A).
  cudaLaunchAttribute attr[2];
  int attrs = 0;
  if (p.wait_prior_grid) {
    attr[attrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[attrs++].val.programmaticStreamSerializationAllowed = 1;
  }
  cudaLaunchConfig_t config{};
  config.blockDim = dim3(Cfg::kThreads, 1, 1);
  config.dynamicSmemBytes = Cfg::kSmemBytes;
  config.stream = stream;
  config.attrs = attr;
  if constexpr (Cfg::kClusterM == 1) {
    // Stream-K: one CTA per range (the ranges were cut for at most sm_count).
    const int grid = p.stream_k.ctas_per_row > 0 ? p.stream_k.ctas() : std::min(sm_count, work);
    config.gridDim = dim3(grid, 1, 1);
    config.numAttrs = attrs;
    e = cudaLaunchKernelEx(&config, kernel, p);
    if (e != cudaSuccess) return e;
    return cudaGetLastError();
  } else {
    // A persistent grid of clusters: at most one per position, and no more
    // than fit the device at once.
    attr[attrs++] = cluster_attribute<Cfg>();
    config.numAttrs = attrs;
    const int clusters = max_active_clusters<Cfg>(sm_count);
    if (clusters < 1) return cudaErrorInvalidConfiguration;
    config.gridDim = dim3(Cfg::kClusterM * std::min(clusters, work), 1, 1);
    if constexpr (Cfg::kStreamK) {
      // Stream-K: one CTA per range of every (padded) line; a cluster's CTAs
      // take adjacent lines of one range. No CTA waits for another, so the
      // grid may exceed what is resident at once.
      if (p.stream_k.ctas_per_row > 0) {
        if (p.stream_k.rows % Cfg::kClusterM != 0) return cudaErrorInvalidValue;
        config.gridDim = dim3(p.stream_k.ctas(), 1, 1);
      }
    }
    e = cudaLaunchKernelEx(&config, kernel, p);
    if (e != cudaSuccess) return e;
    return cudaGetLastError();
  }
}

}  // namespace cusync_sm90
