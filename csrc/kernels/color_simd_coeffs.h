// The integer constants of the exact uint8 RGB -> YCbCr rows (color_simd.h), shared by the AVX2
// and AVX-512 files: coefficient pairs for 16-bit dot products (vpmaddwd, vpdpwssd) of (R, G) and
// (B, 125), and the two divisions' constants.
#pragma once
#include <cstdint>

namespace fastprep::kernels::color_simd::coeffs {

constexpr int16_t kYR = 299, kYG = 587, kYB = 114, kYK = 4;
constexpr int16_t kCbR = -5273, kCbG = -10352, kCbB = 15625, kCbK = 32125;
constexpr int16_t kCrR = 15625, kCrG = -13084, kCrB = -2541, kCrK = 32125;
constexpr int16_t kK = 125;
constexpr int kDiv125Mul = 33555, kDiv125Shift = 6;  // floor(t * 33555 / 2^22) = floor(t / 125), t < 59074
constexpr float kInv31250 = 1.0f / 31250.0f;

// Two int16 as one int32 lane, lo in the low half: a vpmaddwd / vpdpwssd coefficient pair.
inline int32_t pair(int16_t lo, int16_t hi) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                              (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
}

}  // namespace fastprep::kernels::color_simd::coeffs
