// JFIF (BT.601 full range) RGB <-> YCbCr on CHW or HWC images, torch-free.
// Mirror: pyext/fastprep/numba_kernels/_color.py.
#pragma once
#include <cstdint>

namespace fastprep::kernels {

// Element types by code: 0 uint8, 1 float32, 2 float16, 3 bfloat16.
enum ColorType : int { kU8 = 0, kF32 = 1, kF16 = 2, kBF16 = 3 };

struct ColorSource {
  const void* data;  // element (channel 0, 0, 0)
  int64_t h, w;
  int64_t sc, sh, sw;  // element strides of channel, row, column
};

// out: [3, h, w] contiguous. forward: RGB -> YCbCr, else YCbCr -> RGB.
// uint8 -> uint8: exact (see color.cpp). Otherwise float32 math, output * scale, rounded to the
// output type. The chroma offset is 128 for uint8 input and 0.5 for float input.
void convert_color(const ColorSource& src, int in_type, void* out, int out_type, bool forward, float scale);

}  // namespace fastprep::kernels
