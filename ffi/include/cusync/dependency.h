// Which part of the producer's output a consumer step reads.
//
// A consumer GEMM tile loops over k-blocks of its A operand; A is (a view of)
// the producer's output. These functions turn "consumer tile rows [r0, r1),
// k-block [k0, k1)" into the producer Region it reads; a Policy then turns
// that Region into semaphores to wait on.
#pragma once

#include "defs.h"
#include "stage.h"

namespace cusync {

// MLP: A is the producer's output itself (after the activation), so the
// region is the same rows and the k range as columns.
CUSYNC_HD Region gemm_dependency(int row_begin, int row_end, int k_begin, int k_end) {
  return Region{row_begin, row_end, k_begin, k_end};
}

// Implicit-GEMM convolution (NHWC, stride 1, SAME padding, R x S filter).
// The consumer's A is im2col(producer output): row p is output pixel p of the
// flattened (n, h, w) grid; column k is (filter tap k / C, channel k % C).
// Pixel p reads producer pixels up to (R/2) image rows and (S/2) columns away,
// so a consumer row block depends on the producer rows of its halo, clipped to
// the rows of the same images.
struct ConvGeometry {
  int height, width;   // spatial size of the image (input = output: SAME)
  int channels;        // C: producer output channels = consumer input channels
  int filter_r, filter_s;
};

CUSYNC_HD Region conv_dependency(const ConvGeometry& g, int images, int row_begin, int row_end,
                                 int k_begin, int k_end) {
  const int pixels = g.height * g.width;
  const int halo = (g.filter_r / 2) * g.width + g.filter_s / 2;
  // Clip the halo to the first/last image the block touches.
  const int first_image = row_begin / pixels;
  const int last_image = (row_end - 1) / pixels;
  const int lo = max_int(first_image * pixels, row_begin - halo);
  const int hi = min_int(min_int((last_image + 1) * pixels, images * pixels), row_end + halo);
  // A k range covering several taps reads every channel; within one tap only
  // channels [k_begin % C, (k_end - 1) % C].
  int c0 = 0, c1 = g.channels;
  if (k_begin / g.channels == (k_end - 1) / g.channels) {
    c0 = k_begin % g.channels;
    c1 = (k_end - 1) % g.channels + 1;
  }
  return Region{lo, hi, c0, c1};
}

}  // namespace cusync
