#include "kernels/color_simd.h"

#include "kernels/simd.h"

#if FASTPREP_X86_LEVELS

#include <algorithm>
#include <cstring>

namespace fastprep::kernels::color_simd {
namespace {

// Coefficient pairs for vpmaddwd: (R, G) and (B, 125) -> the exact numerators (color_simd.h).
constexpr int16_t kYR = 299, kYG = 587, kYB = 114, kYK = 4;
constexpr int16_t kCbR = -5273, kCbG = -10352, kCbB = 15625, kCbK = 32125;
constexpr int16_t kCrR = 15625, kCrG = -13084, kCrB = -2541, kCrK = 32125;
constexpr int16_t kK = 125;
constexpr int kDiv125Mul = 33555, kDiv125Shift = 6;  // floor(t * 33555 / 2^22) = floor(t / 125), t < 59074
constexpr float kInv31250 = 1.0f / 31250.0f;

inline int32_t pair(int16_t lo, int16_t hi) {
  return static_cast<int32_t>(static_cast<uint32_t>(static_cast<uint16_t>(lo)) |
                              (static_cast<uint32_t>(static_cast<uint16_t>(hi)) << 16));
}

// ---- AVX-512 ------------------------------------------------------------------------------------

struct Coeffs512 {
  __m512i y_rg, y_bk, cb_rg, cb_bk, cr_rg, cr_bk;
  __m512i div_mul;
  __m512 inv;
};

FASTPREP_TARGET_V4 inline Coeffs512 coeffs512() {
  return {_mm512_set1_epi32(pair(kYR, kYG)),
          _mm512_set1_epi32(pair(kYB, kYK)),
          _mm512_set1_epi32(pair(kCbR, kCbG)),
          _mm512_set1_epi32(pair(kCbB, kCbK)),
          _mm512_set1_epi32(pair(kCrR, kCrG)),
          _mm512_set1_epi32(pair(kCrB, kCrK)),
          _mm512_set1_epi16(static_cast<int16_t>(kDiv125Mul)),
          _mm512_set1_ps(kInv31250)};
}

// floor(t / 125) in each 16-bit lane, t < 59074.
FASTPREP_TARGET_V4 inline __m512i y_from_eighths(__m512i t, const Coeffs512& c) {
  return _mm512_srli_epi16(_mm512_mulhi_epu16(t, c.div_mul), kDiv125Shift);
}

// 16 pixels: rg holds (R, G) and bk (B, 125) as 16-bit pairs, one pixel per 32-bit lane. y8 gets
// floor(N_Y / 8) (< 2^15), which y_from_eighths finishes once packed to 16-bit lanes.
FASTPREP_TARGET_V4 inline void convert16_512(__m512i rg, __m512i bk, const Coeffs512& c, __m512i& y8, __m512i& cb,
                                             __m512i& cr) {
  const __m512i ny = _mm512_add_epi32(_mm512_madd_epi16(rg, c.y_rg), _mm512_madd_epi16(bk, c.y_bk));
  y8 = _mm512_srli_epi32(ny, 3);
  const __m512i ncb = _mm512_add_epi32(_mm512_madd_epi16(rg, c.cb_rg), _mm512_madd_epi16(bk, c.cb_bk));
  cb = _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(ncb), c.inv));
  const __m512i ncr = _mm512_add_epi32(_mm512_madd_epi16(rg, c.cr_rg), _mm512_madd_epi16(bk, c.cr_bk));
  cr = _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(ncr), c.inv));
}

// Masked pixels -> (0, 128, 128); then the bytes go out, only the first n of 64 when n < 64.
FASTPREP_TARGET_V4 inline void store64_512(__m512i yv, __m512i cbv, __m512i crv, const uint8_t* mask, int64_t n,
                                           uint8_t* y, uint8_t* cb, uint8_t* cr) {
  const __mmask64 valid = n >= 64 ? ~0ULL : (1ULL << n) - 1;
  if (mask != nullptr) {
    const __m512i m = _mm512_maskz_loadu_epi8(valid, mask);
    const __mmask64 masked = _mm512_test_epi8_mask(m, m);
    const __m512i half = _mm512_set1_epi8(static_cast<char>(128));
    yv = _mm512_maskz_mov_epi8(~masked, yv);
    cbv = _mm512_mask_mov_epi8(cbv, masked, half);
    crv = _mm512_mask_mov_epi8(crv, masked, half);
  }
  _mm512_mask_storeu_epi8(y, valid, yv);
  _mm512_mask_storeu_epi8(cb, valid, cbv);
  _mm512_mask_storeu_epi8(cr, valid, crv);
}

// 32 bytes from p zero-extended to 16-bit lanes; only the first `bytes` are read.
FASTPREP_TARGET_V4 inline __m512i load_u8x32(const uint8_t* p, int64_t bytes) {
  if (bytes >= 32) return _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  const __mmask32 k = bytes <= 0 ? 0 : (1u << bytes) - 1;
  return _mm512_cvtepu8_epi16(_mm256_maskz_loadu_epi8(k, p));
}

// Four registers of 16 int32 results (pixels 16g ..) -> 64 bytes in pixel order (saturated);
// Y's (its eighths) divided on the way, once in 16-bit lanes.
template <bool IsY>
FASTPREP_TARGET_V4 inline __m512i pack_groups(const __m512i* v, __m512i order, const Coeffs512& c) {
  __m512i lo = _mm512_packus_epi32(v[0], v[1]), hi = _mm512_packus_epi32(v[2], v[3]);
  if constexpr (IsY) lo = y_from_eighths(lo, c), hi = y_from_eighths(hi, c);
  return _mm512_permutexvar_epi32(order, _mm512_packus_epi16(lo, hi));
}

// 64 pixels (n of them when Tail, n < 64) of packed RGB at p -> the three outputs.
template <bool Tail>
FASTPREP_TARGET_V4 inline void block_packed_512(const uint8_t* p, int64_t n, const uint8_t* mask, uint8_t* y,
                                                uint8_t* cb, uint8_t* cr, const Coeffs512& c, const __m512i* idx,
                                                __m512i order) {
  __m512i w[6];
  for (int k = 0; k < 6; ++k) {
    w[k] = Tail ? load_u8x32(p + 32 * k, 3 * n - 32 * k)
                : _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * k)));
  }
  __m512i yv[4], cbv[4], crv[4];
  for (int g = 0; g < 4; ++g) {  // pixels 16g .. 16g + 15: words 48g .. 48g + 47
    const __m512i a = w[3 * g / 2], b = w[3 * g / 2 + 1];
    const __m512i rg = _mm512_permutex2var_epi16(a, idx[g % 2], b);
    const __m512i bk = _mm512_mask2_permutex2var_epi16(a, idx[2 + g % 2], 0x55555555u, b);
    convert16_512(rg, bk, c, yv[g], cbv[g], crv[g]);
  }
  store64_512(pack_groups<true>(yv, order, c), pack_groups<false>(cbv, order, c), pack_groups<false>(crv, order, c),
              mask, Tail ? n : 64, y, cb, cr);
}

}  // namespace

FASTPREP_TARGET_V4 void rgb_to_ycbcr_packed_v4(const uint8_t* rgb, int64_t n, const uint8_t* mask, uint8_t* y,
                                               uint8_t* cb, uint8_t* cr) {
  const Coeffs512 c = coeffs512();
  // vpermt2w tables: 16 pixels of 48 words from a 64-word window of two registers. Pixel i of the
  // window sits at word 3i + o (o = 0, or 16 when the window starts 16 words early): lane i gets
  // words (3i + o, 3i + o + 1) = (R, G), or (3i + o + 2, 125) with 125 from the table itself
  // (vpermi2w leaves the unselected odd words as the index).
  alignas(64) uint16_t rg_idx[2][32], bk_idx[2][32];
  for (int o = 0; o < 2; ++o) {
    for (int i = 0; i < 16; ++i) {
      rg_idx[o][2 * i] = static_cast<uint16_t>(3 * i + 16 * o);
      rg_idx[o][2 * i + 1] = static_cast<uint16_t>(3 * i + 16 * o + 1);
      bk_idx[o][2 * i] = static_cast<uint16_t>(3 * i + 16 * o + 2);
      bk_idx[o][2 * i + 1] = kK;
    }
  }
  const __m512i idx[4] = {_mm512_load_si512(rg_idx[0]), _mm512_load_si512(rg_idx[1]), _mm512_load_si512(bk_idx[0]),
                          _mm512_load_si512(bk_idx[1])};
  // After the packs, 32-bit lane 4l + m holds pixels 16m + 4l .. 16m + 4l + 3.
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  int64_t x = 0;
  for (; x + 64 <= n; x += 64) {
    block_packed_512<false>(rgb + 3 * x, 64, mask ? mask + x : nullptr, y + x, cb + x, cr + x, c, idx, order);
  }
  if (x < n)
    block_packed_512<true>(rgb + 3 * x, n - x, mask ? mask + x : nullptr, y + x, cb + x, cr + x, c, idx, order);
}

FASTPREP_TARGET_V4 void rgb_to_ycbcr_planar_v4(const uint8_t* r, const uint8_t* g, const uint8_t* b, int64_t n,
                                               const uint8_t* mask, uint8_t* y, uint8_t* cb, uint8_t* cr) {
  const Coeffs512 c = coeffs512();
  const __m512i k125 = _mm512_set1_epi16(kK);
  // After the packs, 64-bit lane 2l + h holds pixels 32h + 8l .. 32h + 8l + 7.
  const __m512i order = _mm512_setr_epi64(0, 2, 4, 6, 1, 3, 5, 7);
  for (int64_t x = 0; x < n; x += 64) {
    const int64_t m = std::min<int64_t>(64, n - x);
    __m512i words[3][2];  // y, cb, cr as 16-bit lanes, pixels in order, per half of 32
    for (int h = 0; h < 2; ++h) {
      const int64_t o = x + 32 * h, left = m - 32 * h;
      const __m512i rv = load_u8x32(r + o, left), gv = load_u8x32(g + o, left), bv = load_u8x32(b + o, left);
      // In-lane unpacks: lane l of lo holds pixels 8l .. 8l + 3, of hi 8l + 4 .. 8l + 7.
      __m512i ylo, yhi, cblo, cbhi, crlo, crhi;
      convert16_512(_mm512_unpacklo_epi16(rv, gv), _mm512_unpacklo_epi16(bv, k125), c, ylo, cblo, crlo);
      convert16_512(_mm512_unpackhi_epi16(rv, gv), _mm512_unpackhi_epi16(bv, k125), c, yhi, cbhi, crhi);
      words[0][h] = y_from_eighths(_mm512_packus_epi32(ylo, yhi), c);
      words[1][h] = _mm512_packus_epi32(cblo, cbhi);
      words[2][h] = _mm512_packus_epi32(crlo, crhi);
    }
    __m512i out[3];
    for (int k = 0; k < 3; ++k) out[k] = _mm512_permutexvar_epi64(order, _mm512_packus_epi16(words[k][0], words[k][1]));
    store64_512(out[0], out[1], out[2], mask ? mask + x : nullptr, m, y + x, cb + x, cr + x);
  }
}

// ---- AVX2 ---------------------------------------------------------------------------------------

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

// 32 pixels held as R, G, B bytes (byte i = pixel i) -> 32 bytes of each output, masked pixels set.
FASTPREP_TARGET_V3 inline void convert32_256(__m256i rb, __m256i gb, __m256i bb, const uint8_t* mask,
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
  if (mask != nullptr) {
    const __m256i keep =
        _mm256_cmpeq_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(mask)), _mm256_setzero_si256());
    const __m256i half = _mm256_set1_epi8(static_cast<char>(128));
    out[0] = _mm256_and_si256(out[0], keep);
    out[1] = _mm256_blendv_epi8(half, out[1], keep);
    out[2] = _mm256_blendv_epi8(half, out[2], keep);
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
  alignas(32) uint8_t in[3][32] = {}, m[32] = {}, out[3][32];
  const uint8_t* mask(const uint8_t* mrow, int64_t n) {
    if (mrow == nullptr) return nullptr;
    std::memcpy(m, mrow, static_cast<size_t>(n));
    return m;
  }
  void emit(int64_t n, uint8_t* y, uint8_t* cb, uint8_t* cr) const {
    std::memcpy(y, out[0], static_cast<size_t>(n));
    std::memcpy(cb, out[1], static_cast<size_t>(n));
    std::memcpy(cr, out[2], static_cast<size_t>(n));
  }
};

}  // namespace

FASTPREP_TARGET_V3 void rgb_to_ycbcr_packed_v3(const uint8_t* rgb, int64_t n, const uint8_t* mask, uint8_t* y,
                                               uint8_t* cb, uint8_t* cr) {
  const Coeffs256 c = coeffs256();
  __m256i rv, gv, bv;
  int64_t x = 0;
  for (; x + 32 <= n; x += 32) {
    deinterleave32(rgb + 3 * x, rv, gv, bv);
    convert32_256(rv, gv, bv, mask ? mask + x : nullptr, c, y + x, cb + x, cr + x);
  }
  if (x < n) {
    alignas(32) uint8_t packed[96] = {};
    Tail32 t;
    std::memcpy(packed, rgb + 3 * x, static_cast<size_t>(3 * (n - x)));
    deinterleave32(packed, rv, gv, bv);
    convert32_256(rv, gv, bv, t.mask(mask ? mask + x : nullptr, n - x), c, t.out[0], t.out[1], t.out[2]);
    t.emit(n - x, y + x, cb + x, cr + x);
  }
}

FASTPREP_TARGET_V3 void rgb_to_ycbcr_planar_v3(const uint8_t* r, const uint8_t* g, const uint8_t* b, int64_t n,
                                               const uint8_t* mask, uint8_t* y, uint8_t* cb, uint8_t* cr) {
  const Coeffs256 c = coeffs256();
  int64_t x = 0;
  for (; x + 32 <= n; x += 32) {
    convert32_256(ld(r + x), ld(g + x), ld(b + x), mask ? mask + x : nullptr, c, y + x, cb + x, cr + x);
  }
  if (x < n) {
    Tail32 t;
    const size_t k = static_cast<size_t>(n - x);
    std::memcpy(t.in[0], r + x, k), std::memcpy(t.in[1], g + x, k), std::memcpy(t.in[2], b + x, k);
    convert32_256(ld(t.in[0]), ld(t.in[1]), ld(t.in[2]), t.mask(mask ? mask + x : nullptr, n - x), c, t.out[0],
                  t.out[1], t.out[2]);
    t.emit(n - x, y + x, cb + x, cr + x);
  }
}

}  // namespace fastprep::kernels::color_simd

#endif  // FASTPREP_X86_LEVELS
