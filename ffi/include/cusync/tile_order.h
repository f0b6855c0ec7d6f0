// Tile orders: the order in which a stage's tiles are handed out.
//
// A kernel does not compute tile blockIdx; it asks the stage for the next tile
// index from a global counter and maps that index through the stage's order,
// so tiles are produced in the order the consumer needs them whatever order
// the hardware launches blocks in.
#pragma once

#include "defs.h"
#include "divisor.h"

namespace cusync {

enum class TileOrder : int {
  kRowMajor = 0,     // (0,0) (0,1) ... (0,C-1) (1,0) ...
  kColumnMajor = 1,  // (0,0) (1,0) ... (R-1,0) (0,1) ...
  kStrided = 2,      // row-major, but the `slices` column tiles that share a
                     // StridedSync semaphore are consecutive: (0,0) (0,C/s) ...
  kGrouped = 3,      // column-major within bands of `group_rows` tile rows,
                     // the bands in row order: a wave of tiles spans few rows
                     // and few columns, so neither operand streams through the
                     // L2 many times (row-major re-reads all of B per row band).
};

// The default band height; a stage may choose another (Stage::group_rows):
// lower bands finish rows sooner (RowSync consumers start earlier), higher
// ones reuse more of the L2.
constexpr int kGroupRows = 8;

struct Tile {
  int row;
  int col;
};

// Maps a schedule position to a tile of a rows x cols grid. `slices` splits the
// columns into equal groups whose tile j belong together (SwiGLU's gate and up
// halves: slices = 2); only kStrided uses it. `group_rows`: kGrouped's band.
// The divisors (divisor.h) carry those three numbers and the grid's width:
// IntDivisor divides plainly, FastDivisor with its precomputed multiplier.
// `last_band`: rows % group_rows, the height of a lower last band (0: none).
template <class Divisor>
CUSYNC_HD Tile tile_at(TileOrder order, int index, const Divisor& rows, const Divisor& cols,
                       const Divisor& slices, const Divisor& group_rows, const Divisor& last_band) {
  switch (order) {
    case TileOrder::kColumnMajor:
      return Tile{rows.mod(index), rows.div(index)};
    case TileOrder::kStrided: {
      const int row = cols.div(index);
      const int within = index - row * cols.value();
      const int per_slice = slices.div(cols.value());
      return Tile{row, slices.div(within) + slices.mod(within) * per_slice};
    }
    case TileOrder::kGrouped: {
      // index / (group_rows * cols), as two divisions by known divisors.
      const int group = group_rows.div(cols.div(index));
      const int first_row = group * group_rows.value();
      const int within = index - first_row * cols.value();
      // The last band may be lower than the others.
      const Divisor& band = rows.value() - first_row < group_rows.value() ? last_band : group_rows;
      return Tile{first_row + band.mod(within), band.div(within)};
    }
    case TileOrder::kRowMajor:
    default:
      return Tile{cols.div(index), cols.mod(index)};
  }
}

CUSYNC_HD Tile tile_at(TileOrder order, int index, int rows, int cols, int slices,
                       int group_rows = kGroupRows) {
  return tile_at(order, index, IntDivisor{rows}, IntDivisor{cols}, IntDivisor{slices}, IntDivisor{group_rows},
                 IntDivisor{rows % group_rows});
}

}  // namespace cusync
