// The conv pair's convolutions one kernel at a time, at the sizes where a
// kernel's fixed cost decides (ResNet-38's 3x3 layers at batch 1 and 8): how
// much of the gap to cuDNN is the im2col A, how much the Hopper GEMM's fixed
// cost, and whether an sm80-style kernel (mma.sync, cp.async: the kind cuDNN
// runs for these convs on the H200, sm80_xmma_fprop_...) is the better tool.
//
//   own_conv_*    the project's Hopper conv (A through TMA's im2col mode)
//   own_gemm_*    the project's Hopper GEMM on the same conv's A materialized
//                 as an im2col matrix [pixels, 9 C]
//   cutlass3_*    CUTLASS's warp-specialized TMA GEMMs on that matrix
//   cutlass2_*    CUTLASS's sm80 multistage GEMMs on that matrix
//   cutlass2conv_* CUTLASS's sm80 implicit-GEMM convolution (fprop, its
//                 optimized im2col iterators; the filter transposed to KRSC)
//
// Every variant computes the same [pixels, C] output (checked against the
// first). A time is the median over alternated rounds of 20 back-to-back
// launches between two events, divided by 20: a kernel's cost in a stream of
// kernels, without the host's launch latency. The project's launches each
// take their own zeroed counter, so no memset sits between them.
// Built by `HARNESS=conv_vs_cutlass bench/gemm_vs_cutlass.sh`.
//   conv_vs_cutlass [ROUNDS]          ResNet-38's layers at batch 1 and 8
//   conv_vs_cutlass ROUNDS H C N      one layer: H x H x C, batch N, 3x3, C filters
//   conv_vs_cutlass phases H C N      (built with -DCUSYNC_SM90_PHASE_TIMES)
#include "harness.cuh"

#include <cutlass/conv/device/implicit_gemm_convolution.h>
#include <cutlass/conv/kernel/default_conv2d_fprop.h>
#include <cutlass/epilogue/thread/linear_combination.h>
#include <cutlass/gemm/device/gemm.h>

using namespace cute;

// ---- CUTLASS's sm80 multistage GEMM: A [M, K] and B [K, N] row-major.
template <class Block, class Warp, int kStages>
struct Cutlass2Gemm {
  using Gemm = cutlass::gemm::device::Gemm<
      Element, cutlass::layout::RowMajor, Element, cutlass::layout::RowMajor, Element, cutlass::layout::RowMajor,
      float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, Block, Warp, cutlass::gemm::GemmShape<16, 8, 16>,
      cutlass::epilogue::thread::LinearCombination<Element, 8, float, float>,
      cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, kStages>;
  Gemm gemm;
  void* workspace = nullptr;
  void setup(const Element* a, const Element* b, Element* out, int m, int n, int k) {
    const typename Gemm::Arguments args({m, n, k}, {a, k}, {b, n}, {out, n}, {out, n}, {1.f, 0.f});
    const std::string what = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    initialize_with_workspace(gemm, args, workspace, what.c_str());
  }
  void run(cudaStream_t s) {
    if (gemm(s) != cutlass::Status::kSuccess) std::exit(1);
  }
};

// ---- CUTLASS's sm80 implicit-GEMM convolution: x NHWC, the filter KRSC
// (output channel first), y NHWC; stride 1, SAME (padding 1 for 3x3).
template <class Block, class Warp, int kStages>
struct Cutlass2Conv {
  using Kernel = typename cutlass::conv::kernel::DefaultConv2dFprop<
      Element, cutlass::layout::TensorNHWC, Element, cutlass::layout::TensorNHWC, Element,
      cutlass::layout::TensorNHWC, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, Block, Warp,
      cutlass::gemm::GemmShape<16, 8, 16>, cutlass::epilogue::thread::LinearCombination<Element, 8, float, float>,
      cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<>, kStages, cutlass::arch::OpMultiplyAdd,
      cutlass::conv::IteratorAlgorithm::kOptimized>::Kernel;
  using Conv = cutlass::conv::device::ImplicitGemmConvolution<Kernel>;
  Conv conv;
  void* workspace = nullptr;
  void setup(const Element* x, const Element* w_krsc, Element* out, int images, int size, int c, int k) {
    cutlass::conv::Conv2dProblemSize problem(images, size, size, c, k, 3, 3, size, size, 1, 1, 1, 1, 1, 1,
                                             cutlass::conv::Mode::kCrossCorrelation);
    using L = cutlass::layout::TensorNHWC;
    typename Conv::Arguments args(
        problem, {const_cast<Element*>(x), L::packed({images, size, size, c})},
        {const_cast<Element*>(w_krsc), L::packed({k, 3, 3, c})}, {out, L::packed({images, size, size, k})},
        {out, L::packed({images, size, size, k})}, {1.f, 0.f});
    const std::string what = "the conv " + std::to_string(size) + "x" + std::to_string(size) + "x" +
                             std::to_string(c) + " batch " + std::to_string(images);
    initialize_with_workspace(conv, args, workspace, what.c_str());
  }
  void run(cudaStream_t s) {
    if (conv(s) != cutlass::Status::kSuccess) std::exit(1);
  }
};

// w [3, 3, c, k] HWIO -> [k, 3, 3, c] KRSC.
__global__ void hwio_to_krsc(const Element* w, Element* krsc, int c, int k) {
  const int total = 9 * c * k;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < total; i += gridDim.x * blockDim.x) {
    const int co = i % k, ci = (i / k) % c, tap = i / (k * c);
    krsc[(size_t(co) * 9 + tap) * c + ci] = w[i];
  }
}

// One layer: x [images, size, size, c] NHWC, w [3, 3, c, c] HWIO (= B [9c, c]).
struct Layer {
  int size, c, images;
  __host__ __device__ int pixels() const { return images * size * size; }
  __host__ __device__ int k() const { return 9 * c; }
};

// a[p, (r * 3 + s) * c + ch] = x at pixel p shifted by (r - 1, s - 1), 0 in the padding.
__global__ void im2col(const Element* x, Element* a, Layer l) {
  const size_t total = size_t(l.pixels()) * l.k();
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    const int p = int(i / l.k()), kk = int(i % l.k());
    const int tap = kk / l.c, ch = kk % l.c;
    const int n = p / (l.size * l.size), hw = p % (l.size * l.size);
    const int h = hw / l.size + tap / 3 - 1, w = hw % l.size + tap % 3 - 1;
    const bool in = h >= 0 && h < l.size && w >= 0 && w < l.size;
    a[i] = in ? x[((size_t(n) * l.size + h) * l.size + w) * l.c + ch] : Element(0.f);
  }
}

// The project's kernel: one stage, serial (no synchronization), `kBatch`
// parameter sets that differ only in their counter, zeroed together before a
// batch of launches (the package zeroes its counter on the stream before each
// call; here that memset would sit between the launches timed).
constexpr int kBatch = 20;
template <class Cfg>
struct OwnLaunch {
  cusync_sm90::ChainParams<Cfg> p[kBatch];
  int* counters = nullptr;
  int sms = 0;
  // conv: A through im2col of x; else A is the materialized matrix.
  void setup(const Layer& l, bool conv, const Element* x_or_a, const Element* w, Element* out, int sms_) {
    sms = sms_;
    if (!counters) CHECK(cudaMalloc(&counters, sizeof(int) * kBatch));
    cusync::Stage tiling{l.pixels(), l.c, 1, Cfg::kTileM, Cfg::kTileN, cusync::TileOrder::kRowMajor, 8};
    cusync_sm90::ChainParams<Cfg> base{};
    if constexpr (Cfg::kConvA) {
      if (!conv) std::exit(1);
      if (!cusync_sm90::make_conv_stage<Cfg>(&base.stage[0], x_or_a, l.images, l.size, l.size, l.c, 3, w, l.c, out,
                                             nullptr, nullptr, tiling, cusync::Activation::kIdentity)) {
        std::fprintf(stderr, "the driver refused the im2col descriptor\n");
        std::exit(1);
      }
    } else {
      if (conv) std::exit(1);
      base.stage[0] = cusync_sm90::make_gemm_stage<Cfg>(x_or_a, l.pixels(), l.k(), l.k(), w, l.c, out, l.c, nullptr,
                                                       tiling, cusync::Activation::kIdentity);
    }
    base.stage[1] = base.stage[0];
    base.tiles0 = cusync_sm90::schedule_positions<Cfg>(tiling);
    base.begin = 0;
    base.end = base.tiles0;
    base.policy = cusync::Policy{cusync::PolicyKind::kRowSync, 0};
    for (int i = 0; i < kBatch; ++i) {
      p[i] = base;
      p[i].counter = counters + i;
    }
  }
  void zero(cudaStream_t s) { CHECK(cudaMemsetAsync(counters, 0, sizeof(int) * kBatch, s)); }
  void run(int i, cudaStream_t s) { CHECK(cusync_sm90::launch_chain(p[i], sms, s)); }
};

template <class G>
Timed cutlass_timed(const char* name, G& g) {
  return {name, [](cudaStream_t) {}, [&g](int, cudaStream_t s) { g.run(s); }};
}
template <class Cfg>
Timed own_timed(const char* name, OwnLaunch<Cfg>& o) {
  return {name, [&o](cudaStream_t s) { o.zero(s); }, [&o](int i, cudaStream_t s) { o.run(i, s); }};
}

// Instances: the package's conv configurations, and the same tiles as a GEMM.
using ConvX64 = cusync_sm90::ChainConfig<Element, 64, false, 1, false, 2, true, true>;
using ConvX64Coop = cusync_sm90::ChainConfig<Element, 64, false, 1, false, 2, false, true>;
using ConvX128Coop = cusync_sm90::ChainConfig<Element, 128, false, 1, false, 2, false, true>;
using GemmX64 = cusync_sm90::ChainConfig<Element, 64, false, 1, false, 2, true>;
using GemmX64Coop = cusync_sm90::ChainConfig<Element, 64, false, 1, false, 2, false>;
using GemmX128Coop = cusync_sm90::ChainConfig<Element, 128, false, 1, false, 2, false>;
using C1 = Shape<_1, _1, _1>;
using Pingpong = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using Cooperative = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpiTma = cutlass::epilogue::TmaWarpSpecialized;
using EpiTmaCoop = cutlass::epilogue::TmaWarpSpecializedCooperative;
using GS = cutlass::gemm::GemmShape<128, 64, 32>;

int run_layer(const Layer& l, int rounds, int sms, cudaStream_t stream, bool phases) {
  Element *x, *w, *a, *w_krsc;
  const int m = l.pixels(), n = l.c, k = l.k();
  CHECK(cudaMalloc(&x, size_t(m) * l.c * sizeof(Element)));
  CHECK(cudaMalloc(&w, size_t(k) * n * sizeof(Element)));
  CHECK(cudaMalloc(&w_krsc, size_t(k) * n * sizeof(Element)));
  CHECK(cudaMalloc(&a, size_t(m) * k * sizeof(Element)));
  fill<<<1024, 256>>>(x, size_t(m) * l.c, 17);
  fill<<<1024, 256>>>(w, size_t(k) * n, 91);
  im2col<<<1024, 256>>>(x, a, l);
  hwio_to_krsc<<<1024, 256>>>(w, w_krsc, l.c, n);
  CHECK(cudaGetLastError());

  static OwnLaunch<ConvX64> conv64;
  static OwnLaunch<ConvX64Coop> conv64coop;
  static OwnLaunch<ConvX128Coop> conv128coop;
  static OwnLaunch<GemmX64> gemm64;
  static OwnLaunch<GemmX64Coop> gemm64coop;
  static OwnLaunch<GemmX128Coop> gemm128coop;
  static CutlassGemm<Shape<_128, _64, _64>, C1, Cooperative, EpiTmaCoop> c3_coop128x64;
  static CutlassGemm<Shape<_64, _64, _64>, C1, Pingpong, EpiTma> c3_pp64x64;
  static CutlassGemm<Shape<_128, _128, _64>, C1, Cooperative, EpiTmaCoop> c3_coop128x128;
  static Cutlass2Gemm<cutlass::gemm::GemmShape<128, 64, 32>, cutlass::gemm::GemmShape<64, 32, 32>, 4> c2_128x64;
  static Cutlass2Gemm<cutlass::gemm::GemmShape<64, 64, 32>, cutlass::gemm::GemmShape<32, 32, 32>, 5> c2_64x64;
  static Cutlass2Gemm<cutlass::gemm::GemmShape<64, 64, 64>, cutlass::gemm::GemmShape<32, 32, 64>, 3> c2_64x64k64;
  static Cutlass2Conv<cutlass::gemm::GemmShape<64, 64, 64>, cutlass::gemm::GemmShape<32, 32, 64>, 4> c2conv_64x64;
  static Cutlass2Conv<cutlass::gemm::GemmShape<128, 64, 32>, cutlass::gemm::GemmShape<64, 32, 32>, 4> c2conv_128x64;

  // (outputs, one per variant, each set up against its own buffer)
  std::vector<Timed> variants;
  std::vector<Element*> outs;
  auto out_buffer = [&] {
    Element* o;
    CHECK(cudaMalloc(&o, size_t(m) * n * sizeof(Element)));
    CHECK(cudaMemset(o, 0, size_t(m) * n * sizeof(Element)));
    outs.push_back(o);
    return o;
  };
  c2_128x64.setup(a, w, out_buffer(), m, n, k);
  variants.push_back(cutlass_timed("cutlass2_128x64x32_s4", c2_128x64));
  c2_64x64.setup(a, w, out_buffer(), m, n, k);
  variants.push_back(cutlass_timed("cutlass2_64x64x32_s5", c2_64x64));
  c2_64x64k64.setup(a, w, out_buffer(), m, n, k);
  variants.push_back(cutlass_timed("cutlass2_64x64x64_s3", c2_64x64k64));
  c2conv_64x64.setup(x, w_krsc, out_buffer(), l.images, l.size, l.c, n);
  variants.push_back(cutlass_timed("cutlass2conv_64x64x64_s4", c2conv_64x64));
  c2conv_128x64.setup(x, w_krsc, out_buffer(), l.images, l.size, l.c, n);
  variants.push_back(cutlass_timed("cutlass2conv_128x64x32_s4", c2conv_128x64));
  c3_coop128x64.setup(a, w, out_buffer(), m, n, k, sms);
  variants.push_back(cutlass_timed("cutlass3_coop128x64", c3_coop128x64));
  c3_pp64x64.setup(a, w, out_buffer(), m, n, k, sms);
  variants.push_back(cutlass_timed("cutlass3_pp64x64", c3_pp64x64));
  conv64.setup(l, true, x, w, out_buffer(), sms);
  variants.push_back(own_timed("own_conv_128x64", conv64));
  conv64coop.setup(l, true, x, w, out_buffer(), sms);
  variants.push_back(own_timed("own_conv_128x64coop", conv64coop));
  gemm64.setup(l, false, a, w, out_buffer(), sms);
  variants.push_back(own_timed("own_gemm_128x64", gemm64));
  gemm64coop.setup(l, false, a, w, out_buffer(), sms);
  variants.push_back(own_timed("own_gemm_128x64coop", gemm64coop));
  if (n >= 128) {
    c3_coop128x128.setup(a, w, out_buffer(), m, n, k, sms);
    variants.push_back(cutlass_timed("cutlass3_coop128x128", c3_coop128x128));
    conv128coop.setup(l, true, x, w, out_buffer(), sms);
    variants.push_back(own_timed("own_conv_128x128coop", conv128coop));
    gemm128coop.setup(l, false, a, w, out_buffer(), sms);
    variants.push_back(own_timed("own_gemm_128x128coop", gemm128coop));
  }

#ifdef CUSYNC_SM90_PHASE_TIMES
  if (phases) {
    char title[96];
    const int kb = k / 64;
    std::snprintf(title, sizeof title, "%dx%dx%d batch %d  %-20s", l.size, l.size, l.c, l.images, "own_conv_128x64coop");
    print_phases(title, sms, kb, [&] { conv64coop.zero(stream); }, [&](cudaStream_t s) { conv64coop.run(0, s); },
                 stream);
    std::snprintf(title, sizeof title, "%dx%dx%d batch %d  %-20s", l.size, l.size, l.c, l.images, "own_gemm_128x64coop");
    print_phases(title, sms, kb, [&] { gemm64coop.zero(stream); }, [&](cudaStream_t s) { gemm64coop.run(0, s); },
                 stream);
    return 0;
  }
#else
  (void)phases;
#endif

  const std::vector<float> diff = run_once_and_compare(variants, outs, size_t(m) * n, stream);
  const std::vector<float> med_us = median_us(variants, rounds, kBatch, stream);
  const double flop = 2.0 * m * n * k;
  for (size_t v = 0; v < variants.size(); ++v) {
    const float med = med_us[v];
    std::printf("%3dx%-3d x%-4d batch %2d  %-24s %8.2f us %6.1f TF/s  maxdiff %.3g\n", l.size, l.size, l.c,
                l.images, variants[v].name.c_str(), med, flop / med * 1e-6, diff[v]);
  }
  std::fflush(stdout);
  for (auto* o : outs) CHECK(cudaFree(o));
  CHECK(cudaFree(x));
  CHECK(cudaFree(w));
  CHECK(cudaFree(a));
  CHECK(cudaFree(w_krsc));
  return 0;
}

int main(int argc, char** argv) {
  const ConvHarnessArgs a = conv_harness_args(argc, argv);
  std::vector<Layer> layers;
  if (a.one) {
    layers.push_back({a.size, a.c, a.images});
  } else {
    for (int images : {1, 8})
      for (auto [size, c] : {std::array<int, 2>{56, 64}, {28, 128}, {14, 256}, {7, 512}})
        layers.push_back({size, c, images});
  }
  for (const Layer& l : layers)
    if (run_layer(l, a.rounds, a.sms, a.stream, a.phases)) return 1;
  return 0;
}
