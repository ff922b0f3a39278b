#include "kernels/random_mask.h"

#include <algorithm>
#include <vector>

#include "kernels/isa.h"
#include "kernels/mask_rows.h"
#include "kernels/simd.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "packed bytes are the words' bytes in order");

namespace fastprep::kernels {

#if FASTPREP_X86_LEVELS
namespace mask_rows {

FASTPREP_TARGET_V4 void words_to_bools_v4(const uint64_t* words, int64_t width, uint8_t* out) {
  const __m512i one = _mm512_set1_epi8(1);
  const int64_t full = width / 64;
  for (int64_t j = 0; j < full; ++j) _mm512_storeu_si512(out + 64 * j, _mm512_maskz_mov_epi8(words[j], one));
  if (width % 64) {  // masked store: bytes past the row are never touched
    const __mmask64 tail = (1ULL << (width % 64)) - 1;
    _mm512_mask_storeu_epi8(out + 64 * full, tail, _mm512_maskz_mov_epi8(words[full], one));
  }
}

FASTPREP_TARGET_V4 void bools_to_words_v4(const uint8_t* row, int64_t width, uint64_t* words) {
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

FASTPREP_TARGET_V3 void words_to_bools_v3(const uint64_t* words, int64_t width, uint8_t* out) {
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

FASTPREP_TARGET_V3 void bools_to_words_v3(const uint8_t* row, int64_t width, uint64_t* words) {
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

}  // namespace mask_rows
#endif

namespace {

struct RandomMaskRow {
  template <Isa L>
  static FASTPREP_INLINE void run(uint64_t seed, uint32_t q, int64_t row, int64_t wpr, int64_t width, uint64_t* words) {
    mask_rows::random_row(seed, q, row, wpr, width, words);
  }
};

struct WordsToBools {
  template <Isa L>
  static FASTPREP_INLINE void run(const uint64_t* words, int64_t width, uint8_t* out) {
    mask_rows::words_to_bools<L>(words, width, out);
  }
};

struct BoolsToWords {
  template <Isa L>
  static FASTPREP_INLINE void run(const uint8_t* row, int64_t width, uint64_t* words) {
    mask_rows::bools_to_words<L>(row, width, words);
  }
};

struct RandomMask {
  template <Isa L>
  static FASTPREP_INLINE void run(int64_t seed, double p, int64_t rows, int64_t width, bool packed, uint8_t* out) {
    const uint32_t q = mask_threshold(p);
    const int64_t wpr = words_per_row(width);
    const int64_t row_bytes = packed ? (width + 7) / 8 : width;
    if (wpr == 0) return;
    // Blocks of rows (~8 KB of words, L1) so the generator runs long loops across rows.
    const int64_t block = std::max<int64_t>(1, 1024 / wpr);
    std::vector<uint64_t> words(static_cast<size_t>(block * wpr));
    for (int64_t r = 0; r < rows; r += block) {
      const int64_t n = std::min(block, rows - r);
      mask_rows::random_rows(static_cast<uint64_t>(seed), q, r, n, wpr, width, words.data());
      mask_rows::emit_rows<L>(words.data(), n, width, packed, out + r * row_bytes);
    }
  }
};

}  // namespace

void random_mask_row(uint64_t seed, uint32_t q, int64_t row, int64_t wpr, int64_t width, uint64_t* words) {
  dispatch<RandomMaskRow>(seed, q, row, wpr, width, words);
}

void words_to_bools(const uint64_t* words, int64_t width, uint8_t* out) { dispatch<WordsToBools>(words, width, out); }

void words_to_packed(const uint64_t* words, int64_t width, uint8_t* out) {
  mask_rows::words_to_packed(words, width, out);
}

void bools_to_words(const uint8_t* row, int64_t width, uint64_t* words) { dispatch<BoolsToWords>(row, width, words); }

void packed_to_words(const uint8_t* row, int64_t width, uint64_t* words) {
  mask_rows::packed_to_words(row, width, words);
}

void random_mask(int64_t seed, double p, int64_t rows, int64_t width, bool packed, uint8_t* out) {
  dispatch<RandomMask>(seed, p, rows, width, packed, out);
}

}  // namespace fastprep::kernels
