// CMYK pixels as libjpeg decodes a 4-component JPEG (a YCCK one converted to CMYK by libjpeg) into
// what fastprep's modes give, with the bits of Pillow's Image.open(f).convert(...). Torch-free.
//
// Pillow reads every 4-component JPEG as "CMYK;I" (Adobe's inverted polarity: its C is 255 minus
// libjpeg's sample) and converts CMYK to RGB in integer arithmetic (Convert.c, cmyk2rgb):
//   nk = 255 - K,  R = nk - round(C nk / 255)   (the same for G with M, B with Y)
// with round(x / 255) = ((x + 128) / 256 + x + 128) / 256, exact for x in [0, 255^2] and free of
// ties (255 is odd). Its L of a CMYK image goes through RGB: L = (19595 R + 38470 G + 7471 B +
// 2^15) >> 16 (rgb2l). mode YCbCr is fastprep's exact rgb_to_ycbcr of that RGB (kernels/
// color_pixel.h), as every reader gives for an RGB-coded image. Written over libjpeg's samples, so
// Pillow's nk is libjpeg's K and Pillow's C is 255 - libjpeg's C.
#pragma once
#include <cstdint>

#include "jpeg/decode.h"

namespace fastprep::jpeg {

// n pixels of interleaved libjpeg CMYK into n pixels of `mode` (3 interleaved bytes for RGB and
// YCbCr, 1 for GRAY).
void convert_cmyk(const uint8_t* cmyk, uint8_t* out, int64_t n, Mode mode);

}  // namespace fastprep::jpeg
