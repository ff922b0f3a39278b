// Per-pixel JFIF colour formulas, shared by color.cpp and crop_mask_ycbcr.cpp so both give the
// same bits. Mirror: the per-pixel functions of pyext/fastprep/numba_kernels/color.py.
#pragma once
#include <algorithm>
#include <cstdint>

#include "kernels/color.h"

namespace fastprep::kernels::color_pixel {

// uint8 -> uint8 is exact: each output is floor(N / D) for an exact integer N (the formula with
// its decimal constants scaled by D, plus D / 2 for rounding half up), N clamped to [0, 256 D)
// so the result lands in [0, 255]. floor(N / D) is then (N * M) >> S with M = ceil(2^S / D),
// which is exact for all N < 2^k when (M D - 2^S) 2^k < 2^S (S below satisfy it; the 2^24-colour
// test in tests/test_color.py checks the end result).
//   Y  + 1/2 = (299 R + 587 G + 114 B + 500) / 1000
//   Cb + 1/2 = (-5273 R - 10352 G + 15625 B + 4015625) / 31250     (the 1e-6 constants / 32)
//   Cr + 1/2 = (15625 R - 13084 G - 2541 B + 4015625) / 31250
//   R  + 1/2 = (500 Y + 250 + 701 (Cr - 128)) / 500
//   G  + 1/2 = (125000 Y + 62500 - 43017 (Cb - 128) - 89267 (Cr - 128)) / 125000
//   B  + 1/2 = (250 Y + 125 + 443 (Cb - 128)) / 250
template <int64_t D, int S, uint64_t M>
inline uint8_t div_clamped(int32_t n) {
  static_assert(M == ((uint64_t{1} << S) + D - 1) / D, "M = ceil(2^S / D)");
  const int32_t c = std::min<int32_t>(std::max<int32_t>(n, 0), static_cast<int32_t>(256 * D - 1));
  return static_cast<uint8_t>((static_cast<uint64_t>(static_cast<uint32_t>(c)) * M) >> S);
}

inline void rgb_to_ycbcr_u8(int32_t r, int32_t g, int32_t b, uint8_t& y, uint8_t& cb, uint8_t& cr) {
  y = div_clamped<1000, 26, 67109>(299 * r + 587 * g + 114 * b + 500);
  cb = div_clamped<31250, 37, 4398047>(-5273 * r - 10352 * g + 15625 * b + 4015625);
  cr = div_clamped<31250, 37, 4398047>(15625 * r - 13084 * g - 2541 * b + 4015625);
}

inline void ycbcr_to_rgb_u8(int32_t y, int32_t cb, int32_t cr, uint8_t& r, uint8_t& g, uint8_t& b) {
  cb -= 128;
  cr -= 128;
  r = div_clamped<500, 25, 67109>(500 * y + 250 + 701 * cr);
  g = div_clamped<125000, 42, 35184373>(125000 * y + 62500 - 43017 * cb - 89267 * cr);
  b = div_clamped<250, 24, 67109>(250 * y + 125 + 443 * cb);
}

template <typename T> inline float load(const T* p);
template <> inline float load<uint8_t>(const uint8_t* p) { return static_cast<float>(*p); }
template <> inline float load<float>(const float* p) { return *p; }
struct Half { uint16_t bits; };
struct BF16 { uint16_t bits; };
template <> inline float load<Half>(const Half* p) { return half_bits_to_float(p->bits); }
template <> inline float load<BF16>(const BF16* p) { return bf16_bits_to_float(p->bits); }

inline void store(float* p, float v) { *p = v; }
inline void store(Half* p, float v) { p->bits = float_to_half_bits(v); }
inline void store(BF16* p, float v) { p->bits = float_to_bf16_bits(v); }

// The float formulas, evaluated left to right in float32 (the Numba mirror does the same ops).
inline void rgb_to_ycbcr_f(float r, float g, float b, float d, float& y, float& cb, float& cr) {
  y = 0.299f * r + 0.587f * g + 0.114f * b;
  cb = -0.168736f * r - 0.331264f * g + 0.5f * b + d;
  cr = 0.5f * r - 0.418688f * g - 0.081312f * b + d;
}

inline void ycbcr_to_rgb_f(float y, float cb, float cr, float d, float& r, float& g, float& b) {
  r = y + 1.402f * (cr - d);
  g = y - 0.344136f * (cb - d) - 0.714136f * (cr - d);
  b = y + 1.772f * (cb - d);
}

}  // namespace fastprep::kernels::color_pixel
