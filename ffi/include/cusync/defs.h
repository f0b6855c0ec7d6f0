// Portability macros for the cuSync core: every function in this folder is
// usable from host code (the CPU tile executor, the planner's tests) and from
// device code (the CUDA kernels), so there is one definition of each rule.
#pragma once

#if defined(__CUDACC__)
#define CUSYNC_HD __host__ __device__ __forceinline__
#else
#define CUSYNC_HD inline
#endif

namespace cusync {

CUSYNC_HD int ceil_div(int a, int b) { return (a + b - 1) / b; }
CUSYNC_HD int min_int(int a, int b) { return a < b ? a : b; }
CUSYNC_HD int max_int(int a, int b) { return a > b ? a : b; }

}  // namespace cusync
