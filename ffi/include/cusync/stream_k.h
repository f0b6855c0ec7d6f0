// Stream-K schedule of one GEMM stage (run by the Hopper GEMM-chain kernel;
// the CPU module sizes the workspace with it and exposes the schedule to the
// core tests).
//
// Where a stage's tiles fill the SMs in a fraction of a wave (GPT-3 at 256
// tokens: 96 tiles of 128x128 for 132 SMs), whole tiles leave SMs idle for a
// whole tile's time. Stream-K lays the k-blocks of tiles end to end and cuts
// that line into contiguous ranges of near-equal length, one per CTA. A CTA
// runs its range as segments, each the k-blocks [kb0, kb1) of one tile. A
// tile cut between CTAs is finished by the segment that arrives last,
// whichever it is: the others store their fp32 partial sums and count them
// stored; the last one keeps its own in registers, adds theirs and runs the
// epilogue. It waits only for segments that have arrived, which wait for
// nothing: no schedule can deadlock.
//
// One line per row of tiles, each cut into the same ranges: CTAs (r, j) of
// every row r run the same columns at the same k-blocks at the same time, so
// the weight tile they share is read from DRAM once and from L2 by the other
// rows. (One line through all tiles put the rows of a column a range apart:
// every weight block was read from DRAM once per row, and the GEMM ran 1.4x
// slower than without stream-K.)
#pragma once

#include "defs.h"
#include "tile_order.h"

namespace cusync {

struct StreamKSegment {
  Tile tile;
  int index;     // row * cols + col: the tile's partial sums and count
  int kb0, kb1;  // its k-blocks
  int slot;      // which of the tile's segments (0: the one with k-block 0)
  int count;     // how many segments the tile has (1: the tile is whole)
};

struct StreamK {
  int rows = 0;          // rows of tiles (lines)
  int cols = 0;          // tiles per row
  int k_blocks = 0;      // k-blocks of each tile
  int ctas_per_row = 0;  // ranges per line; 0: stream-K is off

  CUSYNC_HD int ctas() const { return rows * ctas_per_row; }
  CUSYNC_HD int tiles() const { return rows * cols; }
  CUSYNC_HD int line_units() const { return cols * k_blocks; }
  // CTA c runs line c % rows, range c / rows.
  CUSYNC_HD int row_of(int cta) const { return cta % rows; }
  // Range j of a line is units [begin(j), begin(j + 1)): the first
  // line_units % ctas_per_row ranges are one unit longer.
  CUSYNC_HD int begin(int j) const {
    const int q = line_units() / ctas_per_row, r = line_units() % ctas_per_row;
    return j * q + (j < r ? j : r);
  }
  CUSYNC_HD int range_of(int unit) const {
    const int q = line_units() / ctas_per_row, r = line_units() % ctas_per_row;
    const int big = r * (q + 1);  // units of the longer ranges
    return unit < big ? unit / (q + 1) : r + (unit - big) / q;
  }
  CUSYNC_HD int cta_begin(int cta) const { return begin(cta / rows); }
  CUSYNC_HD int cta_end(int cta) const { return begin(cta / rows + 1); }
  // The segment of line `row` that starts at `unit`, in a range that ends at `end`.
  CUSYNC_HD StreamKSegment segment(int row, int unit, int end) const {
    StreamKSegment s;
    const int col = unit / k_blocks;
    s.tile = Tile{row, col};
    s.index = row * cols + col;
    s.kb0 = unit % k_blocks;
    s.kb1 = s.kb0 + (end - unit) < k_blocks ? s.kb0 + (end - unit) : k_blocks;
    const int first = range_of(col * k_blocks);
    s.slot = range_of(unit) - first;
    s.count = range_of(col * k_blocks + k_blocks - 1) - first + 1;
    return s;
  }
  // Partial-sum slots per tile: a tile meets at most this many ranges.
  CUSYNC_HD int max_segments() const {
    const int q = line_units() / ctas_per_row;
    return q > 0 ? (k_blocks + q - 1) / q + 1 : k_blocks;
  }
};

// CTA ranges per row of tiles for a budget of `ctas` CTAs: as many as fit
// whole for every row, at least one, at most one per unit. Where a row's
// tiles fit its share, every tile gets the same whole number of ranges (an
// even split-K: 64 tiles of 128x192 on 132 SMs run as 128 half tiles): ranges
// that straddle tiles made 128x192 at GPT-3's first GEMM at 256 tokens 1.10x
// slower than the even split (bench/NOTES_sm90.md, stop 15).
CUSYNC_HD int stream_k_ctas_per_row(int rows, int cols, int k_blocks, int ctas) {
  int per_row = rows > 0 ? ctas / rows : 0;
  if (cols > 0 && per_row >= cols) per_row = cols * (per_row / cols);
  const int units = cols * k_blocks;
  return per_row < 1 ? 1 : (per_row < units ? per_row : units);
}

// cluster_rows > 1 (2x1 clusters): the lines are padded to a multiple of it,
// so the CTAs of a cluster (consecutive CTAs, lines r and r + 1 of one range)
// run the same columns and k-blocks of adjacent row tiles and share B. A
// padded line's tiles lie past the last row: they load but store nothing.
CUSYNC_HD StreamK make_stream_k(int rows, int cols, int k_blocks, int ctas, int cluster_rows = 1) {
  const int lines = cluster_rows > 1 ? ceil_div(rows, cluster_rows) * cluster_rows : rows;
  return StreamK{lines, cols, k_blocks, stream_k_ctas_per_row(lines, cols, k_blocks, ctas)};
}

}  // namespace cusync
