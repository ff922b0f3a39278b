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

// Round to nearest even, as torch's float -> bfloat16; NaN stays a (quiet) NaN. The conversions
// compute every case and select, without branches, so loops over them vectorise.
inline uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((x & 0x7FFFFFFFu) > 0x7F800000u ? (x >> 16) | 0x40u : rounded);
}

// Round to nearest even with subnormals and overflow to inf; NaN payloads as numpy keeps them:
// the same bits as numpy's float32 -> float16.
inline uint16_t float_to_half_bits(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t a = x & 0x7FFFFFFFu;
  // Normal half: rebias the exponent (-112 << 23), round the 13 dropped bits to even.
  const uint32_t normal = (a - 0x38000000u + 0xFFFu + ((a >> 13) & 1u)) >> 13;
  // Subnormal half: the significand shifted down, rounded to even; shifts past 25 give 0 anyway.
  // Computed for every input (branch-free, so it vectorises) but used only for e <= 112; the
  // shift is kept in [14, 25] for the others too, since a shift by >= 32 is undefined (UBSan).
  const uint32_t e = a >> 23;
  const uint32_t shift = e < 101u ? 25u : e > 112u ? 14u : 126u - e;
  const uint32_t mant = (a & 0x7FFFFFu) | 0x800000u;
  const uint32_t sub = (mant + (1u << (shift - 1u)) - 1u + ((mant >> shift) & 1u)) >> shift;
  const uint32_t payload = (a >> 13) & 0x3FFu;
  const uint32_t nan = 0x7C00u | (payload ? payload : 1u);
  const uint32_t h = a > 0x7F800000u ? nan : a >= 0x47800000u ? 0x7C00u : a >= 0x38800000u ? normal : sub;
  return static_cast<uint16_t>(sign | h);
}

inline float half_bits_to_float(uint16_t hb) {
  const uint32_t sign = static_cast<uint32_t>(hb & 0x8000u) << 16;
  const uint32_t e = (hb >> 10) & 0x1Fu;
  const uint32_t m = hb & 0x3FFu;
  const uint32_t normal = ((e + 112u) << 23) | (m << 13);
  const uint32_t special = 0x7F800000u | (m << 13);
  // A subnormal half is m * 2^-24: exact in float32.
  const uint32_t sub = float_bits(static_cast<float>(m) * 5.9604644775390625e-08f);
  return bits_float(sign | (e == 0x1Fu ? special : e != 0 ? normal : sub));
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
