// The project's Hopper GEMM (kernel family 1, one stage, no synchronization)
// against CUTLASS's own warp-specialized GEMMs, in one process, on the same
// inputs: the reference that says how much of the gap to cuBLAS is the
// kernel's and how much is the shape's. Built by bench/gemm_vs_cutlass.sh;
// prints one line per shape and kernel (median ms over alternated rounds) and
// the largest difference of each output against the first kernel's.
//   gemm_vs_cutlass [ROUNDS [M N K | few | few-c2]]
//   gemm_vs_cutlass sustain M N K SECONDS
//   gemm_vs_cutlass phases M N K   (built with -DCUSYNC_SM90_PHASE_TIMES)
// `few`: the MLP's shapes at 256, 512 and 768 rows, where 128x128 tiles leave
// SMs idle, with CUTLASS's stream-K and A-multicast GEMMs beside ours.
// `few-c2`: the same shapes, our 128x192 and 128x128 tiles alone and in 2x1
// clusters.
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

#define CHECK(x)                                                                    \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

using Element = cutlass::half_t;

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
    if (gemm.can_implement(args) != cutlass::Status::kSuccess) {
      std::fprintf(stderr, "CUTLASS cannot run %dx%dx%d\n", m, n, k);
      std::exit(1);
    }
    if (workspace) CHECK(cudaFree(workspace));
    workspace = nullptr;
    const size_t bytes = Gemm::get_workspace_size(args);
    if (bytes) CHECK(cudaMalloc(&workspace, bytes));
    if (gemm.initialize(args, workspace) != cutlass::Status::kSuccess) std::exit(1);
  }
  void run(cudaStream_t s) {
    if (gemm.run(s) != cutlass::Status::kSuccess) std::exit(1);
  }
};

using namespace cute;
using Tile128 = Shape<_128, _128, _64>;
using C1 = Shape<_1, _1, _1>;
using C2 = Shape<_2, _1, _1>;
using C1x2 = Shape<_1, _2, _1>;  // two column tiles share A (multicast)
using Pingpong = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using Cooperative = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpiTmaCoop = cutlass::epilogue::TmaWarpSpecializedCooperative;
using StreamK = cutlass::gemm::StreamKScheduler;
using Decomposition = cutlass::gemm::kernel::detail::DecompositionMode;
using EpiTma = cutlass::epilogue::TmaWarpSpecialized;
using EpiNoSmem = cutlass::epilogue::NoSmemWarpSpecialized;

// ---- The project's kernel, one GEMM through the chain kernel's serial path.
template <class Cfg>
struct OwnGemm {
  cusync_sm90::ChainParams<Cfg> p{};
  int* counter = nullptr;
  int sms = 0;

  void setup(const Element* x, const Element* w, Element* out, int m, int n, int k, int sms_,
             cusync::TileOrder order, int group_rows) {
    sms = sms_;
    if (!counter) CHECK(cudaMalloc(&counter, sizeof(int)));
    cusync::Stage tiling{m, n, 1, Cfg::kTileM, Cfg::kTileN, order, group_rows};
    p = {};
    p.stage[0] = cusync_sm90::make_gemm_stage<Cfg>(x, m, k, k, w, n, out, n, nullptr, tiling,
                                                  cusync::Activation::kIdentity);
    p.tiles0 = cusync_sm90::schedule_positions<Cfg>(tiling);  // (2x1 clusters: one per pair of row tiles)
    p.begin = 0;
    p.end = p.tiles0;
    p.counter = counter;
    p.policy = cusync::Policy{cusync::PolicyKind::kRowSync, 0};
    // Zeroed here, outside the timed span, unless memset_in_run: the
    // package zeroes it on the stream before every launch, and that variant
    // times what the zeroing adds.
    if (!memset_in_run) CHECK(cudaMemset(counter, 0, sizeof(int)));
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
    if (memset_in_run) CHECK(cudaMemsetAsync(counter, 0, sizeof(int), s));
    if (stream_k) CHECK(cudaMemsetAsync(counts, 0, sizeof(int) * p.stream_k.tiles(), s));
    CHECK(cusync_sm90::launch_chain(p, sms, s));
  }
  bool memset_in_run = false;
  bool stream_k = false;
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

// Sustained load: each variant launched back to back (batches of 50 between
// events) for `seconds`, a second of idle between variants. Prints per variant
// the median and the first and last batch's time per launch.
int sustain(std::vector<Variant>& variants, int m, int n, int k, double seconds, cudaStream_t stream) {
  Element *x, *w, *out;
  one_input_set(m, n, k, &x, &w, &out);
  cudaEvent_t ev[2];
  CHECK(cudaEventCreate(&ev[0]));
  CHECK(cudaEventCreate(&ev[1]));
  for (auto& v : variants) {
    v.setup(x, w, out, m, n, k);
    std::vector<float> per;
    const std::string start = stamp();
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < seconds) {
      CHECK(cudaEventRecord(ev[0], stream));
      for (int i = 0; i < 50; ++i) v.run(stream);
      CHECK(cudaEventRecord(ev[1], stream));
      CHECK(cudaEventSynchronize(ev[1]));
      float t;
      CHECK(cudaEventElapsedTime(&t, ev[0], ev[1]));
      per.push_back(t / 50);
    }
    const std::string end = stamp();
    std::vector<float> sorted = per;
    std::sort(sorted.begin(), sorted.end());
    std::printf("sustain %d %d %d  %-22s %s-%s  median %.4f ms  first %.4f  last %.4f  (%zu batches)\n", m, n, k,
                v.name.c_str(), start.c_str(), end.c_str(), sorted[sorted.size() / 2], per.front(), per.back(),
                per.size());
    std::fflush(stdout);
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return 0;
}

#ifdef CUSYNC_SM90_PHASE_TIMES
// `phases M N K` (built with -DCUSYNC_SM90_PHASE_TIMES): per CTA, the cycles
// of its first tile's phases from the kernel's stamps, entry -> first
// position -> first TMA issued -> first data landed -> mainloop end ->
// epilogue issued -> stores written. Printed as the median [10th, 90th
// percentile] over the CTAs that ran a tile, for a launch after an idle GPU
// (as the timed rounds launch) and for the last of 5 back-to-back launches.
template <class G>
void phases_of(const char* name, G& gemm, int m, int n, int k, int sms, cusync::TileOrder order, cudaStream_t stream,
               const Element* x, const Element* w, Element* out) {
  constexpr int kSlots = cusync_sm90::kPhaseSlots;
  const int ctas = sms;
  long long* buf;
  CHECK(cudaMalloc(&buf, sizeof(long long) * kSlots * ctas));
  CHECK(cudaMemcpyToSymbol(cusync_sm90::g_phase_times, &buf, sizeof(buf)));
  const int k_blocks = (k + 63) / 64;
  for (int back_to_back : {0, 1}) {
    gemm.setup(x, w, out, m, n, k, sms, order, 8);
    for (int i = 0; i < 3; ++i) gemm.run(stream);
    CHECK(cudaStreamSynchronize(stream));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    CHECK(cudaMemset(buf, 0, sizeof(long long) * kSlots * ctas));
    CHECK(cudaDeviceSynchronize());
    for (int i = 0; i < (back_to_back ? 5 : 1); ++i) {
      gemm.setup(x, w, out, m, n, k, sms, order, 8);  // zeroes the counter
      gemm.run(stream);
    }
    CHECK(cudaStreamSynchronize(stream));
    std::vector<long long> h(size_t(kSlots) * ctas);
    CHECK(cudaMemcpy(h.data(), buf, sizeof(long long) * h.size(), cudaMemcpyDeviceToHost));
    // Deltas per CTA that ran a tile (slot 4 set).
    // (The epilogue's two inner stamps are of a CTA's last tile: read them
    // where each CTA runs one tile.)
    constexpr int kDeltas = 11;
    const char* labels[kDeltas] = {"barriers set", "position", "resolved", "first TMA", "first data", "mainloop",
                                   "epi 1st pass", "epi last pass", "epilogue", "to exit", "entry..exit"};
    const int from[kDeltas] = {0, 0, 0, 0, 0, 4, 5, 5, 5, 6, 0}, to[kDeltas] = {12, 1, 13, 2, 4, 5, 10, 11, 6, 7, 7};
    std::vector<std::vector<double>> d(kDeltas);
    long long g0 = -1, g1 = -1, e0 = -1, e1 = -1;
    int ran = 0;
    for (int c = 0; c < ctas; ++c) {
      const long long* t = h.data() + size_t(c) * kSlots;
      if (t[4] == 0 || t[5] == 0) continue;
      ++ran;
      for (int i = 0; i < kDeltas; ++i) d[i].push_back(double(t[to[i]] - t[from[i]]));
      if (g0 < 0 || t[8] < g0) g0 = t[8];
      if (t[9] > g1) g1 = t[9];
      if (e0 < 0 || t[8] > e0) e0 = t[8];
      if (e1 < 0 || t[9] < e1) e1 = t[9];
    }
    std::printf("phases %d %d %d  %-18s %s  %d CTAs ran a tile; span %.1f us (entries within %.1f us, "
                "first exit at %.1f us)\n", m, n, k, name, back_to_back ? "back-to-back" : "after idle  ", ran,
                (g1 - g0) * 1e-3, (e0 - g0) * 1e-3, (e1 - g0) * 1e-3);
    for (int i = 0; i < kDeltas; ++i) {
      auto& v = d[i];
      if (v.empty()) continue;
      std::sort(v.begin(), v.end());
      const double med = v[v.size() / 2];
      std::printf("    %-13s %8.0f cycles [%8.0f, %8.0f]\n", labels[i], med, v[v.size() / 10], v[v.size() * 9 / 10]);
      if (i == 5) std::printf("    %-13s %8.1f cycles a k-block (%d k-blocks of the first tile)\n", "", med / k_blocks, k_blocks);
    }
    std::fflush(stdout);
  }
  long long* none = nullptr;
  CHECK(cudaMemcpyToSymbol(cusync_sm90::g_phase_times, &none, sizeof(none)));
  CHECK(cudaFree(buf));
}
#endif

int main(int argc, char** argv) {
  int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  const int iters = 20;
  const int sets = 3;  // rotated input sets
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));

  // "few": 256-768 rows; "few-c2": the same rows, 128x192 in 2x1 clusters
  // beside the plain 128x192 and 128x128 ones (on its own: new, it could hang).
  const bool few_c2 = argc == 3 && std::string(argv[2]) == "few-c2";
  const bool few = few_c2 || (argc == 3 && std::string(argv[2]) == "few");
  using Own128 = cusync_sm90::ChainConfig<Element, 128, false, 1>;
  // 128x128 cooperative (both MMA warpgroups on every tile, 64 rows each),
  // the package's form where a CTA runs at most two tiles.
  using Own128coop = cusync_sm90::ChainConfig<Element, 128, false, 1, false, 2, false>;
  using Own96 = cusync_sm90::ChainConfig<Element, 96, false, 1>;
  using Own128c2 = cusync_sm90::ChainConfig<Element, 128, false, 2>;
  using Own128sk = cusync_sm90::ChainConfig<Element, 128, false, 1, true>;
  // Wider tiles (cooperative: each MMA warpgroup 64 rows) for few rows, where
  // cuBLAS takes 192-wide tiles (bench/NOTES_sm90.md, stop 13).
  using Own192sk = cusync_sm90::ChainConfig<Element, 192, false, 1, true>;
  using Own256sk = cusync_sm90::ChainConfig<Element, 256, false, 1, true>;
  // The packaged 128x192 (4 stages), and one with a one-box epilogue band
  // and so a fifth stage.
  using Own192 = cusync_sm90::ChainConfig<Element, 192, false, 1>;
  using Own192e1 = cusync_sm90::ChainConfig<Element, 192, false, 1, false, 1>;
  // 2x1 clusters of 128x192 tiles, each CTA loading half of every B stage's
  // k for both (TMA multicast).
  using Own192c2 = cusync_sm90::ChainConfig<Element, 192, false, 2>;
  // The same clusters run stream-K: the two CTAs of a cluster take one range
  // of two adjacent row tiles' lines (192 even split at 256 rows: split-K 2
  // on 64 clusters, cuBLAS's decomposition of GPT-3's first GEMM there).
  using Own192c2sk = cusync_sm90::ChainConfig<Element, 192, false, 2, true>;
  using Own128c2sk = cusync_sm90::ChainConfig<Element, 128, false, 2, true>;
  static_assert(Own192::kStages == 4 && Own192e1::kStages == 5);
  static OwnGemm<Own128> own_grouped, own_column, own_column_memset;
  static OwnGemm<Own128sk> own_streamk;
  static OwnGemm<Own128coop> own128coop_column;
  static OwnGemm<Own192> own192_column, own192_grouped;
  static OwnGemm<Own192e1> own192_5st_column;
  static OwnGemm<Own192c2> own192_c2_column;
  static OwnGemm<Own192c2sk> own192_c2_streamk;
  static OwnGemm<Own128c2sk> own128_c2_streamk;
  own192_c2_streamk.stream_k = true;
  own128_c2_streamk.stream_k = true;
  static OwnGemm<Own192sk> own192_streamk;
  static OwnGemm<Own256sk> own256_streamk;
  own_streamk.stream_k = own192_streamk.stream_k = own256_streamk.stream_k = true;
  static OwnGemm<Own96> own96_column;
  static OwnGemm<Own128c2> own128c2_column;
  own_column_memset.memset_in_run = true;
  static CutlassGemm<Tile128, C1, Pingpong, EpiTma> pp_c1;
  static CutlassGemm<Tile128, C2, Pingpong, EpiTma> pp_c2;
  static CutlassGemm<Tile128, C1, Pingpong, EpiNoSmem> pp_c1_nosmem;
  static CutlassGemm<Tile128, C1x2, Pingpong, EpiTma> pp_c1x2;
  static CutlassGemm<Tile128, C1, Cooperative, EpiTmaCoop, StreamK> coop_dp, coop_sk, coop_heur;
  coop_dp.decomposition = Decomposition::DataParallel;
  coop_sk.decomposition = Decomposition::StreamK;
  constexpr auto kColumn = cusync::TileOrder::kColumnMajor;
  std::vector<Variant> few_variants = {
      own_variant("own128_column", own_column, kColumn, sms),
      own_variant("own128coop_column", own128coop_column, kColumn, sms),
      own_variant("own128_streamk", own_streamk, kColumn, sms),
      own_variant("own192_column", own192_column, kColumn, sms),
      own_variant("own192_5st_column", own192_5st_column, kColumn, sms),
      own_variant("own192_streamk", own192_streamk, kColumn, sms),
      own_variant("own256_streamk", own256_streamk, kColumn, sms),
      own_variant("own96_column", own96_column, kColumn, sms),
      own_variant("own128_c2_column", own128c2_column, kColumn, sms),
      cutlass_variant("cutlass_pp128_c1", pp_c1, sms),
      cutlass_variant("cutlass_pp128_c1x2", pp_c1x2, sms),
      cutlass_variant("cutlass_coop128_dp", coop_dp, sms),
      cutlass_variant("cutlass_coop128_streamk", coop_sk, sms),
      cutlass_variant("cutlass_coop128_heuristic", coop_heur, sms),
  };
  std::vector<Variant> many_variants = {
      own_variant("own128_grouped", own_grouped, cusync::TileOrder::kGrouped, sms),
      own_variant("own128_column", own_column, kColumn, sms),
      own_variant("own128_column_memset", own_column_memset, kColumn, sms),
      own_variant("own128coop_column", own128coop_column, kColumn, sms),
      own_variant("own192_grouped", own192_grouped, cusync::TileOrder::kGrouped, sms),
      own_variant("own192_5st_column", own192_5st_column, kColumn, sms),
      cutlass_variant("cutlass_pp128_c1", pp_c1, sms),
      cutlass_variant("cutlass_pp128_c2", pp_c2, sms),
      cutlass_variant("cutlass_pp128_c1_regepi", pp_c1_nosmem, sms),
  };
  std::vector<Variant> c2_variants = {
      own_variant("own192_column", own192_column, kColumn, sms),
      own_variant("own192_c2_column", own192_c2_column, kColumn, sms),
      own_variant("own192_streamk", own192_streamk, kColumn, sms),
      own_variant("own192_c2_streamk", own192_c2_streamk, kColumn, sms),
      own_variant("own128_column", own_column, kColumn, sms),
      own_variant("own128_c2_column", own128c2_column, kColumn, sms),
      own_variant("own128_streamk", own_streamk, kColumn, sms),
      own_variant("own128_c2_streamk", own128_c2_streamk, kColumn, sms),
  };
  // (Set up once and launched back to back: each launch zeroes its counter.)
  static OwnGemm<Own128> own_column_sustain;
  static OwnGemm<Own192> own192_column_sustain;
  own_column_sustain.memset_in_run = own192_column_sustain.memset_in_run = true;
  std::vector<Variant> sustain_variants = {
      own_variant("own128_column", own_column_sustain, kColumn, sms),
      own_variant("own192_column", own192_column_sustain, kColumn, sms),
      own_variant("own192_streamk", own192_streamk, kColumn, sms),
      cutlass_variant("cutlass_pp128_c1", pp_c1, sms),
      own_variant("own128_column", own_column_sustain, kColumn, sms),
  };
  std::vector<Variant>& variants = few_c2 ? c2_variants : few ? few_variants : many_variants;
  std::printf("own kernel: 128x128x64, %d stages, %d bytes of shared memory\n", Own128::kStages,
              Own128::kSmemBytes);

  // The MLP's GEMM shapes, or the one shape named on the command line
  // (`gemm_vs_cutlass ROUNDS M N K`: for a profiler run).
  std::vector<std::array<int, 3>> shapes = {{1024, 6144, 12288}, {1024, 12288, 6144}, {1024, 5632, 8192},
                                            {1024, 8192, 2816},  {4096, 6144, 12288}, {4096, 12288, 6144},
                                            {4096, 5632, 8192},  {4096, 8192, 2816}};
  if (argc == 6 && std::string(argv[1]) == "sustain") {
    // Each variant back to back for SECONDS (nvidia-smi beside it gives the
    // power and clocks of each phase; the wall-clock stamps align them).
    const int m = std::atoi(argv[2]), n = std::atoi(argv[3]), k = std::atoi(argv[4]);
    return sustain(sustain_variants, m, n, k, std::atof(argv[5]), stream);
  }
#ifdef CUSYNC_SM90_PHASE_TIMES
  if (argc == 5 && std::string(argv[1]) == "phases") {
    const int m = std::atoi(argv[2]), n = std::atoi(argv[3]), k = std::atoi(argv[4]);
    Element *x, *w, *out;
    one_input_set(m, n, k, &x, &w, &out);
    phases_of("own128_column", own_column, m, n, k, sms, kColumn, stream, x, w, out);
    phases_of("own128coop_column", own128coop_column, m, n, k, sms, kColumn, stream, x, w, out);
    phases_of("own192_column", own192_column, m, n, k, sms, kColumn, stream, x, w, out);
    return 0;
  }
#endif
  if (argc == 5) shapes = {{std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4])}};
  if (few) {
    shapes.clear();
    for (int m : {256, 512, 768})
      for (auto nk : {std::array<int, 2>{6144, 12288}, {12288, 6144}, {5632, 8192}, {8192, 2816}})
        shapes.push_back({m, nk[0], nk[1]});
  }
  cudaEvent_t ev[2];
  CHECK(cudaEventCreate(&ev[0]));
  CHECK(cudaEventCreate(&ev[1]));
  float* dmax;
  CHECK(cudaMalloc(&dmax, sizeof(float)));
  for (auto& s : shapes) {
    const int m = s[0], n = s[1], k = s[2];
    std::vector<Element*> xs(sets), ws(sets), outs(variants.size());
    for (int i = 0; i < sets; ++i) {
      CHECK(cudaMalloc(&xs[i], size_t(m) * k * sizeof(Element)));
      CHECK(cudaMalloc(&ws[i], size_t(k) * n * sizeof(Element)));
      fill<<<1024, 256>>>(xs[i], size_t(m) * k, 17 + i);
      fill<<<1024, 256>>>(ws[i], size_t(k) * n, 91 + i);
    }
    for (auto& o : outs) CHECK(cudaMalloc(&o, size_t(m) * n * sizeof(Element)));
    // Correctness on set 0 against the first variant.
    std::vector<float> diff(variants.size(), 0.f);
    for (size_t v = 0; v < variants.size(); ++v) {
      variants[v].setup(xs[0], ws[0], outs[v], m, n, k);
      variants[v].run(stream);
    }
    CHECK(cudaStreamSynchronize(stream));
    for (size_t v = 1; v < variants.size(); ++v) {
      CHECK(cudaMemset(dmax, 0, sizeof(float)));
      max_diff<<<1024, 256>>>(outs[0], outs[v], size_t(m) * n, dmax);
      CHECK(cudaMemcpy(&diff[v], dmax, sizeof(float), cudaMemcpyDeviceToHost));
    }
    // Alternated rounds; each round times `iters` launches per variant,
    // rotating the input sets (set up once per set).
    std::vector<std::vector<float>> ms(variants.size());
    for (int r = 0; r < rounds; ++r) {
      for (size_t v = 0; v < variants.size(); ++v) {
        for (int it = 0; it < iters + 3; ++it) {
          const int set = it % sets;
          variants[v].setup(xs[set], ws[set], outs[v], m, n, k);
          CHECK(cudaEventRecord(ev[0], stream));
          variants[v].run(stream);
          CHECK(cudaEventRecord(ev[1], stream));
          CHECK(cudaEventSynchronize(ev[1]));
          float t;
          CHECK(cudaEventElapsedTime(&t, ev[0], ev[1]));
          if (it >= 3) ms[v].push_back(t);
        }
      }
    }
    const double flop = 2.0 * m * n * k;
    for (size_t v = 0; v < variants.size(); ++v) {
      auto& t = ms[v];
      std::sort(t.begin(), t.end());
      const float med = t[t.size() / 2];
      std::printf("%5d %6d %6d  %-26s %8.4f ms %5.0f TF/s  maxdiff %.3g\n", m, n, k, variants[v].name.c_str(), med,
                  flop / med * 1e-9, diff[v]);
    }
    std::fflush(stdout);
    for (int i = 0; i < sets; ++i) {
      CHECK(cudaFree(xs[i]));
      CHECK(cudaFree(ws[i]));
    }
    for (auto& o : outs) CHECK(cudaFree(o));
  }
  return 0;
}
