// Exact uint8 RGB -> YCbCr rows in AVX-512 (x86-64-v4, -v4-icl: color_simd_avx512.cpp) and AVX2
// (x86-64-v3: color_simd_avx2.cpp) intrinsics: the same bytes as color_pixel.h's rgb_to_ycbcr_u8
// for every colour, several times faster than the compiler's vectorisation of it. Used by
// rgb_to_ycbcr and crop_mask_ycbcr on those levels.
//
// The numerators are the exact integers of color_pixel.h, formed in 32-bit lanes by vpmaddwd (and
// vpdpwssd) dot products of 16-bit pairs (R, G) and (B, 125): 125 * 4 = 500, 125 * 32125 = 4015625
// (color_simd_coeffs.h).
//   Y  = floor(N_Y / 1000), N_Y in [0, 255500]: floor(floor(N_Y / 8) / 125), the last step a
//        multiply-high: floor(t * 33555 / 2^22) = floor(t / 125) for every t < 59074.
//   Cb = min(floor(N_Cb / 31250), 255), N_Cb in [31250, 8000000] < 2^24 (exact in float32):
//        truncating float32(N) * float32(1 / 31250) gives floor(N / 31250) for every N in
//        [0, 8000000]; the clamp at 255 is the unsigned saturation of the byte pack. Cr alike.
// tests/ops/test_color.py checks both identities over their whole ranges and the end result over all
// 2^24 colours on every ISA level (.ci/isa).
#pragma once
#include <cstdint>

#include "kernels/isa.h"

namespace fastprep::kernels::color_simd {

#if FASTPREP_X86_LEVELS
// n pixels of one row -> n bytes of each output plane. Packed: rgb holds R, G, B of pixel i at
// rgb[3i..3i+2]. Planar: r[i], g[i], b[i]. mask: null, or the row's mask words (bit i of word j is
// pixel 64j + i, random_mask.h's layout; set = masked); a masked pixel reads as RGB (0, 0, 0)
// (mask_fill's zero), whose YCbCr is (0, 128, 128). Words are what AVX-512 masks are: no bytes.
void rgb_to_ycbcr_packed_v4(const uint8_t* rgb, int64_t n, const uint64_t* mask, uint8_t* y, uint8_t* cb, uint8_t* cr);
void rgb_to_ycbcr_planar_v4(const uint8_t* r, const uint8_t* g, const uint8_t* b, int64_t n, const uint64_t* mask,
                            uint8_t* y, uint8_t* cb, uint8_t* cr);
// Packed rows on x86-64-v4-icl; reversed: output pixel i is row pixel n - 1 - i (rgb is the row's
// leftmost pixel in memory), the read of a left-right flip.
void rgb_to_ycbcr_packed_v4i(const uint8_t* rgb, int64_t n, bool reversed, const uint64_t* mask, uint8_t* y,
                             uint8_t* cb, uint8_t* cr);
void rgb_to_ycbcr_packed_v3(const uint8_t* rgb, int64_t n, const uint64_t* mask, uint8_t* y, uint8_t* cb, uint8_t* cr);
void rgb_to_ycbcr_planar_v3(const uint8_t* r, const uint8_t* g, const uint8_t* b, int64_t n, const uint64_t* mask,
                            uint8_t* y, uint8_t* cb, uint8_t* cr);
#endif

// Whether level L has rows above; the kernels fall back to color_pixel.h's loops otherwise.
template <Isa L>
constexpr bool kHasExactRows = FASTPREP_X86_LEVELS && L != Isa::kBase;
// Whether level L converts reversed packed rows itself (rgb_to_ycbcr_packed_reversed); callers
// make such rows planar first otherwise.
template <Isa L>
constexpr bool kHasReversedRows = FASTPREP_X86_LEVELS && L == Isa::kV4I;

template <Isa L>
FASTPREP_INLINE void rgb_to_ycbcr_packed([[maybe_unused]] const uint8_t* rgb, [[maybe_unused]] int64_t n,
                                         [[maybe_unused]] const uint64_t* mask, [[maybe_unused]] uint8_t* y,
                                         [[maybe_unused]] uint8_t* cb, [[maybe_unused]] uint8_t* cr) {
#if FASTPREP_X86_LEVELS
  if constexpr (L == Isa::kV4I) rgb_to_ycbcr_packed_v4i(rgb, n, false, mask, y, cb, cr);
  if constexpr (L == Isa::kV4) rgb_to_ycbcr_packed_v4(rgb, n, mask, y, cb, cr);
  if constexpr (L == Isa::kV3) rgb_to_ycbcr_packed_v3(rgb, n, mask, y, cb, cr);
#endif
}

// n packed pixels read right to left from the one at lo + 3 (n - 1); levels with kHasReversedRows.
template <Isa L>
FASTPREP_INLINE void rgb_to_ycbcr_packed_reversed([[maybe_unused]] const uint8_t* lo, [[maybe_unused]] int64_t n,
                                                  [[maybe_unused]] const uint64_t* mask, [[maybe_unused]] uint8_t* y,
                                                  [[maybe_unused]] uint8_t* cb, [[maybe_unused]] uint8_t* cr) {
  static_assert(kHasReversedRows<L>, "level L has no reversed rows");
#if FASTPREP_X86_LEVELS
  rgb_to_ycbcr_packed_v4i(lo, n, true, mask, y, cb, cr);
#endif
}

template <Isa L>
FASTPREP_INLINE void rgb_to_ycbcr_planar([[maybe_unused]] const uint8_t* r, [[maybe_unused]] const uint8_t* g,
                                         [[maybe_unused]] const uint8_t* b, [[maybe_unused]] int64_t n,
                                         [[maybe_unused]] const uint64_t* mask, [[maybe_unused]] uint8_t* y,
                                         [[maybe_unused]] uint8_t* cb, [[maybe_unused]] uint8_t* cr) {
#if FASTPREP_X86_LEVELS
  // v4-icl's gain is in the packed bytes' deinterleave; planar rows run v4's.
  if constexpr (has_avx512(L)) rgb_to_ycbcr_planar_v4(r, g, b, n, mask, y, cb, cr);
  if constexpr (L == Isa::kV3) rgb_to_ycbcr_planar_v3(r, g, b, n, mask, y, cb, cr);
#endif
}

}  // namespace fastprep::kernels::color_simd
