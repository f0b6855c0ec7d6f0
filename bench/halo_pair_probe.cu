// The package's halo conv kernel (ffi/cuda/halo_conv_sm90.cuh) outside XLA:
// a ResNet pair of C channels (64: B resident; more: B streamed with each
// unit, as the package does), in serial launches, checked against a
// CPU reference, timed, and watched: each CTA stamps its phases into
// host-mapped memory (CUSYNC_HALO_STAMPS), so a launch that does not finish
// within 3 s is reported CTA by CTA instead of hanging the run.
//
// Built by `HARNESS=halo_pair_probe bench/gemm_vs_cutlass.sh -DCUSYNC_HALO_STAMPS`.
//   halo_pair_probe N [H W [C]]  (default 56 x 56, C = 64); without
//                                -DCUSYNC_HALO_STAMPS it times the launches
//                                and checks, no more. Each launch runs the
//                                package's instance and grid for its tiles.
#include <cuda.h>
#include <cudaTypedefs.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "cuda/halo_conv_sm90.cuh"
#include "cuda_exit_check.h"

using namespace cusync_halo;

static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled() {
  void* pfn = nullptr;
  cudaDriverEntryPointQueryResult q;
  CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &pfn, 12000, cudaEnableDefault, &q));
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(pfn);
}

static void encode(CUtensorMap* map, const void* ptr, int rank, const cuuint64_t* dims, const cuuint64_t* strides,
                   const cuuint32_t* box) {
  const cuuint32_t unit[4] = {1, 1, 1, 1};
  if (encode_tiled()(map, CU_TENSOR_MAP_DATA_TYPE_FLOAT16, rank, const_cast<void*>(ptr), dims, strides, box, unit,
                     CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
    std::fprintf(stderr, "encode failed\n");
    std::exit(1);
  }
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1, h = argc > 3 ? std::atoi(argv[2]) : 56,
            w = argc > 3 ? std::atoi(argv[3]) : 56;
  const int C = argc > 4 ? std::atoi(argv[4]) : 64;
  if (C < 64 || C % 64) {
    std::fprintf(stderr, "C must be a positive multiple of 64, got %d\n", C);
    return 1;
  }
  const int blocks = C / 64;  // channel blocks, in and out
  const size_t px = size_t(n) * h * w;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<__half> hx(px * C), hk1(9 * C * C), hk2(9 * C * C), hb1(C), hb2(C);
  for (auto& v : hx) v = __float2half(u(rng));
  for (auto& v : hk1) v = __float2half(u(rng) / 24.f);
  for (auto& v : hk2) v = __float2half(u(rng) / 24.f);
  for (auto& v : hb1) v = __float2half(0.1f * u(rng));
  for (auto& v : hb2) v = __float2half(0.1f * u(rng));
  __half *x, *k1, *k2, *b1, *b2, *mid, *y;
  int* sync;
  CHECK(cudaMalloc(&x, px * C * 2));
  CHECK(cudaMalloc(&mid, px * C * 2));
  CHECK(cudaMalloc(&y, px * C * 2));
  CHECK(cudaMalloc(&k1, 9 * C * C * 2));
  CHECK(cudaMalloc(&k2, 9 * C * C * 2));
  CHECK(cudaMalloc(&b1, C * 2));
  CHECK(cudaMalloc(&b2, C * 2));
  CHECK(cudaMalloc(&sync, 1 << 20));
  CHECK(cudaMemcpy(x, hx.data(), px * C * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(k1, hk1.data(), hk1.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(k2, hk2.data(), hk2.size() * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b1, hb1.data(), C * 2, cudaMemcpyHostToDevice));
  CHECK(cudaMemcpy(b2, hb2.data(), C * 2, cudaMemcpyHostToDevice));

  HaloParams<__half> p{};
  p.tiling = cusync::make_halo_tiling(n, h, w);
  const auto& g = p.tiling;
  const cuuint64_t xdims[4] = {cuuint64_t(C), cuuint64_t(w), cuuint64_t(h), cuuint64_t(n)};
  const cuuint64_t xstrides[3] = {cuuint64_t(C) * 2, cuuint64_t(w) * C * 2, cuuint64_t(h) * w * C * 2};
  const cuuint32_t xbox[4] = {kC, cuuint32_t(g.bw), cuuint32_t(g.rows), g.paired ? 2u : 1u};
  const cuuint64_t wdims[2] = {cuuint64_t(C), 9 * cuuint64_t(C)};
  const cuuint64_t wstrides[1] = {cuuint64_t(C) * 2};
  const cuuint32_t wbox[2] = {kC, kC};
  encode(&p.x[0], x, 4, xdims, xstrides, xbox);
  encode(&p.x[1], mid, 4, xdims, xstrides, xbox);
  encode(&p.w[0], k1, 2, wdims, wstrides, wbox);
  encode(&p.w[1], k2, 2, wdims, wstrides, wbox);
  p.conv[0] = HaloConv<__half>{b1, nullptr, mid, blocks, blocks, C, cusync::Activation::kRelu, 1, 0, nullptr, nullptr};
  p.conv[1] = HaloConv<__half>{b2, nullptr, y, blocks, blocks, C, cusync::Activation::kIdentity, 1, 0, nullptr, nullptr};
  p.tiles0 = g.tiles() * blocks;
  p.semaphores = sync + 8;
  p.resident_b = cusync::halo_resident_b(C, C, C);
  p.halo_bytes = g.box_positions() * kRowBytes;
  p.halo_stage_bytes = g.halo_stage_bytes();
  p.stage_bytes = g.stage_bytes(p.resident_b);
  int optin = 0, sms = 0;
  CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  p.stages = cusync::halo_stages(g, p.resident_b, optin);
  const size_t smem = cusync::halo_smem_bytes(p.resident_b, p.stage_bytes, p.stages);
  // The package's instance for a launch of `tiles` tiles (halo_conv_instance:
  // no split, no pixel8 here) and its grid, a CTA a tile at most.
  const auto kernel_for = [&](int tiles) { return halo_conv_instance<__half, __half2>(p, tiles, sms); };
  for (auto k : {halo_conv_kernel<__half, __half2, false, false>, halo_conv_kernel<__half, __half2, true, true>,
                 halo_conv_kernel<__half, __half2, true, false>})
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  const auto grid_for = [&](int tiles) { return std::min(tiles, sms); };
  unsigned long long* stamps = nullptr;
  CHECK(cudaHostAlloc(&stamps, 16 * 1024 * sizeof(unsigned long long), cudaHostAllocMapped));
#ifdef CUSYNC_HALO_STAMPS
  unsigned long long* dstamps = nullptr;
  CHECK(cudaHostGetDevicePointer(&dstamps, stamps, 0));
  CHECK(cudaMemcpyToSymbol(halo_stamps, &dstamps, sizeof(dstamps)));
#endif
  std::printf("n=%d h=%d w=%d C=%d tiles=%d a conv stages=%d smem=%zu resident_b=%d bw=%d rows=%d\n", n, h, w, C,
              p.tiles0, p.stages, smem, p.resident_b, g.bw, g.rows);

  const auto launch = [&](int stage) {
    HaloParams<__half> q = p;
    q.begin = stage == 0 ? 0 : p.tiles0;
    q.end = stage == 0 ? p.tiles0 : 2 * p.tiles0;
    q.counter = stage == 0 ? nullptr : sync + stage;  // conv 1 static, conv 2 from a counter
    const int grid = grid_for(p.tiles0);
    std::memset(stamps, 0, 16 * 1024 * sizeof(unsigned long long));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    CHECK(cudaEventRecord(e0));
    kernel_for(p.tiles0)<<<grid, kThreads, smem>>>(q);
    CHECK(cudaEventRecord(e1));
    CHECK(cudaGetLastError());
    const auto t0 = std::chrono::steady_clock::now();
    while (cudaStreamQuery(0) == cudaErrorNotReady) {
      if (std::chrono::steady_clock::now() - t0 > std::chrono::seconds(3)) {
        std::printf("stage %d HANG; per CTA: start, first atomic, last tile, producer end, c0 full, c0 wbar, c0 mma, "
                    "c0 store, c0 exit, c1 exit, c0 tiles, c1 tiles, producer v, c0 v0, c1 v0 (times in us)\n",
                    stage);
        for (int b = 0; b < grid; ++b) {
          const unsigned long long* s = stamps + b * 16;
          const auto us = [&](int i) { return s[i] ? double(s[i] - s[0]) / 1e3 : -1.0; };
          std::printf("cta %3d: %.2f %.2f tile %llu end %.2f | %.2f %.2f %.2f %.2f exit %.2f %.2f | tiles %llu %llu | v %llu %llu %llu\n",
                      b, 0.0, us(1), s[2], us(3), us(4), us(5), us(6), us(7), us(8), us(9), s[10], s[11], s[12],
                      s[13], s[14]);
        }
        std::fflush(stdout);
        std::_Exit(3);
      }
    }
    CHECK(cudaGetLastError());
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    std::printf("stage %d launch %.2f us\n", stage, ms * 1e3);
#ifdef CUSYNC_HALO_STAMPS
    unsigned long long first = ~0ull, last = 0;
    double mma = 0, wbar = 0, full = 0;
    for (int b = 0; b < grid; ++b) {
      const unsigned long long* s = stamps + b * 16;
      first = std::min(first, s[0]);
      last = std::max({last, s[8], s[9], s[3]});
      full += (s[4] - s[0]) / 1e3 / grid;
      wbar += (s[5] - s[0]) / 1e3 / grid;
      mma += (s[6] - s[0]) / 1e3 / grid;
    }
    std::printf("stage %d done: span %.2f us; mean from CTA start: c0 full %.2f, wbar %.2f, first MMAs done %.2f\n",
                stage, (last - first) / 1e3, full, wbar, mma);
    const unsigned long long* s = stamps;
    std::printf("  cta 0: atomic %.2f end %.2f full %.2f wbar %.2f mma %.2f store %.2f exit %.2f %.2f tiles %llu %llu\n",
                (s[1] - s[0]) / 1e3, (s[3] - s[0]) / 1e3, (s[4] - s[0]) / 1e3, (s[5] - s[0]) / 1e3,
                (s[6] - s[0]) / 1e3, (s[7] - s[0]) / 1e3, (s[8] - s[0]) / 1e3, (s[9] - s[0]) / 1e3, s[10], s[11]);
#endif
  };
  for (int rep = 0; rep < 3; ++rep) {
    CHECK(cudaMemset(sync, 0, 1 << 20));
    launch(0);
    launch(1);
  }
#ifndef CUSYNC_HALO_STAMPS
  // Timing: back-to-back calls as the package makes them (serial: static
  // schedules; fused: the sync words zeroed first), 20 a round between events, rounds alternated
  // between the four forms; medians of 7 rounds, in us a call.
  {
    const size_t zeroed = (8 + size_t(p.tiles0)) * sizeof(int);
    const auto issue = [&](int begin, int end, int counter, int synced, int pdl = 0) {
      HaloParams<__half> q = p;
      q.begin = begin;
      q.end = end;
      q.counter = counter < 0 ? nullptr : sync + counter;
      q.posts = q.waits = synced;
      q.wait_prior_grid = pdl;
      cudaLaunchAttribute attr{};
      attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr.val.programmaticStreamSerializationAllowed = 1;
      cudaLaunchConfig_t config{};
      config.gridDim = dim3(grid_for(end - begin), 1, 1);
      config.blockDim = dim3(kThreads, 1, 1);
      config.dynamicSmemBytes = smem;
      config.attrs = &attr;
      config.numAttrs = pdl;
      CHECK(cudaLaunchKernelEx(&config, kernel_for(end - begin), q));
    };
    const auto call = [&](int form) {
      if (form == 0) {  // serial pair: static schedules, nothing to zero
        issue(0, p.tiles0, -1, 0);
        issue(p.tiles0, 2 * p.tiles0, -1, 0);
      } else if (form == 3) {  // serial pair, conv 2 a programmatic dependent (the package's serial mode)
        issue(0, p.tiles0, -1, 0);
        issue(p.tiles0, 2 * p.tiles0, -1, 0, 1);
      } else if (form == 1) {  // conv 1 alone
        issue(0, p.tiles0, -1, 0);
      } else {  // fused pair
        CHECK(cudaMemsetAsync(sync, 0, zeroed));
        issue(0, 2 * p.tiles0, 2, 1);
      }
    };
    const char* names[4] = {"serial-pair", "conv1-alone", "fused-pair", "serial-pdl-pair"};
    std::vector<float> times[4];
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    for (int form = 0; form < 4; ++form) call(form);  // warm
    for (int round = 0; round < 7; ++round)
      for (int form = 0; form < 4; ++form) {
        CHECK(cudaEventRecord(e0));
        for (int i = 0; i < 20; ++i) call(form);
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, e0, e1));
        times[form].push_back(ms * 1e3f / 20);
      }
    CHECK(cudaGetLastError());
    for (int form = 0; form < 4; ++form) {
      std::sort(times[form].begin(), times[form].end());
      std::printf("time n=%d %s us_per_call=%.2f (min %.2f max %.2f)\n", n, names[form], times[form][3],
                  times[form][0], times[form][6]);
    }
    // The check below reads what the last call wrote: a fused pair's, so
    // the synchronized path (posts, waits, the counter) is the one checked.
    CHECK(cudaMemset(mid, 0, px * C * 2));
    CHECK(cudaMemset(y, 0, px * C * 2));
    call(2);
    CHECK(cudaDeviceSynchronize());
  }
#endif
  // Check both convs at a few pixels against the CPU: conv 1 (h, ReLU) from
  // x, conv 2 (y, no activation) from the h the GPU wrote.
  std::vector<__half> hm(px * C), hy(px * C);
  CHECK(cudaMemcpy(hm.data(), mid, px * C * 2, cudaMemcpyDeviceToHost));
  CHECK(cudaMemcpy(hy.data(), y, px * C * 2, cudaMemcpyDeviceToHost));
  const auto conv_at = [&](const std::vector<__half>& in, const std::vector<__half>& k, const std::vector<__half>& bias,
                           size_t i, int co) {
    const int b = int(i / (h * w)), yy = int(i / w % h), xx = int(i % w);
    float acc = __half2float(bias[co]);
    for (int r = 0; r < 3; ++r)
      for (int s2 = 0; s2 < 3; ++s2) {
        const int iy = yy + r - 1, ix = xx + s2 - 1;
        if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
        for (int ci = 0; ci < C; ++ci)
          acc += __half2float(in[((size_t(b) * h + iy) * w + ix) * C + ci]) *
                 __half2float(k[((r * 3 + s2) * C + ci) * C + co]);
      }
    return acc;
  };
  double err1 = 0, err2 = 0;
  for (size_t i = 0; i < px; i += std::max<size_t>(1, px / 97))
    for (int co = 0; co < C; ++co) {
      err1 = std::max(err1, double(std::fabs(std::max(conv_at(hx, hk1, hb1, i, co), 0.f) -
                                             __half2float(hm[i * C + co]))));
      err2 = std::max(err2, double(std::fabs(conv_at(hm, hk2, hb2, i, co) - __half2float(hy[i * C + co]))));
    }
  std::printf("conv 1 max abs err %.4g %s\n", err1, err1 < 2e-2 ? "PASS" : "FAIL");
  std::printf("conv 2 max abs err %.4g %s\n", err2, err2 < 2e-2 ? "PASS" : "FAIL");
  return 0;
}
