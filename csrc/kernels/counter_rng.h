// The one random generator of fastprep: counter-based, so any word of any stream can be computed
// directly, in any order, on any thread, by C++ and by Numba alike (numba_kernels/_counter_rng.py
// is the mirror; tests/ops/test_counter_rng.py holds the known-answer vectors both must give).
//
// random_word(seed, i) is output i (from 0) of Vigna's SplitMix64 started at state `seed`:
//   mix64(seed + (i + 1) * golden), all arithmetic mod 2^64.
// derive_seed(seed, stream) is an independent seed for sub-stream `stream` (a sample of a batch,
// the crop vs the mask of a fused op): a random word of a separate key, so derived seeds never
// coincide with the words the parent seed itself hands out.
#pragma once
#include <cstdint>

namespace fastprep::kernels {

constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ULL;
constexpr uint64_t kDeriveKey = 0xD1B54A32D192ED03ULL;

inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

inline uint64_t random_word(uint64_t seed, uint64_t counter) { return mix64(seed + (counter + 1) * kGolden); }

inline int64_t derive_seed(int64_t seed, int64_t stream) {
  return static_cast<int64_t>(random_word(static_cast<uint64_t>(seed) ^ kDeriveKey, static_cast<uint64_t>(stream)));
}

// Uniform integer in [0, n) for n >= 1 by multiply-shift: for n <= 2^32 from the top 32 bits of
// the word (bias below n / 2^32, i.e. < 1e-6 for image sizes), above that from the whole word,
// floor(word * n / 2^64) (bias below n / 2^64): the 32-bit product would wrap, leaving positions
// past 2^32 of a larger image unreachable.
inline uint64_t uniform_below(uint64_t word, uint64_t n) {
  if (n <= (uint64_t{1} << 32)) return ((word >> 32) * n) >> 32;
  return static_cast<uint64_t>((static_cast<unsigned __int128>(word) * n) >> 64);
}

}  // namespace fastprep::kernels
