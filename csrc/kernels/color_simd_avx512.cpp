// AVX-512 rows of color_simd.h. x86-64-v4: packed RGB widened to 16-bit lanes and deinterleaved
// by word permutes, numerators by vpmaddwd pairs. x86-64-v4-icl: vpermb picks the pairs straight
// from the packed bytes (also right to left, for flipped reads) and vpdpwssd adds the second
// product into the first, ~20% fewer instructions (benchmarks/PROFILE.md).
#include <algorithm>

#include "kernels/color_simd.h"
#include "kernels/color_simd_coeffs.h"
#include "kernels/simd.h"

#if FASTPREP_X86_LEVELS

namespace fastprep::kernels::color_simd {
namespace {

using namespace coeffs;  // NOLINT: the constants' short names

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

// floor(N / 31250) for N in [0, 8000000] (color_simd.h).
FASTPREP_TARGET_V4 inline __m512i div31250(__m512i n, const Coeffs512& c) {
  return _mm512_cvttps_epi32(_mm512_mul_ps(_mm512_cvtepi32_ps(n), c.inv));
}

// 16 pixels: rg holds (R, G) and bk (B, 125) as 16-bit pairs, one pixel per 32-bit lane. y8 gets
// floor(N_Y / 8) (< 2^15), which y_from_eighths finishes once packed to 16-bit lanes.
FASTPREP_TARGET_V4 inline void convert16_512(__m512i rg, __m512i bk, const Coeffs512& c, __m512i& y8, __m512i& cb,
                                             __m512i& cr) {
  y8 = _mm512_srli_epi32(_mm512_add_epi32(_mm512_madd_epi16(rg, c.y_rg), _mm512_madd_epi16(bk, c.y_bk)), 3);
  cb = div31250(_mm512_add_epi32(_mm512_madd_epi16(rg, c.cb_rg), _mm512_madd_epi16(bk, c.cb_bk)), c);
  cr = div31250(_mm512_add_epi32(_mm512_madd_epi16(rg, c.cr_rg), _mm512_madd_epi16(bk, c.cr_bk)), c);
}

// Masked pixels (the set bits of *mask, the block's mask word) -> (0, 128, 128); then the bytes go
// out, only the first n of 64 when n < 64.
FASTPREP_TARGET_V4 inline void store64_512(__m512i yv, __m512i cbv, __m512i crv, const uint64_t* mask, int64_t n,
                                           uint8_t* y, uint8_t* cb, uint8_t* cr) {
  const __mmask64 valid = n >= 64 ? ~0ULL : (1ULL << n) - 1;
  if (mask != nullptr) {  // the block's mask word is a mask register already
    const __mmask64 masked = *mask;
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

// After pack_groups' packs, 32-bit lane 4l + m holds pixels 16m + 4l .. 16m + 4l + 3: this puts
// them in order.
FASTPREP_TARGET_V4 inline __m512i group_order() {
  return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
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
FASTPREP_TARGET_V4 inline void block_packed_512(const uint8_t* p, int64_t n, const uint64_t* mask, uint8_t* y,
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

FASTPREP_TARGET_V4 void rgb_to_ycbcr_packed_v4(const uint8_t* rgb, int64_t n, const uint64_t* mask, uint8_t* y,
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
  const __m512i order = group_order();
  int64_t x = 0;
  for (; x + 64 <= n; x += 64) {
    block_packed_512<false>(rgb + 3 * x, 64, mask ? mask + x / 64 : nullptr, y + x, cb + x, cr + x, c, idx, order);
  }
  if (x < n)
    block_packed_512<true>(rgb + 3 * x, n - x, mask ? mask + x / 64 : nullptr, y + x, cb + x, cr + x, c, idx, order);
}

FASTPREP_TARGET_V4 void rgb_to_ycbcr_planar_v4(const uint8_t* r, const uint8_t* g, const uint8_t* b, int64_t n,
                                               const uint64_t* mask, uint8_t* y, uint8_t* cb, uint8_t* cr) {
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
    store64_512(out[0], out[1], out[2], mask ? mask + x / 64 : nullptr, m, y + x, cb + x, cr + x);
  }
}

// ---- x86-64-v4-icl: AVX-512 with VBMI, VBMI2 and VNNI --------------------------------------------

namespace {

// Byte tables for 16 pixels of a 48-byte window: 32-bit lane i gets (R, 0, G, 0) of window pixel
// q = i (q = 15 - i for a reversed row) through a zeroing vpermb, and (B, 0, 125, 0) through
// vpermt2b, its 125 and zeros taken from bytes 0 and 1 of k125 (indices 64 and 65).
struct IclTables {
  __m512i rg, bk, k125;
};

struct IclBytes {
  alignas(64) uint8_t rg[64], bk[64], k125[64];
};

constexpr IclBytes icl_bytes(bool reversed) {
  IclBytes b{};
  for (int i = 0; i < 16; ++i) {
    const int q = reversed ? 15 - i : i;
    b.rg[4 * i] = static_cast<uint8_t>(3 * q), b.rg[4 * i + 2] = static_cast<uint8_t>(3 * q + 1);
    b.bk[4 * i] = static_cast<uint8_t>(3 * q + 2), b.bk[4 * i + 1] = 65, b.bk[4 * i + 2] = 64, b.bk[4 * i + 3] = 65;
  }
  b.k125[0] = kK;
  return b;
}

// Built at compile time: a row's set-up is three loads (rows can be short, and there is one call a row).
constexpr IclBytes kIclForward = icl_bytes(false), kIclReversed = icl_bytes(true);

FASTPREP_TARGET_V4 inline IclTables icl_tables(bool reversed) {
  const IclBytes& b = reversed ? kIclReversed : kIclForward;
  return {_mm512_load_si512(b.rg), _mm512_load_si512(b.bk), _mm512_load_si512(b.k125)};
}

constexpr __mmask64 kEvenBytes = 0x5555555555555555ULL;

// The 48-byte window of output pixels first .. first + 15, of which k (<= 16) are in the row.
// Forward, window pixel q is row pixel first + q. Reversed, output pixel j is row pixel n - 1 - j,
// so the window is row pixels n - first - 16 ..; when fewer than 16 are left, the k there
// (row pixels 0 .. k - 1) are expand-loaded to the window's top, where the reversed table reads
// them: nothing outside the row is read either way.
FASTPREP_TARGET_V4I inline __m512i window_icl(const uint8_t* rgb, int64_t n, int64_t first, int64_t k, bool reversed) {
  constexpr uint64_t kWindow = (1ULL << 48) - 1;
  if (k <= 0) return _mm512_setzero_si512();
  if (!reversed) return _mm512_maskz_loadu_epi8(k == 16 ? kWindow : (1ULL << (3 * k)) - 1, rgb + 3 * first);
  if (k == 16) return _mm512_maskz_loadu_epi8(kWindow, rgb + 3 * (n - first - 16));
  return _mm512_maskz_expandloadu_epi8(kWindow & ~((1ULL << (48 - 3 * k)) - 1), rgb);
}

FASTPREP_TARGET_V4I inline void convert16_icl(__m512i w, const IclTables& t, const Coeffs512& c, __m512i& y8,
                                              __m512i& cb, __m512i& cr) {
  const __m512i rg = _mm512_maskz_permutexvar_epi8(kEvenBytes, t.rg, w);
  const __m512i bk = _mm512_permutex2var_epi8(w, t.bk, t.k125);
  y8 = _mm512_srli_epi32(_mm512_dpwssd_epi32(_mm512_madd_epi16(rg, c.y_rg), bk, c.y_bk), 3);
  cb = div31250(_mm512_dpwssd_epi32(_mm512_madd_epi16(rg, c.cb_rg), bk, c.cb_bk), c);
  cr = div31250(_mm512_dpwssd_epi32(_mm512_madd_epi16(rg, c.cr_rg), bk, c.cr_bk), c);
}

// 64 output pixels from x (n - x of them when Tail); Tail windows are loaded pixel-exact.
template <bool Tail, bool Reversed>
FASTPREP_TARGET_V4I inline void block_icl(const uint8_t* rgb, int64_t n, int64_t x, const uint64_t* mask, uint8_t* y,
                                          uint8_t* cb, uint8_t* cr, const Coeffs512& c, const IclTables& t,
                                          __m512i order) {
  __m512i yv[4], cbv[4], crv[4];
  for (int g = 0; g < 4; ++g) {
    const int64_t first = x + 16 * g;
    const __m512i w = Tail ? window_icl(rgb, n, first, std::min<int64_t>(16, n - first), Reversed)
                           : _mm512_maskz_loadu_epi8((1ULL << 48) - 1, rgb + 3 * (Reversed ? n - first - 16 : first));
    convert16_icl(w, t, c, yv[g], cbv[g], crv[g]);
  }
  store64_512(pack_groups<true>(yv, order, c), pack_groups<false>(cbv, order, c), pack_groups<false>(crv, order, c),
              mask ? mask + x / 64 : nullptr, Tail ? n - x : 64, y + x, cb + x, cr + x);
}

// The row's whole 64-pixel blocks, then its tail.
template <bool Reversed>
FASTPREP_TARGET_V4I inline void row_icl(const uint8_t* rgb, int64_t n, const uint64_t* mask, uint8_t* y, uint8_t* cb,
                                        uint8_t* cr) {
  const Coeffs512 c = coeffs512();
  const IclTables t = icl_tables(Reversed);
  const __m512i order = group_order();
  const int64_t full = n / 64 * 64;
  for (int64_t x = 0; x < full; x += 64) block_icl<false, Reversed>(rgb, n, x, mask, y, cb, cr, c, t, order);
  if (full < n) block_icl<true, Reversed>(rgb, n, full, mask, y, cb, cr, c, t, order);
}

}  // namespace

FASTPREP_TARGET_V4I void rgb_to_ycbcr_packed_v4i(const uint8_t* rgb, int64_t n, bool reversed, const uint64_t* mask,
                                                 uint8_t* y, uint8_t* cb, uint8_t* cr) {
  if (reversed) return row_icl<true>(rgb, n, mask, y, cb, cr);
  row_icl<false>(rgb, n, mask, y, cb, cr);
}

}  // namespace fastprep::kernels::color_simd

#endif  // FASTPREP_X86_LEVELS
