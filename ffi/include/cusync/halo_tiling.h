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
constexpr int kHaloWideBW = kHaloTileM + 2;
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

  CUSYNC_HD int tiles() const { return paired ? ceil_div(images, 2) : images * tiles_per_image; }

  CUSYNC_HD HaloTile tile(int index) const {
    if (paired) return HaloTile{2 * index, 0, 0, 0};
    const int n = index / tiles_per_image, t = index % tiles_per_image;
    if (wide) return HaloTile{n, t / segs, (t % segs) * kHaloTileM, 0};
    const int p0 = t * kHaloTileM, h0 = p0 / bw;
    return HaloTile{n, h0, 0, p0 - h0 * bw};
  }

  // Whether positions 64 .. 127 of tile `index` (its second 64-row chain)
  // hold any output pixel: a 7x7 image's 63 padded positions fill one chain
  // only, and the kernel skips the other's MMAs and stores.
  CUSYNC_HD bool second_half_live(int index) const {
    if (paired) return 2 * index + 1 < images;
    const HaloTile t = tile(index);
    if (wide) return t.w0 + kHaloTileM / 2 < width;
    const int p = (index % tiles_per_image) * kHaloTileM + kHaloTileM / 2;  // first position of the half
    const int end = min_int(p + kHaloTileM / 2, height * bw);
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
  CUSYNC_HD int read_positions() const {
    return paired ? max_int(box_positions(), chain_halo_offset(1) + kHaloTileM / 2 + 2 * bw + 2) : rows * bw;
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
    const int first = (r0 * bw) / kHaloTileM;
    const int last = min_int(tiles_per_image - 1, (r1 * bw + width - 1) / kHaloTileM);
    for (int p = first; p <= last; ++p) f(base + p);
  }
};

CUSYNC_HD HaloTiling make_halo_tiling(int images, int height, int width) {
  HaloTiling t{};
  t.images = images;
  t.height = height;
  t.width = width;
  t.wide = width + 2 > kHaloWideBW;
  t.bw = t.wide ? kHaloWideBW : width + 2;
  t.paired = !t.wide && height * t.bw <= kHaloTileM / 2 && images >= kHaloPairMinImages;
  t.rows = t.wide ? 3 : t.paired ? height + 2 : 3 + ceil_div(kHaloTileM + 1, t.bw);
  t.segs = ceil_div(width, kHaloTileM);
  t.tiles_per_image = t.wide ? height * t.segs : ceil_div(height * t.bw, kHaloTileM);
  return t;
}

}  // namespace cusync
