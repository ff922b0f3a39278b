// The horizontal taps of resize.cpp's 16-row blocks in AVX-512 (x86-64-v4, -v4-icl) and AVX2
// (x86-64-v3) intrinsics (resize_simd.cpp): each tap is one zero-extending load of a tile column
// (the 16 rows' bytes), one vpmaddwd by the weight (pixel and weight are 16-bit halves of each
// 32-bit lane, the other halves 0: an exact product) and one add; the sums are shifted and
// saturated by vpackssdw / vpackuswb (vpmovusdb), as torch's kernels. Integer arithmetic: the same
// bytes as the plain loop of the baseline (resize.cpp), which .ci/isa checks.
#pragma once
#include <cstdint>

#include "kernels/isa.h"

namespace fastprep::kernels::resize_simd {

// The outputs of one channel for a block: out[x * 16 + r] = saturate((2^(precision - 1) +
// sum_k w[x * taps + k] * col[r]) >> precision) over k < count[x], col = tile + (start[x] + k) * step.
struct TapsArgs {
  const uint8_t* tile;  // column 0 of the channel: 16 bytes a column
  int64_t step;         // bytes from one tap's column to the next
  const int64_t* start;
  const int32_t* count;
  const int32_t* w;  // weights < 2^15, `taps` an output
  int64_t taps;
  int precision;
  int64_t out_w;
  uint8_t* out;
};

// The vertical taps of one output row of one channel: out[x] = saturate((2^(precision - 1) +
// sum_k w[k] * rows[k][x]) >> precision) for x < n, k < count.
struct RowTapsArgs {
  const uint8_t* const* rows;
  const int32_t* w;
  int32_t count;
  int precision;
  int64_t n;
  uint8_t* out;
};

#if FASTPREP_X86_LEVELS
void taps_v4(const TapsArgs& a);
void taps_v3(const TapsArgs& a);
void row_taps_v4(const RowTapsArgs& a);
void row_taps_v3(const RowTapsArgs& a);
#endif

// The plain loops: the baseline's taps, and the tails of the levels above.
FASTPREP_INLINE uint8_t saturate(int32_t acc, int precision) {
  acc >>= precision;
  return static_cast<uint8_t>(acc < 0 ? 0 : acc > 255 ? 255 : acc);
}

FASTPREP_INLINE void taps_plain(const TapsArgs& a) {
  for (int64_t x = 0; x < a.out_w; ++x) {
    int32_t acc[16];
    for (int r = 0; r < 16; ++r) acc[r] = 1 << (a.precision - 1);
    for (int32_t k = 0; k < a.count[x]; ++k) {
      const uint8_t* col = a.tile + (a.start[x] + k) * a.step;
      for (int r = 0; r < 16; ++r) acc[r] += a.w[x * a.taps + k] * static_cast<int32_t>(col[r]);
    }
    for (int r = 0; r < 16; ++r) a.out[x * 16 + r] = saturate(acc[r], a.precision);
  }
}

FASTPREP_INLINE void row_taps_plain(const RowTapsArgs& a, int64_t x0) {
  for (int64_t x = x0; x < a.n; ++x) {
    int32_t acc = 1 << (a.precision - 1);
    for (int32_t k = 0; k < a.count; ++k) acc += a.w[k] * static_cast<int32_t>(a.rows[k][x]);
    a.out[x] = saturate(acc, a.precision);
  }
}

template <Isa L>
FASTPREP_INLINE void taps(const TapsArgs& a) {
#if FASTPREP_X86_LEVELS
  if constexpr (has_avx512(L)) return taps_v4(a);
  if constexpr (L == Isa::kV3) return taps_v3(a);
#endif
  taps_plain(a);
}

template <Isa L>
FASTPREP_INLINE void row_taps(const RowTapsArgs& a) {
#if FASTPREP_X86_LEVELS
  if constexpr (has_avx512(L)) return row_taps_v4(a);
  if constexpr (L == Isa::kV3) return row_taps_v3(a);
#endif
  row_taps_plain(a, 0);
}

}  // namespace fastprep::kernels::resize_simd
