// 16 x 16 byte transposes: the resize's horizontal pass runs on 16 rows at once, each source
// column as one vector of its 16 rows (resize.cpp). SSE2 (so every x86-64 level, inlined into
// each level's kernel) or plain loops elsewhere; a copy either way, so the same bits.
#pragma once
#include <cstdint>

#include "kernels/isa.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace fastprep::kernels {

// out[i * 16 + r] = rows[r][offset + i] for i, r in [0, 16): column i of the 16 rows becomes
// row i of the 256 contiguous bytes at out.
FASTPREP_INLINE void transpose16(const uint8_t* const* rows, int64_t offset, uint8_t* out) {
#if defined(__SSE2__)
  __m128i a[16], t[16];
  for (int r = 0; r < 16; ++r) a[r] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(rows[r] + offset));
  // Bytes of rows (2k, 2k + 1): t[k] columns 0-7, t[k + 8] columns 8-15.
  for (int k = 0; k < 8; ++k) {
    t[k] = _mm_unpacklo_epi8(a[2 * k], a[2 * k + 1]);
    t[k + 8] = _mm_unpackhi_epi8(a[2 * k], a[2 * k + 1]);
  }
  // Rows 4q .. 4q + 3 of column group g (4 columns): a[4 g + q].
  for (int h = 0; h < 2; ++h) {
    for (int q = 0; q < 4; ++q) {
      a[8 * h + q] = _mm_unpacklo_epi16(t[8 * h + 2 * q], t[8 * h + 2 * q + 1]);
      a[8 * h + q + 4] = _mm_unpackhi_epi16(t[8 * h + 2 * q], t[8 * h + 2 * q + 1]);
    }
  }
  for (int g = 0; g < 4; ++g) {
    const __m128i lo01 = _mm_unpacklo_epi32(a[4 * g], a[4 * g + 1]);      // columns 4g, 4g + 1: rows 0-7
    const __m128i hi01 = _mm_unpackhi_epi32(a[4 * g], a[4 * g + 1]);      // columns 4g + 2, 4g + 3
    const __m128i lo23 = _mm_unpacklo_epi32(a[4 * g + 2], a[4 * g + 3]);  // rows 8-15
    const __m128i hi23 = _mm_unpackhi_epi32(a[4 * g + 2], a[4 * g + 3]);
    auto* o = reinterpret_cast<__m128i*>(out + 64 * g);
    _mm_storeu_si128(o, _mm_unpacklo_epi64(lo01, lo23));
    _mm_storeu_si128(o + 1, _mm_unpackhi_epi64(lo01, lo23));
    _mm_storeu_si128(o + 2, _mm_unpacklo_epi64(hi01, hi23));
    _mm_storeu_si128(o + 3, _mm_unpackhi_epi64(hi01, hi23));
  }
#else
  for (int i = 0; i < 16; ++i) {
    for (int r = 0; r < 16; ++r) out[i * 16 + r] = rows[r][offset + i];
  }
#endif
}

}  // namespace fastprep::kernels
