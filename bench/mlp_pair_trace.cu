// The MLP's two GEMMs (x @ w1 -> gelu -> @ w2) on the Hopper chain kernel
// outside JAX and XLA, as the package launches them: serial (two launches,
// static schedules, the consumer a programmatic dependent of the producer)
// and fused (one launch, the placed schedule, consumer tiles waiting on the
// producer's posts), each in the pingpong and the cooperative MMA form, on
// 128x128 tiles in the grouped order (bands of 8 tile rows). Every variant's
// y is checked against the first's.
//
//   mlp_pair_trace [ROUNDS [T H F]]   median us a pair over alternated rounds of
//                                     20 back-to-back pairs (default GPT-3 at 1024
//                                     tokens: 1024 12288 6144)
//   mlp_pair_trace trace T H F        (built with -DCUSYNC_SM90_TILE_TRACE) every
//                                     tile's stamps of one pair after idle and of
//                                     the last of 20 back-to-back pairs, summed up
//                                     per stage (what a tile's cycles go to, the
//                                     SM clock it ran at) and as a timeline of
//                                     what the SMs do (20 us bins)
// Built by `HARNESS=mlp_pair_trace bench/gemm_vs_cutlass.sh [-DCUSYNC_SM90_TILE_TRACE]
// [-DCUSYNC_SM90_UNIT_STRIDE=67]` (scripts/build_probes.sh builds each): the stride
// permutes which CTA takes which static positions (next_position).
// CUSYNC_PROBE_GRID=N launches N CTAs (more than are resident at once tests
// that a schedule cannot deadlock), but for the static synced row, which can.
#include "harness.cuh"

using namespace cute;

using Pingpong = cusync_sm90::ChainConfig<Element, 128, false>;
using Cooperative = cusync_sm90::ChainConfig<Element, 128, false, 1, false, 2, false>;
constexpr int kBatch = 20;

struct Shape3 {
  int t, h, f;  // tokens, hidden, ffn: x [t, h], w1 [h, f], w2 [f, h]
};

struct Inputs {
  Element *x, *w1, *w2;
};

struct Row {
  std::string name;
  int policy;       // < 0: serial
  bool cooperative;
  enum Schedule { kPlaced, kCounter, kStatic } schedule = kPlaced;  // fused: where positions come from
  bool synced = true;   // fused: the consumer waits and the producer posts (else neither: a probe)
};
// The probes: the atomic counter (the fused schedule before the placed one);
// the static schedule, deadlock-free here only because every CTA is resident
// and takes its producer positions before its consumer ones; the unsynced
// launch races (its y is not checked): what one launch of both GEMMs costs
// without any synchronization.
const Row kRows[] = {
    {"serial-pingpong", -1, false},
    {"fused-RowSync-pingpong", int(cusync::PolicyKind::kRowSync), false},
    {"fused-TileSync-pingpong", int(cusync::PolicyKind::kTileSync), false},
    {"serial-cooperative", -1, true},
    {"fused-RowSync-cooperative", int(cusync::PolicyKind::kRowSync), true},
    {"fused-RowSync-counter-pp", int(cusync::PolicyKind::kRowSync), false, Row::kCounter},
    {"fused-RowSync-static-pp", int(cusync::PolicyKind::kRowSync), false, Row::kStatic},
    {"fused-unsynced-pp", int(cusync::PolicyKind::kRowSync), false, Row::kPlaced, false},
    {"fused-unsynced-static-pp", int(cusync::PolicyKind::kRowSync), false, Row::kStatic, false},
};
// One variant: a fused launch or a serial pair, kBatch times over, each with
// its own zeroed counter and semaphores.
template <class Cfg>
struct PairLaunch {
  std::vector<cusync_sm90::ChainParams<Cfg>> launches[kBatch];
  int* words = nullptr;
  int stride = 0;

  // row.policy < 0: serial.
  void setup(const Shape3& s, const Row& row, const Inputs& in, Element* h, Element* y) {
    const int policy = row.policy;
    const cusync::Stage producer{s.t, s.f, 1, Cfg::kTileM, Cfg::kTileN, cusync::TileOrder::kGrouped, 8};
    const cusync::Stage consumer{s.t, s.h, 1, Cfg::kTileM, Cfg::kTileN, cusync::TileOrder::kGrouped, 8};
    int semaphores = 0;
    for (auto kind : {cusync::PolicyKind::kTileSync, cusync::PolicyKind::kRowSync})
      semaphores = std::max(semaphores, cusync::Policy{kind, 0}.semaphore_count(producer));
    const int P = cusync_sm90::schedule_positions<Cfg>(producer), C = cusync_sm90::schedule_positions<Cfg>(consumer);
    stride = cusync::kSyncHeaderWords + semaphores;
    stride += P + C;  // the placed schedule's flags, after the semaphores
    CHECK(cudaMalloc(&words, sizeof(int) * stride * kBatch));
    const auto g1 = cusync_sm90::make_gemm_stage<Cfg>(in.x, s.t, s.h, s.h, in.w1, s.f, h, s.f, nullptr, producer,
                                                      cusync::Activation::kGeluTanh);
    const auto g2 = cusync_sm90::make_gemm_stage<Cfg>(h, s.t, s.f, s.f, in.w2, s.h, y, s.h, nullptr, consumer,
                                                      cusync::Activation::kIdentity);
    for (int i = 0; i < kBatch; ++i) {
      int* w = words + i * stride;
      cusync_sm90::ChainParams<Cfg> p{};
      p.semaphores = w + cusync::kSyncHeaderWords;
      if (policy < 0) {
        // As launch_stage in ffi/cuda/mlp_sm90.cu runs serial mode.
        p.policy = cusync::Policy{cusync::PolicyKind::kRowSync, 0};
        cusync_sm90::ChainParams<Cfg> p1 = p, p2 = p;
        cusync_sm90::single_stage_schedule(p1, g1, 0, producer, false, w);
        cusync_sm90::single_stage_schedule(p2, g2, 1, producer, false, w);
        p2.wait_prior_grid = true;
        launches[i] = {p1, p2};
      } else {
        // As launch_fused there.
        p.policy = cusync::Policy{static_cast<cusync::PolicyKind>(policy), 0};
        p.release_store = p.policy.single_poster(producer);
        p.stage[0] = g1;
        p.stage[1] = g2;
        p.tiles0 = P;
        p.begin = 0;
        p.end = P + C;
        if (row.schedule == Row::kCounter) p.counter = w + cusync::kFusedCounter;
        if (row.schedule == Row::kPlaced) {
          p.placed_flags = w + cusync::kSyncHeaderWords + semaphores;
          p.placed_cursors = w + cusync::kPlacedCursors;
        }
        p.consumer_waits = p.producer_posts = row.synced;
        launches[i] = {p};
      }
    }
  }
  void zero(cudaStream_t st) { CHECK(cudaMemsetAsync(words, 0, sizeof(int) * stride * kBatch, st)); }
  void run(int i, int sms, cudaStream_t st) {
    for (auto& p : launches[i]) CHECK(cusync_sm90::launch_chain(p, sms, st));
  }
};

constexpr int kRowCount = sizeof(kRows) / sizeof(kRows[0]);

#ifdef CUSYNC_SM90_TILE_TRACE
// One tile's stamps (see CUSYNC_TRACE in sm90_chain_kernel.cuh).
struct TileStamps {
  const long long* s;
  bool ran() const { return s[0] != 0 && s[7] != 0; }
  // ns a cycle on this tile's SM, from the two global-timer stamps.
  double ns_per_cycle() const { return double(s[9] - s[8]) / double(s[7] - s[1]); }
  // The global time (ns) of clock stamp `slot`.
  double at(int slot) const { return double(s[8]) + double(s[slot] - s[1]) * ns_per_cycle(); }
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(q * v.size()))];
}

// The summary of one traced launch (a fused launch or a serial pair).
void print_trace(const std::string& title, const std::vector<long long>& h, const int tiles[2],
                 const int k_blocks[2]) {
  constexpr int kSlots = cusync_sm90::kTraceSlots, kStride = cusync_sm90::kTraceStageTiles;
  double t0 = 1e300, t1 = 0;
  for (int st = 0; st < 2; ++st)
    for (int i = 0; i < tiles[st]; ++i) {
      const TileStamps t{h.data() + (size_t(st) * kStride + i) * kSlots};
      if (!t.ran()) continue;
      t0 = std::min(t0, double(t.s[8]));
      t1 = std::max(t1, double(t.s[9]));
    }
  std::printf("trace %s  span %.1f us (first claim to last epilogue)\n", title.c_str(), (t1 - t0) * 1e-3);
  const char* stage_name[2] = {"GEMM 1", "GEMM 2"};
  for (int st = 0; st < 2; ++st) {
    std::vector<double> loader_wait, queue, first_data, mainloop, data_wait, epilogue, mhz;
    double first = 1e300, last = 0, main_first = 1e300;
    int ran = 0;
    for (int i = 0; i < tiles[st]; ++i) {
      const TileStamps t{h.data() + (size_t(st) * kStride + i) * kSlots};
      if (!t.ran()) continue;
      ++ran;
      loader_wait.push_back(double(t.s[2] - t.s[1]));
      queue.push_back(double(t.s[4] - t.s[1]));
      first_data.push_back(double(t.s[5] - t.s[4]));
      mainloop.push_back(double(t.s[6] - t.s[5]));
      data_wait.push_back(double(t.s[10]));
      epilogue.push_back(double(t.s[7] - t.s[6]));
      mhz.push_back(1e3 / t.ns_per_cycle());
      first = std::min(first, double(t.s[8]));
      last = std::max(last, double(t.s[9]));
      main_first = std::min(main_first, t.at(5));
    }
    std::printf("  %s: %d of %d tiles ran; claims from %.1f us, first data at %.1f us, last epilogue at %.1f us\n",
                stage_name[st], ran, tiles[st], (first - t0) * 1e-3, (main_first - t0) * 1e-3, (last - t0) * 1e-3);
    auto line = [](const char* what, const std::vector<double>& v, const char* unit) {
      std::printf("    %-20s %10.0f %s [%10.0f, %10.0f]\n", what, percentile(v, 0.5), unit, percentile(v, 0.1),
                  percentile(v, 0.9));
    };
    line("claim..first A", loader_wait, "cycles");
    line("claim..mainloop", queue, "cycles");
    line("mainloop..data", first_data, "cycles");
    line("data..mainloop end", mainloop, "cycles");
    std::printf("    %-20s %10.1f cycles a k-block (%d k-blocks)\n", "", percentile(mainloop, 0.5) / k_blocks[st],
                k_blocks[st]);
    line("MMA data waits", data_wait, "cycles");
    line("epilogue (+post)", epilogue, "cycles");
    line("SM clock", mhz, "MHz   ");
  }
  // Timeline: per 20 us bin, the mean number of MMA warpgroups in a mainloop
  // (first data to mainloop end) of each GEMM, and of GEMM 2 tiles claimed
  // but not yet computing (waiting on the producer or the other warpgroup).
  constexpr double kBin = 20e3;
  const int bins = int((t1 - t0) / kBin) + 1;
  std::vector<double> busy[2], held(bins, 0.0);
  busy[0].assign(bins, 0.0);
  busy[1].assign(bins, 0.0);
  auto spread = [&](std::vector<double>& acc, double a, double b) {
    for (int k = std::max(0, int((a - t0) / kBin)); k < bins && t0 + k * kBin < b; ++k) {
      const double lo = std::max(a, t0 + k * kBin), hi = std::min(b, t0 + (k + 1) * kBin);
      if (hi > lo) acc[k] += (hi - lo) / kBin;
    }
  };
  for (int st = 0; st < 2; ++st)
    for (int i = 0; i < tiles[st]; ++i) {
      const TileStamps t{h.data() + (size_t(st) * kStride + i) * kSlots};
      if (!t.ran()) continue;
      spread(busy[st], t.at(5), t.at(6));
      if (st == 1) spread(held, double(t.s[8]), t.at(5));
    }
  std::printf("  timeline (mean warpgroups in a mainloop: GEMM 1, GEMM 2; GEMM 2 tiles claimed, not computing)\n");
  for (int k = 0; k < bins; ++k)
    std::printf("    %5.0f us  %6.1f %6.1f  %6.1f\n", k * kBin * 1e-3, busy[0][k], busy[1][k], held[k]);
  std::fflush(stdout);
}
#endif

template <class Cfg>
Timed make_timed(PairLaunch<Cfg>& pl, const char* name, int sms) {
  return {name, [&pl](cudaStream_t s) { pl.zero(s); }, [&pl, sms](int i, cudaStream_t s) { pl.run(i, sms, s); }};
}

int main(int argc, char** argv) {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaStream_t stream;
  CHECK(cudaStreamCreate(&stream));
  const bool trace = argc > 1 && std::string(argv[1]) == "trace";
  const int rounds = !trace && argc > 1 ? std::atoi(argv[1]) : 10;
  Shape3 s{1024, 12288, 6144};
  if (argc == 5) s = {std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4])};
  if (s.t <= 0 || s.h % 128 != 0 || s.f % 128 != 0) {
    std::fprintf(stderr, "T must be positive and H, F multiples of 128; got %d %d %d\n", s.t, s.h, s.f);
    return 1;
  }
  Inputs in{};
  CHECK(cudaMalloc(&in.x, size_t(s.t) * s.h * sizeof(Element)));
  CHECK(cudaMalloc(&in.w1, size_t(s.h) * s.f * sizeof(Element)));
  CHECK(cudaMalloc(&in.w2, size_t(s.f) * s.h * sizeof(Element)));
  fill<<<1024, 256>>>(in.x, size_t(s.t) * s.h, 17);
  fill<<<1024, 256>>>(in.w1, size_t(s.h) * s.f, 91);
  fill<<<1024, 256>>>(in.w2, size_t(s.f) * s.h, 53);
  CHECK(cudaGetLastError());

  const char* grid_env = std::getenv("CUSYNC_PROBE_GRID");
  const int grid = grid_env != nullptr ? std::atoi(grid_env) : sms;
  static PairLaunch<Pingpong> pp[kRowCount];
  static PairLaunch<Cooperative> coop[kRowCount];
  std::vector<Element*> ys;
  std::vector<Timed> variants;
  const size_t out_elems = size_t(s.t) * s.h;
  for (int v = 0; v < kRowCount; ++v) {
    const int ctas = kRows[v].synced && kRows[v].schedule == Row::kStatic ? sms : grid;
    Element *h, *y;
    CHECK(cudaMalloc(&h, size_t(s.t) * s.f * sizeof(Element)));
    CHECK(cudaMalloc(&y, out_elems * sizeof(Element)));
    CHECK(cudaMemset(y, 0, out_elems * sizeof(Element)));
    ys.push_back(y);
    if (kRows[v].cooperative) {
      coop[v].setup(s, kRows[v], in, h, y);
      variants.push_back(make_timed(coop[v], kRows[v].name.c_str(), ctas));
    } else {
      pp[v].setup(s, kRows[v], in, h, y);
      variants.push_back(make_timed(pp[v], kRows[v].name.c_str(), ctas));
    }
  }
  const std::vector<float> diff = run_once_and_compare(variants, ys, out_elems, stream);
  for (int v = 0; v < kRowCount; ++v)
    if (kRows[v].synced && !(diff[v] <= 0.05f)) {
      std::fprintf(stderr, "%s differs from %s by %g\n", kRows[v].name.c_str(), kRows[0].name.c_str(), diff[v]);
      return 1;
    }

  if (trace) {
#ifdef CUSYNC_SM90_TILE_TRACE
    constexpr int kSlots = cusync_sm90::kTraceSlots, kStride = cusync_sm90::kTraceStageTiles;
    const int tiles[2] = {cusync::ceil_div(s.t, 128) * (s.f / 128), cusync::ceil_div(s.t, 128) * (s.h / 128)};
    const int k_blocks[2] = {s.h / 64, s.f / 64};
    if (tiles[0] > kStride || tiles[1] > kStride) {
      std::fprintf(stderr, "at most %d tiles a GEMM can be traced\n", kStride);
      return 1;
    }
    const size_t n = size_t(2) * kStride * kSlots;
    long long *buf, *none = nullptr;
    CHECK(cudaMalloc(&buf, n * sizeof(long long)));
    std::vector<long long> host(n);
    for (int v = 0; v < kRowCount; ++v)
      for (int back_to_back : {0, 1}) {
        Timed& t = variants[v];
        CHECK(cudaMemcpyToSymbolAsync(cusync_sm90::g_tile_trace, &none, sizeof(none), 0, cudaMemcpyHostToDevice,
                                      stream));
        t.before(stream);
        for (int i = 0; i < (back_to_back ? kBatch - 1 : 3); ++i) t.run(i, stream);
        if (!back_to_back) {
          CHECK(cudaStreamSynchronize(stream));
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        CHECK(cudaMemsetAsync(buf, 0, n * sizeof(long long), stream));
        CHECK(cudaMemcpyToSymbolAsync(cusync_sm90::g_tile_trace, &buf, sizeof(buf), 0, cudaMemcpyHostToDevice,
                                      stream));
        // A batch slot no earlier launch of this round used: its words are still zero.
        t.run(kBatch - 1, stream);
        CHECK(cudaMemcpyToSymbolAsync(cusync_sm90::g_tile_trace, &none, sizeof(none), 0, cudaMemcpyHostToDevice,
                                      stream));
        CHECK(cudaStreamSynchronize(stream));
        CHECK(cudaMemcpy(host.data(), buf, n * sizeof(long long), cudaMemcpyDeviceToHost));
        char title[160];
        std::snprintf(title, sizeof title, "%d %d %d  %s  %s", s.t, s.h, s.f, kRows[v].name.c_str(),
                      back_to_back ? "last of 20 back-to-back" : "after idle");
        print_trace(title, host, tiles, k_blocks);
      }
    CHECK(cudaFree(buf));
    return 0;
#else
    std::fprintf(stderr, "trace needs a build with -DCUSYNC_SM90_TILE_TRACE\n");
    return 1;
#endif
  }

  const std::vector<float> med = median_us(variants, rounds, kBatch, stream);
  for (int v = 0; v < kRowCount; ++v)
    std::printf("%d %d %d  %-26s %8.2f us a pair  (%.3f of serial-pingpong)  maxdiff %.3g\n", s.t, s.h, s.f,
                kRows[v].name.c_str(), med[v], med[v] / med[0], diff[v]);
  return 0;
}
