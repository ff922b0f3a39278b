// JFIF (BT.601 full range) RGB <-> YCbCr on CHW or HWC images, torch-free, plus the bit-exact
// float16 / bfloat16 conversions both backends use (Numba has no bf16, and fp16 casts must not
// depend on the compiler), so C++ and Numba give the same bits.
// Mirror: pyext/fastprep/numba_kernels/color.py.
#pragma once
#include <cstdint>
#include <cstring>

namespace fastprep::kernels {

inline uint32_t float_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}

inline float bits_float(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// Round to nearest even, as torch's float -> bfloat16; NaN stays a (quiet) NaN.
inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = float_bits(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// Round to nearest even with subnormals, overflow to inf, as numpy's float32 -> float16.
inline uint16_t float_to_half_bits(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7FFFFFFFu;
  if (a > 0x7F800000u) {  // NaN: keep the top payload bits, as numpy does, but stay a NaN
    const uint32_t payload = (a >> 13) & 0x3FFu;
    return static_cast<uint16_t>(sign | 0x7C00u | (payload ? payload : 1u));
  }
  if (a >= 0x47800000u) return static_cast<uint16_t>(sign | 0x7C00u);
  uint32_t h, rem, halfway;
  if (a >= 0x38800000u) {  // a half normal: rebias the exponent, drop 13 mantissa bits
    h = ((a >> 23) - 112u) << 10 | ((a >> 13) & 0x3FFu);
    rem = a & 0x1FFFu;
    halfway = 0x1000u;
  } else {  // a half subnormal (or zero): shift the full significand down
    const uint32_t shift = 126u - (a >> 23);
    if (shift > 24u) return static_cast<uint16_t>(sign);
    const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
    h = mant >> shift;
    rem = mant & ((1u << shift) - 1u);
    halfway = 1u << (shift - 1u);
  }
  if (rem > halfway || (rem == halfway && (h & 1u))) ++h;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | h);
}

inline float half_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1Fu;
  uint32_t m = h & 0x3FFu;
  if (e == 0x1Fu) return bits_float(sign | 0x7F800000u | (m << 13));
  if (e != 0) return bits_float(sign | ((e + 112u) << 23) | (m << 13));
  if (m == 0) return bits_float(sign);
  uint32_t exp = 113u;  // normalise the subnormal
  while (!(m & 0x400u)) {
    m <<= 1;
    --exp;
  }
  return bits_float(sign | (exp << 23) | ((m & 0x3FFu) << 13));
}

inline float bf16_bits_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

// Element types by code: 0 uint8, 1 float32, 2 float16, 3 bfloat16.
enum ColorType : int { kU8 = 0, kF32 = 1, kF16 = 2, kBF16 = 3 };

struct ColorSource {
  const void* data;     // element (channel 0, 0, 0)
  int64_t h, w;
  int64_t sc, sh, sw;   // element strides of channel, row, column
};

// out: [3, h, w] contiguous. forward: RGB -> YCbCr, else YCbCr -> RGB.
// uint8 -> uint8: exact (see color.cpp). Otherwise float32 math, output * scale, rounded to the
// output type. The chroma offset is 128 for uint8 input and 0.5 for float input.
void convert_color(const ColorSource& src, int in_type, void* out, int out_type, bool forward,
                   float scale);

}  // namespace fastprep::kernels
