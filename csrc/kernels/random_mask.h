// Random binary masks from the counter generator (counter_rng.h), 64 pixels per step, plus the
// row <-> 64-bit-word conversions the mask kernels share. Mirror: numba_kernels/_random_mask.py.
//
// Precision: p is rounded to q / 2^16 with q = floor(p * 65536 + 0.5), so dyadic p with at most
// 16 binary digits (0.25, 0.5, 0.125, ...) is exact and any other p is off by at most 2^-17.
// Counters: the word of digit step t (t = 0 for q's lowest set binary digit, then one per higher
// digit) for 64-pixel word j of row r is random_word(seed, (r * words_per_row + j) * 16 + t),
// words_per_row = ceil(W / 64); bit b of a mask word is pixel 64j + b. Rows are the flattened
// leading dims. Packed and unpacked output share these counters, so they hold the same bits.
#pragma once
#include <cstdint>
#include <cstring>

namespace fastprep::kernels {

constexpr int kMaskDigits = 16;

inline uint32_t mask_threshold(double p) {
  return static_cast<uint32_t>(p * 65536.0 + 0.5);  // p in [0, 1] is checked by the binding
}

inline int64_t words_per_row(int64_t width) { return (width + 63) / 64; }

// Valid-pixel bits of a row's last word: padding bits are kept zero everywhere.
inline uint64_t last_word_mask(int64_t width) {
  const int64_t r = width % 64;
  return r == 0 ? ~0ULL : (1ULL << r) - 1;
}

// Mask words of global row `row` (padding bits zero).
void random_mask_row(uint64_t seed, uint32_t q, int64_t row, int64_t wpr, int64_t width, uint64_t* words);

// Row words -> one bool byte per pixel, or -> the row's ceil(width / 8) packed bytes.
void words_to_bools(const uint64_t* words, int64_t width, uint8_t* out);
void words_to_packed(const uint64_t* words, int64_t width, uint8_t* out);
// One row of bool bytes (nonzero = true) or packed bytes -> words, padding bits cleared.
void bools_to_words(const uint8_t* row, int64_t width, uint64_t* words);
void packed_to_words(const uint8_t* row, int64_t width, uint64_t* words);

// rows x width mask -> bool bytes [rows, width] or packed bytes [rows, ceil(width / 8)].
void random_mask(int64_t seed, double p, int64_t rows, int64_t width, bool packed, uint8_t* out);

}  // namespace fastprep::kernels
