// Per-pixel JFIF colour formulas, shared by color.cpp and crop_mask_ycbcr.cpp so both give the
// same bits. Mirror: the same-named functions of pyext/fastprep/numba_kernels/_color.py.
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
// Forward, N_Y is in [0, 255500] and N_Cb, N_Cr in [31250, 8000000]: no clamp below, and every
// N and partial sum is an integer below 2^24, so float32 holds them exactly whatever the order.
// Each division is then one float32 product, truncated: floor(N / 1000) = trunc(N * r1000) with
// r1000 = the float32 just above 1/1000, floor(N / 31250) = trunc(N * float32(1 / 31250)), exact
// over those ranges (tests/ops/test_color.py checks every N); Cb and Cr are at most 256, clamped.
// color_simd.h reaches the same values with other exact steps. Backward, N (an int32) is clamped
// to [0, 256 D) and divided the same way: c = clamped N >> Shift is below 2^24, so exact in float32,
// and trunc(c * float32(1 / (D >> Shift))) = floor(c / (D >> Shift)) over that range;
// floor(floor(N / 2^Shift) / (D / 2^Shift)) = floor(N / D). G shifts by 3 (256 x 125000 is past
// 2^24; 125000 = 8 x 15625). tests/ops/test_color.py checks every c and the end result over all 2^24
// colours. A remainder-corrected int32 estimate took twice the time: GCC turns its constant
// multiplies into shift-and-add chains.
constexpr float kInv1000 = 0x1.0624ep-10f;  // nextafter(float32(1 / 1000), 1) = 0x1.0624dep-10 + 1 ulp
constexpr float kInv31250 = 1.0f / 31250.0f;

template <int32_t D, int Shift>
FASTPREP_INLINE int32_t div_clamped(int32_t n) {
  static_assert(D % (1 << Shift) == 0 && (int64_t{256} * D >> Shift) <= (int64_t{1} << 24), "D, Shift");
  constexpr float kInv = 1.0f / static_cast<float>(D >> Shift);
  const int32_t c = std::min<int32_t>(std::max<int32_t>(n, 0), 256 * D - 1);
  return static_cast<int32_t>(static_cast<float>(c >> Shift) * kInv);
}

// r, g, b: the uint8 values as floats; the results are integers in [0, 255], as floats, so the
// chunk loop keeps one lane width (the narrowing to bytes is a separate loop).
FASTPREP_INLINE void rgb_to_ycbcr_u8(float r, float g, float b, float& y, float& cb, float& cr) {
  y = static_cast<float>(static_cast<int32_t>((299.0f * r + 587.0f * g + 114.0f * b + 500.0f) * kInv1000));
  cb = static_cast<float>(
      std::min(static_cast<int32_t>((-5273.0f * r - 10352.0f * g + 15625.0f * b + 4015625.0f) * kInv31250), 255));
  cr = static_cast<float>(
      std::min(static_cast<int32_t>((15625.0f * r - 13084.0f * g - 2541.0f * b + 4015625.0f) * kInv31250), 255));
}

FASTPREP_INLINE void ycbcr_to_rgb_u8(int32_t y, int32_t cb, int32_t cr, int32_t& r, int32_t& g, int32_t& b) {
  cb -= 128;
  cr -= 128;
  r = div_clamped<500, 0>(500 * y + 250 + 701 * cr);
  g = div_clamped<125000, 3>(125000 * y + 62500 - 43017 * cb - 89267 * cr);
  b = div_clamped<250, 0>(250 * y + 125 + 443 * cb);
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

// The temporaries of uint8 -> uint8: float forward (exact float formulas), int32 backward.
template <bool Fwd, typename In, typename Out>
using ChunkAcc =
    std::conditional_t<!Fwd && std::is_same_v<In, uint8_t> && std::is_same_v<Out, uint8_t>, int32_t, float>;

// Converts n pixels held in contiguous temporaries (ChunkAcc) and writes the three output planes;
// the temporaries are overwritten. Contiguous, so it vectorises.
template <bool Fwd, typename Acc, typename Out>
FASTPREP_INLINE void convert_chunk(Acc* __restrict__ t0, Acc* __restrict__ t1, Acc* __restrict__ t2, int64_t n,
                                   Out* __restrict__ o0, Out* __restrict__ o1, Out* __restrict__ o2, float delta,
                                   float scale) {
  constexpr bool kExact = std::is_same_v<Out, uint8_t>;
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
