// Bit-exact float32 -> float16 / bfloat16 conversions (and back) that the colour and crop kernels
// of both backends use: Numba has no bf16, and fp16 casts must not depend on the compiler, so C++
// and Numba give the same bits. Mirror: pyext/fastprep/numba_kernels/_float_bits.py.
#pragma once
#include <cstdint>
#include <cstring>

#include "kernels/isa.h"

namespace fastprep::kernels {

FASTPREP_INLINE uint32_t float_bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  return x;
}

FASTPREP_INLINE float bits_float(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// Round to nearest even, as torch's float -> bfloat16; NaN stays a (quiet) NaN. The conversions
// compute every case and select, without branches, so loops over them vectorise.
FASTPREP_INLINE uint16_t float_to_bf16_bits(float f) {
  const uint32_t x = float_bits(f);
  const uint32_t rounded = (x + 0x7FFFu + ((x >> 16) & 1u)) >> 16;
  return static_cast<uint16_t>((x & 0x7FFFFFFFu) > 0x7F800000u ? (x >> 16) | 0x40u : rounded);
}

// Round to nearest even with subnormals and overflow to inf; NaN payloads as numpy keeps them:
// the same bits as numpy's float32 -> float16.
FASTPREP_INLINE uint16_t float_to_half_bits(float f) {
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

FASTPREP_INLINE float half_bits_to_float(uint16_t hb) {
  const uint32_t sign = static_cast<uint32_t>(hb & 0x8000u) << 16;
  const uint32_t e = (hb >> 10) & 0x1Fu;
  const uint32_t m = hb & 0x3FFu;
  const uint32_t normal = ((e + 112u) << 23) | (m << 13);
  const uint32_t special = 0x7F800000u | (m << 13);
  // A subnormal half is m * 2^-24: exact in float32.
  const uint32_t sub = float_bits(static_cast<float>(m) * 5.9604644775390625e-08f);
  return bits_float(sign | (e == 0x1Fu ? special : e != 0 ? normal : sub));
}

FASTPREP_INLINE float bf16_bits_to_float(uint16_t b) { return bits_float(static_cast<uint32_t>(b) << 16); }

}  // namespace fastprep::kernels
