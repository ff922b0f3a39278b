#include "jpeg/crc32c.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "kernels/isa.h"

namespace fastprep::jpeg {
namespace {

using kernels::Isa;
constexpr uint32_t kPoly = 0x82F63B78u;  // the Castagnoli polynomial, bit-reflected

// Slicing-by-8: table[k][b] is the CRC of byte b followed by k zero bytes.
constexpr std::array<std::array<uint32_t, 256>, 8> make_tables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t b = 0; b < 256; ++b) {
    uint32_t c = b;
    for (int i = 0; i < 8; ++i) c = (c >> 1) ^ (kPoly & (0u - (c & 1u)));
    t[0][b] = c;
  }
  for (int k = 1; k < 8; ++k) {
    for (uint32_t b = 0; b < 256; ++b) t[k][b] = (t[k - 1][b] >> 8) ^ t[0][t[k - 1][b] & 0xFF];
  }
  return t;
}
constexpr auto kTables = make_tables();

FASTPREP_INLINE uint64_t load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;  // little-endian: the CRC's byte order on x86 and the table's
}

FASTPREP_INLINE uint32_t table_byte(uint32_t c, uint8_t b) { return (c >> 8) ^ kTables[0][(c ^ b) & 0xFF]; }

FASTPREP_INLINE uint32_t table_word(uint32_t c, uint64_t w) {
  w ^= c;
  return kTables[7][w & 0xFF] ^ kTables[6][(w >> 8) & 0xFF] ^ kTables[5][(w >> 16) & 0xFF] ^
         kTables[4][(w >> 24) & 0xFF] ^ kTables[3][(w >> 32) & 0xFF] ^ kTables[2][(w >> 40) & 0xFF] ^
         kTables[1][(w >> 48) & 0xFF] ^ kTables[0][w >> 56];
}

// One 8-byte step and one byte step at level L: the crc32 instruction from x86-64-v3 on (the
// levels fastprep compiles that have SSE4.2), else the tables. GCC's builtins rather than
// <immintrin.h>'s always_inline wrappers: a builtin is checked against the target of the function
// it ends up in (run_v3 and up, isa.h), a wrapper against this template's own (the baseline).
template <Isa L>
FASTPREP_INLINE uint32_t step64(uint32_t c, const uint8_t* p) {
#if FASTPREP_X86_LEVELS
  if constexpr (L != Isa::kBase) return static_cast<uint32_t>(__builtin_ia32_crc32di(c, load64(p)));
#endif
  return table_word(c, load64(p));
}

template <Isa L>
FASTPREP_INLINE uint32_t step8(uint32_t c, uint8_t b) {
#if FASTPREP_X86_LEVELS
  if constexpr (L != Isa::kBase) return __builtin_ia32_crc32qi(c, b);
#endif
  return table_byte(c, b);
}

template <Isa L>
FASTPREP_INLINE uint32_t run_one(uint32_t c, const uint8_t* p, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) c = step64<L>(c, p + i);
  for (; i < n; ++i) c = step8<L>(c, p[i]);
  return c;
}

// Ranges are often short and scattered (a window's bands: 192 bytes of each of 256 rows): the
// hardware prefetcher sees each as a new stream, so the ranges kAhead positions on are prefetched,
// which hides most of the memory latency (the bands of a 256^2 window of a raw record not in
// cache, Zen 4: 148 us without, 83 with 9 ranges ahead, ~40-50 with 24 to 60).
constexpr size_t kAhead = 24;
constexpr size_t kMaxPrefetch = 4096;  // of a long range, its start (the prefetcher follows the rest)

FASTPREP_INLINE void prefetch(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < std::min(n, kMaxPrefetch); i += 64) __builtin_prefetch(p + i);
}

struct Crc32cMany {
  template <Isa L>
  static FASTPREP_INLINE void run(const uint8_t* const* data, const size_t* size, uint32_t* out, size_t n) {
    for (size_t r = 0; r < std::min(n, kAhead); ++r) prefetch(data[r], size[r]);
    size_t r = 0;
    for (; r + 3 <= n; r += 3) {  // three streams in lockstep over their common length
      for (size_t k = r + kAhead; k < std::min(n, r + kAhead + 3); ++k) prefetch(data[k], size[k]);
      uint32_t a = 0xFFFFFFFFu, b = a, c = a;
      const size_t common = std::min(size[r], std::min(size[r + 1], size[r + 2])) & ~size_t{7};
      for (size_t i = 0; i < common; i += 8) {
        a = step64<L>(a, data[r] + i);
        b = step64<L>(b, data[r + 1] + i);
        c = step64<L>(c, data[r + 2] + i);
      }
      out[r] = ~run_one<L>(a, data[r] + common, size[r] - common);
      out[r + 1] = ~run_one<L>(b, data[r + 1] + common, size[r + 1] - common);
      out[r + 2] = ~run_one<L>(c, data[r + 2] + common, size[r + 2] - common);
    }
    for (; r < n; ++r) out[r] = ~run_one<L>(0xFFFFFFFFu, data[r], size[r]);
  }
};

}  // namespace

uint32_t crc32c(const uint8_t* data, size_t size) {
  uint32_t out = 0;
  crc32c_many(&data, &size, &out, 1);
  return out;
}

void crc32c_many(const uint8_t* const* data, const size_t* size, uint32_t* out, size_t n) {
  kernels::dispatch<Crc32cMany>(data, size, out, n);
}

}  // namespace fastprep::jpeg
