#include "kernels/dilate.h"

#include <vector>

#include "kernels/isa.h"
#include "kernels/random_mask.h"

namespace fastprep::kernels {
namespace {

// Pixel x takes pixels x - 1 and x + 1: a left shift brings the neighbour below (bit 63 of the
// previous word carries in), a right shift the one above (bit 0 of the next word).
inline uint64_t spread_h(uint64_t prev, uint64_t cur, uint64_t next) {
  return cur | (cur << 1) | (prev >> 63) | (cur >> 1) | (next << 63);
}

}  // namespace

FASTPREP_MULTIVERSION
void dilate_words(const uint64_t* src, uint64_t* dst, int64_t h, int64_t width, bool square) {
  const int64_t wpr = words_per_row(width);
  if (wpr == 0) return;
  const uint64_t last = last_word_mask(width);
  std::vector<uint64_t> zeros(static_cast<size_t>(wpr), 0);
  std::vector<uint64_t> vert(square ? static_cast<size_t>(wpr) : 0);
  for (int64_t r = 0; r < h; ++r) {
    const uint64_t* cur = src + r * wpr;
    const uint64_t* up = r > 0 ? cur - wpr : zeros.data();
    const uint64_t* dn = r + 1 < h ? cur + wpr : zeros.data();
    uint64_t* o = dst + r * wpr;
    if (square) {
      // The 3x3 square is the horizontal spread of the vertical OR.
      for (int64_t j = 0; j < wpr; ++j) vert[j] = up[j] | cur[j] | dn[j];
      cur = vert.data();
    }
    for (int64_t j = 0; j < wpr; ++j) {
      const uint64_t prev = j > 0 ? cur[j - 1] : 0;
      const uint64_t next = j + 1 < wpr ? cur[j + 1] : 0;
      o[j] = spread_h(prev, cur[j], next) | up[j] | dn[j];
    }
    o[wpr - 1] &= last;  // pixel W - 1 spreads into the padding bits
  }
}

void dilate_word_images(uint64_t* words, int64_t images, int64_t h, int64_t width, bool square,
                        int64_t iterations) {
  const int64_t plane = h * words_per_row(width);
  if (iterations == 0 || plane == 0) return;
  std::vector<uint64_t> tmp(static_cast<size_t>(plane));
  for (int64_t i = 0; i < images; ++i) {
    uint64_t* img = words + i * plane;
    for (int64_t it = 0; it < iterations; ++it) {
      dilate_words(img, tmp.data(), h, width, square);
      std::memcpy(img, tmp.data(), static_cast<size_t>(plane) * 8);
    }
  }
}

namespace {

void emit_rows(const uint64_t* words, int64_t rows, int64_t width, bool packed, uint8_t* out) {
  const int64_t wpr = words_per_row(width);
  const int64_t row_bytes = packed ? (width + 7) / 8 : width;
  for (int64_t r = 0; r < rows; ++r) {
    if (packed) {
      words_to_packed(words + r * wpr, width, out + r * row_bytes);
    } else {
      words_to_bools(words + r * wpr, width, out + r * row_bytes);
    }
  }
}

}  // namespace

void dilate(const uint8_t* in, uint8_t* out, int64_t images, int64_t h, int64_t width, bool square,
            int64_t iterations, bool packed) {
  const int64_t wpr = words_per_row(width);
  const int64_t row_bytes = packed ? (width + 7) / 8 : width;
  // One image at a time so its words stay in cache between packing, dilating and emitting.
  std::vector<uint64_t> words(static_cast<size_t>(h * wpr));
  for (int64_t i = 0; i < images; ++i) {
    const uint8_t* src = in + i * h * row_bytes;
    for (int64_t r = 0; r < h; ++r) {
      if (packed) {
        packed_to_words(src + r * row_bytes, width, words.data() + r * wpr);
      } else {
        bools_to_words(src + r * row_bytes, width, words.data() + r * wpr);
      }
    }
    dilate_word_images(words.data(), 1, h, width, square, iterations);
    emit_rows(words.data(), h, width, packed, out + i * h * row_bytes);
  }
}

void random_dilated_mask(int64_t seed, double p, int64_t images, int64_t h, int64_t width, bool square,
                         int64_t iterations, bool packed, uint8_t* out) {
  const uint32_t q = mask_threshold(p);
  const int64_t wpr = words_per_row(width);
  const int64_t row_bytes = packed ? (width + 7) / 8 : width;
  std::vector<uint64_t> words(static_cast<size_t>(h * wpr));
  for (int64_t i = 0; i < images; ++i) {
    for (int64_t r = 0; r < h; ++r) {
      random_mask_row(static_cast<uint64_t>(seed), q, i * h + r, wpr, width, words.data() + r * wpr);
    }
    dilate_word_images(words.data(), 1, h, width, square, iterations);
    emit_rows(words.data(), h, width, packed, out + i * h * row_bytes);
  }
}

}  // namespace fastprep::kernels
