// Development harness for v4 of the Hopper GEMM-chain kernel (v4/: pingpong
// MMA warpgroups for 128x128 tiles) next to v3 (ffi/cuda/): checks v4 against a
// plain reference GEMM on random inputs, then times v3 and v4 alternated in
// rounds with CUDA events.
//
//   nvcc -O3 -std=c++20 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a \
//        -I ffi/include -I ffi -I <cutlass>/include ffi/sm90_dev/chain_dev_v4.cu -o chain_dev_v4
// or, faster on many cores, ffi/sm90_dev/build_v4.sh (the chain_dev_v4_inst_*.cu
// units and this file with -DCHAIN_DEV_SPLIT, in parallel); one device call
// that builds, checks and times: ffi/sm90_dev/run_v4_device.sh.
//   ./chain_dev_v4 check | bench [rounds] | gemm [rounds] | mlp [rounds]
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/sm90_chain_launch.cuh"
#include "v4/sm90_chain_launch.cuh"
#include "chain_dev_v4_inst.h"

#ifdef CHAIN_DEV_SPLIT
// Kernels are compiled in the chain_dev_v4_inst_*.cu units, in parallel.
#define CHAIN_DEV_EXTERN(ns, E, N, S) extern CHAIN_DEV_INSTANCE(ns, E, N, S)
CHAIN_DEV_ALL(CHAIN_DEV_EXTERN)
#endif
#include "cusync/sync_layout.h"

#define CHECK_CUDA(x)                                                                       \
  do {                                                                                      \
    cudaError_t e_ = (x);                                                                   \
    if (e_ != cudaSuccess) {                                                                \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                         \
    }                                                                                       \
  } while (0)

// The two kernel versions behind one interface.
struct V3 {
  static constexpr const char* name = "v3";
  template <class C> using Cfg = cusync_sm90::ChainConfig<typename C::E, C::N, C::S>;
  template <class Cf> using Params = cusync_sm90::ChainParams<Cf>;
  template <class Cf, class... A> static auto stage(A... a) { return cusync_sm90::make_gemm_stage<Cf>(a...); }
  template <class Cf> static cudaError_t launch(const Params<Cf>& p, int sms, cudaStream_t s) {
    return cusync_sm90::launch_chain(p, sms, s);
  }
};
struct V4 {
  static constexpr const char* name = "v4";
  template <class C> using Cfg = cusync_sm90_v4::ChainConfig<typename C::E, C::N, C::S>;
  template <class Cf> using Params = cusync_sm90_v4::ChainParams<Cf>;
  template <class Cf, class... A> static auto stage(A... a) { return cusync_sm90_v4::make_gemm_stage<Cf>(a...); }
  template <class Cf> static cudaError_t launch(const Params<Cf>& p, int sms, cudaStream_t s) {
    return cusync_sm90_v4::launch_chain(p, sms, s);
  }
};
// Element type, tile width, SwiGLU.
template <class E_, int N_, bool S_> struct Shape_ { using E = E_; static constexpr int N = N_; static constexpr bool S = S_; };
using H128 = Shape_<cute::half_t, 128, false>;
using H256 = Shape_<cute::half_t, 256, false>;
using B128 = Shape_<cute::bfloat16_t, 128, false>;
using B256 = Shape_<cute::bfloat16_t, 256, false>;
using H128S = Shape_<cute::half_t, 128, true>;
using H256S = Shape_<cute::half_t, 256, true>;
using B128S = Shape_<cute::bfloat16_t, 128, true>;

static int g_sms = 132;

template <class T>
__global__ void fill_random(T* p, long long n, unsigned seed, float scale) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    unsigned z = (unsigned)(i * 2654435761ull) ^ (seed * 0x9e3779b9u);
    z ^= z >> 15; z *= 0x2c1b3c6du; z ^= z >> 12; z *= 0x297a2d39u; z ^= z >> 15;
    p[i] = T(scale * ((z & 0xffffff) / float(0x1000000) * 2.f - 1.f));
  }
}

// out[r, c] = act(sum_k A(r, k) * B[k, c] + bias[c]); A(r,k) = a[r*lda+k] (times
// a[r*lda + up_off + k] when up_off > 0: SwiGLU). fp32 result.
template <class T>
__global__ void reference_gemm(const T* a, int lda, int up_off, const T* b, int ldb, const T* bias,
                               float* out, int rows, int cols, int k, int act, int slice_cols) {
  int r = blockIdx.y, c = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= rows || c >= cols) return;
  float s = 0.f;
  for (int i = 0; i < k; ++i) {
    float av = float(a[(long long)r * lda + i]);
    if (up_off > 0) av = float(T(av * float(a[(long long)r * lda + up_off + i])));
    s += av * float(b[(long long)i * ldb + c]);
  }
  if (bias) s += float(bias[c]);
  out[(long long)r * cols + c] = cusync::activate(cusync::Activation(act), c / slice_cols, s);
}

template <class T>
__global__ void to_float(const T* in, float* out, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    out[i] = float(in[i]);
}

template <class T>
__global__ void poison(T* p, long long n) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x)
    p[i] = T(NAN);
}

// ||x - ref|| / ||ref||, NaN if x has any NaN.
static double rel_err(const float* x_dev, const float* ref_dev, long long n) {
  std::vector<float> x(n), r(n);
  CHECK_CUDA(cudaMemcpy(x.data(), x_dev, n * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(r.data(), ref_dev, n * 4, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (long long i = 0; i < n; ++i) {
    if (std::isnan(x[i])) return NAN;
    num += (double(x[i]) - r[i]) * (double(x[i]) - r[i]);
    den += double(r[i]) * r[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

template <class T>
T* alloc_random(long long n, unsigned seed, float scale) {
  T* p;
  CHECK_CUDA(cudaMalloc(&p, n * sizeof(T)));
  fill_random<<<1024, 256>>>(p, n, seed, scale);
  return p;
}

// One MLP (or a single GEMM when ffn == 0 paths are not used) on device buffers.
template <class V, class Sh>
struct Mlp {
  using Cfg = typename V::template Cfg<Sh>;
  using E = typename Cfg::Element;
  int T, H, F, O, slices;
  cusync::Activation act;
  E *x, *w1, *b1, *w2, *b2, *h, *y;
  int* sync;
  cusync::Stage P, C;

  Mlp(int T_, int H_, int F_, int O_, cusync::Activation a, unsigned seed)
      : T(T_), H(H_), F(F_), O(O_), slices(cusync::activation_slices(a)), act(a) {
    const float s1 = 1.f / std::sqrt(float(H)), s2 = 1.f / std::sqrt(float(F));
    x = alloc_random<E>((long long)T * H, seed, 1.f);
    w1 = alloc_random<E>((long long)H * slices * F, seed + 1, 2.f * s1);
    b1 = alloc_random<E>((long long)slices * F, seed + 2, 0.5f);
    w2 = alloc_random<E>((long long)F * O, seed + 3, 2.f * s2);
    b2 = alloc_random<E>(O, seed + 4, 0.5f);
    CHECK_CUDA(cudaMalloc(&h, (long long)T * slices * F * sizeof(E)));
    CHECK_CUDA(cudaMalloc(&y, (long long)T * O * sizeof(E)));
    P = cusync::Stage{T, F, slices, Cfg::kTileM, Cfg::kTileN,
                      slices > 1 ? cusync::TileOrder::kStrided : cusync::TileOrder::kRowMajor};
    C = cusync::Stage{T, O, 1, Cfg::kTileM, Cfg::kTileN, cusync::TileOrder::kRowMajor};
    CHECK_CUDA(cudaMalloc(&sync, cusync::sync_words(P) * sizeof(int)));
  }

  typename V::template Params<Cfg> params(cusync::Policy policy) const {
    typename V::template Params<Cfg> p{};
    p.stage[0] = V::template stage<Cfg>(x, nullptr, T, H, H, w1, slices * F, h, slices * F, b1, P, act);
    p.stage[1] = V::template stage<Cfg>(h, slices > 1 ? h + F : nullptr, T, F, slices * F, w2, O, y, O,
                                      b2, C, cusync::Activation::kIdentity);
    p.tiles0 = P.tile_count();
    p.semaphores = sync + cusync::kSyncHeaderWords;
    p.policy = policy;
    p.release_store = policy.single_poster(P);
    return p;
  }

  // mode: 0 serial (two launches), 2 fused.
  void run(int mode, cusync::Policy policy, cudaStream_t st = 0) const {
    CHECK_CUDA(cudaMemsetAsync(sync, 0, cusync::sync_words(P) * sizeof(int), st));
    auto p = params(policy);
    const int n0 = P.tile_count(), n1 = C.tile_count();
    if (mode == 2) {
      p.begin = 0; p.end = n0 + n1; p.counter = sync + cusync::kFusedCounter;
      p.consumer_waits = true; p.producer_posts = true;
      CHECK_CUDA(V::launch(p, g_sms, st));
    } else {
      p.consumer_waits = false; p.producer_posts = false;
      p.begin = 0; p.end = n0; p.counter = sync + cusync::kProducerCounter;
      CHECK_CUDA(V::launch(p, g_sms, st));
      p.begin = n0; p.end = n0 + n1; p.counter = sync + cusync::kConsumerCounter;
      CHECK_CUDA(V::launch(p, g_sms, st));
    }
  }

  // Only the first GEMM (x @ w1 + b1, activation): the GEMM-alone timing.
  void run_gemm1(cudaStream_t st = 0) const {
    CHECK_CUDA(cudaMemsetAsync(sync, 0, sizeof(int) * cusync::kSyncHeaderWords, st));
    auto p = params(cusync::Policy{cusync::PolicyKind::kTileSync, 0});
    p.begin = 0; p.end = P.tile_count(); p.counter = sync + cusync::kProducerCounter;
    CHECK_CUDA(V::launch(p, g_sms, st));
  }

  // Relative errors of h and y against the reference chain (computed from the
  // kernel's own h for y, so each GEMM is checked on its own inputs).
  std::pair<double, double> check() const {
    const long long nh = (long long)T * slices * F, ny = (long long)T * O;
    float *hr, *yr, *hk, *yk;
    CHECK_CUDA(cudaMalloc(&hr, nh * 4)); CHECK_CUDA(cudaMalloc(&yr, ny * 4));
    CHECK_CUDA(cudaMalloc(&hk, nh * 4)); CHECK_CUDA(cudaMalloc(&yk, ny * 4));
    reference_gemm<E><<<dim3((slices * F + 127) / 128, T), 128>>>(x, H, 0, w1, slices * F, b1, hr, T,
                                                                  slices * F, H, int(act), F);
    reference_gemm<E><<<dim3((O + 127) / 128, T), 128>>>(h, slices * F, slices > 1 ? F : 0, w2, O, b2,
                                                         yr, T, O, F, 0, 1 << 30);
    to_float<E><<<1024, 256>>>(h, hk, nh);
    to_float<E><<<1024, 256>>>(y, yk, ny);
    CHECK_CUDA(cudaDeviceSynchronize());
    auto r = std::make_pair(rel_err(hk, hr, nh), rel_err(yk, yr, ny));
    cudaFree(hr); cudaFree(yr); cudaFree(hk); cudaFree(yk);
    return r;
  }

  void poison_outputs() const {
    poison<E><<<1024, 256>>>(h, (long long)T * slices * F);
    poison<E><<<1024, 256>>>(y, (long long)T * O);
  }

  void free_all() {
    for (void* q : {(void*)x, (void*)w1, (void*)b1, (void*)w2, (void*)b2, (void*)h, (void*)y, (void*)sync})
      cudaFree(q);
  }
};

static const char* policy_name(cusync::PolicyKind k) {
  switch (k) {
    case cusync::PolicyKind::kRowSync: return "RowSync";
    case cusync::PolicyKind::kStridedSync: return "StridedSync";
    default: return "TileSync";
  }
}

static int failures = 0;

template <class V, class Sh>
void check_case(const char* dtype, int T, int H, int F, int O, cusync::Activation act, int mode,
                cusync::PolicyKind pk) {
  Mlp<V, Sh> m(T, H, F, O, act, 1234u + T + F);
  m.poison_outputs();
  m.run(mode, cusync::Policy{pk, 0});
  CHECK_CUDA(cudaDeviceSynchronize());
  auto [eh, ey] = m.check();
  const double tol = std::strcmp(dtype, "bf16") == 0 ? 2e-2 : 4e-3;
  const bool ok = eh < tol && ey < tol;  // NaN fails
  if (!ok) ++failures;
  std::printf("check %s %-4s tile 128x%d T=%d H=%d F=%d O=%d act=%d %s %-11s  h %.2e  y %.2e  %s\n", V::name,
              dtype, Sh::N, T, H, F, O, int(act), mode == 2 ? "fused " : "serial", policy_name(pk), eh, ey,
              ok ? "ok" : "FAIL");
  std::fflush(stdout);
  m.free_all();
}

template <class F>
float time_ms(F&& f, int iters) {
  cudaEvent_t a, b;
  CHECK_CUDA(cudaEventCreate(&a)); CHECK_CUDA(cudaEventCreate(&b));
  for (int i = 0; i < 3; ++i) f(i);
  std::vector<float> ts;
  for (int i = 0; i < iters; ++i) {
    CHECK_CUDA(cudaEventRecord(a));
    f(i);
    CHECK_CUDA(cudaEventRecord(b));
    CHECK_CUDA(cudaEventSynchronize(b));
    float ms; CHECK_CUDA(cudaEventElapsedTime(&ms, a, b));
    ts.push_back(ms);
  }
  cudaEventDestroy(a); cudaEventDestroy(b);
  std::sort(ts.begin(), ts.end());
  return ts[ts.size() / 2];
}

// Medians over rounds, keyed by a label.
static std::vector<std::pair<std::string, std::vector<float>>> g_results;
static void record(const std::string& key, float ms) {
  for (auto& [k, v] : g_results)
    if (k == key) { v.push_back(ms); return; }
  g_results.push_back({key, {ms}});
}
static float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5f * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// GEMM alone: [M, K] @ [K, N] through the first stage of an MLP of those sizes
// (two rotated input sets: the weight of the small shapes fits in L2).
template <class V, class Sh>
void bench_gemm(const char* dtype, int M, int N, int K) {
  Mlp<V, Sh> a(M, K, N, 8, cusync::Activation::kIdentity, 7), b(M, K, N, 8, cusync::Activation::kIdentity, 9);
  const float ms = time_ms([&](int i) { (i % 2 ? b : a).run_gemm1(); }, 30);
  const double tf = 2.0 * M * N * K / (ms * 1e-3) / 1e12;
  std::printf("gemm %s %-4s 128x%-3d M=%5d N=%5d K=%5d  %.4f ms  %.0f TFLOP/s\n", V::name, dtype, Sh::N, M, N, K,
              ms, tf);
  char key[128];
  std::snprintf(key, sizeof key, "gemm %-4s M=%5d N=%5d K=%5d | %s 128x%d", dtype, M, N, K, V::name, Sh::N);
  record(key, ms);
  std::fflush(stdout);
  a.free_all(); b.free_all();
}

template <class V, class Sh>
void bench_mlp(const char* dtype, const char* model, int T, int H, int F, int O, cusync::Activation act) {
  Mlp<V, Sh> a(T, H, F, O, act, 11), b(T, H, F, O, act, 13);
  const int slices = cusync::activation_slices(act);
  std::vector<std::pair<std::string, cusync::PolicyKind>> pols;
  if (slices > 1) pols = {{"Strided", cusync::PolicyKind::kStridedSync}, {"Tile", cusync::PolicyKind::kTileSync}};
  else pols = {{"Row", cusync::PolicyKind::kRowSync}, {"Tile", cusync::PolicyKind::kTileSync}};
  const float serial = time_ms([&](int i) { (i % 2 ? b : a).run(0, cusync::Policy{pols[0].second, 0}); }, 15);
  std::printf("mlp %s %-4s %-5s 128x%-3d T=%5d serial %.4f ms", V::name, dtype, model, Sh::N, T, serial);
  char key[160];
  std::snprintf(key, sizeof key, "mlp %-5s T=%5d | %s 128x%d serial", model, T, V::name, Sh::N);
  record(key, serial);
  for (auto& [name, pk] : pols) {
    const float f = time_ms([&](int i) { (i % 2 ? b : a).run(2, cusync::Policy{pk, 0}); }, 15);
    std::printf("  %s %.4f ms (%.2fx)", name.c_str(), f, serial / f);
    std::snprintf(key, sizeof key, "mlp %-5s T=%5d | %s 128x%d fused %s", model, T, V::name, Sh::N, name.c_str());
    record(key, f);
  }
  std::printf("\n");
  std::fflush(stdout);
  a.free_all(); b.free_all();
}

int main(int argc, char** argv) {
  const std::string what = argc > 1 ? argv[1] : "check";
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  g_sms = prop.multiProcessorCount;
  using C4 = V4::Cfg<H128>;
  using C4S = V4::Cfg<H128S>;
  using C4W = V4::Cfg<H256>;
  std::printf("%s, %d SMs; v4 smem bytes: H128 %d H256 %d H128S %d (stages %d %d %d)\n", prop.name, g_sms,
              C4::kSmemBytes, C4W::kSmemBytes, C4S::kSmemBytes, C4::kStages, C4W::kStages, C4S::kStages);
  using A = cusync::Activation;
  using PK = cusync::PolicyKind;
  if (what == "check") {
    // Partial tiles in every dimension, both modes, every policy.
    check_case<V4, H128>("f16", 300, 1000, 392, 520, A::kGelu, 0, PK::kTileSync);
    check_case<V4, H128>("f16", 300, 1000, 392, 520, A::kGelu, 2, PK::kTileSync);
    check_case<V4, H128>("f16", 300, 1000, 392, 520, A::kGelu, 2, PK::kRowSync);
    check_case<V4, H256>("f16", 300, 1000, 392, 520, A::kGelu, 2, PK::kRowSync);
    check_case<V4, H256>("f16", 1024, 2048, 1536, 2048, A::kGeluTanh, 2, PK::kTileSync);
    check_case<V4, B256>("bf16", 1024, 2048, 1536, 2048, A::kGelu, 2, PK::kRowSync);
    check_case<V4, B128>("bf16", 640, 1024, 768, 1280, A::kRelu, 2, PK::kTileSync);
    // One k-block per tile, a ragged one, and producer/consumer K that differ:
    // the warpgroup that skips a tile steps over its k-blocks.
    check_case<V4, H128>("f16", 136, 64, 200, 264, A::kRelu, 2, PK::kTileSync);
    check_case<V4, H128>("f16", 520, 40, 1064, 328, A::kSilu, 2, PK::kRowSync);
    check_case<V4, H128>("f16", 4100, 2056, 136, 3000, A::kGelu, 0, PK::kTileSync);
    check_case<V4, H128S>("f16", 520, 1024, 704, 1024, A::kSwiglu, 2, PK::kStridedSync);
    check_case<V4, H128S>("f16", 520, 1024, 704, 1024, A::kSwiglu, 2, PK::kTileSync);
    check_case<V4, H256S>("f16", 520, 1024, 704, 1024, A::kSwiglu, 2, PK::kTileSync);
    check_case<V4, B128S>("bf16", 1024, 2048, 1408, 2048, A::kSwiglu, 2, PK::kStridedSync);
    check_case<V4, B128S>("bf16", 1024, 2048, 1408, 2048, A::kSwiglu, 0, PK::kStridedSync);
    // Repeat fused cases to catch races.
    for (int i = 0; i < 3; ++i) check_case<V4, H128>("f16", 2048, 4096, 2048, 4096, A::kGelu, 2, PK::kTileSync);
    for (int i = 0; i < 2; ++i) check_case<V4, H128>("f16", 4096, 2048, 6144, 2048, A::kGelu, 2, PK::kRowSync);
    std::printf("%s\n", failures ? "CHECK FAILED" : "all checks passed");
    return failures ? 1 : 0;
  }
  if (what == "bench" || what == "gemm" || what == "mlp") {
    const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
    const int shapes[4][2] = {{6144, 12288}, {12288, 6144}, {5632, 8192}, {8192, 2816}};
    for (int r = 0; r < rounds; ++r) {
      std::printf("-- round %d\n", r);
      std::fflush(stdout);
      if (what != "mlp")
        for (int M : {1024, 4096})
          for (auto& s : shapes) {
            bench_gemm<V3, H128>("f16", M, s[0], s[1]);
            bench_gemm<V4, H128>("f16", M, s[0], s[1]);
            bench_gemm<V3, H256>("f16", M, s[0], s[1]);
            bench_gemm<V4, H256>("f16", M, s[0], s[1]);
          }
      if (what != "gemm")
        for (int T : {256, 1024, 4096}) {
          bench_mlp<V3, H128>("f16", "gpt3", T, 12288, 6144, 12288, A::kGelu);
          bench_mlp<V4, H128>("f16", "gpt3", T, 12288, 6144, 12288, A::kGelu);
          bench_mlp<V3, H256>("f16", "gpt3", T, 12288, 6144, 12288, A::kGelu);
          bench_mlp<V4, H256>("f16", "gpt3", T, 12288, 6144, 12288, A::kGelu);
          bench_mlp<V3, H128S>("f16", "llama", T, 8192, 2816, 8192, A::kSwiglu);
          bench_mlp<V4, H128S>("f16", "llama", T, 8192, 2816, 8192, A::kSwiglu);
        }
    }
    std::printf("\n== medians over %d rounds (ms)\n", rounds);
    for (auto& [k, v] : g_results) std::printf("%s  %.4f\n", k.c_str(), median(v));
    return 0;
  }
  std::fprintf(stderr, "usage: chain_dev_v4 check | bench [rounds] | gemm [rounds] | mlp [rounds]\n");
  return 2;
}
