// The target pipeline's per-sample work in one pass, torch-free: read the crop window of a uint8
// RGB image (any strides), zero every channel where the mask is set, convert to YCbCr and
// write CHW planes. Per-pixel formulas: color_pixel.h; mask: random_dilated_mask (dilate.h).
// Mirror: pyext/fastprep/numba_kernels/_crop_mask_ycbcr.py.
#pragma once
#include <cstdint>

namespace fastprep::kernels {

struct RgbSource {
  const uint8_t* data;  // element (0, 0, 0)
  int64_t sc, sh, sw;   // element strides of channel, row, column
};

// out: [3, height, width] contiguous of out_type (color.h's ColorType codes). mask: null, or
// [height, words_per_row(width)] mask words (random_mask.h's layout, padding bits zero; a set bit =
// masked): the AVX-512 rows use each word as the mask register of their blends, the other paths
// turn a row's words into bytes as they go. Float outputs are the float formulas times scale, as
// convert_color computes them from uint8. transpose: row y of the window is written as column y of
// out, which is then [3, width, height] (a quarter turn's transpose, _fold.py); the mask stays in
// the window's terms ([height, words_per_row(width)], row y masking the window's row y).
void crop_mask_ycbcr(const RgbSource& src, int64_t top, int64_t left, int64_t height, int64_t width,
                     const uint64_t* mask, void* out, int out_type, float scale, bool transpose = false);

}  // namespace fastprep::kernels
