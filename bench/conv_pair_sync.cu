// The Hopper conv pair (ResNet's 3x3 C -> C -> C blocks) fused in one launch
// under each policy, beside its two convs launched one after the other: why
// TileSync and Conv2DTileSync take 1.6x RowSync's time on the conv pair in
// device time (bench/NOTES_sm90.md, stop 21), outside JAX and XLA.
//
//   serial          conv 1, then conv 2: two launches, no waits
//   fused-<policy>  one launch: conv 1's tiles, then conv 2's, which wait on
//                   the producer tiles of their halo (the package's fused
//                   mode, 128x64 cooperative tiles as it picks them here)
//
// Every variant's y is checked against serial's. Times: the median over
// alternated rounds of 20 back-to-back launches between two events (a fused
// launch, or a serial pair of launches), each with its own zeroed counters
// and semaphores. Built by `HARNESS=conv_pair_sync bench/gemm_vs_cutlass.sh`.
//   conv_pair_sync [ROUNDS]          ResNet-38's 56x56x64 and 28x28x128 blocks at batch 1
//   conv_pair_sync ROUNDS H C N      one block: H x H x C, batch N
//   conv_pair_sync phases H C N      (built with -DCUSYNC_SM90_PHASE_TIMES) the fused
//                                    launches' stamps, producer and consumer CTAs apart
#include "harness.cuh"

#include <array>

using namespace cute;

// The package's fused conv configuration for 64-channel tiles where a launch
// gives a CTA at most two tiles: 128x64, cooperative.
using Conv = cusync_sm90::ChainConfig<Element, 64, false, 1, false, 2, false, true>;
constexpr int kBatch = 20;

struct Block {
  int size, c, images;
  int pixels() const { return images * size * size; }
};

// Words of one launch: the fused counter, serial's two counters, then the
// producer's semaphores.
constexpr int kCounterWords = 4;

struct PairLaunch {
  std::string name;
  std::vector<cusync_sm90::ChainParams<Conv>> launches[kBatch];  // one (fused) or two (serial) a pair
  int* words = nullptr;
  int stride = 0;

  // policy < 0: serial.
  void setup(const Block& b, int policy, const Element* x, const Element* w1, Element* h, const Element* w2,
             Element* y, int semaphores) {
    stride = kCounterWords + semaphores;
    CHECK(cudaMalloc(&words, sizeof(int) * stride * kBatch));
    const cusync::Stage tiling{b.pixels(), b.c, 1, Conv::kTileM, Conv::kTileN, cusync::TileOrder::kRowMajor, 8};
    cusync_sm90::GemmStage<Conv> conv1{}, conv2{};
    if (!cusync_sm90::make_conv_stage<Conv>(&conv1, x, b.images, b.size, b.size, b.c, 3, w1, b.c, h, nullptr,
                                            nullptr, tiling, cusync::Activation::kRelu) ||
        !cusync_sm90::make_conv_stage<Conv>(&conv2, h, b.images, b.size, b.size, b.c, 3, w2, b.c, y, nullptr,
                                            nullptr, tiling, cusync::Activation::kIdentity)) {
      std::fprintf(stderr, "the driver refused an im2col descriptor\n");
      std::exit(1);
    }
    const int positions = cusync_sm90::schedule_positions<Conv>(tiling);
    for (int i = 0; i < kBatch; ++i) {
      int* w = words + i * stride;
      cusync_sm90::ChainParams<Conv> p{};
      p.semaphores = w + kCounterWords;
      p.begin = 0;
      if (policy < 0) {
        p.policy = cusync::Policy{cusync::PolicyKind::kRowSync, 0};
        for (int stage : {0, 1}) {
          p.stage[0] = p.stage[1] = stage == 0 ? conv1 : conv2;
          p.tiles0 = stage == 0 ? positions : 0;
          p.end = positions;
          p.counter = w + 1 + stage;
          launches[i].push_back(p);
        }
      } else {
        p.policy = cusync::Policy{static_cast<cusync::PolicyKind>(policy), 0};
        p.release_store = p.policy.single_poster(tiling);
        p.stage[0] = conv1;
        p.stage[1] = conv2;
        p.tiles0 = positions;
        p.end = 2 * positions;
        p.counter = w;
        p.consumer_waits = p.producer_posts = true;
        launches[i].push_back(p);
      }
    }
  }
  void zero(cudaStream_t s) { CHECK(cudaMemsetAsync(words, 0, sizeof(int) * stride * kBatch, s)); }
  void run(int i, int sms, cudaStream_t s) {
    for (auto& p : launches[i]) CHECK(cusync_sm90::launch_chain(p, sms, s));
  }
};

int run_block(const Block& b, int rounds, int sms, cudaStream_t stream, bool phases) {
  const size_t act = size_t(b.pixels()) * b.c, filt = size_t(9) * b.c * b.c;
  Element *x, *w1, *w2;
  CHECK(cudaMalloc(&x, act * sizeof(Element)));
  CHECK(cudaMalloc(&w1, filt * sizeof(Element)));
  CHECK(cudaMalloc(&w2, filt * sizeof(Element)));
  fill<<<1024, 256>>>(x, act, 17);
  fill<<<1024, 256>>>(w1, filt, 91);
  fill<<<1024, 256>>>(w2, filt, 53);
  CHECK(cudaGetLastError());
  const cusync::Stage tiling{b.pixels(), b.c, 1, Conv::kTileM, Conv::kTileN, cusync::TileOrder::kRowMajor, 8};
  int semaphores = 0;
  for (auto kind : {cusync::PolicyKind::kTileSync, cusync::PolicyKind::kRowSync, cusync::PolicyKind::kConv2DTileSync})
    semaphores = std::max(semaphores, cusync::Policy{kind, 0}.semaphore_count(tiling));

  const std::array<std::pair<const char*, int>, 4> rows = {{
      {"serial", -1},
      {"fused-RowSync", int(cusync::PolicyKind::kRowSync)},
      {"fused-TileSync", int(cusync::PolicyKind::kTileSync)},
      {"fused-Conv2DTileSync", int(cusync::PolicyKind::kConv2DTileSync)},
  }};
  static PairLaunch pairs[rows.size()];
  std::vector<Element*> hs, ys;
  std::vector<Timed> variants;
  for (size_t v = 0; v < rows.size(); ++v) {
    Element *h, *y;
    CHECK(cudaMalloc(&h, act * sizeof(Element)));
    CHECK(cudaMalloc(&y, act * sizeof(Element)));
    CHECK(cudaMemset(y, 0, act * sizeof(Element)));
    hs.push_back(h);
    ys.push_back(y);
    PairLaunch& pl = pairs[v];
    if (pl.words) CHECK(cudaFree(pl.words));
    pl = PairLaunch{};
    pl.name = rows[v].first;
    pl.setup(b, rows[v].second, x, w1, h, w2, y, semaphores);
    variants.push_back({pl.name, [&pl](cudaStream_t s) { pl.zero(s); },
                        [&pl, sms](int i, cudaStream_t s) { pl.run(i, sms, s); }});
  }

#ifdef CUSYNC_SM90_PHASE_TIMES
  if (phases) {
    const int kb = 9 * b.c / Conv::kTileK;
    for (size_t v = 1; v < variants.size(); ++v)
      for (int stage : {1, 2}) {
        char title[112];
        std::snprintf(title, sizeof title, "%dx%dx%d batch %d  %-21s %s", b.size, b.size, b.c, b.images,
                      variants[v].name.c_str(), stage == 1 ? "conv 1 CTAs" : "conv 2 CTAs");
        PairLaunch& pl = pairs[v];
        print_phases(title, sms, kb, [&] { pl.zero(stream); }, [&](cudaStream_t s) { pl.run(0, sms, s); }, stream,
                     stage);
      }
    return 0;
  }
#else
  (void)phases;
#endif

  const std::vector<float> diff = run_once_and_compare(variants, ys, act, stream);
  const std::vector<float> med = median_us(variants, rounds, kBatch, stream);
  for (size_t v = 0; v < variants.size(); ++v)
    std::printf("%3dx%-3d x%-4d batch %2d  %-22s %8.2f us a pair  maxdiff %.3g\n", b.size, b.size, b.c, b.images,
                variants[v].name.c_str(), med[v], diff[v]);
  std::fflush(stdout);
  for (auto* p : hs) CHECK(cudaFree(p));
  for (auto* p : ys) CHECK(cudaFree(p));
  CHECK(cudaFree(x));
  CHECK(cudaFree(w1));
  CHECK(cudaFree(w2));
  return 0;
}

int main(int argc, char** argv) {
  const ConvHarnessArgs a = conv_harness_args(argc, argv);
  const std::vector<Block> blocks =
      a.one ? std::vector<Block>{{a.size, a.c, a.images}} : std::vector<Block>{{56, 64, 1}, {28, 128, 1}};
  for (const Block& b : blocks) {
    if (b.c % 64 != 0) {
      std::fprintf(stderr, "channels must be a multiple of 64 (the tile's k); got %d\n", b.c);
      return 1;
    }
    if (run_block(b, a.rounds, a.sms, a.stream, a.phases)) return 1;
  }
  return 0;
}
