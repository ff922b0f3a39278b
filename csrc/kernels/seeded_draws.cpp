#include "kernels/seeded_draws.h"

#include "kernels/isa.h"

namespace fastprep::kernels {
namespace {

constexpr int kStateWords = 624, kShift = 397;
// Seeds seeded side by side: the state recurrence is one dependent multiply after another, so a
// seed alone waits on latency (0.7 us a seed); across lanes the loop vectorises.
constexpr int64_t kLanes = 16;

// Output k of the generator (k < 227) of lane `lane`: word k of the twisted state, tempered.
FASTPREP_INLINE uint32_t output(const uint32_t (*mt)[kLanes], int64_t k, int64_t lane) {
  const uint32_t y = (mt[k][lane] & 0x80000000u) | (mt[k + 1][lane] & 0x7fffffffu);
  uint32_t v = mt[k + kShift][lane] ^ (y >> 1) ^ ((y & 1u) ? 0x9908b0dfu : 0u);
  v ^= v >> 11;
  v ^= (v << 7) & 0x9d2c5680u;
  v ^= (v << 15) & 0xefc60000u;
  return v ^ (v >> 18);
}

struct Draws {
  template <Isa L>
  static FASTPREP_INLINE void run(const int64_t* seeds, int64_t n, int64_t count, int64_t* out) {
    uint32_t mt[kStateWords][kLanes];
    const int64_t words = 2 * count + kShift;  // the state words outputs 0 .. 2 count - 1 read
    for (int64_t i0 = 0; i0 < n; i0 += kLanes) {
      const int64_t lanes = n - i0 < kLanes ? n - i0 : kLanes;
      for (int64_t l = 0; l < kLanes; ++l) {
        mt[0][l] = static_cast<uint32_t>(static_cast<uint64_t>(seeds[i0 + (l < lanes ? l : 0)]));
      }
      for (int64_t j = 1; j < words; ++j) {
        for (int64_t l = 0; l < kLanes; ++l) {
          mt[j][l] = 1812433253u * (mt[j - 1][l] ^ (mt[j - 1][l] >> 30)) + static_cast<uint32_t>(j);
        }
      }
      for (int64_t l = 0; l < lanes; ++l) {
        for (int64_t k = 0; k < count; ++k) {
          const uint64_t word = (static_cast<uint64_t>(output(mt, 2 * k, l)) << 32) | output(mt, 2 * k + 1, l);
          out[(i0 + l) * count + k] = static_cast<int64_t>(word % ~uint64_t{0} + (uint64_t{1} << 63));
        }
      }
    }
  }
};

}  // namespace

void seeded_draws(const int64_t* seeds, int64_t n, int64_t count, int64_t* out) {
  dispatch<Draws>(seeds, n, count, out);
}

}  // namespace fastprep::kernels
