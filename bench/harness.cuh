// What the harnesses (bench/gemm_vs_cutlass.cu, conv_vs_cutlass.cu, conv_pair_sync.cu)
// share: the project's kernel and CUTLASS's behind one setup/run interface,
// inputs, the output check and the phase stamps' printout.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <thread>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/collective/collective_builder.hpp>
#include <cutlass/gemm/collective/collective_builder.hpp>
#include <cutlass/gemm/device/gemm_universal_adapter.h>
#include <cutlass/gemm/kernel/gemm_universal.hpp>
#include <cutlass/util/packed_stride.hpp>

#include "cuda/sm90_chain_launch.cuh"

#include "cuda_exit_check.h"

using Element = cutlass::half_t;

// A CUTLASS device operator (a 3.x GEMM adapter, a 2.x convolution) readied
// for `args`: checked, its workspace (re)allocated, initialized. `what`
// names the problem when CUTLASS cannot run it.
template <class Op, class Args>
void initialize_with_workspace(Op& op, const Args& args, void*& workspace, const char* what) {
  if (op.can_implement(args) != cutlass::Status::kSuccess) {
    std::fprintf(stderr, "CUTLASS cannot run %s\n", what);
    std::exit(1);
  }
  if (workspace) CHECK(cudaFree(workspace));
  workspace = nullptr;
  const size_t bytes = Op::get_workspace_size(args);
  if (bytes) CHECK(cudaMalloc(&workspace, bytes));
  if (op.initialize(args, workspace) != cutlass::Status::kSuccess) std::exit(1);
}

// ---- CUTLASS: x [M, K] row-major times w [K, N] row-major (N contiguous).
template <class TileShape, class ClusterShape, class Schedule, class EpiSchedule, class Scheduler = void>
struct CutlassGemm {
  using LayoutA = cutlass::layout::RowMajor;
  using LayoutB = cutlass::layout::RowMajor;
  using LayoutD = cutlass::layout::RowMajor;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float, void, LayoutD, 8, Element, LayoutD, 8,
      EpiSchedule>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutA, 8, Element, LayoutB, 8, float,
      TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename Epilogue::SharedStorage))>,
      Schedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<cute::Shape<int, int, int, int>, Mainloop, Epilogue, Scheduler>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;

  Gemm gemm;
  void* workspace = nullptr;
  // Stream-K scheduler only: how the work is split (Heuristic lets CUTLASS
  // choose among data-parallel, split-K and stream-K).
  cutlass::gemm::kernel::detail::DecompositionMode decomposition =
      cutlass::gemm::kernel::detail::DecompositionMode::Heuristic;

  void setup(const Element* x, const Element* w, Element* out, int m, int n, int k, int sms) {
    using StrideA = typename Gemm::GemmKernel::StrideA;
    using StrideB = typename Gemm::GemmKernel::StrideB;
    using StrideD = typename Gemm::GemmKernel::StrideD;
    auto sa = cutlass::make_cute_packed_stride(StrideA{}, cute::make_shape(m, k, 1));
    auto sb = cutlass::make_cute_packed_stride(StrideB{}, cute::make_shape(n, k, 1));
    auto sd = cutlass::make_cute_packed_stride(StrideD{}, cute::make_shape(m, n, 1));
    cutlass::KernelHardwareInfo hw;
    hw.device_id = 0;
    hw.sm_count = sms;
    typename Gemm::Arguments args{cutlass::gemm::GemmUniversalMode::kGemm,
                                  {m, n, k, 1},
                                  {x, sa, w, sb},
                                  {{1.f, 0.f}, nullptr, sd, out, sd},
                                  hw};
    if constexpr (!std::is_void_v<Scheduler>) args.scheduler.decomposition_mode = decomposition;
    const std::string what = std::to_string(m) + "x" + std::to_string(n) + "x" + std::to_string(k);
    initialize_with_workspace(gemm, args, workspace, what.c_str());
  }
  void run(cudaStream_t s) {
    if (gemm.run(s) != cutlass::Status::kSuccess) std::exit(1);
  }
};

// ---- The project's kernel, one GEMM through the chain kernel's serial path.
template <class Cfg>
struct OwnGemm {
  cusync_sm90::ChainParams<Cfg> p{};
  int* counter = nullptr;
  int sms = 0;

  void setup(const Element* x, const Element* w, Element* out, int m, int n, int k, int sms_,
             cusync::TileOrder order, int group_rows) {
    sms = sms_;
    if (counted && !counter) CHECK(cudaMalloc(&counter, sizeof(int)));
    cusync::Stage tiling{m, n, 1, Cfg::kTileM, Cfg::kTileN, order, group_rows};
    p = {};
#ifdef CUSYNC_SM90_PROBE_SIDES
    p.probe_side = side;
#endif
    p.stage[0] = cusync_sm90::make_gemm_stage<Cfg>(x, m, k, k, w, n, out, n, nullptr, tiling,
                                                  cusync::Activation::kIdentity);
    p.tiles0 = cusync_sm90::schedule_positions<Cfg>(tiling);  // (2x1 clusters: one per pair of row tiles)
    p.begin = 0;
    p.end = p.tiles0;
    // The package's launches without waits take a static schedule (no
    // counter); `counted` runs the counter its launches with waits take,
    // zeroed on the stream before each launch (in the timed span, as there).
    p.counter = counted ? counter : nullptr;
    p.policy = cusync::Policy{cusync::PolicyKind::kRowSync, 0};
    if (stream_k) {
      // Ranges for every SM, as the package cuts them (cusync/stream_k.h:
      // an even split of every tile where a row's tiles fit its share, so 64
      // tiles on 132 SMs run as 128 halves; 2x1 clusters pad the lines to an
      // even count); the per-tile counts are zeroed on the stream before each
      // launch (in the timed span, as the package does).
      p.stream_k = cusync::make_stream_k(tiling.grid_rows(), tiling.grid_cols(), (k + Cfg::kTileK - 1) / Cfg::kTileK,
                                         sms, Cfg::kClusterM);
      p.stream_k_stage = 0;
      p.begin = 0;
      p.end = cusync_sm90::kStreamKDone;
      const size_t partial_floats =
          size_t(p.stream_k.tiles()) * p.stream_k.max_segments() * Cfg::kTileM * Cfg::kTileN;
      if (partial_floats > partial_capacity) {
        if (partials) CHECK(cudaFree(partials));
        if (counts) CHECK(cudaFree(counts));
        CHECK(cudaMalloc(&partials, partial_floats * sizeof(float)));
        CHECK(cudaMalloc(&counts, sizeof(int) * 65536));
        partial_capacity = partial_floats;
      }
      p.stream_k_counts = counts;
      p.stream_k_partials = partials;
    }
  }
  void run(cudaStream_t s) {
    if (counted) CHECK(cudaMemsetAsync(counter, 0, sizeof(int), s));
    if (stream_k) CHECK(cudaMemsetAsync(counts, 0, sizeof(int) * p.stream_k.tiles(), s));
    CHECK(cusync_sm90::launch_chain(p, sms, s));
  }
  bool counted = false;
  bool stream_k = false;
  int side = 0;  // probe builds (CUSYNC_SM90_PROBE_SIDES): which side of the pipeline runs

  int* counts = nullptr;
  float* partials = nullptr;
  size_t partial_capacity = 0;
};

__global__ void fill(Element* x, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    x[i] = Element((float(h & 0xffff) / 65536.f - 0.5f) * 0.25f);
  }
}

__global__ void max_diff(const Element* a, const Element* b, size_t n, float* out) {
  float m = 0.f;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    m = fmaxf(m, fabsf(float(a[i]) - float(b[i])));
  atomicMax(reinterpret_cast<int*>(out), __float_as_int(m));  // m >= 0: int order = float order
}

// The largest |difference| of each output from the first (0 for the first).
inline std::vector<float> diffs_from_first(const std::vector<Element*>& outs, size_t n) {
  float* dmax;
  CHECK(cudaMalloc(&dmax, sizeof(float)));
  std::vector<float> diff(outs.size(), 0.f);
  for (size_t v = 1; v < outs.size(); ++v) {
    CHECK(cudaMemset(dmax, 0, sizeof(float)));
    max_diff<<<1024, 256>>>(outs[0], outs[v], n, dmax);
    CHECK(cudaMemcpy(&diff[v], dmax, sizeof(float), cudaMemcpyDeviceToHost));
  }
  CHECK(cudaFree(dmax));
  return diff;
}

struct Variant {
  std::string name;
  std::function<void(const Element*, const Element*, Element*, int, int, int)> setup;
  std::function<void(cudaStream_t)> run;
};

// One of the project's GEMMs (OwnGemm) in the given tile order, or one of CUTLASS's.
template <class G>
Variant own_variant(const char* name, G& gemm, cusync::TileOrder order, int sms) {
  return {name,
          [&gemm, order, sms](const Element* x, const Element* w, Element* o, int m, int n, int k) {
            gemm.setup(x, w, o, m, n, k, sms, order, 8);
          },
          [&gemm](cudaStream_t s) { gemm.run(s); }};
}

template <class G>
Variant cutlass_variant(const char* name, G& gemm, int sms) {
  return {name,
          [&gemm, sms](const Element* x, const Element* w, Element* o, int m, int n, int k) {
            gemm.setup(x, w, o, m, n, k, sms);
          },
          [&gemm](cudaStream_t s) { gemm.run(s); }};
}

// Wall-clock time of day, to line phases up with nvidia-smi's samples.
std::string stamp() {
  const auto now = std::chrono::system_clock::now();
  const auto t = std::chrono::system_clock::to_time_t(now);
  const int ms = int(std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000);
  char buf[32];
  std::strftime(buf, sizeof buf, "%H:%M:%S", std::gmtime(&t));
  return std::string(buf) + "." + std::to_string(1000 + ms).substr(1);
}

// One input set of an M x N x K GEMM (filled) and its output.
void one_input_set(int m, int n, int k, Element** x, Element** w, Element** out) {
  CHECK(cudaMalloc(x, size_t(m) * k * sizeof(Element)));
  CHECK(cudaMalloc(w, size_t(k) * n * sizeof(Element)));
  CHECK(cudaMalloc(out, size_t(m) * n * sizeof(Element)));
  fill<<<1024, 256>>>(*x, size_t(m) * k, 17);
  fill<<<1024, 256>>>(*w, size_t(k) * n, 91);
}

// The conv harnesses' command line: [ROUNDS] (their default shapes), ROUNDS
// H C N (one shape) or `phases H C N`; and the device's SM count and a stream.
struct ConvHarnessArgs {
  bool phases = false;
  int rounds = 10;
  bool one = false;  // H C N given
  int size = 0, c = 0, images = 0;
  int sms = 0;
  cudaStream_t stream = nullptr;
};
inline ConvHarnessArgs conv_harness_args(int argc, char** argv) {
  ConvHarnessArgs a;
  CHECK(cudaDeviceGetAttribute(&a.sms, cudaDevAttrMultiProcessorCount, 0));
  CHECK(cudaStreamCreate(&a.stream));
  a.phases = argc == 5 && std::string(argv[1]) == "phases";
  if (argc > 1 && !a.phases) a.rounds = std::atoi(argv[1]);
  if (argc == 5) {
    a.one = true;
    a.size = std::atoi(argv[2]);
    a.c = std::atoi(argv[3]);
    a.images = std::atoi(argv[4]);
  }
  return a;
}

// One timed variant: what readies a batch of launches, and launch i of it.
struct Timed {
  std::string name;
  std::function<void(cudaStream_t)> before;    // outside the timed span (zero the counters)
  std::function<void(int, cudaStream_t)> run;  // launch i of the batch
};

// Every variant's output against the first's, after one launch each.
inline std::vector<float> run_once_and_compare(std::vector<Timed>& variants, const std::vector<Element*>& outs,
                                               size_t n, cudaStream_t stream) {
  for (auto& v : variants) {
    v.before(stream);
    v.run(0, stream);
  }
  CHECK(cudaStreamSynchronize(stream));
  return diffs_from_first(outs, n);
}

// Median microseconds a launch of each variant: `rounds` alternated rounds
// (after one to warm up; the first variant rotates) of `batch` back-to-back
// launches between two events, divided by `batch`: a kernel's cost in a
// stream of kernels, without the host's launch latency.
inline std::vector<float> median_us(std::vector<Timed>& variants, int rounds, int batch, cudaStream_t stream) {
  cudaEvent_t ev[2];
  CHECK(cudaEventCreate(&ev[0]));
  CHECK(cudaEventCreate(&ev[1]));
  std::vector<std::vector<float>> us(variants.size());
  for (int r = 0; r < rounds + 1; ++r) {
    for (size_t i = 0; i < variants.size(); ++i) {
      const size_t v = (i + r) % variants.size();
      variants[v].before(stream);
      CHECK(cudaEventRecord(ev[0], stream));
      for (int b = 0; b < batch; ++b) variants[v].run(b, stream);
      CHECK(cudaEventRecord(ev[1], stream));
      CHECK(cudaEventSynchronize(ev[1]));
      float t;
      CHECK(cudaEventElapsedTime(&t, ev[0], ev[1]));
      if (r > 0) us[v].push_back(t * 1e3f / batch);
    }
  }
  CHECK(cudaEventDestroy(ev[0]));
  CHECK(cudaEventDestroy(ev[1]));
  std::vector<float> med;
  for (auto& t : us) {
    std::sort(t.begin(), t.end());
    med.push_back(t[t.size() / 2]);
  }
  return med;
}

#ifdef CUSYNC_SM90_PHASE_TIMES
// `phases M N K` (built with -DCUSYNC_SM90_PHASE_TIMES): per CTA, the cycles
// of its first tile's phases from the kernel's stamps, entry -> first
// position -> first TMA issued -> first data landed -> mainloop end ->
// epilogue issued -> stores written. Printed as the median [10th, 90th
// percentile] over the CTAs that ran a tile, for a launch after an idle GPU
// (as the timed rounds launch) and for the last of 5 back-to-back launches.
// title: what ran (the shape and the kernel); ctas: the grid; setup():
// readies a launch (zeroes its counter); run(stream): launches it. stage
// 1 or 2: only the CTAs whose first tile was of the fused launch's first or
// second GEMM (0: all).
template <class Setup, class Run>
void print_phases(const std::string& title, int ctas, int k_blocks, Setup&& setup, Run&& run, cudaStream_t stream,
                  int stage = 0) {
  constexpr int kSlots = cusync_sm90::kPhaseSlots;
  long long* buf;
  CHECK(cudaMalloc(&buf, sizeof(long long) * kSlots * ctas));
  CHECK(cudaMemcpyToSymbol(cusync_sm90::g_phase_times, &buf, sizeof(buf)));
  for (int back_to_back : {0, 1}) {
    setup();
    for (int i = 0; i < 3; ++i) run(stream);
    CHECK(cudaStreamSynchronize(stream));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(cudaMemset(buf, 0, sizeof(long long) * kSlots * ctas));
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < (back_to_back ? 5 : 1); ++i) {
      setup();
      run(stream);
    }
    CHECK(cudaStreamSynchronize(stream));
    std::vector<long long> h(size_t(kSlots) * ctas);
    CHECK(cudaMemcpy(h.data(), buf, sizeof(long long) * h.size(), cudaMemcpyDeviceToHost));
    // Deltas per CTA that ran a tile (slot 4 set).
    // (The epilogue's two inner stamps are of a CTA's last tile: read them
    // where each CTA runs one tile.)
    // (Slot 0 is stamped once g_phase_times has loaded; "entry lag" is the
    // time from the first clock read to it. The other deltas count from slot 0.)
    constexpr int kDeltas = 17;
    const char* labels[kDeltas] = {"entry lag",   "barriers set", "descriptors",   "loop entry", "position",
                                   "resolved",    "first TMA",    "mma has tile",  "mma waits",  "first data",
                                   "mainloop",    "epi 1st pass", "epi last pass", "epilogue",   "to exit",
                                   "entry..exit", "A issue span"};
    const int from[kDeltas] = {18, 0, 0, 0, 0, 0, 0, 0, 0, 0, 4, 5, 5, 5, 6, 0, 2},
              to[kDeltas] = {0, 12, 19, 20, 1, 13, 2, 21, 22, 4, 5, 10, 11, 6, 7, 7, 15};
    std::vector<std::vector<double>> d(kDeltas);
    // Cycles waited over the first tile: the loader for free stages, the MMA for landed data.
    std::vector<double> waited_free, waited_data;
    long long g0 = -1, g1 = -1, e0 = -1, e1 = -1;
    int ran = 0;
    for (int c = 0; c < ctas; ++c) {
      const long long* t = h.data() + size_t(c) * kSlots;
      if (t[4] == 0 || t[5] == 0 || (stage != 0 && t[14] != stage)) continue;
      ++ran;
      for (int i = 0; i < kDeltas; ++i)
        if (t[to[i]] != 0 && t[from[i]] != 0) d[i].push_back(double(t[to[i]] - t[from[i]]));
      waited_free.push_back(double(t[16]));
      waited_data.push_back(double(t[17]));
      if (g0 < 0 || t[8] < g0) g0 = t[8];
      if (t[9] > g1) g1 = t[9];
      if (e0 < 0 || t[8] > e0) e0 = t[8];
      if (e1 < 0 || t[9] < e1) e1 = t[9];
    }
    std::printf("phases %s %s  %d CTAs ran a tile; span %.1f us (entries within %.1f us, "
                "first exit at %.1f us)\n", title.c_str(), back_to_back ? "back-to-back" : "after idle  ", ran,
                (g1 - g0) * 1e-3, (e0 - g0) * 1e-3, (e1 - g0) * 1e-3);
    for (int i = 0; i < kDeltas; ++i) {
      auto& v = d[i];
      if (v.empty()) continue;
      std::sort(v.begin(), v.end());
      const double med = v[v.size() / 2];
      std::printf("    %-13s %8.0f cycles [%8.0f, %8.0f]\n", labels[i], med, v[v.size() / 10], v[v.size() * 9 / 10]);
      if (i == 8) std::printf("    %-13s %8.1f cycles a k-block (%d k-blocks of the first tile)\n", "", med / k_blocks, k_blocks);
    }
    for (auto* w : {&waited_free, &waited_data}) {
      if (w->empty()) continue;
      std::sort(w->begin(), w->end());
      std::printf("    %-13s %8.0f cycles [%8.0f, %8.0f] over the first tile\n",
                  w == &waited_free ? "loader waited" : "MMA waited", (*w)[w->size() / 2], (*w)[w->size() / 10],
                  (*w)[w->size() * 9 / 10]);
    }
    std::fflush(stdout);
  }
  long long* none = nullptr;
  CHECK(cudaMemcpyToSymbol(cusync_sm90::g_phase_times, &none, sizeof(none)));
  CHECK(cudaFree(buf));
}
#endif
