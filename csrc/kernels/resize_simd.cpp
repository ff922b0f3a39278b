// AVX-512 and AVX2 taps of resize_simd.h.
#include "kernels/resize_simd.h"

#include "kernels/simd.h"

#if FASTPREP_X86_LEVELS

namespace fastprep::kernels::resize_simd {
namespace {

// 16 bytes as the low 16-bit halves of 16 (8) 32-bit lanes, multiplied by w (< 2^15) by vpmaddwd.
FASTPREP_TARGET_V4 inline __m512i mul16_v4(const uint8_t* p, __m512i w) {
  return _mm512_madd_epi16(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), w);
}

FASTPREP_TARGET_V3 inline __m256i mul8_v3(const uint8_t* p, __m256i w) {
  return _mm256_madd_epi16(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))), w);
}

// 16 sums to bytes: shifted, then saturated as torch's vpackssdw / vpackuswb (the sums are >= 0,
// as every weight is, so vpmovusdb's unsigned saturation is the same).
FASTPREP_TARGET_V4 inline __m128i to_bytes_v4(__m512i acc, __m128i shift) {
  return _mm512_cvtusepi32_epi8(_mm512_max_epi32(_mm512_sra_epi32(acc, shift), _mm512_setzero_si512()));
}

// Rows 0-7 in lo, 8-15 in hi. vpackssdw interleaves the 128-bit lanes (words 0-3, 8-11 | 4-7,
// 12-15): vpermq puts them in order.
FASTPREP_TARGET_V3 inline __m128i to_bytes_v3(__m256i lo, __m256i hi, __m128i shift) {
  const __m256i words =
      _mm256_permute4x64_epi64(_mm256_packs_epi32(_mm256_sra_epi32(lo, shift), _mm256_sra_epi32(hi, shift)), 0xD8);
  return _mm_packus_epi16(_mm256_castsi256_si128(words), _mm256_extracti128_si256(words, 1));
}

// 16 outputs: saturate((2^(precision - 1) + sum_k w[k] * bytes(k)[i]) >> precision), bytes(k)
// the 16 bytes of tap k. Two sums on AVX-512, so that the adds of one tap do not wait on the other's.
template <class Bytes>
FASTPREP_TARGET_V4 inline __m128i sum16_v4(Bytes bytes, const int32_t* w, int32_t count, __m512i half, __m128i shift) {
  __m512i acc0 = half, acc1 = _mm512_setzero_si512();
  int32_t k = 0;
  for (; k + 1 < count; k += 2) {
    acc0 = _mm512_add_epi32(acc0, mul16_v4(bytes(k), _mm512_set1_epi32(w[k])));
    acc1 = _mm512_add_epi32(acc1, mul16_v4(bytes(k + 1), _mm512_set1_epi32(w[k + 1])));
  }
  if (k < count) acc0 = _mm512_add_epi32(acc0, mul16_v4(bytes(k), _mm512_set1_epi32(w[k])));
  return to_bytes_v4(_mm512_add_epi32(acc0, acc1), shift);
}

template <class Bytes>
FASTPREP_TARGET_V3 inline __m128i sum16_v3(Bytes bytes, const int32_t* w, int32_t count, __m256i half, __m128i shift) {
  __m256i lo = half, hi = half;
  for (int32_t k = 0; k < count; ++k) {
    const __m256i wk = _mm256_set1_epi32(w[k]);
    lo = _mm256_add_epi32(lo, mul8_v3(bytes(k), wk));
    hi = _mm256_add_epi32(hi, mul8_v3(bytes(k) + 8, wk));
  }
  return to_bytes_v3(lo, hi, shift);
}

}  // namespace

FASTPREP_TARGET_V4 void taps_v4(const TapsArgs& a) {
  const __m512i half = _mm512_set1_epi32(1 << (a.precision - 1));
  const __m128i shift = _mm_cvtsi32_si128(a.precision);
  for (int64_t x = 0; x < a.out_w; ++x) {
    const uint8_t* col = a.tile + a.start[x] * a.step;
    const auto bytes = [col, step = a.step](int32_t k) { return col + k * step; };
    const __m128i out = sum16_v4(bytes, a.w + x * a.taps, a.count[x], half, shift);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a.out + x * 16), out);
  }
}

FASTPREP_TARGET_V3 void taps_v3(const TapsArgs& a) {
  const __m256i half = _mm256_set1_epi32(1 << (a.precision - 1));
  const __m128i shift = _mm_cvtsi32_si128(a.precision);
  for (int64_t x = 0; x < a.out_w; ++x) {
    const uint8_t* col = a.tile + a.start[x] * a.step;
    const auto bytes = [col, step = a.step](int32_t k) { return col + k * step; };
    const __m128i out = sum16_v3(bytes, a.w + x * a.taps, a.count[x], half, shift);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a.out + x * 16), out);
  }
}

FASTPREP_TARGET_V4 void row_taps_v4(const RowTapsArgs& a) {
  const __m512i half = _mm512_set1_epi32(1 << (a.precision - 1));
  const __m128i shift = _mm_cvtsi32_si128(a.precision);
  int64_t x = 0;
  for (; x + 16 <= a.n; x += 16) {
    const auto bytes = [rows = a.rows, x](int32_t k) { return rows[k] + x; };
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a.out + x), sum16_v4(bytes, a.w, a.count, half, shift));
  }
  row_taps_plain(a, x);
}

FASTPREP_TARGET_V3 void row_taps_v3(const RowTapsArgs& a) {
  const __m256i half = _mm256_set1_epi32(1 << (a.precision - 1));
  const __m128i shift = _mm_cvtsi32_si128(a.precision);
  int64_t x = 0;
  for (; x + 16 <= a.n; x += 16) {
    const auto bytes = [rows = a.rows, x](int32_t k) { return rows[k] + x; };
    _mm_storeu_si128(reinterpret_cast<__m128i*>(a.out + x), sum16_v3(bytes, a.w, a.count, half, shift));
  }
  row_taps_plain(a, x);
}

}  // namespace fastprep::kernels::resize_simd

#endif
