// The halo conv's tiling (kernel family 2, cuda/halo_conv_sm90.cuh) and the
// dependency of its consumer tiles on its producer tiles, host and device.
//
// A 3x3, stride-1, SAME convolution whose tile loads its input once, as a
// halo: a window of the zero-padded input, BW positions a row, whose row 0 /
// column 0 is input pixel (h0 - 1, w0 - 1). A tile is 128 output positions;
// position i sits at halo index q = a0 + i, output pixel (h0 + q / BW,
// w0 + q % BW), and filter tap (r, s) reads halo index q + r BW + s: one shift
// per tap. Positions off the image are computed and not stored. Two tilings:
//   narrow (W + 2 <= 130): BW = W + 2, an image's padded grid in order; tile t
//     of an image holds positions 128 t .. 128 t + 127 (tiles never straddle
//     images); h0 = 128 t / BW, w0 = 0, a0 = 128 t % BW. The halo has
//     R = 3 + ceil(129 / BW) rows (tap (2, 2) of position 127 from any a0 < BW).
//   row tiles (narrow, where the 128-position halo leaves room for one ring
//     stage and a halo of whole rows for two: VGG's 56x56x256): a tile is
//     T = floor(128 / BW) whole padded rows, positions T BW .. 127 computed
//     and not stored; a0 = 0, so the halo is R = T + 2 rows (6 -> 4 at W =
//     56: 44.5 -> 29.7 KB, and a second stage fits beside a streamed B).
//   wide (W + 2 > 130, e.g. VGG's 224): a tile is 128 positions of one output
//     row, w0 = 128 j; BW = 130, R = 3, a0 = 0.
//   paired (narrow, H BW <= 64: 7x7 and smaller, and at least
//     kHaloPairMinImages images): a tile is two images, one 64-position chain
//     each (tile t: images 2 t and 2 t + 1); the halo is both images' padded
//     grids, R = H + 2 rows each, the second's at halo index R BW. One image
//     a tile leaves half of every tile's rows idle and streams the filter once
//     per image, which pays only once the tiles fill the GPU: at fewer images
//     the halved tile count costs more than the filter traffic saves
//     (7x7x512 on the H200: b16 27.8 us unpaired, 30.5 paired; b32 46.2, 35.4).
// Both convolutions of a pair have the same images and size, so one tiling
// serves both: producer tile p covers output positions of tile p of conv 1,
// and a consumer tile's halo reads the producer tiles of the rows (and, wide,
// the columns) it spans.
#pragma once

#include "defs.h"

namespace cusync {

constexpr int kHaloTileM = 128;          // positions per tile
constexpr int kHaloPairMinImages = 24;   // the fewest images the paired tiling takes
// The halo conv's shared memory (cuda/halo_conv_sm90.cuh lays it out; here
// so the tiling can be chosen where the sync buffer is sized, without a
// device): a 64 x 64 filter block's 9 taps, the epilogue's scratch, a stage
// record's ints, and sm_90's opt-in limit a block.
constexpr int kHaloRowBytes = 64 * 2;  // a position's 64 channels (or a filter row's 64 outputs)
constexpr int kHaloWeightBytes = 9 * 64 * kHaloRowBytes;
constexpr int kHaloScratchBytes = 8 * 16 * kHaloRowBytes;
constexpr int kHaloRecordInts = 10;
constexpr long long kHaloSmemLimit = 232448;
constexpr int kHaloWideBW = kHaloTileM + 2;
// Conv 1's input channels in the pixel8 form (an RGB image padded: a
// position is 16 bytes, see cuda/halo_conv_sm90.cuh); one channel block.
constexpr int kHaloPixel8Channels = 8;
// A share's fp32 sums when the halo conv splits a conv along its input
// channel blocks: one tile of 128 positions x 64 output channels.
constexpr int kHaloShareFloats = kHaloTileM * 64;

struct HaloTile {
  int image, h0, w0, a0;
};

struct HaloTiling {
  int images, height, width;
  int wide;             // 1: the wide tiling
  int paired;           // 1: the paired tiling (two images a tile)
  int bw;               // halo positions a row
  int rows;             // halo rows R
  int segs;             // wide: tiles per output row
  int tiles_per_image;
  int row_tiles;        // row tiles: padded rows a tile (0: 128-position tiles)
  int span;             // positions a tile owns (narrow: tile t's from t span); the rest computed, not stored

  CUSYNC_HD int tiles() const { return paired ? ceil_div(images, 2) : images * tiles_per_image; }

  CUSYNC_HD HaloTile tile(int index) const {
    if (paired) return HaloTile{2 * index, 0, 0, 0};
    const int n = index / tiles_per_image, t = index % tiles_per_image;
    if (wide) return HaloTile{n, t / segs, (t % segs) * kHaloTileM, 0};
    const int p0 = t * span, h0 = p0 / bw;
    return HaloTile{n, h0, 0, p0 - h0 * bw};
  }

  // Whether positions 64 .. 127 of tile `index` (its second 64-row chain)
  // hold any output pixel: a 7x7 image's 63 padded positions fill one chain
  // only, and the kernel skips the other's MMAs and stores.
  CUSYNC_HD bool second_half_live(int index) const {
    if (paired) return 2 * index + 1 < images;
    const HaloTile t = tile(index);
    if (wide) return t.w0 + kHaloTileM / 2 < width;
    const int first = (index % tiles_per_image) * span;
    const int p = first + kHaloTileM / 2;  // first position of the half
    const int end = min_int(first + span, height * bw);
    if (p >= end) return false;
    if (p % bw < width) return true;
    return (p / bw + 1) * bw < end;  // the next row's first pixel
  }

  // Whether no tile has a pixel in its second half (a paired tiling of one
  // image). Tile 0's second half is the first to hold one: in the wide
  // tiling, and in the narrow one, it always does.
  CUSYNC_HD bool one_chain() const { return !second_half_live(0); }

  // Chain c of a tile (its 64 rows from 64 c): the tile whose positions it
  // computes (paired: the second image's), the tile position of its first
  // row, and that row's halo index past the tile's a0.
  CUSYNC_HD HaloTile chain_tile(HaloTile t, int c) const {
    if (paired) t.image += c;
    return t;
  }
  CUSYNC_HD int chain_first(int c) const { return paired ? 0 : c * (kHaloTileM / 2); }
  CUSYNC_HD int chain_halo_offset(int c) const { return paired ? c * rows * bw : c * (kHaloTileM / 2); }
  // The halo's positions as TMA loads them (paired: two images), and as far
  // as a chain's taps may read, in the shared memory a stage must hold (a
  // paired chain's rows past its image's last pixel read past its grid).
  CUSYNC_HD int box_positions() const { return (paired ? 2 : 1) * rows * bw; }
  // (Row tiles: the unstored positions' taps read past the box.)
  CUSYNC_HD int read_positions() const {
    if (paired) return max_int(box_positions(), chain_halo_offset(1) + kHaloTileM / 2 + 2 * bw + 2);
    return row_tiles ? max_int(rows * bw, kHaloTileM + 2 * bw + 2) : rows * bw;
  }
  // A stage's bytes: the halo area (to a 1024-byte boundary, where its B
  // block starts) and, unless B is resident, that block.
  CUSYNC_HD int halo_stage_bytes() const { return (read_positions() * kHaloRowBytes + 1023) / 1024 * 1024; }
  CUSYNC_HD int stage_bytes(bool resident_b) const {
    return halo_stage_bytes() + (resident_b ? 0 : kHaloWeightBytes);
  }

  // Calls f(index) for every tile whose outputs tile `index`'s halo reads
  // (the same image; the halo's rows h0 - 1 .. and its columns, clipped to
  // the image), in increasing order.
  template <class F>
  CUSYNC_HD void for_each_dependency(int index, F&& f) const {
    if (paired) {
      f(index);  // the same two images
      return;
    }
    const HaloTile t = tile(index);
    const int base = t.image * tiles_per_image;
    const int r0 = max_int(0, t.h0 - 1);
    if (wide) {
      const int r1 = min_int(height - 1, t.h0 + 1);
      const int s0 = max_int(0, t.w0 - 1) / kHaloTileM;
      const int s1 = min_int(width - 1, t.w0 + kHaloTileM) / kHaloTileM;
      for (int r = r0; r <= r1; ++r)
        for (int s = s0; s <= s1; ++s) f(base + r * segs + s);
      return;
    }
    // The halo's last row is h0 + R - 2 of the image; a producer tile holds
    // row r's pixels when it meets positions r BW .. r BW + W - 1.
    const int r1 = min_int(height - 1, t.h0 + rows - 2);
    const int first = (r0 * bw) / span;
    const int last = min_int(tiles_per_image - 1, (r1 * bw + width - 1) / span);
    for (int p = first; p <= last; ++p) f(base + p);
  }
};

// row_tiles: the row-tile tiling (narrow images only; else ignored).
CUSYNC_HD HaloTiling make_halo_tiling(int images, int height, int width, bool row_tiles = false) {
  HaloTiling t{};
  t.images = images;
  t.height = height;
  t.width = width;
  t.wide = width + 2 > kHaloWideBW;
  t.bw = t.wide ? kHaloWideBW : width + 2;
  t.paired = !t.wide && height * t.bw <= kHaloTileM / 2 && images >= kHaloPairMinImages;
  t.row_tiles = row_tiles && !t.wide && !t.paired ? kHaloTileM / t.bw : 0;
  t.span = t.row_tiles ? t.row_tiles * t.bw : kHaloTileM;
  t.rows = t.wide ? 3 : t.paired ? height + 2 : t.row_tiles ? t.row_tiles + 2 : 3 + ceil_div(kHaloTileM + 1, t.bw);
  t.segs = ceil_div(width, kHaloTileM);
  t.tiles_per_image = t.wide ? height * t.segs : ceil_div(height * t.bw, t.span);
  return t;
}

// The halo conv's dynamic shared memory for `stages` stages: the alignment
// slack, resident B, the scratch, the barriers (B's, two turns, full and
// empty a stage), a record a stage and the cursor.
CUSYNC_HD long long halo_smem_bytes(bool resident_b, int stage_bytes, int stages) {
  return 1024 + (resident_b ? kHaloWeightBytes : 0) + kHaloScratchBytes + 24 +
         (long long)stages * (stage_bytes + 16 + 4 * kHaloRecordInts) + 16;
}

// Stages that fit in `limit` bytes (0: not even one).
CUSYNC_HD int halo_stages(const HaloTiling& g, bool resident_b, long long limit) {
  int stages = 0;
  while (halo_smem_bytes(resident_b, g.stage_bytes(resident_b), stages + 1) <= limit) ++stages;
  return stages;
}

// B is resident where each conv of the pair has one channel block in (64,
// or pixel8's 8) and one of 64 out.
CUSYNC_HD bool halo_resident_b(int in_channels, int mid_channels, int out_channels) {
  return (in_channels == 64 || in_channels == kHaloPixel8Channels) && mid_channels == 64 && out_channels == 64;
}

// The tiling a pair runs: row tiles where the 128-position tiles' halo and
// streamed B leave room for one ring stage and row tiles' for two (a stage
// loads while the other computes: VGG's 56x56x256 ran at half the tensor
// cores' rate with one); else 128-position tiles, which store 96 % of their
// rows at W = 56 where row tiles store 88 %.
CUSYNC_HD HaloTiling plan_halo_tiling(int images, int height, int width, int in_channels, int mid_channels,
                                      int out_channels) {
  const HaloTiling positions = make_halo_tiling(images, height, width);
  const bool resident = halo_resident_b(in_channels, mid_channels, out_channels);
  if (positions.wide || positions.paired || halo_stages(positions, resident, kHaloSmemLimit) >= 2)
    return positions;
  const HaloTiling rows = make_halo_tiling(images, height, width, true);
  return rows.row_tiles >= 1 && halo_stages(rows, resident, kHaloSmemLimit) >= 2 ? rows : positions;
}

}  // namespace cusync
