// The sm_90 instructions both Hopper kernel families write their epilogues
// with (the chain kernel's TMA band and the halo conv's scratch).
#pragma once

#include <cstdint>

namespace cusync_cuda::sm90 {

// Four 8x8 matrices of 16-bit values from a warp into shared memory, one row
// address per lane (lanes 8j..8j+7: the rows of matrix j); lane l holds row
// l/4, columns 2 (l%4) and 2 (l%4) + 1 of each, as a wgmma or mma.sync
// accumulator holds 8 columns of two rows 8 apart.
__device__ __forceinline__ void stmatrix_x4(uint32_t row_addr, uint32_t m0, uint32_t m1, uint32_t m2, uint32_t m3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(row_addr), "r"(m0), "r"(m1),
               "r"(m2), "r"(m3)
               : "memory");
}

}  // namespace cusync_cuda::sm90
