// Binary dilation on rows of 64-pixel words (bit b of word j = pixel 64j + b, random_mask.h):
// a 3x3 cross or square in shifts and ORs, bits carried across word boundaries but never across
// rows; pixels outside the image count as false (scipy binary_dilation with border_value=0).
// Mirror: numba_kernels/_dilate.py.
#pragma once
#include <cstdint>

namespace fastprep::kernels {

// One dilation of an h x wpr word image, src -> dst (distinct buffers); padding bits stay zero.
void dilate_words(const uint64_t* src, uint64_t* dst, int64_t h, int64_t width, bool square);

// Bool bytes [images, h, width] or packed bytes [images, h, ceil(width / 8)] -> same layout.
void dilate(const uint8_t* in, uint8_t* out, int64_t images, int64_t h, int64_t width, bool square, int64_t iterations,
            bool packed);

// dilate(random_mask(...)) with the bits kept as words between generation and output.
void random_dilated_mask(int64_t seed, double p, int64_t images, int64_t h, int64_t width, bool square,
                         int64_t iterations, bool packed, uint8_t* out);

// One image's random_dilated_mask with one iteration as [h, words_per_row(width)] words (padding
// bits zero): what crop_mask_ycbcr applies, with no bytes in between.
void random_dilated_mask_words(int64_t seed, double p, int64_t h, int64_t width, bool square, uint64_t* words);

}  // namespace fastprep::kernels
