#include "kernels/pack_bits.h"

#include <algorithm>
#include <cstring>

#include "kernels/isa.h"
#include "kernels/simd.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "word tricks below assume little-endian");

namespace fastprep::kernels {
namespace {

// Multiplying 8 bytes of 0/1 by these moves byte k's bit to bit 56 + k (little) or 63 - k (big);
// no partial product carries into the top byte, so (w * magic) >> 56 is the packed byte.
constexpr uint64_t kGatherLittle = 0x0102040810204080ULL;
constexpr uint64_t kGatherBig = 0x8040201008040201ULL;
// Byte k of (b * 0x0101..01) & mask keeps bit k (little) or bit 7 - k (big) of b.
constexpr uint64_t kSpreadLittle = 0x8040201008040201ULL;
constexpr uint64_t kSpreadBig = 0x0102040810204080ULL;
constexpr uint64_t kLow7 = 0x7F7F7F7F7F7F7F7FULL;
constexpr uint64_t kHigh1 = 0x8080808080808080ULL;

FASTPREP_INLINE uint64_t load_word(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// Each byte becomes 1 if it was nonzero, else 0.
FASTPREP_INLINE uint64_t bytes_to_bits(uint64_t w) { return ((((w & kLow7) + kLow7) | w) & kHigh1) >> 7; }

FASTPREP_INLINE int bit_shift(int64_t k, bool little) { return little ? static_cast<int>(k) : 7 - static_cast<int>(k); }

// n bytes (nonzero = 1) -> ceil(n / 8) packed bytes, a word of 8 bytes at a time.
FASTPREP_INLINE void pack_row_words(const uint8_t* row, int64_t n, bool little, uint8_t* orow) {
  const int64_t full = n / 8;
  const uint64_t gather = little ? kGatherLittle : kGatherBig;
  for (int64_t j = 0; j < full; ++j) {
    orow[j] = static_cast<uint8_t>((bytes_to_bits(load_word(row + 8 * j)) * gather) >> 56);
  }
  if (8 * full < n) {
    unsigned b = 0;
    for (int64_t k = 0; k < n - 8 * full; ++k) {
      b |= static_cast<unsigned>(row[8 * full + k] != 0) << bit_shift(k, little);
    }
    orow[full] = static_cast<uint8_t>(b);
  }
}

// count elements from ceil(count / 8) packed bytes -> 0/1 bytes, a word of 8 bytes at a time.
FASTPREP_INLINE void unpack_row_words(const uint8_t* prow, int64_t count, bool little, uint8_t* orow) {
  const int64_t full = count / 8;
  const uint64_t spread = little ? kSpreadLittle : kSpreadBig;
  for (int64_t j = 0; j < full; ++j) {
    const uint64_t w = bytes_to_bits((prow[j] * 0x0101010101010101ULL) & spread);
    std::memcpy(orow + 8 * j, &w, 8);
  }
  for (int64_t k = 0; k < count - 8 * full; ++k) {
    orow[8 * full + k] = static_cast<uint8_t>((prow[full] >> bit_shift(k, little)) & 1);
  }
}

#if FASTPREP_X86_LEVELS
// AVX2 (x86-64-v3): a byte compare and movemask give 32 bits at once (bit i from byte i, the little
// order once stored); the last < 32 bytes go through the word code above.
FASTPREP_TARGET_V3 inline __m256i reverse_octets_256(__m256i v) {
  return _mm256_shuffle_epi8(
      v, _mm256_broadcastsi128_si256(_mm_setr_epi8(7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8)));
}

FASTPREP_TARGET_V3 inline uint32_t nonzero_bits_256(__m256i v) {
  return ~static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, _mm256_setzero_si256())));
}

FASTPREP_TARGET_V3 void pack_run_v3(const uint8_t* x, int64_t n, bool little, uint8_t* out) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i));
    if (!little) v = reverse_octets_256(v);
    const uint32_t m = nonzero_bits_256(v);
    std::memcpy(out + i / 8, &m, 4);
  }
  pack_row_words(x + i, n - i, little, out + i / 8);
}

// 32 bits -> 32 bytes of 0/1: byte j gets packed byte j / 8, then its bit j % 8 (little) or
// 7 - j % 8 (big) is tested.
FASTPREP_TARGET_V3 void unpack_run_v3(const uint8_t* packed, int64_t count, bool little, uint8_t* out) {
  const __m256i spread =
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(little ? 0x8040201008040201LL : 0x0102040810204080LL);
  const __m256i one = _mm256_set1_epi8(1);
  int64_t i = 0;
  for (; i + 32 <= count; i += 32) {
    uint32_t m;
    std::memcpy(&m, packed + i / 8, 4);
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(m)), spread), bit);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), one));
  }
  unpack_row_words(packed + i / 8, count - i, little, out + i);
}

// Up to 8 planes of n bytes (plane k at x + k * stride) -> one plane of n bytes, bit
// bit_shift(k) of each from plane k's byte, accumulated in a register per 32 bytes.
FASTPREP_TARGET_V3 void pack_planes_v3(const uint8_t* x, int64_t stride, int64_t planes, int64_t n, bool little,
                                       uint8_t* out) {
  const __m256i zero = _mm256_setzero_si256();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    __m256i acc = zero;
    for (int64_t k = 0; k < planes; ++k) {
      const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + k * stride + i));
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1u << bit_shift(k, little)));
      acc = _mm256_or_si256(acc, _mm256_andnot_si256(_mm256_cmpeq_epi8(v, zero), bit));
    }
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), acc);
  }
  for (; i < n; ++i) {
    unsigned b = 0;
    for (int64_t k = 0; k < planes; ++k) b |= static_cast<unsigned>(x[k * stride + i] != 0) << bit_shift(k, little);
    out[i] = static_cast<uint8_t>(b);
  }
}

// One plane of packed bytes -> up to 8 planes of n 0/1 bytes (plane k at out + k * stride gets bit
// bit_shift(k) of each), 32 bytes loaded once for all of them.
FASTPREP_TARGET_V3 void unpack_planes_v3(const uint8_t* packed, int64_t planes, int64_t n, bool little, uint8_t* out,
                                         int64_t stride) {
  const __m256i one = _mm256_set1_epi8(1);
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(packed + i));
    for (int64_t k = 0; k < planes; ++k) {
      const __m256i bit = _mm256_set1_epi8(static_cast<char>(1u << bit_shift(k, little)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k * stride + i),
                          _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit), one));
    }
  }
  for (; i < n; ++i) {
    for (int64_t k = 0; k < planes; ++k)
      out[k * stride + i] = static_cast<uint8_t>((packed[i] >> bit_shift(k, little)) & 1);
  }
}

// Byte k of every 8 goes to 7 - k: with it, "big" bit order is the "little" one of the reversed bytes.
FASTPREP_TARGET_V4 inline __m512i reverse_octets_512(__m512i v) {
  const __m512i rev = _mm512_broadcast_i32x4(_mm_setr_epi8(7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8));
  return _mm512_shuffle_epi8(v, rev);
}

// n bytes (nonzero = 1) -> ceil(n / 8) packed bytes: AVX-512's byte test puts bit i of the mask
// register at element i, which is the little bit order once stored.
FASTPREP_TARGET_V4 void pack_run_v4(const uint8_t* x, int64_t n, bool little, uint8_t* out) {
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __m512i v = _mm512_loadu_si512(x + i);
    if (!little) v = reverse_octets_512(v);
    const uint64_t m = _mm512_test_epi8_mask(v, v);
    std::memcpy(out + i / 8, &m, 8);
  }
  if (i < n) {  // masked load: nothing past the run is read; the missing bytes count as 0
    __m512i v = _mm512_maskz_loadu_epi8((1ULL << (n - i)) - 1, x + i);
    if (!little) v = reverse_octets_512(v);
    const uint64_t m = _mm512_test_epi8_mask(v, v);
    std::memcpy(out + i / 8, &m, static_cast<size_t>((n - i + 7) / 8));
  }
}

// count elements from ceil(count / 8) packed bytes -> 0/1 bytes.
FASTPREP_TARGET_V4 void unpack_run_v4(const uint8_t* packed, int64_t count, bool little, uint8_t* out) {
  const __m512i one = _mm512_set1_epi8(1);
  int64_t i = 0;
  for (; i + 64 <= count; i += 64) {
    uint64_t m;
    std::memcpy(&m, packed + i / 8, 8);
    __m512i v = _mm512_maskz_mov_epi8(m, one);
    if (!little) v = reverse_octets_512(v);
    _mm512_storeu_si512(out + i, v);
  }
  if (i < count) {  // masked store: nothing past the run is written
    uint64_t m = 0;
    std::memcpy(&m, packed + i / 8, static_cast<size_t>((count - i + 7) / 8));
    __m512i v = _mm512_maskz_mov_epi8(m, one);
    if (!little) v = reverse_octets_512(v);
    _mm512_mask_storeu_epi8(out + i, (1ULL << (count - i)) - 1, v);
  }
}

// Up to 8 planes of n bytes (plane k at x + k * stride) -> one plane of n bytes, bit
// bit_shift(k) of each from plane k's byte; the byte tests' mask registers drive the ORs.
FASTPREP_TARGET_V4 void pack_planes_v4(const uint8_t* x, int64_t stride, int64_t planes, int64_t n, bool little,
                                       uint8_t* out) {
  for (int64_t i = 0; i < n; i += 64) {
    const __mmask64 valid = n - i >= 64 ? ~0ULL : (1ULL << (n - i)) - 1;
    __m512i acc = _mm512_setzero_si512();
    for (int64_t k = 0; k < planes; ++k) {
      const __m512i v = _mm512_maskz_loadu_epi8(valid, x + k * stride + i);
      const __m512i bit = _mm512_set1_epi8(static_cast<char>(1u << bit_shift(k, little)));
      acc = _mm512_or_si512(acc, _mm512_maskz_mov_epi8(_mm512_test_epi8_mask(v, v), bit));
    }
    _mm512_mask_storeu_epi8(out + i, valid, acc);
  }
}
#endif

struct PackRows {
  template <Isa L>
  static FASTPREP_INLINE void run(const uint8_t* x, uint8_t* out, int64_t rows, int64_t n, bool little) {
#if FASTPREP_X86_LEVELS
    if constexpr (L != Isa::kBase) {
      constexpr auto pack_run = has_avx512(L) ? pack_run_v4 : pack_run_v3;  // the level's SIMD run
      if (n % 8 == 0) return pack_run(x, rows * n, little, out);            // rows of whole bytes: one run
      for (int64_t r = 0; r < rows; ++r) pack_run(x + r * n, n, little, out + r * ((n + 7) / 8));
      return;
    }
#endif
    const int64_t nb = (n + 7) / 8;
    for (int64_t r = 0; r < rows; ++r) pack_row_words(x + r * n, n, little, out + r * nb);
  }
};

struct PackPlanes {
  template <Isa L>
  static FASTPREP_INLINE void run(const uint8_t* x, uint8_t* out, int64_t outer, int64_t n, int64_t inner,
                                  bool little) {
#if FASTPREP_X86_LEVELS
    if constexpr (L != Isa::kBase) {
      constexpr auto pack_planes = has_avx512(L) ? pack_planes_v4 : pack_planes_v3;  // the level's SIMD planes
      const int64_t nb = (n + 7) / 8;
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; j < nb; ++j) {
          pack_planes(x + (o * n + 8 * j) * inner, inner, std::min<int64_t>(8, n - 8 * j), inner, little,
                      out + (o * nb + j) * inner);
        }
      }
      return;
    }
#endif
    const int64_t nb = (n + 7) / 8;
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < nb; ++j) {
        uint8_t* orow = out + (o * nb + j) * inner;
        std::memset(orow, 0, static_cast<size_t>(inner));
        const int64_t kmax = n - 8 * j < 8 ? n - 8 * j : 8;
        for (int64_t k = 0; k < kmax; ++k) {
          const uint8_t* xrow = x + (o * n + 8 * j + k) * inner;
          const int s = bit_shift(k, little);
          for (int64_t i = 0; i < inner; ++i) {
            orow[i] = static_cast<uint8_t>(orow[i] | ((xrow[i] != 0) << s));
          }
        }
      }
    }
  }
};

struct UnpackRows {
  template <Isa L>
  static FASTPREP_INLINE void run(const uint8_t* packed, uint8_t* out, int64_t rows, int64_t m, int64_t count,
                                  bool little) {
#if FASTPREP_X86_LEVELS
    if constexpr (L != Isa::kBase) {
      constexpr auto unpack_run = has_avx512(L) ? unpack_run_v4 : unpack_run_v3;  // the level's SIMD run
      if (count == 8 * m) return unpack_run(packed, rows * count, little, out);   // whole bytes: one run
      for (int64_t r = 0; r < rows; ++r) unpack_run(packed + r * m, count, little, out + r * count);
      return;
    }
#endif
    for (int64_t r = 0; r < rows; ++r) unpack_row_words(packed + r * m, count, little, out + r * count);
  }
};

struct UnpackPlanes {
  template <Isa L>
  static FASTPREP_INLINE void run(const uint8_t* packed, uint8_t* out, int64_t outer, int64_t m, int64_t inner,
                                  int64_t count, bool little) {
#if FASTPREP_X86_LEVELS
    if constexpr (L == Isa::kV3) {
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t j = 0; 8 * j < count; ++j) {
          unpack_planes_v3(packed + (o * m + j) * inner, std::min<int64_t>(8, count - 8 * j), inner, little,
                           out + (o * count + 8 * j) * inner, inner);
        }
      }
      return;
    }
#endif
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t c = 0; c < count; ++c) {
        const uint8_t* prow = packed + (o * m + c / 8) * inner;
        uint8_t* orow = out + (o * count + c) * inner;
        const int s = bit_shift(c % 8, little);
        for (int64_t i = 0; i < inner; ++i) {
          orow[i] = static_cast<uint8_t>((prow[i] >> s) & 1);
        }
      }
    }
  }
};

}  // namespace

void pack_bits(const uint8_t* x, uint8_t* out, int64_t outer, int64_t n, int64_t inner, bool little) {
  if (inner == 1) {
    dispatch<PackRows>(x, out, outer, n, little);
  } else {
    dispatch<PackPlanes>(x, out, outer, n, inner, little);
  }
}

void unpack_bits(const uint8_t* packed, uint8_t* out, int64_t outer, int64_t m, int64_t inner, int64_t count,
                 bool little) {
  if (inner == 1) {
    dispatch<UnpackRows>(packed, out, outer, m, count, little);
  } else {
    dispatch<UnpackPlanes>(packed, out, outer, m, inner, count, little);
  }
}

}  // namespace fastprep::kernels
