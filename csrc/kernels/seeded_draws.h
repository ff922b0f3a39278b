// What torch's CPU generator hands out after manual_seed(seed): the int64 seeds fastprep's
// draw_seed() takes from it (Tensor.random_(INT64_MIN, INT64_MAX)), for many seeds at once. It is
// how fastprep.Loader draws a whole chunk's transform parameters in one call with the bits of
// SeedByIndex (torch's generator seeded per sample) in a DataLoader.
//
// torch's generator is mt19937 (ATen/core/MT19937RNGEngine.h): the state seeded from the low 32
// bits of the seed, twisted before its first output, outputs tempered. An int64 draw over the full
// range (ATen/core/DistributionsHelper.h) takes two outputs, the first as the high half, and is
// (word mod (2^64 - 1)) + INT64_MIN. Draw k reads state words up to 2k + 1 + 397, so the first
// kMaxSeededDraws draws come from the state as seeded, without a full twist.
// Mirror: pyext/fastprep/numba_kernels/_seeded_draws.py.
#pragma once
#include <cstdint>

namespace fastprep::kernels {

constexpr int64_t kMaxSeededDraws = 113;  // 2 * 113 + 397 = 623: within the first block of 624 words

// out: [n, count] row-major; count <= kMaxSeededDraws.
void seeded_draws(const int64_t* seeds, int64_t n, int64_t count, int64_t* out);

}  // namespace fastprep::kernels
