// Per-pixel JFIF colour formulas, shared by color.cpp and crop_mask_ycbcr.cpp so both give the
// same bits. Mirror: the same-named functions of pyext/fastprep/numba_kernels/color.py.
#pragma once
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/color.h"
#include "kernels/float_bits.h"
#include "kernels/isa.h"

namespace fastprep::kernels::color_pixel {

// uint8 -> uint8 is exact: each output is floor(N / D) for an exact integer N (the formula with
// its decimal constants scaled by D, plus D / 2 for rounding half up), N clamped to [0, 256 D)
// so the result lands in [0, 255]:
//   Y  + 1/2 = (299 R + 587 G + 114 B + 500) / 1000
//   Cb + 1/2 = (-5273 R - 10352 G + 15625 B + 4015625) / 31250     (the 1e-6 constants / 32)
//   Cr + 1/2 = (15625 R - 13084 G - 2541 B + 4015625) / 31250
//   R  + 1/2 = (500 Y + 250 + 701 (Cr - 128)) / 500
//   G  + 1/2 = (125000 Y + 62500 - 43017 (Cb - 128) - 89267 (Cr - 128)) / 125000
//   B  + 1/2 = (250 Y + 125 + 443 (Cb - 128)) / 250
// The division stays in int32 lanes so it vectorises: q0 = (N M) >> S with M = floor(2^S / D)
// (N M < 2^31) is never above floor(N / D) and at most 1 below it on [0, 256 D); the exact
// remainder N - q0 D then decides the last step. tests/test_color.py checks the estimate over
// every N and the end result over all 2^24 colours.
template <int32_t D, int S, int32_t M>
FASTPREP_INLINE int32_t div_clamped(int32_t n) {
  static_assert(M == (int64_t{1} << S) / D && int64_t{256} * D * M < (int64_t{1} << 31), "M, S");
  const int32_t c = std::min<int32_t>(std::max<int32_t>(n, 0), 256 * D - 1);
  const int32_t q0 = (c * M) >> S;
  return q0 + (c - q0 * D >= D ? 1 : 0);
}

FASTPREP_INLINE void rgb_to_ycbcr_u8(int32_t r, int32_t g, int32_t b, int32_t& y, int32_t& cb, int32_t& cr) {
  y = div_clamped<1000, 17, 131>(299 * r + 587 * g + 114 * b + 500);
  cb = div_clamped<31250, 21, 67>(-5273 * r - 10352 * g + 15625 * b + 4015625);
  cr = div_clamped<31250, 21, 67>(15625 * r - 13084 * g - 2541 * b + 4015625);
}

FASTPREP_INLINE void ycbcr_to_rgb_u8(int32_t y, int32_t cb, int32_t cr, int32_t& r, int32_t& g, int32_t& b) {
  cb -= 128;
  cr -= 128;
  r = div_clamped<500, 16, 131>(500 * y + 250 + 701 * cr);
  g = div_clamped<125000, 23, 67>(125000 * y + 62500 - 43017 * cb - 89267 * cr);
  b = div_clamped<250, 15, 131>(250 * y + 125 + 443 * cb);
}

template <typename T>
FASTPREP_INLINE float load(const T* p);
template <>
FASTPREP_INLINE float load<uint8_t>(const uint8_t* p) {
  return static_cast<float>(*p);
}
template <>
FASTPREP_INLINE float load<float>(const float* p) {
  return *p;
}
struct Half {
  uint16_t bits;
};
struct BF16 {
  uint16_t bits;
};
template <>
FASTPREP_INLINE float load<Half>(const Half* p) {
  return half_bits_to_float(p->bits);
}
template <>
FASTPREP_INLINE float load<BF16>(const BF16* p) {
  return bf16_bits_to_float(p->bits);
}

FASTPREP_INLINE void store(float* p, float v) { *p = v; }
FASTPREP_INLINE void store(Half* p, float v) { p->bits = float_to_half_bits(v); }
FASTPREP_INLINE void store(BF16* p, float v) { p->bits = float_to_bf16_bits(v); }

// The float formulas, evaluated left to right in float32 (the Numba mirror does the same ops).
FASTPREP_INLINE void rgb_to_ycbcr_f(float r, float g, float b, float d, float& y, float& cb, float& cr) {
  y = 0.299f * r + 0.587f * g + 0.114f * b;
  cb = -0.168736f * r - 0.331264f * g + 0.5f * b + d;
  cr = 0.5f * r - 0.418688f * g - 0.081312f * b + d;
}

FASTPREP_INLINE void ycbcr_to_rgb_f(float y, float cb, float cr, float d, float& r, float& g, float& b) {
  r = y + 1.402f * (cr - d);
  g = y - 0.344136f * (cb - d) - 0.714136f * (cr - d);
  b = y + 1.772f * (cb - d);
}

// Pixels per chunk: three temporaries of this many stay in L1.
constexpr int64_t kChunk = 256;

// Converts n pixels held in contiguous temporaries (int32 for uint8 -> uint8, else float) and
// writes the three output planes; the temporaries are overwritten. Contiguous, so it vectorises.
template <bool Fwd, typename Acc, typename Out>
FASTPREP_INLINE void convert_chunk(Acc* __restrict__ t0, Acc* __restrict__ t1, Acc* __restrict__ t2, int64_t n,
                                   Out* __restrict__ o0, Out* __restrict__ o1, Out* __restrict__ o2, float delta,
                                   float scale) {
  constexpr bool kExact = std::is_same_v<Acc, int32_t>;
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (kExact) {  // in place, narrowed below: mixed widths defeat the vectoriser
      if constexpr (Fwd)
        rgb_to_ycbcr_u8(t0[i], t1[i], t2[i], t0[i], t1[i], t2[i]);
      else
        ycbcr_to_rgb_u8(t0[i], t1[i], t2[i], t0[i], t1[i], t2[i]);
    } else {
      float a, b, c;
      if constexpr (Fwd)
        rgb_to_ycbcr_f(t0[i], t1[i], t2[i], delta, a, b, c);
      else
        ycbcr_to_rgb_f(t0[i], t1[i], t2[i], delta, a, b, c);
      store(o0 + i, a * scale);
      store(o1 + i, b * scale);
      store(o2 + i, c * scale);
    }
  }
  if constexpr (kExact) {
    for (int64_t i = 0; i < n; ++i) {
      o0[i] = static_cast<uint8_t>(t0[i]), o1[i] = static_cast<uint8_t>(t1[i]);
      o2[i] = static_cast<uint8_t>(t2[i]);
    }
  }
}

}  // namespace fastprep::kernels::color_pixel
