// The project's Hopper GEMM (kernel family 1, one stage, no synchronization)
// against CUTLASS's own warp-specialized GEMMs, in one process, on the same
// inputs: the reference that says how much of the gap to cuBLAS is the
// kernel's and how much is the shape's. Built by bench/gemm_vs_cutlass.sh;
// prints one line per shape and kernel (median ms over alternated rounds) and
// the largest difference of each output against the first kernel's.
//   gemm_vs_cutlass [ROUNDS [M N K | few | few-c2 | big-c2]]
//   gemm_vs_cutlass sustain M N K SECONDS
//   gemm_vs_cutlass phases M N K   (built with -DCUSYNC_SM90_PHASE_TIMES)
// `few`: the MLP's shapes at 256, 512 and 768 rows, where 128x128 tiles leave
// SMs idle, with CUTLASS's stream-K and A-multicast GEMMs beside ours.
// `few-c2`: the same shapes, our 128x192 and 128x128 tiles alone and in 2x1
// clusters. `big-c2`: the 4096-row shapes, our 128x128 and 128x256 tiles alone
// and in 2x1 clusters, beside CUTLASS's pingpong in 2x1 clusters.
#include "harness.cuh"

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
// The phases of one of the project's GEMMs at M x N x K, one CTA per SM.
template <class G>
void phases_of(const char* name, G& gemm, int m, int n, int k, int sms, cusync::TileOrder order, cudaStream_t stream,
               const Element* x, const Element* w, Element* out) {
  char title[96];
  std::snprintf(title, sizeof title, "%d %d %d  %-18s", m, n, k, name);
  print_phases(title, sms, (k + 63) / 64, [&] { gemm.setup(x, w, out, m, n, k, sms, order, 8); },
               [&](cudaStream_t s) { gemm.run(s); }, stream);
}
#endif

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line out as it is printed (a hang keeps what came before)
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
  const bool big_c2 = argc == 3 && std::string(argv[2]) == "big-c2";
  const bool few = few_c2 || (argc == 3 && std::string(argv[2]) == "few");
  // HARNESS_BACK_TO_BACK=1: time launches back to back (see the rounds below).
  const char* b2b = std::getenv("HARNESS_BACK_TO_BACK");
  const bool back_to_back = b2b != nullptr && std::string(b2b) == "1";
  std::printf("timing: %s\n", back_to_back ? "back to back, per launch" : "one launch after an idle GPU");
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
  // 128x256 tiles (cooperative) alone and in 2x1 clusters, each CTA loading
  // 128 of B's 256 columns for both (multicast): cuBLAS's form at 4096 rows,
  // where B's bytes per multiply-add are the energy lever (bench/NOTES_sm90.md,
  // stop 24). The clusters are not in the package.
  using Own256 = cusync_sm90::ChainConfig<Element, 256, false, 1>;
  using Own256c2 = cusync_sm90::ChainConfig<Element, 256, false, 2>;
  static_assert(Own192::kStages == 4 && Own192e1::kStages == 5);
  static OwnGemm<Own128> own_grouped, own_column, own_column_counted;
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
  static OwnGemm<Own256> own256_column;
  static OwnGemm<Own256c2> own256_c2_column;
  own_column_counted.counted = true;
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
      own_variant("own128_column_counted", own_column_counted, kColumn, sms),
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
  std::vector<Variant> big_c2_variants = {
      own_variant("own128_column", own_column, kColumn, sms),
      own_variant("own128_c2_column", own128c2_column, kColumn, sms),
      own_variant("own256_column", own256_column, kColumn, sms),
      own_variant("own256_c2_column", own256_c2_column, kColumn, sms),
      cutlass_variant("cutlass_pp128_c2", pp_c2, sms),
  };
  std::vector<Variant> sustain_variants = {
      own_variant("own128_column", own_column, kColumn, sms),
      own_variant("own192_column", own192_column, kColumn, sms),
      own_variant("own192_streamk", own192_streamk, kColumn, sms),
      own_variant("own256_column", own256_column, kColumn, sms),
      own_variant("own256_c2_column", own256_c2_column, kColumn, sms),
      cutlass_variant("cutlass_pp128_c1", pp_c1, sms),
      own_variant("own128_column", own_column, kColumn, sms),
  };
#ifdef CUSYNC_SM90_PROBE_SIDES
  // "sides" (a probe build): each of these kernels whole, with its loads
  // alone and with its MMA alone, alternated in the same rounds.
  const bool sides = argc >= 3 && std::string(argv[2]) == "sides";
  std::vector<Variant> sides_variants;
  auto add_sides = [&](const char* name, auto* gemm_of_side, cusync::TileOrder order) {
    static const char* const kSide[3] = {"", "~loads", "~mma"};
    for (int side = 0; side < 3; ++side) {
      auto* g = gemm_of_side(side);
      g->side = side;
      sides_variants.push_back(own_variant((std::string(name) + kSide[side]).c_str(), *g, order, sms));
    }
  };
  auto fresh = [](auto tag) { return [](int) { return new OwnGemm<typename decltype(tag)::type>; }; };
  add_sides("own128coop_column", +fresh(std::type_identity<Own128coop>{}), kColumn);
  add_sides("own128_grouped", +fresh(std::type_identity<Own128>{}), cusync::TileOrder::kGrouped);
  add_sides("own192_grouped", +fresh(std::type_identity<Own192>{}), cusync::TileOrder::kGrouped);
  add_sides("own256_grouped", +fresh(std::type_identity<Own256>{}), cusync::TileOrder::kGrouped);
  add_sides("own96_column", +fresh(std::type_identity<Own96>{}), kColumn);
  add_sides("own128_c2_column", +fresh(std::type_identity<Own128c2>{}), kColumn);
  add_sides("own256_c2_column", +fresh(std::type_identity<Own256c2>{}), kColumn);
  sides_variants.push_back(cutlass_variant("cutlass_pp128_c1", pp_c1, sms));
#else
  const bool sides = false;
  std::vector<Variant> sides_variants;
#endif
  std::vector<Variant>& variants = sides ? sides_variants
                                   : big_c2 ? big_c2_variants
                                   : few_c2 ? c2_variants
                                   : few    ? few_variants
                                            : many_variants;
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
    // Stream-K: the mainloop row covers the first share only (a k-block count
    // of its own), and a CTA whose share is not the tile's last stamps no store.
    phases_of("own192_streamk", own192_streamk, m, n, k, sms, kColumn, stream, x, w, out);
    phases_of("own96_column", own96_column, m, n, k, sms, kColumn, stream, x, w, out);
    return 0;
  }
#endif
  if (argc == 5) shapes = {{std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4])}};
  if (sides && argc == 3) {
    shapes.clear();
    for (int m : {256, 1024, 4096})
      for (auto nk : {std::array<int, 2>{6144, 12288}, {12288, 6144}, {5632, 8192}, {8192, 2816}})
        shapes.push_back({m, nk[0], nk[1]});
  }
  if (sides && argc == 6) shapes = {{std::atoi(argv[3]), std::atoi(argv[4]), std::atoi(argv[5])}};
  if (big_c2) shapes = {{4096, 6144, 12288}, {4096, 12288, 6144}, {4096, 5632, 8192}, {4096, 8192, 2816}};
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
    // rotating the input sets (set up once per set). Each launch alone after
    // an idle GPU, or (back_to_back) the `iters` launches between two events,
    // as a stream of kernels runs them (the MLP's case), over iters.
    std::vector<std::vector<float>> ms(variants.size());
    for (int r = 0; r < rounds; ++r) {
      for (size_t v = 0; v < variants.size(); ++v) {
        if (back_to_back) {
          for (int pass = 0; pass < 2; ++pass) {  // the first warms up
            CHECK(cudaEventRecord(ev[0], stream));
            for (int it = 0; it < iters; ++it) {
              const int set = it % sets;
              variants[v].setup(xs[set], ws[set], outs[v], m, n, k);
              variants[v].run(stream);
            }
            CHECK(cudaEventRecord(ev[1], stream));
            CHECK(cudaEventSynchronize(ev[1]));
            float t;
            CHECK(cudaEventElapsedTime(&t, ev[0], ev[1]));
            if (pass == 1) ms[v].push_back(t / iters);
          }
          continue;
        }
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
