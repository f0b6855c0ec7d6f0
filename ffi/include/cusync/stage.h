// A stage: one tiled kernel of the chain (the producer GEMM or the consumer
// GEMM), described by its output matrix and tile shape.
//
// The output may be made of `slices` equal column slices whose tiles are
// computed separately but consumed together: SwiGLU's first GEMM writes
// [gate | up] (slices = 2) and a consumer k-block needs column tile j of both.
// Each slice is tiled on its own, so a width that is not a multiple of the
// tile width never makes a tile straddle two slices.
#pragma once

#include "defs.h"
#include "divisor.h"
#include "tile_order.h"

namespace cusync {

struct Stage {
  int rows;        // output rows (tokens, or output pixels for a conv)
  int cols;        // output columns of one slice
  int slices;      // column slices consumed together (1 unless SwiGLU-like)
  int tile_rows;   // tile height in elements
  int tile_cols;   // tile width in elements
  TileOrder order; // the order tiles are handed out in
  int group_rows = kGroupRows;  // the band height of TileOrder::kGrouped

  CUSYNC_HD int grid_rows() const { return ceil_div(rows, tile_rows); }
  CUSYNC_HD int tiles_per_slice() const { return ceil_div(cols, tile_cols); }
  CUSYNC_HD int grid_cols() const { return slices * tiles_per_slice(); }
  CUSYNC_HD int tile_count() const { return grid_rows() * grid_cols(); }

  // The tile at schedule position `index` (0 <= index < tile_count()).
  CUSYNC_HD Tile tile(int index) const {
    return tile_at(order, index, grid_rows(), grid_cols(), slices, group_rows);
  }

  // Element bounds of a tile: rows [row_begin, row_end), output columns
  // [col_begin, col_end) in the full (all slices) output.
  CUSYNC_HD int row_begin(Tile t) const { return t.row * tile_rows; }
  CUSYNC_HD int row_end(Tile t) const { return min_int(rows, (t.row + 1) * tile_rows); }
  CUSYNC_HD int slice_of(Tile t) const { return slice_of(t, IntDivisor{tiles_per_slice()}); }
  CUSYNC_HD int col_begin(Tile t) const { return col_begin(t, IntDivisor{tiles_per_slice()}); }
  CUSYNC_HD int col_end(Tile t) const { return col_end(t, IntDivisor{tiles_per_slice()}); }

  // The same, given tiles_per_slice() as a divisor (StageDivisors below).
  template <class Divisor>
  CUSYNC_HD int slice_of(Tile t, const Divisor& per_slice) const { return per_slice.div(t.col); }
  template <class Divisor>
  CUSYNC_HD int col_begin(Tile t, const Divisor& per_slice) const {
    return slice_of(t, per_slice) * cols + per_slice.mod(t.col) * tile_cols;
  }
  template <class Divisor>
  CUSYNC_HD int col_end(Tile t, const Divisor& per_slice) const {
    return slice_of(t, per_slice) * cols + min_int(cols, (per_slice.mod(t.col) + 1) * tile_cols);
  }
};

// A stage's divisions, precomputed on the host for the GPU kernels: where a
// kernel maps each schedule position to its tile and bounds, these replace
// the plain divisions (the same results: tile_order.h has one mapping).
struct StageDivisors {
  FastDivisor rows, cols, slices, group_rows, last_band, tiles_per_slice;

  StageDivisors() = default;
  explicit StageDivisors(const Stage& s)
      : rows(s.grid_rows()),
        cols(s.grid_cols()),
        slices(s.slices),
        group_rows(s.group_rows),
        // Without a lower last band it is never used (and a divisor is >= 1).
        last_band(s.grid_rows() % s.group_rows == 0 ? 1 : s.grid_rows() % s.group_rows),
        tiles_per_slice(s.tiles_per_slice()) {}

  CUSYNC_HD Tile tile(const Stage& s, int index) const {
    return tile_at(s.order, index, rows, cols, slices, group_rows, last_band);
  }
};

// A rectangle of a producer's output that one consumer step reads: rows
// [row_begin, row_end) and, in every slice, columns [col_begin, col_end).
struct Region {
  int row_begin, row_end;
  int col_begin, col_end;
};

}  // namespace cusync
