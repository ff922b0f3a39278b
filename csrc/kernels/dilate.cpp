#include "kernels/dilate.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/isa.h"
#include "kernels/mask_rows.h"
#include "kernels/random_mask.h"
#include "kernels/simd.h"

namespace fastprep::kernels {
namespace {

// Pixel x takes pixels x - 1 and x + 1: a left shift brings the neighbour below (bit 63 of the
// previous word carries in), a right shift the one above (bit 0 of the next word).
FASTPREP_INLINE uint64_t spread_h(uint64_t prev, uint64_t cur, uint64_t next) {
  return cur | (cur << 1) | (prev >> 63) | (cur >> 1) | (next << 63);
}

// Output word j of a row from the words above (up), at (c) and below (d) it.
template <bool Square>
FASTPREP_INLINE uint64_t dilated_word(const uint64_t* up, const uint64_t* c, const uint64_t* d, int64_t j) {
  if constexpr (Square) {
    return spread_h(up[j - 1] | c[j - 1] | d[j - 1], up[j] | c[j] | d[j], up[j + 1] | c[j + 1] | d[j + 1]);
  }
  return spread_h(c[j - 1], c[j], c[j + 1]) | up[j] | d[j];
}

#if FASTPREP_X86_LEVELS
// AVX2 (x86-64-v3) word I/O of the one-pass bool dilation below: `bytes` (64, or the row's last
// word's) bool bytes -> a word (two byte compares + movemasks), a word -> `bytes` 0/1 bytes (a
// shuffle + bit test per 32). A last word of fewer bytes goes through a zero-padded copy: AVX2 has no
// byte-masked loads or stores, and nothing outside the row is read or written.
FASTPREP_TARGET_V3 inline uint64_t bool_word_v3(const uint8_t* p, int64_t bytes) {
  alignas(32) uint8_t pad[64];
  if (bytes < 64) {
    std::memset(pad, 0, 64);
    std::memcpy(pad, p, static_cast<size_t>(bytes));
    p = pad;
  }
  const __m256i zero = _mm256_setzero_si256();
  const uint32_t lo = ~static_cast<uint32_t>(
      _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), zero)));
  const uint32_t hi = ~static_cast<uint32_t>(
      _mm256_movemask_epi8(_mm256_cmpeq_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32)), zero)));
  return static_cast<uint64_t>(hi) << 32 | lo;
}

FASTPREP_TARGET_V3 inline void store_bools_v3(uint8_t* o, uint64_t v, int64_t bytes) {
  const __m256i shuf =
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ULL));
  const __m256i one = _mm256_set1_epi8(1);
  alignas(32) uint8_t pad[64];
  uint8_t* dst = bytes < 64 ? pad : o;
  for (int h = 0; h < 2; ++h) {
    const int b = static_cast<int>(static_cast<uint32_t>(v >> (32 * h)));
    const __m256i t = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(b), shuf), bit);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + 32 * h), _mm256_and_si256(_mm256_cmpeq_epi8(t, bit), one));
  }
  if (bytes < 64) std::memcpy(o, pad, static_cast<size_t>(bytes));
}

// dilate_bool_row_v4 / dilate_bools_v4 below with the AVX2 word I/O (see there).
template <bool Square, bool Below>
FASTPREP_TARGET_V3 inline void dilate_bool_row_v3(const uint64_t* up, const uint64_t* c, uint64_t* d,
                                                  const uint8_t* below, uint8_t* o, int64_t wpr, int64_t tail,
                                                  uint64_t last) {
  if constexpr (Below && Square) d[0] = bool_word_v3(below, wpr > 1 ? 64 : tail);
  for (int64_t j = 0; j + 1 < wpr; ++j) {
    if constexpr (Below) {
      if constexpr (Square) {
        d[j + 1] = bool_word_v3(below + 64 * (j + 1), j + 2 < wpr ? 64 : tail);
      } else {
        d[j] = bool_word_v3(below + 64 * j, 64);
      }
    }
    store_bools_v3(o + 64 * j, dilated_word<Square>(up, c, d, j), 64);
  }
  if constexpr (Below && !Square) d[wpr - 1] = bool_word_v3(below + 64 * (wpr - 1), tail);
  store_bools_v3(o + 64 * (wpr - 1), dilated_word<Square>(up, c, d, wpr - 1) & last, tail);
}

template <bool Square>
FASTPREP_TARGET_V3 void dilate_bools_v3(const uint8_t* in, uint8_t* out, int64_t h, int64_t width, uint64_t* ring) {
  const int64_t wpr = words_per_row(width);
  const uint64_t last = last_word_mask(width);
  const int64_t tail = width - 64 * (wpr - 1);  // bytes of the row's last word
  std::fill(ring, ring + 3 * (wpr + 2), 0);
  uint64_t* rows[3] = {ring + 1, ring + wpr + 3, ring + 2 * wpr + 5};  // above, at, below
  for (int64_t j = 0; j < wpr; ++j) rows[1][j] = bool_word_v3(in + 64 * j, j + 1 < wpr ? 64 : tail);
  for (int64_t r = 0; r + 1 < h; ++r) {
    dilate_bool_row_v3<Square, true>(rows[0], rows[1], rows[2], in + (r + 1) * width, out + r * width, wpr, tail, last);
    uint64_t* t = rows[0];
    rows[0] = rows[1], rows[1] = rows[2], rows[2] = t;
  }
  std::fill(rows[2], rows[2] + wpr, 0);
  dilate_bool_row_v3<Square, false>(rows[0], rows[1], rows[2], nullptr, out + (h - 1) * width, wpr, tail, last);
}

// dilate_row below in AVX-512, 8 words a step. The words on either side of a step come from the
// steps before and after it, kept in registers (valignq), so each word is loaded once; loads are
// masked at the row's end (nothing outside the row is read, and no bit carries across rows).
FASTPREP_TARGET_V4 inline __m512i load_step(const uint64_t* p, int64_t j, int64_t wpr) {
  if (j >= wpr) return _mm512_setzero_si512();
  return _mm512_maskz_loadu_epi64(wpr - j >= 8 ? 0xFF : static_cast<__mmask8>((1u << (wpr - j)) - 1), p + j);
}

// Step j of the row the horizontal spread reads: the row itself (cross) or the vertical OR
// (square); u and d get step j of the rows above and below.
FASTPREP_TARGET_V4 inline __m512i spread_src(const uint64_t* up, const uint64_t* cur, const uint64_t* dn, int64_t j,
                                             int64_t wpr, bool square, __m512i& u, __m512i& d) {
  u = load_step(up, j, wpr), d = load_step(dn, j, wpr);
  const __m512i c = load_step(cur, j, wpr);
  return square ? _mm512_ternarylogic_epi64(c, u, d, 0xFE) : c;  // 0xFE: a | b | c
}

FASTPREP_TARGET_V4 inline void dilate_row_v4(const uint64_t* up, const uint64_t* cur, const uint64_t* dn, uint64_t* o,
                                             int64_t wpr, uint64_t last, bool square) {
  __m512i u, d, un, dn_;
  __m512i before = _mm512_setzero_si512(), s = spread_src(up, cur, dn, 0, wpr, square, u, d);
  for (int64_t j = 0; j < wpr; j += 8) {
    const __m512i after = spread_src(up, cur, dn, j + 8, wpr, square, un, dn_);
    const __m512i prev = _mm512_alignr_epi64(s, before, 7);  // word k - 1 in lane k
    const __m512i next = _mm512_alignr_epi64(after, s, 1);   // word k + 1 in lane k
    __m512i v = _mm512_ternarylogic_epi64(s, _mm512_slli_epi64(s, 1), _mm512_srli_epi64(s, 1), 0xFE);
    v = _mm512_ternarylogic_epi64(v, _mm512_srli_epi64(prev, 63), _mm512_slli_epi64(next, 63), 0xFE);
    v = _mm512_ternarylogic_epi64(v, u, d, 0xFE);
    const int64_t n = std::min<int64_t>(8, wpr - j);
    if (n <= 8 && j + 8 >= wpr) {  // pixel W - 1 spreads into the padding bits of the last word
      v = _mm512_mask_and_epi64(v, static_cast<__mmask8>(1u << (n - 1)), v,
                                _mm512_set1_epi64(static_cast<int64_t>(last)));
    }
    _mm512_mask_storeu_epi64(o + j, n == 8 ? 0xFF : static_cast<__mmask8>((1u << n) - 1), v);
    before = s, s = after, u = un, d = dn_;
  }
}

// Word j of a row of bool bytes (a byte test of its 64 bytes; k selects the bytes of a last word).
FASTPREP_TARGET_V4 inline uint64_t bool_word_v4(const uint8_t* row, int64_t j, __mmask64 k = ~0ULL) {
  const __m512i v = _mm512_maskz_loadu_epi8(k, row + 64 * j);
  return _mm512_test_epi8_mask(v, v);
}

// Output row r (o) of dilate_bools_v4; with Below, row r + 1's words go into d one word ahead of
// their use (its bytes at `below`), else d is the zero row under the image.
template <bool Square, bool Below>
FASTPREP_TARGET_V4 inline void dilate_bool_row_v4(const uint64_t* up, const uint64_t* c, uint64_t* d,
                                                  const uint8_t* below, uint8_t* o, int64_t wpr, __mmask64 tail,
                                                  uint64_t last) {
  const __m512i one = _mm512_set1_epi8(1);
  // The cross reads word j of the row below, the square word j + 1 too: one word ahead.
  if constexpr (Below && Square) d[0] = bool_word_v4(below, 0, wpr > 1 ? ~0ULL : tail);
  for (int64_t j = 0; j + 1 < wpr; ++j) {
    if constexpr (Below) {
      if constexpr (Square) {
        d[j + 1] = bool_word_v4(below, j + 1, j + 2 < wpr ? ~0ULL : tail);
      } else {
        d[j] = bool_word_v4(below, j);
      }
    }
    _mm512_storeu_si512(o + 64 * j, _mm512_maskz_mov_epi8(dilated_word<Square>(up, c, d, j), one));
  }
  if constexpr (Below && !Square) d[wpr - 1] = bool_word_v4(below, wpr - 1, tail);
  // Pixel W - 1 spreads into the padding bits; nothing past the row is written.
  const uint64_t v = dilated_word<Square>(up, c, d, wpr - 1) & last;
  _mm512_mask_storeu_epi8(o + 64 * (wpr - 1), tail, _mm512_maskz_mov_epi8(v, one));
}

// One dilation of an h x width bool image in one pass, row by row: output row r's words are formed
// from the rows above, at and below it (scalar shifts and ORs) and stored as bytes (a masked move)
// while row r + 1's bytes become its words (a byte test per 64 pixels), so reads and writes
// interleave as a copy's do (the streamed path reads a block, then writes it). The words live in a
// ring of three rows, each with a zero word on either side (ring: 3 * (wpr + 2) words), so words
// j - 1 and j + 1 need no test.
template <bool Square>
FASTPREP_TARGET_V4 void dilate_bools_v4(const uint8_t* in, uint8_t* out, int64_t h, int64_t width, uint64_t* ring) {
  const int64_t wpr = words_per_row(width);
  const uint64_t last = last_word_mask(width);
  const __mmask64 tail = width % 64 ? (1ULL << (width % 64)) - 1 : ~0ULL;
  std::fill(ring, ring + 3 * (wpr + 2), 0);
  uint64_t* rows[3] = {ring + 1, ring + wpr + 3, ring + 2 * wpr + 5};  // above, at, below
  for (int64_t j = 0; j < wpr; ++j) rows[1][j] = bool_word_v4(in, j, j + 1 < wpr ? ~0ULL : tail);
  for (int64_t r = 0; r + 1 < h; ++r) {
    dilate_bool_row_v4<Square, true>(rows[0], rows[1], rows[2], in + (r + 1) * width, out + r * width, wpr, tail, last);
    uint64_t* t = rows[0];
    rows[0] = rows[1], rows[1] = rows[2], rows[2] = t;
  }
  std::fill(rows[2], rows[2] + wpr, 0);
  dilate_bool_row_v4<Square, false>(rows[0], rows[1], rows[2], nullptr, out + (h - 1) * width, wpr, tail, last);
}

// n rows of src (row -1 is `above`, row n is `below`) -> n rows of dst, in one function so the
// row calls inline.
FASTPREP_TARGET_V4 void dilate_rows_v4(const uint64_t* src, uint64_t* dst, int64_t n, const uint64_t* above,
                                       const uint64_t* below, int64_t wpr, uint64_t last, bool square) {
  for (int64_t r = 0; r < n; ++r) {
    const uint64_t* cur = src + r * wpr;
    dilate_row_v4(r > 0 ? cur - wpr : above, cur, r + 1 < n ? cur + wpr : below, dst + r * wpr, wpr, last, square);
  }
}
#endif

// One output row from the rows above, at and below it (pass zeros outside the image); `vert` is
// one row of scratch.
template <Isa L>
FASTPREP_INLINE void dilate_row(const uint64_t* up, const uint64_t* cur, const uint64_t* dn, uint64_t* o,
                                uint64_t* vert, int64_t wpr, uint64_t last, bool square) {
#if FASTPREP_X86_LEVELS
  if constexpr (has_avx512(L)) return dilate_row_v4(up, cur, dn, o, wpr, last, square);
#endif
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

// n rows of src (row -1 is `above`, row n is `below`) -> n rows of dst.
template <Isa L>
FASTPREP_INLINE void dilate_rows(const uint64_t* src, uint64_t* dst, int64_t n, const uint64_t* above,
                                 const uint64_t* below, int64_t wpr, uint64_t last, bool square, uint64_t* vert) {
#if FASTPREP_X86_LEVELS
  if constexpr (has_avx512(L)) return dilate_rows_v4(src, dst, n, above, below, wpr, last, square);
#endif
  for (int64_t r = 0; r < n; ++r) {
    const uint64_t* cur = src + r * wpr;
    dilate_row<L>(r > 0 ? cur - wpr : above, cur, r + 1 < n ? cur + wpr : below, dst + r * wpr, vert, wpr, last,
                  square);
  }
}

// One dilation of the word image src into dst (distinct), row by row.
template <Isa L>
FASTPREP_INLINE void dilate_image(const uint64_t* src, uint64_t* dst, int64_t h, int64_t width, bool square,
                                  uint64_t* zeros, uint64_t* vert) {
  const int64_t wpr = words_per_row(width);
  if (wpr == 0) return;
  dilate_rows<L>(src, dst, h, zeros, zeros, wpr, last_word_mask(width), square, vert);
}

// `iterations` dilations of src, alternating between buffers a and b (src may be a); the last one
// goes to `final` when given. Returns where the result is (src itself for 0 iterations).
template <Isa L>
FASTPREP_INLINE const uint64_t* run_iterations(const uint64_t* src, uint64_t* final, uint64_t* a, uint64_t* b,
                                               int64_t h, int64_t width, bool square, int64_t iterations,
                                               uint64_t* zeros, uint64_t* vert) {
  const uint64_t* cur = src;
  for (int64_t it = 0; it < iterations; ++it) {
    uint64_t* dst = (it + 1 == iterations && final != nullptr) ? final : (cur == a ? b : a);
    dilate_image<L>(cur, dst, h, width, square, zeros, vert);
    cur = dst;
  }
  return cur;
}

// One dilation streamed through blocks of rows: fill(r, n, words) writes source rows r .. r + n - 1
// (padding bits zero), emit(r, n, words) takes output rows r .. r + n - 1. A block (~8 KB of words) is filled with
// the row below it, and keeps the row above from the block before, so the words stay in L1 from
// source to output whatever the image size, and a filler runs long loops (the generator's
// vectorise across rows). The row below a block is filled again as the next block's first.
template <Isa L, class Fill, class Emit>
FASTPREP_INLINE void dilate_streamed(int64_t h, int64_t width, bool square, Fill&& fill, Emit&& emit) {
  const int64_t wpr = words_per_row(width);
  if (wpr == 0 || h == 0) return;
  // No larger than the image: the buffers are allocated (and zeroed) every call, 16 KB for a 4x4 mask otherwise.
  const int64_t block = std::min(h, std::max<int64_t>(1, 1024 / wpr));
  const uint64_t last = last_word_mask(width);
  std::vector<uint64_t> buf(static_cast<size_t>((block + 2) * wpr), 0), oblock(static_cast<size_t>(block * wpr)),
      vert(static_cast<size_t>(wpr));
  uint64_t* b = buf.data();
  int64_t prev = 0;
  for (int64_t r0 = 0; r0 < h; r0 += block) {
    const int64_t n = std::min(block, h - r0), below = r0 + n < h ? 1 : 0;
    if (r0 > 0) std::memcpy(b, b + prev * wpr, static_cast<size_t>(wpr) * 8);  // row r0 - 1
    fill(r0, n + below, b + wpr);
    if (!below) std::memset(b + (n + 1) * wpr, 0, static_cast<size_t>(wpr) * 8);
    dilate_rows<L>(b + wpr, oblock.data(), n, b, b + (n + 1) * wpr, wpr, last, square, vert.data());
    emit(r0, n, oblock.data());
    prev = n;
  }
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
    dilate_image<L>(src, dst, h, width, square, zeros.data(), vert.data());
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
    if (direct && iterations == 1) {  // word image to word image: no scratch planes
      std::vector<uint64_t> zeros(static_cast<size_t>(wpr), 0), vert(static_cast<size_t>(wpr));
      for (int64_t i = 0; i < images; ++i) {
        dilate_image<L>(reinterpret_cast<const uint64_t*>(in) + i * plane, reinterpret_cast<uint64_t*>(out) + i * plane,
                        h, width, square, zeros.data(), vert.data());
      }
      return;
    }
#if FASTPREP_X86_LEVELS
    if constexpr (has_avx512(L) || L == Isa::kV3) {
      if (iterations == 1 && !packed && wpr > 0 && h > 0) {
        std::vector<uint64_t> ring(static_cast<size_t>(3 * (wpr + 2)));
        for (int64_t i = 0; i < images; ++i) {
          if constexpr (has_avx512(L)) {
            (square ? dilate_bools_v4<true> : dilate_bools_v4<false>)(in + i * h * width, out + i * h * width, h, width,
                                                                      ring.data());
          } else {
            (square ? dilate_bools_v3<true> : dilate_bools_v3<false>)(in + i * h * width, out + i * h * width, h, width,
                                                                      ring.data());
          }
        }
        return;
      }
    }
#endif
    if (iterations == 1) {
      for (int64_t i = 0; i < images; ++i) {
        const uint8_t* src = in + i * h * row_bytes;
        uint8_t* dst = out + i * h * row_bytes;
        const auto fill = [&](int64_t r, int64_t n, uint64_t* words) __attribute__((always_inline)) {
          for (int64_t k = 0; k < n; ++k) {
            if (packed) {
              mask_rows::packed_to_words(src + (r + k) * row_bytes, width, words + k * wpr);
            } else {
              mask_rows::bools_to_words<L>(src + (r + k) * row_bytes, width, words + k * wpr);
            }
          }
        };
        const auto emit = [&](int64_t r, int64_t n, const uint64_t* words) __attribute__((always_inline)) {
          mask_rows::emit_rows<L>(words, n, width, packed, dst + r * row_bytes);
        };
        dilate_streamed<L>(h, width, square, fill, emit);
      }
      return;
    }
    // One image at a time so its words stay in cache between packing, dilating and emitting.
    std::vector<uint64_t> a(static_cast<size_t>(plane)), b(static_cast<size_t>(plane));
    std::vector<uint64_t> zeros(static_cast<size_t>(wpr), 0), vert(static_cast<size_t>(wpr));
    for (int64_t i = 0; i < images; ++i) {
      const uint8_t* src = in + i * h * row_bytes;
      uint8_t* dst = out + i * h * row_bytes;
      if (direct) {
        run_iterations<L>(reinterpret_cast<const uint64_t*>(src), reinterpret_cast<uint64_t*>(dst), a.data(), b.data(),
                          h, width, square, iterations, zeros.data(), vert.data());
        continue;
      }
      for (int64_t r = 0; r < h; ++r) {
        if (packed) {
          mask_rows::packed_to_words(src + r * row_bytes, width, a.data() + r * wpr);
        } else {
          mask_rows::bools_to_words<L>(src + r * row_bytes, width, a.data() + r * wpr);
        }
      }
      const uint64_t* result = run_iterations<L>(a.data(), nullptr, a.data(), b.data(), h, width, square, iterations,
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
      for (int64_t i = 0; i < images; ++i) {
        const auto fill = [&](int64_t r, int64_t n, uint64_t* words) __attribute__((always_inline)) {
          mask_rows::random_rows(useed, q, i * h + r, n, wpr, width, words);
        };
        const auto emit = [&](int64_t r, int64_t n, const uint64_t* words) __attribute__((always_inline)) {
          mask_rows::emit_rows<L>(words, n, width, packed, out + (i * h + r) * row_bytes);
        };
        dilate_streamed<L>(h, width, square, fill, emit);
      }
      return;
    }
    std::vector<uint64_t> a(static_cast<size_t>(h * wpr)), b(static_cast<size_t>(h * wpr));
    for (int64_t i = 0; i < images; ++i) {
      mask_rows::random_rows(useed, q, i * h, h, wpr, width, a.data());
      const uint64_t* result = run_iterations<L>(a.data(), nullptr, a.data(), b.data(), h, width, square, iterations,
                                                 zeros.data(), vert.data());
      mask_rows::emit_rows<L>(result, h, width, packed, out + i * h * row_bytes);
    }
  }
};

// random_dilated_mask's one dilation of one image, kept as words (for crop_mask_ycbcr).
struct RandomDilatedMaskWords {
  template <Isa L>
  static FASTPREP_INLINE void run(int64_t seed, double p, int64_t h, int64_t width, bool square, uint64_t* words) {
    const uint32_t q = mask_threshold(p);
    const int64_t wpr = words_per_row(width);
    const auto fill = [&](int64_t r, int64_t n, uint64_t* w) __attribute__((always_inline)) {
      mask_rows::random_rows(static_cast<uint64_t>(seed), q, r, n, wpr, width, w);
    };
    const auto emit = [&](int64_t r, int64_t n, const uint64_t* w) __attribute__((always_inline)) {
      std::memcpy(words + r * wpr, w, static_cast<size_t>(n * wpr) * 8);
    };
    dilate_streamed<L>(h, width, square, fill, emit);
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

void random_dilated_mask_words(int64_t seed, double p, int64_t h, int64_t width, bool square, uint64_t* words) {
  dispatch<RandomDilatedMaskWords>(seed, p, h, width, square, words);
}

}  // namespace fastprep::kernels
