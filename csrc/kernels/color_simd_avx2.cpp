// AVX2 (x86-64-v3) rows of color_simd.h: a three-shuffle deinterleave of packed RGB, vpmaddwd
// numerators, the divisions of color_simd.h.
#include <cstring>

#include "kernels/color_simd.h"
#include "kernels/color_simd_coeffs.h"
#include "kernels/simd.h"

#if FASTPREP_X86_LEVELS

namespace fastprep::kernels::color_simd {

using namespace coeffs;  // NOLINT: the constants' short names

namespace {

struct Coeffs256 {
  __m256i y_rg, y_bk, cb_rg, cb_bk, cr_rg, cr_bk;
  __m256i div_mul, k125;
  __m256 inv;
};

FASTPREP_TARGET_V3 inline Coeffs256 coeffs256() {
  return {_mm256_set1_epi32(pair(kYR, kYG)),
          _mm256_set1_epi32(pair(kYB, kYK)),
          _mm256_set1_epi32(pair(kCbR, kCbG)),
          _mm256_set1_epi32(pair(kCbB, kCbK)),
          _mm256_set1_epi32(pair(kCrR, kCrG)),
          _mm256_set1_epi32(pair(kCrB, kCrK)),
          _mm256_set1_epi16(static_cast<int16_t>(kDiv125Mul)),
          _mm256_set1_epi16(kK),
          _mm256_set1_ps(kInv31250)};
}

// As convert16_512: y8 gets floor(N_Y / 8), divided by 125 once packed to 16-bit lanes.
FASTPREP_TARGET_V3 inline void convert8_256(__m256i rg, __m256i bk, const Coeffs256& c, __m256i& y8, __m256i& cb,
                                            __m256i& cr) {
  const __m256i ny = _mm256_add_epi32(_mm256_madd_epi16(rg, c.y_rg), _mm256_madd_epi16(bk, c.y_bk));
  y8 = _mm256_srli_epi32(ny, 3);
  const __m256i ncb = _mm256_add_epi32(_mm256_madd_epi16(rg, c.cb_rg), _mm256_madd_epi16(bk, c.cb_bk));
  cb = _mm256_cvttps_epi32(_mm256_mul_ps(_mm256_cvtepi32_ps(ncb), c.inv));
  const __m256i ncr = _mm256_add_epi32(_mm256_madd_epi16(rg, c.cr_rg), _mm256_madd_epi16(bk, c.cr_bk));
  cr = _mm256_cvttps_epi32(_mm256_mul_ps(_mm256_cvtepi32_ps(ncr), c.inv));
}

// Bytes 16h .. 16h + 15 of v zero-extended to 16-bit lanes.
FASTPREP_TARGET_V3 inline __m256i widen_half(__m256i v, int h) {
  return _mm256_cvtepu8_epi16(h ? _mm256_extracti128_si256(v, 1) : _mm256_castsi256_si128(v));
}

// The 32 mask bits of pixels x .. x + 31 (x a multiple of 32) of a row's mask words.
FASTPREP_TARGET_V3 inline uint32_t mask_bits32(const uint64_t* words, int64_t x) {
  return static_cast<uint32_t>(words[x / 64] >> (x % 64));
}

// 32 pixels held as R, G, B bytes (byte i = pixel i) -> 32 bytes of each output; with has_mask, the
// pixels whose bit is set in `bits` get (0, 128, 128).
FASTPREP_TARGET_V3 inline void convert32_256(__m256i rb, __m256i gb, __m256i bb, bool has_mask, uint32_t bits,
                                             const Coeffs256& c, uint8_t* y, uint8_t* cb, uint8_t* cr) {
  __m256i words[3][2];
  for (int h = 0; h < 2; ++h) {
    const __m256i rv = widen_half(rb, h), gv = widen_half(gb, h), bv = widen_half(bb, h);
    __m256i ylo, yhi, cblo, cbhi, crlo, crhi;
    convert8_256(_mm256_unpacklo_epi16(rv, gv), _mm256_unpacklo_epi16(bv, c.k125), c, ylo, cblo, crlo);
    convert8_256(_mm256_unpackhi_epi16(rv, gv), _mm256_unpackhi_epi16(bv, c.k125), c, yhi, cbhi, crhi);
    words[0][h] = _mm256_srli_epi16(_mm256_mulhi_epu16(_mm256_packus_epi32(ylo, yhi), c.div_mul), kDiv125Shift);
    words[1][h] = _mm256_packus_epi32(cblo, cbhi);
    words[2][h] = _mm256_packus_epi32(crlo, crhi);
  }
  // 64-bit lane 2l + h holds pixels 16h + 8l .. 16h + 8l + 7.
  __m256i out[3];
  for (int k = 0; k < 3; ++k) out[k] = _mm256_permute4x64_epi64(_mm256_packus_epi16(words[k][0], words[k][1]), 0xD8);
  if (has_mask) {
    // Bit k of the 32 -> byte k: byte k gets source byte k / 8, then its bit k % 8 is tested.
    const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                            3, 3, 3, 3, 3, 3, 3);
    const __m256i bit = _mm256_set1_epi64x(0x8040201008040201LL);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(bits)), spread), bit);
    const __m256i masked = _mm256_cmpeq_epi8(v, bit);
    const __m256i half = _mm256_set1_epi8(static_cast<char>(128));
    out[0] = _mm256_andnot_si256(masked, out[0]);
    out[1] = _mm256_blendv_epi8(out[1], half, masked);
    out[2] = _mm256_blendv_epi8(out[2], half, masked);
  }
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(y), out[0]);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(cb), out[1]);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(cr), out[2]);
}

// Bytes o .. o + 15 of p in the low lane and 48 + o .. 48 + o + 15 in the high one.
FASTPREP_TARGET_V3 inline __m256i load_lanes(const uint8_t* p, int o) {
  return _mm256_loadu2_m128i(reinterpret_cast<const __m128i*>(p + 48 + o), reinterpret_cast<const __m128i*>(p + o));
}

// The same in-lane byte shuffle on both lanes.
FASTPREP_TARGET_V3 inline __m256i sh(__m256i v, __m128i t) {
  return _mm256_shuffle_epi8(v, _mm256_broadcastsi128_si256(t));
}

// 32 packed pixels (96 bytes) -> R, G, B bytes. Lane h of the three loads holds bytes 48h ..
// 48h + 47, pixels 16h .. 16h + 15; within a lane the classic three-shuffle deinterleave.
FASTPREP_TARGET_V3 inline void deinterleave32(const uint8_t* p, __m256i& r, __m256i& g, __m256i& b) {
  const __m256i a = load_lanes(p, 0), bb = load_lanes(p, 16), cc = load_lanes(p, 32);
  constexpr char z = -128;  // a shuffle index with the top bit set writes 0
  r = _mm256_or_si256(_mm256_or_si256(sh(a, _mm_setr_epi8(0, 3, 6, 9, 12, 15, z, z, z, z, z, z, z, z, z, z)),
                                      sh(bb, _mm_setr_epi8(z, z, z, z, z, z, 2, 5, 8, 11, 14, z, z, z, z, z))),
                      sh(cc, _mm_setr_epi8(z, z, z, z, z, z, z, z, z, z, z, 1, 4, 7, 10, 13)));
  g = _mm256_or_si256(_mm256_or_si256(sh(a, _mm_setr_epi8(1, 4, 7, 10, 13, z, z, z, z, z, z, z, z, z, z, z)),
                                      sh(bb, _mm_setr_epi8(z, z, z, z, z, 0, 3, 6, 9, 12, 15, z, z, z, z, z))),
                      sh(cc, _mm_setr_epi8(z, z, z, z, z, z, z, z, z, z, z, 2, 5, 8, 11, 14)));
  b = _mm256_or_si256(_mm256_or_si256(sh(a, _mm_setr_epi8(2, 5, 8, 11, 14, z, z, z, z, z, z, z, z, z, z, z)),
                                      sh(bb, _mm_setr_epi8(z, z, z, z, z, 1, 4, 7, 10, 13, z, z, z, z, z, z))),
                      sh(cc, _mm_setr_epi8(z, z, z, z, z, z, z, z, z, z, 0, 3, 6, 9, 12, 15)));
}

// The last n < 32 pixels go through zero-padded copies: AVX2 has no byte-masked loads or stores.
FASTPREP_TARGET_V3 inline __m256i ld(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

struct Tail32 {
  alignas(32) uint8_t in[3][32] = {}, out[3][32];
  void emit(int64_t n, uint8_t* y, uint8_t* cb, uint8_t* cr) const {
    std::memcpy(y, out[0], static_cast<size_t>(n));
    std::memcpy(cb, out[1], static_cast<size_t>(n));
    std::memcpy(cr, out[2], static_cast<size_t>(n));
  }
};

}  // namespace

FASTPREP_TARGET_V3 void rgb_to_ycbcr_packed_v3(const uint8_t* rgb, int64_t n, const uint64_t* mask, uint8_t* y,
                                               uint8_t* cb, uint8_t* cr) {
  const Coeffs256 c = coeffs256();
  __m256i rv, gv, bv;
  int64_t x = 0;
  for (; x + 32 <= n; x += 32) {
    deinterleave32(rgb + 3 * x, rv, gv, bv);
    convert32_256(rv, gv, bv, mask != nullptr, mask ? mask_bits32(mask, x) : 0, c, y + x, cb + x, cr + x);
  }
  if (x < n) {
    alignas(32) uint8_t packed[96] = {};
    Tail32 t;
    std::memcpy(packed, rgb + 3 * x, static_cast<size_t>(3 * (n - x)));
    deinterleave32(packed, rv, gv, bv);
    convert32_256(rv, gv, bv, mask != nullptr, mask ? mask_bits32(mask, x) : 0, c, t.out[0], t.out[1], t.out[2]);
    t.emit(n - x, y + x, cb + x, cr + x);
  }
}

FASTPREP_TARGET_V3 void rgb_to_ycbcr_planar_v3(const uint8_t* r, const uint8_t* g, const uint8_t* b, int64_t n,
                                               const uint64_t* mask, uint8_t* y, uint8_t* cb, uint8_t* cr) {
  const Coeffs256 c = coeffs256();
  int64_t x = 0;
  for (; x + 32 <= n; x += 32) {
    convert32_256(ld(r + x), ld(g + x), ld(b + x), mask != nullptr, mask ? mask_bits32(mask, x) : 0, c, y + x, cb + x,
                  cr + x);
  }
  if (x < n) {
    Tail32 t;
    const size_t k = static_cast<size_t>(n - x);
    std::memcpy(t.in[0], r + x, k), std::memcpy(t.in[1], g + x, k), std::memcpy(t.in[2], b + x, k);
    convert32_256(ld(t.in[0]), ld(t.in[1]), ld(t.in[2]), mask != nullptr, mask ? mask_bits32(mask, x) : 0, c, t.out[0],
                  t.out[1], t.out[2]);
    t.emit(n - x, y + x, cb + x, cr + x);
  }
}

}  // namespace fastprep::kernels::color_simd

#endif  // FASTPREP_X86_LEVELS
