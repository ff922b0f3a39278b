#include "kernels/mask_fill.h"

#include <cstddef>
#include <vector>

#include "kernels/isa.h"
#include "kernels/mask_rows.h"
#include "kernels/random_mask.h"
#include "kernels/simd.h"

namespace fastprep::kernels {
namespace {

// One image row's mask as 0/1 bytes, so the fill loops below are branch-free selects. Packed rows
// go through the mask words' SIMD expansion (mask_rows.h); `words` holds one row of them.
template <Isa L>
FASTPREP_INLINE void row_bits(const uint8_t* mrow, int64_t w, bool packed, uint64_t* words, uint8_t* bits) {
  if (packed) {
    mask_rows::packed_to_words(mrow, w, words);
    mask_rows::words_to_bools<L>(words, w, bits);
  } else {
    for (int64_t x = 0; x < w; ++x) bits[x] = mrow[x] != 0;
  }
}

#if FASTPREP_X86_LEVELS
// One contiguous row of w elements of one plane, AVX-512: the mask row's words are the mask
// registers of the selects (elements per register divide 64), so no bit is expanded to a byte.
// In place, only the masked elements are stored (masked stores) and the image is not read.
template <typename T>
FASTPREP_TARGET_V4 void fill_row_v4(const T* src, T* dst, const uint64_t* words, int64_t w, T value, bool in_place) {
  constexpr int64_t kV = 64 / sizeof(T);
  for (int64_t x = 0; x < w; x += kV) {
    const uint64_t valid = w - x >= kV ? (kV == 64 ? ~0ULL : (1ULL << kV) - 1) : (1ULL << (w - x)) - 1;
    const uint64_t k = (words[x / 64] >> (x % 64)) & valid;
    if constexpr (sizeof(T) == 1) {
      const __m512i v = _mm512_set1_epi8(static_cast<char>(value));
      if (in_place) {
        _mm512_mask_storeu_epi8(dst + x, k, v);
      } else {
        _mm512_mask_storeu_epi8(dst + x, valid, _mm512_mask_mov_epi8(_mm512_maskz_loadu_epi8(valid, src + x), k, v));
      }
    } else if constexpr (sizeof(T) == 2) {
      const __m512i v = _mm512_set1_epi16(static_cast<int16_t>(value));
      const __mmask32 k32 = static_cast<__mmask32>(k), valid32 = static_cast<__mmask32>(valid);
      if (in_place) {
        _mm512_mask_storeu_epi16(dst + x, k32, v);
      } else {
        _mm512_mask_storeu_epi16(dst + x, valid32,
                                 _mm512_mask_mov_epi16(_mm512_maskz_loadu_epi16(valid32, src + x), k32, v));
      }
    } else {
      const __m512i v = _mm512_set1_epi32(static_cast<int32_t>(value));
      const __mmask16 k16 = static_cast<__mmask16>(k), valid16 = static_cast<__mmask16>(valid);
      if (in_place) {
        _mm512_mask_storeu_epi32(dst + x, k16, v);
      } else {
        _mm512_mask_storeu_epi32(dst + x, valid16,
                                 _mm512_mask_mov_epi32(_mm512_maskz_loadu_epi32(valid16, src + x), k16, v));
      }
    }
  }
}

// The element mask words of a dense RGB row (3 elements a pixel) from its pixel mask words: pixel
// word k (64 pixels) gives element words 3k .. 3k + 2. pdep puts pixels 0-21, 22-42 and 43-63 at
// bits 3 apart from bit 0, 2 and 1 (where each pixel's first element falls in its word), two shifts
// triple them, and pixels 21 and 42, split across words, add their last elements at bit 0 (and 1).
FASTPREP_TARGET_V4 inline void tripled_words(const uint64_t* words, int64_t w, uint64_t* out) {
  for (int64_t k = 0; k < words_per_row(w); ++k) {
    const uint64_t m = words[k];
    const uint64_t p0 = _pdep_u64(m, 0x9249249249249249ULL);        // pixels 0-21 at bits 0, 3, .., 63
    const uint64_t p1 = _pdep_u64(m >> 22, 0x4924924924924924ULL);  // pixels 22-42 at bits 2, 5, .., 62
    const uint64_t p2 = _pdep_u64(m >> 43, 0x2492492492492492ULL);  // pixels 43-63 at bits 1, 4, .., 61
    out[3 * k] = p0 | p0 << 1 | p0 << 2;
    out[3 * k + 1] = (p1 | p1 << 1 | p1 << 2) | ((m >> 21) & 1) * 3;
    out[3 * k + 2] = (p2 | p2 << 1 | p2 << 2) | ((m >> 42) & 1);
  }
}
#endif

template <typename T>
struct FillTyped {
  template <Isa L>
  static FASTPREP_INLINE void run(const T* src, const FillView sv, T* dst, const FillView dv, const uint8_t* mask,
                                  int64_t mask_n, bool packed, T value) {
    // The views by value: uint8 stores may alias anything, so fields read through references would
    // be reloaded after every store and the loops would not vectorise (measured 20x slower).
    const int64_t w = dv.w, channels = dv.c;
    const int64_t row_bytes = packed ? (w + 7) / 8 : w;
    const bool in_place = src == dst && sv.sn == dv.sn && sv.sc == dv.sc && sv.sh == dv.sh && sv.sw == dv.sw;
    // Dense pixel-major rows (packed HWC: channels at stride 1, pixels at stride C) are one run of
    // w * C elements: the row's mask bytes, each repeated C times, select over the whole run.
    const bool dense_pixels = !in_place && sv.sc == 1 && dv.sc == 1 && sv.sw == channels && dv.sw == channels;
    std::vector<uint8_t> bits_buf(static_cast<size_t>(dense_pixels ? w * channels + w : w));
    std::vector<uint64_t> words(static_cast<size_t>(words_per_row(w)));
    uint8_t* __restrict__ bits = bits_buf.data();
    // Pixel-major (HWC-like: channels closer than pixels) vs plane-major loops: the inner loop
    // walks the smaller stride; unit-stride planes become branch-free selects that vectorise.
    const bool pixel_major = dv.sc < dv.sw;
    const bool planes_contiguous = sv.sw == 1 && dv.sw == 1;
#if FASTPREP_X86_LEVELS
    if constexpr (has_avx512(L)) {
      // Planes: each row's mask words drive the selects of its C plane rows. Packed RGB: the
      // tripled words drive one run of 3W elements.
      const bool dense_rgb = dense_pixels && channels == 3;
      if (dense_rgb || planes_contiguous) {
        std::vector<uint64_t> element_words(static_cast<size_t>(dense_rgb ? 3 * words_per_row(w) : 0));
        for (int64_t n = 0; n < dv.n; ++n) {
          const uint8_t* mimg = mask + (mask_n == 1 ? 0 : n) * dv.h * row_bytes;
          for (int64_t y = 0; y < dv.h; ++y) {
            if (packed) {
              mask_rows::packed_to_words(mimg + y * row_bytes, w, words.data());
            } else {
              mask_rows::bools_to_words<L>(mimg + y * row_bytes, w, words.data());
            }
            const T* s = src + n * sv.sn + y * sv.sh;
            T* d = dst + n * dv.sn + y * dv.sh;
            if (dense_rgb) {
              tripled_words(words.data(), w, element_words.data());
              fill_row_v4(s, d, element_words.data(), 3 * w, value, false);
            } else {
              for (int64_t c = 0; c < channels; ++c)
                fill_row_v4(s + c * sv.sc, d + c * dv.sc, words.data(), w, value, in_place);
            }
          }
        }
        return;
      }
    }
#endif
    for (int64_t n = 0; n < dv.n; ++n) {
      const uint8_t* mimg = mask + (mask_n == 1 ? 0 : n) * dv.h * row_bytes;
      for (int64_t y = 0; y < dv.h; ++y) {
        row_bits<L>(mimg + y * row_bytes, w, packed, words.data(), bits);
        const T* s = src + n * sv.sn + y * sv.sh;
        T* d = dst + n * dv.sn + y * dv.sh;
        if (dense_pixels) {
          uint8_t* __restrict__ run_bits = bits + w;
          if (channels == 3) {  // the usual RGB: a literal count, so the repeat vectorises
            for (int64_t x = 0; x < w; ++x) run_bits[3 * x] = run_bits[3 * x + 1] = run_bits[3 * x + 2] = bits[x];
          } else {
            for (int64_t x = 0; x < w; ++x)
              for (int64_t c = 0; c < channels; ++c) run_bits[x * channels + c] = bits[x];
          }
          for (int64_t e = 0; e < w * channels; ++e) d[e] = run_bits[e] ? value : s[e];
        } else if (in_place && pixel_major) {
          for (int64_t x = 0; x < w; ++x) {
            if (!bits[x]) continue;
            for (int64_t c = 0; c < channels; ++c) d[x * dv.sw + c * dv.sc] = value;
          }
        } else if (planes_contiguous) {
          for (int64_t c = 0; c < channels; ++c) {
            const T* sp = s + c * sv.sc;
            T* dp = d + c * dv.sc;
            for (int64_t x = 0; x < w; ++x) dp[x] = bits[x] ? value : sp[x];
          }
        } else if (pixel_major) {
          for (int64_t x = 0; x < w; ++x) {
            for (int64_t c = 0; c < channels; ++c)
              d[x * dv.sw + c * dv.sc] = bits[x] ? value : s[x * sv.sw + c * sv.sc];
          }
        } else {
          for (int64_t c = 0; c < channels; ++c) {
            for (int64_t x = 0; x < w; ++x) d[c * dv.sc + x * dv.sw] = bits[x] ? value : s[c * sv.sc + x * sv.sw];
          }
        }
      }
    }
  }
};

}  // namespace

void mask_fill(const void* src, const FillView& sv, void* dst, const FillView& dv, int elem_size, const uint8_t* mask,
               int64_t mask_n, bool packed, uint32_t value_bits) {
  switch (elem_size) {
    case 1:
      dispatch<FillTyped<uint8_t>>(static_cast<const uint8_t*>(src), sv, static_cast<uint8_t*>(dst), dv, mask, mask_n,
                                   packed, static_cast<uint8_t>(value_bits));
      break;
    case 2:
      dispatch<FillTyped<uint16_t>>(static_cast<const uint16_t*>(src), sv, static_cast<uint16_t*>(dst), dv, mask,
                                    mask_n, packed, static_cast<uint16_t>(value_bits));
      break;
    default:
      dispatch<FillTyped<uint32_t>>(static_cast<const uint32_t*>(src), sv, static_cast<uint32_t*>(dst), dv, mask,
                                    mask_n, packed, value_bits);
      break;
  }
}

}  // namespace fastprep::kernels
