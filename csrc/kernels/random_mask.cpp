#include "kernels/random_mask.h"

#include <cstdlib>
#include <vector>

#include "kernels/counter_rng.h"
#include "kernels/isa.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(FASTPREP_NO_MULTIVERSION)
#define FASTPREP_X86_SIMD 1
#include <immintrin.h>
#else
#define FASTPREP_X86_SIMD 0
#endif

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "packed bytes are the words' bytes in order");

namespace fastprep::kernels {
namespace {

constexpr uint64_t kSpread = 0x8040201008040201ULL;  // byte k of (b * 0x01..01) & kSpread: bit k of b
constexpr uint64_t kOnes = 0x0101010101010101ULL;
constexpr uint64_t kLow7 = 0x7F7F7F7F7F7F7F7FULL;
constexpr uint64_t kHigh1 = 0x8080808080808080ULL;
constexpr uint64_t kGather = 0x0102040810204080ULL;  // (0/1 bytes * kGather) >> 56: byte k -> bit k

inline uint64_t load8(const uint8_t* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// 8 bits -> 8 bytes of 0/1; each spread byte holds at most one bit, so + kLow7 never carries.
inline uint64_t spread_byte(uint64_t b) { return ((((b * kOnes) & kSpread) + kLow7) & kHigh1) >> 7; }

inline uint64_t gather_bytes(uint64_t w) { return ((((((w & kLow7) + kLow7) | w) & kHigh1) >> 7) * kGather) >> 56; }

}  // namespace

FASTPREP_MULTIVERSION
void random_mask_row(uint64_t seed, uint32_t q, int64_t row, int64_t wpr, int64_t width, uint64_t* words) {
  if (q == 0 || q >= (1u << kMaskDigits)) {
    const uint64_t fill = q == 0 ? 0 : ~0ULL;
    for (int64_t j = 0; j < wpr; ++j) words[j] = fill;
  } else {
    const int lowest = __builtin_ctz(q);
    const uint64_t base = static_cast<uint64_t>(row) * static_cast<uint64_t>(wpr) * kMaskDigits;
    for (int64_t j = 0; j < wpr; ++j) words[j] = random_word(seed, base + static_cast<uint64_t>(j) * kMaskDigits);
    // Digit-major so each pass is one branch-free loop over the row's words (vectorises).
    for (int k = lowest + 1, t = 1; k < kMaskDigits; ++k, ++t) {
      const uint64_t c = base + static_cast<uint64_t>(t);
      if ((q >> k) & 1u) {
        for (int64_t j = 0; j < wpr; ++j) words[j] |= random_word(seed, c + static_cast<uint64_t>(j) * kMaskDigits);
      } else {
        for (int64_t j = 0; j < wpr; ++j) words[j] &= random_word(seed, c + static_cast<uint64_t>(j) * kMaskDigits);
      }
    }
  }
  if (wpr > 0) words[wpr - 1] &= last_word_mask(width);
}

namespace {

// The bool <-> bit conversions are where bool masks spend their time. No portable loop turns into
// AVX-512's mask-register moves or AVX2's movemask, so these use intrinsics, picked once per
// process from the running CPU; every path gives the same bytes as the portable one.
void words_to_bools_portable(const uint64_t* words, int64_t width, uint8_t* out) {
  const int64_t full = width / 8;
  for (int64_t i = 0; i < full; ++i) {
    const uint64_t v = spread_byte((words[i / 8] >> (8 * (i % 8))) & 0xFF);
    std::memcpy(out + 8 * i, &v, 8);
  }
  for (int64_t x = 8 * full; x < width; ++x) out[x] = static_cast<uint8_t>((words[x / 64] >> (x % 64)) & 1);
}

void bools_to_words_portable(const uint8_t* row, int64_t width, uint64_t* words) {
  const int64_t wpr = words_per_row(width);
  for (int64_t j = 0; j < wpr; ++j) words[j] = 0;
  const int64_t full = width / 8;
  for (int64_t i = 0; i < full; ++i) words[i / 8] |= gather_bytes(load8(row + 8 * i)) << (8 * (i % 8));
  for (int64_t x = 8 * full; x < width; ++x) words[x / 64] |= static_cast<uint64_t>(row[x] != 0) << (x % 64);
}

#if FASTPREP_X86_SIMD
__attribute__((target("avx512bw"))) void words_to_bools_avx512(const uint64_t* words, int64_t width, uint8_t* out) {
  const __m512i one = _mm512_set1_epi8(1);
  const int64_t full = width / 64;
  for (int64_t j = 0; j < full; ++j) _mm512_storeu_si512(out + 64 * j, _mm512_maskz_mov_epi8(words[j], one));
  if (width % 64) {  // masked store: bytes past the row are never touched
    const __mmask64 tail = (1ULL << (width % 64)) - 1;
    _mm512_mask_storeu_epi8(out + 64 * full, tail, _mm512_maskz_mov_epi8(words[full], one));
  }
}

__attribute__((target("avx512bw"))) void bools_to_words_avx512(const uint8_t* row, int64_t width, uint64_t* words) {
  const int64_t full = width / 64;
  for (int64_t j = 0; j < full; ++j) {
    const __m512i v = _mm512_loadu_si512(row + 64 * j);
    words[j] = _mm512_test_epi8_mask(v, v);
  }
  if (width % 64) {  // masked load: bytes past the row are never read
    const __m512i v = _mm512_maskz_loadu_epi8((1ULL << (width % 64)) - 1, row + 64 * full);
    words[full] = _mm512_test_epi8_mask(v, v);
  }
}

__attribute__((target("avx2"))) void words_to_bools_avx2(const uint64_t* words, int64_t width, uint8_t* out) {
  // Byte k of 32 gets source byte k / 8 (in-lane: the broadcast puts all 4 bytes in each lane).
  const __m256i shuf =
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(kSpread));
  const __m256i one = _mm256_set1_epi8(1);
  const int64_t full = width / 32;
  for (int64_t i = 0; i < full; ++i) {
    const uint32_t b = static_cast<uint32_t>(words[i / 2] >> (32 * (i % 2)));
    const __m256i v = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(b)), shuf), bit);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 32 * i), _mm256_and_si256(_mm256_cmpeq_epi8(v, bit), one));
  }
  for (int64_t x = 32 * full; x < width; ++x) out[x] = static_cast<uint8_t>((words[x / 64] >> (x % 64)) & 1);
}

__attribute__((target("avx2"))) void bools_to_words_avx2(const uint8_t* row, int64_t width, uint64_t* words) {
  const int64_t wpr = words_per_row(width);
  for (int64_t j = 0; j < wpr; ++j) words[j] = 0;
  const int64_t full = width / 32;
  const __m256i zero = _mm256_setzero_si256();
  for (int64_t i = 0; i < full; ++i) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 32 * i));
    const uint32_t zeros = static_cast<uint32_t>(_mm256_movemask_epi8(_mm256_cmpeq_epi8(v, zero)));
    words[i / 2] |= static_cast<uint64_t>(~zeros) << (32 * (i % 2));
  }
  for (int64_t x = 32 * full; x < width; ++x) words[x / 64] |= static_cast<uint64_t>(row[x] != 0) << (x % 64);
}
#endif

using ToBools = void (*)(const uint64_t*, int64_t, uint8_t*);
using ToWords = void (*)(const uint8_t*, int64_t, uint64_t*);

struct Converters {
  ToBools to_bools = words_to_bools_portable;
  ToWords to_words = bools_to_words_portable;
  Converters() {
#if FASTPREP_X86_SIMD
    // FASTPREP_MASK_SIMD=avx2|portable caps the choice, so tests can check every path on one CPU.
    const char* cap = std::getenv("FASTPREP_MASK_SIMD");
    const bool allow512 = cap == nullptr || std::strcmp(cap, "avx512") == 0;
    const bool allow2 = allow512 || std::strcmp(cap, "avx2") == 0;
    __builtin_cpu_init();
    if (allow512 && __builtin_cpu_supports("avx512bw")) {
      to_bools = words_to_bools_avx512, to_words = bools_to_words_avx512;
    } else if (allow2 && __builtin_cpu_supports("avx2")) {
      to_bools = words_to_bools_avx2, to_words = bools_to_words_avx2;
    }
#endif
  }
};

const Converters& converters() {
  static const Converters c;
  return c;
}

}  // namespace

void words_to_bools(const uint64_t* words, int64_t width, uint8_t* out) { converters().to_bools(words, width, out); }

void words_to_packed(const uint64_t* words, int64_t width, uint8_t* out) {
  std::memcpy(out, words, static_cast<size_t>((width + 7) / 8));
}

void bools_to_words(const uint8_t* row, int64_t width, uint64_t* words) { converters().to_words(row, width, words); }

void packed_to_words(const uint8_t* row, int64_t width, uint64_t* words) {
  const int64_t wpr = words_per_row(width);
  if (wpr == 0) return;
  words[wpr - 1] = 0;
  std::memcpy(words, row, static_cast<size_t>((width + 7) / 8));
  words[wpr - 1] &= last_word_mask(width);
}

void random_mask(int64_t seed, double p, int64_t rows, int64_t width, bool packed, uint8_t* out) {
  const uint32_t q = mask_threshold(p);
  const int64_t wpr = words_per_row(width);
  const int64_t row_bytes = packed ? (width + 7) / 8 : width;
  std::vector<uint64_t> words(static_cast<size_t>(wpr));
  for (int64_t r = 0; r < rows; ++r) {
    random_mask_row(static_cast<uint64_t>(seed), q, r, wpr, width, words.data());
    if (packed) {
      words_to_packed(words.data(), width, out + r * row_bytes);
    } else {
      words_to_bools(words.data(), width, out + r * row_bytes);
    }
  }
}

}  // namespace fastprep::kernels
