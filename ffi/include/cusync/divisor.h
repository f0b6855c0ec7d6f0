// Division by a value fixed before a kernel starts. A schedule position is
// mapped to its tile with several divisions (the tile grid's width, the band
// height, the tiles of a slice); on the GPU each `/` is a ~20-instruction
// sequence through the float unit, and they sit on the loader's path to its
// first TMA issue. FastDivisor precomputes, on the host, a multiplier and a
// shift so that a division is one multiply-high, one add and one shift.
// IntDivisor is the plain division with the same interface, so the order
// mapping (tile_order.h) is written once for both.
#pragma once

#include <stdint.h>

#include "defs.h"

namespace cusync {

struct IntDivisor {
  int d;
  CUSYNC_HD int value() const { return d; }
  CUSYNC_HD int div(int n) const { return n / d; }
  CUSYNC_HD int mod(int n) const { return n % d; }
};

// n / d for 0 <= n < 2^31 and 1 <= d < 2^31: with l = ceil(log2 d) and
// m = floor(2^32 (2^l - d) / d) + 1, n / d = (umulhi(n, m) + n) >> l
// (Granlund and Montgomery's round-up method; the sum stays below 2^32
// because umulhi(n, m) <= n < 2^31).
struct FastDivisor {
  int d = 1;
  uint32_t multiplier = 1;
  uint32_t shift = 0;

  FastDivisor() = default;
  CUSYNC_HD explicit FastDivisor(int divisor) : d(divisor) {
    uint32_t l = 0;
    while ((uint64_t(1) << l) < uint64_t(d)) ++l;
    shift = l;
    multiplier = uint32_t(((uint64_t(1) << 32) * ((uint64_t(1) << l) - uint64_t(d))) / uint64_t(d) + 1);
  }
  CUSYNC_HD int value() const { return d; }
  CUSYNC_HD int div(int n) const {
#if defined(__CUDA_ARCH__)
    const uint32_t hi = __umulhi(uint32_t(n), multiplier);
#else
    const uint32_t hi = uint32_t((uint64_t(uint32_t(n)) * multiplier) >> 32);
#endif
    return int((hi + uint32_t(n)) >> shift);
  }
  CUSYNC_HD int mod(int n) const { return n - div(n) * d; }
};

}  // namespace cusync
