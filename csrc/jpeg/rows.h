// Pixel rows into a strided uint8 output: what the decoder (decode.cpp) does with each row libjpeg
// hands it, and what a raw-pixel record (record.h) does with each row of its window.
#pragma once
#include <cstdint>

#include "jpeg/decode.h"

namespace fastprep::jpeg {

// One row of `width` pixels of `src_channels` interleaved bytes into output row y of `out`
// ([channels, H, W] strides). src_channels 1 with channels 3 writes Y and neutral chroma (128):
// the YCbCr of a grey image.
void put_row(const uint8_t* src, int src_channels, const Output& out, int channels, int64_t y, int64_t width);

}  // namespace fastprep::jpeg
