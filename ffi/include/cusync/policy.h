// Synchronization policies: which semaphore a producer tile posts to, and
// which semaphores (with which counts) a consumer step waits on.
//
//   TileSync       one semaphore per producer tile; wait for every producer
//                  tile the step reads (count 1 each).
//   RowSync        one semaphore per producer row of tiles; wait until the
//                  whole row is done (count = tiles in the row). Fewer waits,
//                  less overlap; the first wait of a consumer tile covers all
//                  its k-blocks.
//   StridedSync    the `slices` column tiles j, j + C, j + 2C ... of a row
//                  (C tiles per slice) share one semaphore, count = slices: a
//                  consumer that reads column tile j of every slice (SwiGLU's
//                  gate and up, attention's Q/K/V) waits once.
//   Conv2DTileSync TileSync at the granularity of an implicit-GEMM conv: the
//                  Region comes from conv_dependency (k-block -> channels of a
//                  filter tap, rows -> the producer pixels of the halo).
//
// The Region (what is read) and the Policy (how readiness is signalled) are
// separate: the same policies serve the MLP and the conv pair.
#pragma once

#include "defs.h"
#include "stage.h"

namespace cusync {

enum class PolicyKind : int {
  kTileSync = 0,
  kRowSync = 1,
  kStridedSync = 2,
  kConv2DTileSync = 3,
};

struct Policy {
  PolicyKind kind;
  // Testing only: wait for this many posts fewer than the policy needs. A
  // positive value makes a deliberately wrong policy (consumers read producer
  // tiles that may not be finished); the stress tests prove they catch it.
  int under_wait;

  CUSYNC_HD bool tile_granular() const {
    return kind == PolicyKind::kTileSync || kind == PolicyKind::kConv2DTileSync;
  }

  // Number of semaphores for a producer stage.
  CUSYNC_HD int semaphore_count(const Stage& p) const {
    switch (kind) {
      case PolicyKind::kRowSync: return p.grid_rows();
      case PolicyKind::kStridedSync: return p.grid_rows() * p.tiles_per_slice();
      default: return p.tile_count();
    }
  }

  // The semaphore producer tile `t` posts to (once, +1) when it is stored.
  CUSYNC_HD int post_semaphore(const Stage& p, Tile t) const {
    switch (kind) {
      case PolicyKind::kRowSync: return t.row;
      case PolicyKind::kStridedSync: return t.row * p.tiles_per_slice() + t.col % p.tiles_per_slice();
      default: return t.row * p.grid_cols() + t.col;
    }
  }

  // Posts per semaphore once the producer is done (the count a wait needs).
  CUSYNC_HD int posts_per_semaphore(const Stage& p) const {
    switch (kind) {
      case PolicyKind::kRowSync: return p.grid_cols();
      case PolicyKind::kStridedSync: return p.slices;
      default: return 1;
    }
  }

  // True when each semaphore has exactly one posting tile, so a post may be a
  // release store of 1 instead of an atomic add.
  CUSYNC_HD bool single_poster(const Stage& p) const { return posts_per_semaphore(p) == 1; }

  // True when one wait covers every k-block of a consumer tile (RowSync), so a
  // kernel waits before its first k-block only.
  CUSYNC_HD bool waits_once_per_tile() const { return kind == PolicyKind::kRowSync; }

  // How many semaphores for_each_wait names for `r`, and the lowest and
  // highest of them (count 0: none), without walking them: a kernel's loader
  // asks once a tile, on its one thread, where the walk would cost a cycle
  // budget the mainloop needs. The tile range is for_each_wait's, below.
  struct WaitSpan {
    int count, lo, hi;
  };
  CUSYNC_HD WaitSpan wait_span(const Stage& p, Region r) const {
    if (r.row_end <= r.row_begin || r.col_end <= r.col_begin) return {0, 0, -1};
    if (posts_per_semaphore(p) - under_wait <= 0) return {0, 0, -1};
    const int row0 = r.row_begin / p.tile_rows, row1 = (r.row_end - 1) / p.tile_rows;
    const int t0 = r.col_begin / p.tile_cols, t1 = (r.col_end - 1) / p.tile_cols;
    const int rows = row1 - row0 + 1, cols = t1 - t0 + 1, per_slice = p.tiles_per_slice();
    switch (kind) {
      case PolicyKind::kRowSync: return {rows, row0, row1};
      case PolicyKind::kStridedSync: return {rows * cols, row0 * per_slice + t0, row1 * per_slice + t1};
      default:
        return {rows * p.slices * cols, row0 * p.grid_cols() + t0,
                row1 * p.grid_cols() + (p.slices - 1) * per_slice + t1};
    }
  }

  // Calls f(semaphore, count) for every semaphore a consumer step that reads
  // `r` of the producer's output must wait on.
  template <class F>
  CUSYNC_HD void for_each_wait(const Stage& p, Region r, F&& f) const {
    if (r.row_end <= r.row_begin || r.col_end <= r.col_begin) return;
    const int need = posts_per_semaphore(p) - under_wait;
    if (need <= 0) return;
    const int row0 = r.row_begin / p.tile_rows, row1 = (r.row_end - 1) / p.tile_rows;
    const int t0 = r.col_begin / p.tile_cols, t1 = (r.col_end - 1) / p.tile_cols;
    const int per_slice = p.tiles_per_slice();
    for (int row = row0; row <= row1; ++row) {
      if (kind == PolicyKind::kRowSync) {
        f(row, need);
        continue;
      }
      for (int t = t0; t <= t1; ++t) {
        if (kind == PolicyKind::kStridedSync) {
          f(row * per_slice + t, need);
        } else {
          for (int s = 0; s < p.slices; ++s) f(row * p.grid_cols() + s * per_slice + t, need);
        }
      }
    }
  }
};

}  // namespace cusync
