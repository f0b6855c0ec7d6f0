// The fused mode's schedule: which schedule position a unit (a CTA of the
// Hopper kernel, a thread of the CPU executor) runs next. Positions
// [0, tiles0) are producer tiles, [tiles0, positions) consumer tiles.
//
// Each unit u owns the static positions of each stage, lo + u, lo + u + units,
// ... (lo = 0, then tiles0): the placement the serial kernels get, where
// tiles next to each other in the tile order run on SMs next to each other
// (a shared atomic counter hands them out in arrival order instead, which
// cost the fused kernel 1-9% of its time on the H100, bench/NOTES_sm90.md,
// stop 50). A unit takes a position by setting its flag. A unit out of its
// own positions steals untaken ones through the stage's cursor, which walks
// down from the stage's end, where owners arrive last.
//
// No deadlock, whichever units are running: a unit walks the producer
// cursor out before its first consumer position, so once any consumer tile
// is taken every producer tile is held by a running unit, and producer tiles
// never wait. Where every unit runs at once (a persistent grid of one CTA per
// SM), each runs its own positions but for the tail's steals.
#pragma once

#include "defs.h"

#if !defined(__CUDA_ARCH__)
#include <atomic>
#endif

namespace cusync {

// The words the units claim through (zeroed before the call: the sync
// buffer's on the GPU) and the launch's shape.
struct PlacedSchedule {
  int* flags;    // one a position: set by the unit that takes it
  int* cursors;  // two: the producer's and the consumer's stealing cursor
  int tiles0;    // producer positions
  int positions; // all positions
  int units;     // units of the launch (resident or not)
};

// One unit's progress: its next own position of each stage, or -1 once the
// producer cursor has been walked out (own[0] only).
struct PlacedClaim {
  int own[2];
};

CUSYNC_HD PlacedClaim placed_start(const PlacedSchedule& s, int unit) { return {{unit, s.tiles0 + unit}}; }

namespace detail {
// Claims are relaxed: no data is published through them (a tile's results
// through its semaphores only).
CUSYNC_HD bool take_flag(int* flag) {
#if defined(__CUDA_ARCH__)
  return atomicExch(flag, 1) == 0;
#else
  return std::atomic_ref<int>(*flag).exchange(1, std::memory_order_relaxed) == 0;
#endif
}

CUSYNC_HD int next_cursor(int* cursor) {
#if defined(__CUDA_ARCH__)
  return atomicAdd(cursor, 1);
#else
  return std::atomic_ref<int>(*cursor).fetch_add(1, std::memory_order_relaxed);
#endif
}

// A position of [lo, hi): the unit's own next, else a stolen one; -1 once
// the stage's cursor is walked out.
CUSYNC_HD int claim_in_stage(const PlacedSchedule& s, int* cursor, int lo, int hi, int& own) {
  while (own < hi) {
    const int pos = own;
    own += s.units;
    if (take_flag(&s.flags[pos])) return pos;
    // Stolen: the cursor walks down, so it has passed every later own position.
    own = hi;
  }
  for (;;) {
    const int pos = hi - 1 - next_cursor(cursor);
    if (pos < lo) return -1;
    if (take_flag(&s.flags[pos])) return pos;
  }
}
}  // namespace detail

// The unit's next position, or s.positions when it has none left.
CUSYNC_HD int placed_next(const PlacedSchedule& s, PlacedClaim& c) {
  if (c.own[0] >= 0) {
    const int pos = detail::claim_in_stage(s, s.cursors, 0, s.tiles0, c.own[0]);
    if (pos >= 0) return pos;
    c.own[0] = -1;  // every producer position is held
  }
  const int pos = detail::claim_in_stage(s, s.cursors + 1, s.tiles0, s.positions, c.own[1]);
  return pos >= 0 ? pos : s.positions;
}

}  // namespace cusync
