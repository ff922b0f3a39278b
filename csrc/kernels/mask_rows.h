// Row helpers of the mask kernels (random_mask, dilate, mask_fill) per ISA level: inlined into a
// kernel's run<L> (isa.h), so each level runs its own code. The bool <-> bit conversions are
// where bool masks spend their time, and no portable loop turns into AVX-512's mask-register
// moves or AVX2's movemask, so those use intrinsics (random_mask.cpp); every level gives the same
// bytes as the portable code.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/counter_rng.h"
#include "kernels/isa.h"
#include "kernels/random_mask.h"

namespace fastprep::kernels::mask_rows {

constexpr uint64_t kSpread = 0x8040201008040201ULL;  // byte k of (b * 0x01..01) & kSpread: bit k of b
constexpr uint64_t kOnes = 0x0101010101010101ULL;
constexpr uint64_t kLow7 = 0x7F7F7F7F7F7F7F7FULL;
constexpr uint64_t kHigh1 = 0x8080808080808080ULL;
constexpr uint64_t kGather = 0x0102040810204080ULL;  // (0/1 bytes * kGather) >> 56: byte k -> bit k

FASTPREP_INLINE uint64_t load8(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// 8 bits -> 8 bytes of 0/1; each spread byte holds at most one bit, so + kLow7 never carries.
FASTPREP_INLINE uint64_t spread_byte(uint64_t b) { return ((((b * kOnes) & kSpread) + kLow7) & kHigh1) >> 7; }

FASTPREP_INLINE uint64_t gather_bytes(uint64_t w) {
  return ((((((w & kLow7) + kLow7) | w) & kHigh1) >> 7) * kGather) >> 56;
}

FASTPREP_INLINE void words_to_bools_portable(const uint64_t* words, int64_t width, uint8_t* out) {
  const int64_t full = width / 8;
  for (int64_t i = 0; i < full; ++i) {
    const uint64_t v = spread_byte((words[i / 8] >> (8 * (i % 8))) & 0xFF);
    std::memcpy(out + 8 * i, &v, 8);
  }
  for (int64_t x = 8 * full; x < width; ++x) out[x] = static_cast<uint8_t>((words[x / 64] >> (x % 64)) & 1);
}

FASTPREP_INLINE void bools_to_words_portable(const uint8_t* row, int64_t width, uint64_t* words) {
  const int64_t wpr = words_per_row(width);
  for (int64_t j = 0; j < wpr; ++j) words[j] = 0;
  const int64_t full = width / 8;
  for (int64_t i = 0; i < full; ++i) words[i / 8] |= gather_bytes(load8(row + 8 * i)) << (8 * (i % 8));
  for (int64_t x = 8 * full; x < width; ++x) words[x / 64] |= static_cast<uint64_t>(row[x] != 0) << (x % 64);
}

#if FASTPREP_X86_LEVELS
// Compiled for their level only (random_mask.cpp); called from that level's run<L>.
void words_to_bools_v4(const uint64_t* words, int64_t width, uint8_t* out);
void bools_to_words_v4(const uint8_t* row, int64_t width, uint64_t* words);
void words_to_bools_v3(const uint64_t* words, int64_t width, uint8_t* out);
void bools_to_words_v3(const uint8_t* row, int64_t width, uint64_t* words);
#endif

// Row words -> one 0/1 byte per pixel.
template <Isa L>
FASTPREP_INLINE void words_to_bools(const uint64_t* words, int64_t width, uint8_t* out) {
#if FASTPREP_X86_LEVELS
  if constexpr (has_avx512(L)) return words_to_bools_v4(words, width, out);
  if constexpr (L == Isa::kV3) return words_to_bools_v3(words, width, out);
#endif
  words_to_bools_portable(words, width, out);
}

// One row of bool bytes (nonzero = true) -> words, padding bits cleared.
template <Isa L>
FASTPREP_INLINE void bools_to_words(const uint8_t* row, int64_t width, uint64_t* words) {
#if FASTPREP_X86_LEVELS
  if constexpr (has_avx512(L)) return bools_to_words_v4(row, width, words);
  if constexpr (L == Isa::kV3) return bools_to_words_v3(row, width, words);
#endif
  bools_to_words_portable(row, width, words);
}

FASTPREP_INLINE void words_to_packed(const uint64_t* words, int64_t width, uint8_t* out) {
  std::memcpy(out, words, static_cast<size_t>((width + 7) / 8));
}

FASTPREP_INLINE void packed_to_words(const uint8_t* row, int64_t width, uint64_t* words) {
  const int64_t wpr = words_per_row(width);
  if (wpr == 0) return;
  words[wpr - 1] = 0;
  std::memcpy(words, row, static_cast<size_t>((width + 7) / 8));
  words[wpr - 1] &= last_word_mask(width);
}

// Mask words [first, first + count) of the flattened word grid (word j of row r is r * wpr + j;
// random_mask.h: counters and digit order). Digit-major so each pass is one long branch-free loop
// (vectorises, 64-bit multiplies and all). Padding bits are the caller's to clear.
FASTPREP_INLINE void random_words(uint64_t seed, uint32_t q, uint64_t first, int64_t count, uint64_t* words) {
  if (q == 0 || q >= (1u << kMaskDigits)) {
    const uint64_t fill = q == 0 ? 0 : ~0ULL;
    for (int64_t j = 0; j < count; ++j) words[j] = fill;
    return;
  }
  const int lowest = __builtin_ctz(q);
  const uint64_t base = first * kMaskDigits;
  for (int64_t j = 0; j < count; ++j) words[j] = random_word(seed, base + static_cast<uint64_t>(j) * kMaskDigits);
  for (int k = lowest + 1, t = 1; k < kMaskDigits; ++k, ++t) {
    const uint64_t c = base + static_cast<uint64_t>(t);
    if ((q >> k) & 1u) {
      for (int64_t j = 0; j < count; ++j) words[j] |= random_word(seed, c + static_cast<uint64_t>(j) * kMaskDigits);
    } else {
      for (int64_t j = 0; j < count; ++j) words[j] &= random_word(seed, c + static_cast<uint64_t>(j) * kMaskDigits);
    }
  }
}

// The mask words of `rows` rows from global row `row0`, padding bits zero.
FASTPREP_INLINE void random_rows(uint64_t seed, uint32_t q, int64_t row0, int64_t rows, int64_t wpr, int64_t width,
                                 uint64_t* words) {
  random_words(seed, q, static_cast<uint64_t>(row0) * static_cast<uint64_t>(wpr), rows * wpr, words);
  const uint64_t last = last_word_mask(width);
  if (wpr > 0 && last != ~0ULL) {
    for (int64_t r = 0; r < rows; ++r) words[r * wpr + wpr - 1] &= last;
  }
}

// The mask words of global row `row`, padding bits zero.
FASTPREP_INLINE void random_row(uint64_t seed, uint32_t q, int64_t row, int64_t wpr, int64_t width, uint64_t* words) {
  random_rows(seed, q, row, 1, wpr, width, words);
}

// Rows of words -> bool bytes [rows, width] or packed bytes [rows, ceil(width / 8)].
template <Isa L>
FASTPREP_INLINE void emit_rows(const uint64_t* words, int64_t rows, int64_t width, bool packed, uint8_t* out) {
  const int64_t wpr = words_per_row(width);
  const int64_t row_bytes = packed ? (width + 7) / 8 : width;
  for (int64_t r = 0; r < rows; ++r) {
    if (packed) {
      words_to_packed(words + r * wpr, width, out + r * row_bytes);
    } else {
      words_to_bools<L>(words + r * wpr, width, out + r * row_bytes);
    }
  }
}

}  // namespace fastprep::kernels::mask_rows
