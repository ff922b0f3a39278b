#include "kernels/dilate.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/isa.h"
#include "kernels/mask_rows.h"
#include "kernels/random_mask.h"

namespace fastprep::kernels {
namespace {

// Pixel x takes pixels x - 1 and x + 1: a left shift brings the neighbour below (bit 63 of the
// previous word carries in), a right shift the one above (bit 0 of the next word).
FASTPREP_INLINE uint64_t spread_h(uint64_t prev, uint64_t cur, uint64_t next) {
  return cur | (cur << 1) | (prev >> 63) | (cur >> 1) | (next << 63);
}

// One output row from the rows above, at and below it (pass zeros outside the image); `vert` is
// one row of scratch.
FASTPREP_INLINE void dilate_row(const uint64_t* up, const uint64_t* cur, const uint64_t* dn, uint64_t* o,
                                uint64_t* vert, int64_t wpr, uint64_t last, bool square) {
  if (square) {
    // The 3x3 square is the horizontal spread of the vertical OR (ORing up / dn again below
    // changes nothing, and keeps one loop for both structures).
    for (int64_t j = 0; j < wpr; ++j) vert[j] = up[j] | cur[j] | dn[j];
    cur = vert;
  }
  if (wpr == 1) {
    o[0] = spread_h(0, cur[0], 0) | up[0] | dn[0];
  } else {
    // First and last words peeled so the middle loop has no branches and vectorises.
    o[0] = spread_h(0, cur[0], cur[1]) | up[0] | dn[0];
    for (int64_t j = 1; j + 1 < wpr; ++j) o[j] = spread_h(cur[j - 1], cur[j], cur[j + 1]) | up[j] | dn[j];
    o[wpr - 1] = spread_h(cur[wpr - 2], cur[wpr - 1], 0) | up[wpr - 1] | dn[wpr - 1];
  }
  o[wpr - 1] &= last;  // pixel W - 1 spreads into the padding bits
}

// One dilation of the word image src into dst (distinct), row by row.
FASTPREP_INLINE void dilate_image(const uint64_t* src, uint64_t* dst, int64_t h, int64_t width, bool square,
                                  uint64_t* zeros, uint64_t* vert) {
  const int64_t wpr = words_per_row(width);
  if (wpr == 0) return;
  const uint64_t last = last_word_mask(width);
  for (int64_t r = 0; r < h; ++r) {
    const uint64_t* cur = src + r * wpr;
    dilate_row(r > 0 ? cur - wpr : zeros, cur, r + 1 < h ? cur + wpr : zeros, dst + r * wpr, vert, wpr, last, square);
  }
}

// `iterations` dilations of src, alternating between buffers a and b (src may be a); the last one
// goes to `final` when given. Returns where the result is (src itself for 0 iterations).
FASTPREP_INLINE const uint64_t* run_iterations(const uint64_t* src, uint64_t* final, uint64_t* a, uint64_t* b,
                                               int64_t h, int64_t width, bool square, int64_t iterations,
                                               uint64_t* zeros, uint64_t* vert) {
  const uint64_t* cur = src;
  for (int64_t it = 0; it < iterations; ++it) {
    uint64_t* dst = (it + 1 == iterations && final != nullptr) ? final : (cur == a ? b : a);
    dilate_image(cur, dst, h, width, square, zeros, vert);
    cur = dst;
  }
  return cur;
}

// Every pixel of an h x width image is within h + width - 2 steps of every other, so dilation is
// at its fixed point after that many: more iterations change nothing, and capping them keeps a huge
// count (iterations=2**62) from running for ever. Formed without h + width overflowing.
int64_t capped_iterations(int64_t iterations, int64_t h, int64_t width) {
  return iterations - width > h ? h + width : iterations;
}

// Packed rows of whole words, 8-byte aligned, are word images already: no conversion either way.
bool packed_are_words(bool packed, int64_t width, const void* p) {
  return packed && width % 64 == 0 && reinterpret_cast<uintptr_t>(p) % alignof(uint64_t) == 0;
}

struct DilateWords {
  template <Isa L>
  static FASTPREP_INLINE void run(const uint64_t* src, uint64_t* dst, int64_t h, int64_t width, bool square) {
    const size_t wpr = static_cast<size_t>(words_per_row(width));
    std::vector<uint64_t> zeros(wpr, 0), vert(wpr);
    dilate_image(src, dst, h, width, square, zeros.data(), vert.data());
  }
};

struct Dilate {
  template <Isa L>
  static FASTPREP_INLINE void run(const uint8_t* in, uint8_t* out, int64_t images, int64_t h, int64_t width,
                                  bool square, int64_t iterations, bool packed) {
    const int64_t wpr = words_per_row(width);
    const int64_t row_bytes = packed ? (width + 7) / 8 : width;
    const int64_t plane = h * wpr;
    const bool direct = packed_are_words(packed, width, in) && packed_are_words(packed, width, out);
    if (direct && iterations == 0) {
      std::memcpy(out, in, static_cast<size_t>(images * plane) * 8);
      return;
    }
    // One image at a time so its words stay in cache between packing, dilating and emitting.
    std::vector<uint64_t> a(static_cast<size_t>(plane)), b(static_cast<size_t>(plane));
    std::vector<uint64_t> zeros(static_cast<size_t>(wpr), 0), vert(static_cast<size_t>(wpr));
    for (int64_t i = 0; i < images; ++i) {
      const uint8_t* src = in + i * h * row_bytes;
      uint8_t* dst = out + i * h * row_bytes;
      if (direct) {
        run_iterations(reinterpret_cast<const uint64_t*>(src), reinterpret_cast<uint64_t*>(dst), a.data(), b.data(), h,
                       width, square, iterations, zeros.data(), vert.data());
        continue;
      }
      for (int64_t r = 0; r < h; ++r) {
        if (packed) {
          mask_rows::packed_to_words(src + r * row_bytes, width, a.data() + r * wpr);
        } else {
          mask_rows::bools_to_words<L>(src + r * row_bytes, width, a.data() + r * wpr);
        }
      }
      const uint64_t* result = run_iterations(a.data(), nullptr, a.data(), b.data(), h, width, square, iterations,
                                              zeros.data(), vert.data());
      mask_rows::emit_rows<L>(result, h, width, packed, dst);
    }
  }
};

struct RandomDilatedMask {
  template <Isa L>
  static FASTPREP_INLINE void run(int64_t seed, double p, int64_t images, int64_t h, int64_t width, bool square,
                                  int64_t iterations, bool packed, uint8_t* out) {
    const uint32_t q = mask_threshold(p);
    const int64_t wpr = words_per_row(width);
    const int64_t row_bytes = packed ? (width + 7) / 8 : width;
    const uint64_t useed = static_cast<uint64_t>(seed);
    std::vector<uint64_t> zeros(static_cast<size_t>(wpr), 0), vert(static_cast<size_t>(wpr));
    if (iterations == 1) {
      // A rolling window of 3 generated rows: row r + 1 is generated just before output row r
      // needs it, so the bits go from generator to output without leaving L1.
      std::vector<uint64_t> ring(static_cast<size_t>(3 * wpr)), orow(static_cast<size_t>(wpr));
      const auto slot = [&](int64_t r) { return ring.data() + (r % 3) * wpr; };
      for (int64_t i = 0; i < images; ++i) {
        mask_rows::random_row(useed, q, i * h, wpr, width, slot(0));
        for (int64_t r = 0; r < h; ++r) {
          if (r + 1 < h) mask_rows::random_row(useed, q, i * h + r + 1, wpr, width, slot(r + 1));
          dilate_row(r > 0 ? slot(r - 1) : zeros.data(), slot(r), r + 1 < h ? slot(r + 1) : zeros.data(), orow.data(),
                     vert.data(), wpr, last_word_mask(width), square);
          mask_rows::emit_rows<L>(orow.data(), 1, width, packed, out + (i * h + r) * row_bytes);
        }
      }
      return;
    }
    std::vector<uint64_t> a(static_cast<size_t>(h * wpr)), b(static_cast<size_t>(h * wpr));
    for (int64_t i = 0; i < images; ++i) {
      for (int64_t r = 0; r < h; ++r) mask_rows::random_row(useed, q, i * h + r, wpr, width, a.data() + r * wpr);
      const uint64_t* result = run_iterations(a.data(), nullptr, a.data(), b.data(), h, width, square, iterations,
                                              zeros.data(), vert.data());
      mask_rows::emit_rows<L>(result, h, width, packed, out + i * h * row_bytes);
    }
  }
};

}  // namespace

void dilate_words(const uint64_t* src, uint64_t* dst, int64_t h, int64_t width, bool square) {
  dispatch<DilateWords>(src, dst, h, width, square);
}

void dilate(const uint8_t* in, uint8_t* out, int64_t images, int64_t h, int64_t width, bool square, int64_t iterations,
            bool packed) {
  dispatch<Dilate>(in, out, images, h, width, square, capped_iterations(iterations, h, width), packed);
}

void random_dilated_mask(int64_t seed, double p, int64_t images, int64_t h, int64_t width, bool square,
                         int64_t iterations, bool packed, uint8_t* out) {
  dispatch<RandomDilatedMask>(seed, p, images, h, width, square, capped_iterations(iterations, h, width), packed, out);
}

}  // namespace fastprep::kernels
