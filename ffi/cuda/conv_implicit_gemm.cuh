// One tile of an implicit-GEMM convolution (NHWC input, HWIO filter,
// stride 1, SAME padding) on tensor cores (WMMA, sm_80+), f16 or bf16 in,
// float accumulation.
//
//   out[p, co] = sum over taps t and channels c of in[src(p, t), c] * w[t, c, co]
//
// p is an output pixel of the flattened (n, h, w) grid, src(p, t) the input
// pixel that tap t reads (none in the padding). The k loop runs tap by tap and,
// within a tap, over channel blocks of kTileK, so a k-block is one tap's
// channel block: exactly the granularity cusync::conv_dependency maps to a
// producer region. The mainloop calls a hook before loading each k-block's A
// tile (the consumer waits there); the caller supplies the epilogue.
//
// The k-blocks stream through kStages shared-memory buffers with 16-byte
// cp.async copies (L2 only, zero-filled in the padding), issued kStages - 1
// k-blocks ahead of the multiply, so global-memory latency is paid once per
// tile rather than twice per k-block.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>

#include <cstdint>

#include "cuda/sm80_ptx.cuh"

namespace cusync_cuda {
namespace conv {

constexpr int kTileM = 128;  // output pixels per tile
constexpr int kTileN = 64;   // output channels per tile
constexpr int kTileK = 32;   // channels of one filter tap per k-block
constexpr int kThreads = 256;  // 8 warps: 4 along m x 2 along n, 32x32 each
constexpr int kStages = 3;     // 3 x 14.5 KB: within the 48 KB of static shared memory
constexpr int kPadAB = 8;      // smem row padding (elements), against bank conflicts
constexpr int kPadC = 4;

struct ConvShape {
  int images, height, width;
  int in_channels, out_channels;
  int filter_r, filter_s;
  __host__ __device__ int pixels() const { return images * height * width; }
};

// k-blocks of the implicit GEMM: taps x channel blocks of kTileK.
__host__ __device__ inline int conv_k_blocks(const ConvShape& s) {
  return s.filter_r * s.filter_s * ((s.in_channels + kTileK - 1) / kTileK);
}

// (WMMA loads need 32-byte-aligned fragment pointers: rows of 80 and 144
// bytes, fragments at multiples of 16 rows and 16 columns, stages of 10240
// and 4608 bytes.)
template <class T>
union alignas(128) SharedStorage {
  struct {
    T a[kStages][kTileM][kTileK + kPadAB];
    T b[kStages][kTileK][kTileN + kPadAB];
  } mainloop;
  float c[kTileM][kTileN + kPadC];  // epilogue staging (after the mainloop)
};

__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// 2-byte loads (channel counts that are not multiples of 8). `coherent`: the
// data is written by other blocks of the same grid (the producer's h), so it
// must bypass the non-coherent L1 path (ld.global.cg); inputs written before
// the launch use the read-only path. (The 16-byte copies, cp.async.cg, always
// go through L2.)
__device__ __forceinline__ unsigned short load2(const void* p, bool coherent) {
  return coherent ? __ldcg(static_cast<const unsigned short*>(p))
                  : __ldg(static_cast<const unsigned short*>(p));
}

// The input pixel that tap (dr, ds) reads for output pixel p, or -1 (padding
// or p past the end).
__device__ __forceinline__ int tap_source(const ConvShape& s, int p, int dr, int ds) {
  if (p >= s.pixels()) return -1;
  const int per_image = s.height * s.width;
  const int n = p / per_image, within = p % per_image;
  const int ih = within / s.width + dr - s.filter_r / 2;
  const int iw = within % s.width + ds - s.filter_s / 2;
  if (ih < 0 || ih >= s.height || iw < 0 || iw >= s.width) return -1;
  return (n * s.height + ih) * s.width + iw;
}

// A tile: kTileM pixels x kTileK channels of tap (dr, ds) into stage `st`,
// zero outside. Channel counts that are multiples of 8 go by cp.async (to be
// awaited); others by synchronous 2-byte loads.
template <class T>
__device__ __forceinline__ void load_a(const ConvShape& s, const T* in, bool coherent, int row0, int dr,
                                       int ds, int c_begin, int st, SharedStorage<T>& sm) {
  constexpr int chunks = kTileK / 8;  // 8 channels (16 bytes) per chunk
  const bool vector = s.in_channels % 8 == 0;
  for (int i = threadIdx.x; i < kTileM * chunks; i += kThreads) {
    const int r = i / chunks, c = c_begin + (i % chunks) * 8;
    const int src = tap_source(s, row0 + r, dr, ds);
    unsigned short* dst = reinterpret_cast<unsigned short*>(&sm.mainloop.a[st][r][(i % chunks) * 8]);
    if (vector) {
      const bool valid = src >= 0 && c < s.in_channels;
      sm80::cp_async_16(sm80::shared_address(dst),
                        valid ? static_cast<const void*>(in + static_cast<int64_t>(src) * s.in_channels + c)
                              : static_cast<const void*>(in),
                        valid);
    } else {
      for (int j = 0; j < 8; ++j)
        dst[j] = (src >= 0 && c + j < s.in_channels)
                     ? load2(in + static_cast<int64_t>(src) * s.in_channels + c + j, coherent)
                     : 0;
    }
  }
}

// B tile: kTileK channels x kTileN output channels of tap `tap` into stage
// `st`, zero outside (cp.async where out_channels is a multiple of 8).
template <class T>
__device__ __forceinline__ void load_b(const ConvShape& s, const T* w, int tap, int c_begin, int col0, int st,
                                       SharedStorage<T>& sm) {
  constexpr int chunks = kTileN / 8;
  const bool vector = s.out_channels % 8 == 0;
  for (int i = threadIdx.x; i < kTileK * chunks; i += kThreads) {
    const int kk = i / chunks, c = c_begin + kk, co = col0 + (i % chunks) * 8;
    const T* src = w + (static_cast<int64_t>(tap) * s.in_channels + c) * s.out_channels + co;
    unsigned short* dst = reinterpret_cast<unsigned short*>(&sm.mainloop.b[st][kk][(i % chunks) * 8]);
    if (vector) {
      const bool valid = c < s.in_channels && co < s.out_channels;
      sm80::cp_async_16(sm80::shared_address(dst),
                        valid ? static_cast<const void*>(src) : static_cast<const void*>(w), valid);
    } else {
      for (int j = 0; j < 8; ++j)
        dst[j] = (c < s.in_channels && co + j < s.out_channels) ? load2(src + j, false) : 0;
    }
  }
}

template <class T>
using FragA = nvcuda::wmma::fragment<nvcuda::wmma::matrix_a, 16, 16, 16, T, nvcuda::wmma::row_major>;
template <class T>
using FragB = nvcuda::wmma::fragment<nvcuda::wmma::matrix_b, 16, 16, 16, T, nvcuda::wmma::row_major>;
using FragC = nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>;

// Computes k-blocks [kb_begin, kb_end) of the tile at (row0, col0) (all of
// them: 0 to conv_k_blocks(s)) into sm.c. `wait(k_begin, k_end)` runs
// before each k-block's A tile is loaded (k in the GEMM's tap-major k index),
// kStages - 1 k-blocks ahead of its multiply; every thread calls it, and it
// must end with every thread past a barrier. With `reorder`, the B tile (no
// dependency) is loaded before the wait.
template <class T, class Wait>
__device__ void conv_tile(const ConvShape& s, const T* in, bool coherent, const T* w, int row0, int col0,
                          int kb_begin, int kb_end, bool reorder, SharedStorage<T>& sm, Wait&& wait) {
  const int warp = threadIdx.x / 32;
  const int wm = (warp % 4) * 32, wn = (warp / 4) * 32;
  FragC acc[2][2];
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j) nvcuda::wmma::fill_fragment(acc[i][j], 0.f);

  const int channel_blocks = (s.in_channels + kTileK - 1) / kTileK;
  // Issues k-block kb's copies into its stage (a k-block is one tap's channel block).
  auto issue = [&](int kb) {
    const int tap = kb / channel_blocks, cb = (kb % channel_blocks) * kTileK;
    const int dr = tap / s.filter_s, ds = tap % s.filter_s, st = kb % kStages;
    const int k_begin = tap * s.in_channels + cb;
    const int k_end = tap * s.in_channels + min(cb + kTileK, s.in_channels);
    if (reorder) load_b(s, w, tap, cb, col0, st, sm);
    wait(k_begin, k_end);
    if (!reorder) load_b(s, w, tap, cb, col0, st, sm);
    load_a(s, in, coherent, row0, dr, ds, cb, st, sm);
  };
  // One commit group per k-block (empty past the end), so "all but the
  // newest kStages - 2 groups complete" means k-block kb has landed.
  for (int kb = kb_begin; kb < kb_begin + kStages - 1; ++kb) {
    if (kb < kb_end) issue(kb);
    sm80::cp_async_commit();
  }
  for (int kb = kb_begin; kb < kb_end; ++kb) {
    sm80::cp_async_wait<kStages - 2>();
    // Every thread's copies of k-block kb have landed, and every warp is
    // done with k-block kb - 1, whose stage the next issue refills.
    __syncthreads();
    if (kb + kStages - 1 < kb_end) issue(kb + kStages - 1);
    sm80::cp_async_commit();
    const int st = kb % kStages;
    for (int kk = 0; kk < kTileK; kk += 16) {
      FragA<T> a[2];
      FragB<T> b[2];
      for (int i = 0; i < 2; ++i)
        nvcuda::wmma::load_matrix_sync(a[i], &sm.mainloop.a[st][wm + 16 * i][kk], kTileK + kPadAB);
      for (int j = 0; j < 2; ++j)
        nvcuda::wmma::load_matrix_sync(b[j], &sm.mainloop.b[st][kk][wn + 16 * j], kTileN + kPadAB);
      for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) nvcuda::wmma::mma_sync(acc[i][j], a[i], b[j], acc[i][j]);
    }
  }
  sm80::cp_async_wait<0>();
  __syncthreads();  // sm.c aliases the mainloop buffers
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 2; ++j)
      nvcuda::wmma::store_matrix_sync(&sm.c[wm + 16 * i][wn + 16 * j], acc[i][j], kTileN + kPadC,
                                      nvcuda::wmma::mem_row_major);
  __syncthreads();
}

}  // namespace conv
}  // namespace cusync_cuda
