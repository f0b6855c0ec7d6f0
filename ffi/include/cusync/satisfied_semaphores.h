// The semaphores one consumer tile has seen satisfied, so that each is
// acquired once a tile: a satisfied semaphore stays satisfied (posts only
// add). Host and device, like the rest of the core; the kernels keep one per
// tile in two registers.
//
// Why a set and not the last one or two: a conv k-block's halo names up to
// three producer rows (Conv2DTileSync), the same rows for every k-block of
// the tile, so a memo of the last two missed on every k-block and paid an
// acquire round trip per semaphore per k-block.
//
// The set is a window of 32 consecutive semaphore indices that follows the
// latest one added: a tile's semaphores are a few producer rows of a few
// columns (the conv's halo) or one row's columns in k order (the MLP), so
// the window holds all of them or the ones still being read. One that fell
// out of the window is acquired again, which is slower, never wrong.
#pragma once

#include "defs.h"

namespace cusync {

// A plain aggregate (start from none()), so a kernel may keep it anywhere.
struct SatisfiedSemaphores {
  int base;       // the window's first semaphore index; -1: empty
  unsigned bits;  // bit d: semaphore base + d is satisfied

  CUSYNC_HD static SatisfiedSemaphores none() { return SatisfiedSemaphores{-1, 0u}; }

  CUSYNC_HD bool has(int sem) const {
    const int d = sem - base;
    return base >= 0 && d >= 0 && d < 32 && ((bits >> d) & 1u);
  }

  CUSYNC_HD void add(int sem) {
    if (base < 0) base = sem;
    int d = sem - base;
    if (d >= 32) {  // slide up: sem becomes the window's last
      const int shift = d - 31;
      bits = shift >= 32 ? 0u : bits >> shift;
      base += shift;
      d = 31;
    } else if (d < 0) {  // slide down: sem becomes the window's first
      bits = -d >= 32 ? 0u : bits << -d;
      base = sem;
      d = 0;
    }
    bits |= 1u << d;
  }
};

}  // namespace cusync
