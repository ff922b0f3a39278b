// Crop of one image (any strides, CHW or HWC) into a contiguous [C, h, w] output, torch-free.
// A copy, so kernels dispatch on element size only. The window may extend past the image (the
// padded random crop): those output pixels get `fill_bits`.
// Mirror: pyext/fastprep/numba_kernels/_crop.py.
#pragma once
#include <cstdint>

#include "kernels/counter_rng.h"

namespace fastprep::kernels {

struct CropSource {
  const void* data;    // element (0, 0, 0) of the image
  int64_t c, h, w;     // image sizes
  int64_t sc, sh, sw;  // element strides (any, e.g. HWC is sc=1, sw=c)
};

// out: [c, height, width] contiguous. Output (y, x) reads source (top + y, left + x) when inside
// the image, else gets fill_bits (the element's bit pattern, low elem_size bytes).
void crop(const CropSource& src, void* out, int elem_size, int64_t top, int64_t left, int64_t height, int64_t width,
          uint32_t fill_bits);

// Offset of a random window on one axis, in source coordinates (negative when padded): from
// `word` = random_word(seed, 0) for the rows and random_word(seed, 1) for the columns.
inline int64_t random_crop_offset(uint64_t word, int64_t size, int64_t crop, bool pad) {
  const int64_t padding = pad && size < crop ? crop - size : 0;
  // torchvision pads both sides by the shortfall: the padded size is size + 2 padding and the
  // window has padded - crop + 1 positions, i.e. |size - crop| + 1, formed so that no step
  // overflows (size + 2 padding does for crops near 2^62).
  const uint64_t positions = static_cast<uint64_t>(padding > 0 ? padding : size - crop) + 1;
  return static_cast<int64_t>(uniform_below(word, positions)) - padding;
}

}  // namespace fastprep::kernels
