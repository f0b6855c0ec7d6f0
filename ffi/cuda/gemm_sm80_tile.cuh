// One output tile of a row-major GEMM on the sm_80 tensor-core path
// (mma.sync m16n8k16, ldmatrix, a multi-stage cp.async pipeline), with the
// cuSync seam in the mainloop: before the A operand of a k-block is loaded,
// a Waiter may make the block wait (thread 0 spins, then a barrier).
//
// A [rows, k] and B [k, cols] are row-major; the tile is BM x BN and walks k
// in BK blocks. Shared memory holds `kStages` k-blocks of A (two A tiles when
// A is the product of two matrices, SwiGLU's gate and up) and B, swizzled so
// that every ldmatrix phase touches 8 distinct 16-byte bank groups.
#pragma once

#include <cstdint>

#include "cuda/sm80_ptx.cuh"
#include "cusync/defs.h"

namespace cusync_cuda::sm80 {

template <int kM_, int kN_, int kK_, int kWarpsM_, int kWarpsN_, int kStages_, int kMinBlocks_>
struct TileConfig {
  static constexpr int kM = kM_, kN = kN_, kK = kK_;
  static constexpr int kWarpsM = kWarpsM_, kWarpsN = kWarpsN_;
  static constexpr int kStages = kStages_;
  static constexpr int kMinBlocks = kMinBlocks_;  // blocks per SM the register budget allows
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static constexpr int kWarpTileM = kM / kWarpsM, kWarpTileN = kN / kWarpsN;
  static constexpr int kMmaM = kWarpTileM / 16, kMmaN = kWarpTileN / 8;
  static constexpr int kChunksA = kK / 8, kChunksB = kN / 8;  // 16-byte chunks per smem row
  static constexpr int kBytesA = kM * kK * 2, kBytesB = kK * kN * 2;
  static constexpr int kCopiesA = kM * kChunksA / kThreads;  // 16-byte copies per thread
  static constexpr int kCopiesB = kK * kChunksB / kThreads;

  static constexpr int stage_bytes(bool two_a) { return (two_a ? 2 : 1) * kBytesA + kBytesB; }
  static constexpr int smem_bytes(bool two_a) { return kStages * stage_bytes(two_a); }

  static_assert(kK % 16 == 0, "k-block must hold whole k16 mma steps");
  static_assert(kWarpTileM % 16 == 0 && kWarpTileN % 16 == 0, "warp tile must be whole 16x16 steps");
  static_assert(kChunksA == 4 || kChunksA % 8 == 0, "A rows must be 64 or a multiple of 128 bytes");
  static_assert(kChunksB % 8 == 0, "B rows must be a multiple of 128 bytes");
  static_assert(kStages >= 2, "the pipeline needs at least two stages");
  static_assert(kCopiesA * kThreads == kM * kChunksA && kCopiesB * kThreads == kK * kChunksB,
                "every thread copies the same number of chunks");
};

// Byte offset of 16-byte chunk `chunk` of row `row` in a swizzled tile whose
// rows hold `kChunks` chunks. ldmatrix reads one chunk from each of 8
// consecutive rows; the XOR puts those 8 chunks in 8 different bank groups.
template <int kChunks>
__device__ __forceinline__ uint32_t swizzled(int row, int chunk) {
  if constexpr (kChunks >= 8) {
    return static_cast<uint32_t>(row * kChunks + (chunk ^ (row & 7))) * 16u;
  } else {  // 64-byte rows: two rows per 128-byte line
    return static_cast<uint32_t>(row * kChunks + (chunk ^ ((row >> 1) & 3))) * 16u;
  }
}

template <class T>
struct TileOperands {
  const T* a;     // A rows start here; the tile reads A columns [0, k)
  const T* a_up;  // when A = a * a_up elementwise (SwiGLU): the second factor, same ld
  int64_t lda;
  const T* b;     // B [k, ldb]
  int64_t ldb;
  int k;
  int row0, row_end;  // tile rows [row0, row_end) of A and of the output
  int col0, col_end;  // tile columns [col0, col_end) of B and of the output
};

// A Waiter that never waits (producer tiles, serial mode).
struct NoWait {
  __device__ __forceinline__ bool active(int) { return false; }
  __device__ __forceinline__ void wait(int) const {}
};

template <class Cfg>
using Accumulators = float[Cfg::kMmaM][Cfg::kMmaN][4];

// Accumulates A[row0:row_end, 0:k] @ B[0:k, col0:col_end] into `acc`
// (zeroed by the caller). Waiter: active(kb) is called by every thread for
// kb = 0, 1, ... in order and must be uniform over the block; wait(kb) is
// called by thread 0 before A's k-block kb is loaded. `reorder_loads`:
// issue the k-block's B load before waiting (it does not depend on A).
template <class Cfg, class T, bool kTwoA, class Waiter>
__device__ __forceinline__ void gemm_tile_mainloop(const TileOperands<T>& g, char* smem,
                                                   Accumulators<Cfg>& acc, Waiter& waiter,
                                                   bool reorder_loads) {
  constexpr int kStageBytes = Cfg::stage_bytes(kTwoA);
  constexpr int kOffsetB = (kTwoA ? 2 : 1) * Cfg::kBytesA;
  const int tid = threadIdx.x;
  const int lane = tid & 31, warp = tid >> 5;
  const int kblocks = cusync::ceil_div(g.k, Cfg::kK);
  const uint32_t base = shared_address(smem);

  auto load_a = [&](int stage, int kb) {
    const uint32_t dst = base + stage * kStageBytes;
#pragma unroll
    for (int j = 0; j < Cfg::kCopiesA; ++j) {
      const int i = tid + j * Cfg::kThreads;
      const int r = i / Cfg::kChunksA, c = i % Cfg::kChunksA;
      const int row = g.row0 + r, k = kb * Cfg::kK + c * 8;
      const bool valid = row < g.row_end && k < g.k;
      const int64_t offset = valid ? row * g.lda + k : 0;
      const uint32_t d = dst + swizzled<Cfg::kChunksA>(r, c);
      cp_async_16(d, g.a + offset, valid);
      if constexpr (kTwoA) cp_async_16(d + Cfg::kBytesA, g.a_up + offset, valid);
    }
  };
  auto load_b = [&](int stage, int kb) {
    const uint32_t dst = base + stage * kStageBytes + kOffsetB;
#pragma unroll
    for (int j = 0; j < Cfg::kCopiesB; ++j) {
      const int i = tid + j * Cfg::kThreads;
      const int r = i / Cfg::kChunksB, c = i % Cfg::kChunksB;
      const int k = kb * Cfg::kK + r, col = g.col0 + c * 8;
      const bool valid = k < g.k && col < g.col_end;
      const int64_t offset = valid ? k * g.ldb + col : 0;
      cp_async_16(dst + swizzled<Cfg::kChunksB>(r, c), g.b + offset, valid);
    }
  };
  // Loads k-block kb into `stage`, waiting first where the Waiter says so.
  // Without reordering the wait comes before the barrier the caller already
  // needs; with it, B goes first and the wait costs a second barrier.
  auto load_stage = [&](int stage, int kb, bool barrier_needed) {
    const bool waits = waiter.active(kb);
    if (!reorder_loads) {
      if (waits && tid == 0) waiter.wait(kb);
      if (waits || barrier_needed) __syncthreads();
      load_a(stage, kb);
      load_b(stage, kb);
    } else {
      if (barrier_needed) __syncthreads();
      load_b(stage, kb);
      if (waits) {
        if (tid == 0) waiter.wait(kb);
        __syncthreads();
      }
      load_a(stage, kb);
    }
  };

  const int warp_row0 = (warp % Cfg::kWarpsM) * Cfg::kWarpTileM;
  const int warp_col0 = (warp / Cfg::kWarpsM) * Cfg::kWarpTileN;
  auto compute_stage = [&](int stage) {
    const uint32_t a_base = base + stage * kStageBytes;
    const uint32_t b_base = a_base + kOffsetB;
#pragma unroll
    for (int kk = 0; kk < Cfg::kK / 16; ++kk) {
      uint32_t a[Cfg::kMmaM][4];
#pragma unroll
      for (int mi = 0; mi < Cfg::kMmaM; ++mi) {
        const uint32_t off =
            swizzled<Cfg::kChunksA>(warp_row0 + mi * 16 + (lane & 15), kk * 2 + (lane >> 4));
        ldmatrix_x4(a[mi], a_base + off);
        if constexpr (kTwoA) {
          uint32_t up[4];
          ldmatrix_x4(up, a_base + Cfg::kBytesA + off);
#pragma unroll
          for (int j = 0; j < 4; ++j) a[mi][j] = Pair<T>::multiply(a[mi][j], up[j]);
        }
      }
      uint32_t b[Cfg::kMmaN][2];
#pragma unroll
      for (int nj = 0; nj < Cfg::kMmaN / 2; ++nj) {
        uint32_t r[4];
        const int k = kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8;
        ldmatrix_x4_trans(r, b_base + swizzled<Cfg::kChunksB>(k, (warp_col0 + nj * 16) / 8 + (lane >> 4)));
        b[2 * nj][0] = r[0];
        b[2 * nj][1] = r[1];
        b[2 * nj + 1][0] = r[2];
        b[2 * nj + 1][1] = r[3];
      }
#pragma unroll
      for (int mi = 0; mi < Cfg::kMmaM; ++mi)
#pragma unroll
        for (int ni = 0; ni < Cfg::kMmaN; ++ni) Mma<T>::run(acc[mi][ni], a[mi], b[ni]);
    }
  };

  // Prologue: the first kStages - 1 k-blocks in flight, one commit group each.
#pragma unroll
  for (int s = 0; s < Cfg::kStages - 1; ++s) {
    if (s < kblocks) load_stage(s, s, false);
    cp_async_commit();
  }
  int read_stage = 0, write_stage = Cfg::kStages - 1;
  for (int kb = 0; kb < kblocks; ++kb) {
    cp_async_wait<Cfg::kStages - 2>();
    // The barrier makes k-block kb visible to every warp and frees the stage
    // computed in the previous iteration, which the next load overwrites.
    const int next = kb + Cfg::kStages - 1;
    if (next < kblocks) {
      load_stage(write_stage, next, true);
    } else {
      __syncthreads();
    }
    cp_async_commit();
    compute_stage(read_stage);
    read_stage = read_stage + 1 == Cfg::kStages ? 0 : read_stage + 1;
    write_stage = write_stage + 1 == Cfg::kStages ? 0 : write_stage + 1;
  }
  cp_async_wait<0>();
}

// Writes f(acc + bias[col], col) as T to out[row, col] for the tile's rows and
// columns (pairs of columns per 32-bit store).
template <class Cfg, class T, class Transform>
__device__ __forceinline__ void store_tile(const Accumulators<Cfg>& acc, T* out, int64_t ldo,
                                           const T* bias, int row0, int row_end, int col0,
                                           int col_end, Transform f) {
  using P = Pair<T>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int warp_row0 = row0 + (warp % Cfg::kWarpsM) * Cfg::kWarpTileM;
  const int warp_col0 = col0 + (warp / Cfg::kWarpsM) * Cfg::kWarpTileN;
#pragma unroll
  for (int ni = 0; ni < Cfg::kMmaN; ++ni) {
    const int col = warp_col0 + ni * 8 + 2 * (lane & 3);
    if (col >= col_end) continue;  // col_end is a multiple of 8: col + 1 is in too
    const float2 b = P::unpack(*reinterpret_cast<const typename P::Type*>(bias + col));
#pragma unroll
    for (int mi = 0; mi < Cfg::kMmaM; ++mi) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const int row = warp_row0 + mi * 16 + (lane >> 2) + half * 8;
        if (row < row_end) {
          const float v0 = f(acc[mi][ni][2 * half] + b.x);
          const float v1 = f(acc[mi][ni][2 * half + 1] + b.y);
          *reinterpret_cast<typename P::Type*>(out + row * ldo + col) = P::pack(v0, v1);
        }
      }
    }
  }
}

}  // namespace cusync_cuda::sm80
