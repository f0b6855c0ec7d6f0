// Tile orders: the order in which a stage's tiles are handed out.
//
// A kernel does not compute tile blockIdx; it asks the stage for the next tile
// index from a global counter and maps that index through the stage's order,
// so tiles are produced in the order the consumer needs them whatever order
// the hardware launches blocks in.
#pragma once

#include "defs.h"

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
CUSYNC_HD Tile tile_at(TileOrder order, int index, int rows, int cols, int slices,
                       int group_rows = kGroupRows) {
  switch (order) {
    case TileOrder::kColumnMajor:
      return Tile{index % rows, index / rows};
    case TileOrder::kStrided: {
      const int row = index / cols;
      const int within = index % cols;
      const int per_slice = cols / slices;
      return Tile{row, within / slices + (within % slices) * per_slice};
    }
    case TileOrder::kGrouped: {
      const int per_group = group_rows * cols;
      const int group = index / per_group;
      const int first_row = group * group_rows;
      const int band = rows - first_row < group_rows ? rows - first_row : group_rows;
      const int within = index - group * per_group;
      return Tile{first_row + within % band, within / band};
    }
    case TileOrder::kRowMajor:
    default:
      return Tile{index / cols, index % cols};
  }
}

}  // namespace cusync
