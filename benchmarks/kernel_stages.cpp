// Per-stage timing of the native kernels, torch-free: what each stage of an op costs next to a
// memcpy moving as many bytes, at the ISA level FASTPREP_ISA selects (default: the CPU's best).
// The op-level numbers (benchmarks/*.py) add the op call, argument checks and output allocation.
//
// Build and run (one thread; a few seconds):
//   cmake --build build/<wheel tag> --target kernel_stages && build/<wheel tag>/kernel_stages
// or without CMake:
//   g++ -O3 -std=c++17 -ffp-contract=off -Icsrc csrc/kernels/*.cpp benchmarks/kernel_stages.cpp -o /tmp/stages
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "kernels/color.h"
#include "kernels/crop.h"
#include "kernels/crop_mask_ycbcr.h"
#include "kernels/dilate.h"
#include "kernels/isa.h"
#include "kernels/mask_fill.h"
#include "kernels/pack_bits.h"
#include "kernels/random_mask.h"

namespace k = fastprep::kernels;

namespace {

// Best of 15 repeats of enough calls to take ~2 ms each, in microseconds per call.
double time_us(const std::function<void()>& fn) {
  using clock = std::chrono::steady_clock;
  fn();
  int n = 1;
  for (;;) {
    const auto t0 = clock::now();
    for (int i = 0; i < n; ++i) fn();
    if (std::chrono::duration<double>(clock::now() - t0).count() > 2e-3 || n > (1 << 20)) break;
    n *= 2;
  }
  double best = 1e30;
  for (int r = 0; r < 15; ++r) {
    const auto t0 = clock::now();
    for (int i = 0; i < n; ++i) fn();
    best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count() / n);
  }
  return best * 1e6;
}

std::vector<uint8_t> a_src, a_dst;

// memcpy of n bytes between buffers kept apart from the ones under test (warm in cache as theirs).
double memcpy_us(size_t n) {
  a_src.assign(n, 1);
  a_dst.assign(n, 0);
  return time_us([n] { std::memcpy(a_dst.data(), a_src.data(), n); });
}

// One line: a stage, the bytes it must move (read + written), its time, and a memcpy moving as
// many bytes (copying half of them: a copy reads and writes each byte).
void line(const char* what, size_t moved, double us) {
  const double floor = memcpy_us(std::max<size_t>(moved / 2, 1));
  std::printf("  %-58s %9zu B %9.2f us   floor %7.2f us = %5.1f%%\n", what, moved, us, floor, 100.0 * floor / us);
}

std::vector<uint8_t> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(g());
  return v;
}

std::vector<uint8_t> random_bools(size_t n, double p, uint32_t seed) {
  std::mt19937 g(seed);
  std::bernoulli_distribution d(p);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = d(g);
  return v;
}

void fused() {
  const int64_t H = 1024, W = 1024, h = 256, w = 256;
  const auto img = random_bytes(H * W * 3, 1);
  std::vector<uint64_t> words(h * w / 64);
  std::vector<uint8_t> out(3 * h * w);
  std::vector<float> outf(3 * h * w);
  const k::RgbSource src{img.data(), 1, W * 3, 3};
  std::puts("crop_mask_ycbcr, 256x256 from 1024x1024x3 uint8 HWC, p=0.25 cross (the binding's stages):");
  const double mask = time_us([&] { k::random_dilated_mask_words(7, 0.25, h, w, false, words.data()); });
  line("1 random_dilated_mask -> mask words", h * w / 8, mask);
  const double body = time_us([&] { k::crop_mask_ycbcr(src, 300, 411, h, w, words.data(), out.data(), k::kU8, 1); });
  line("2 crop + mask + YCbCr -> uint8 CHW", 3 * h * w * 2 + h * w / 8, body);
  line("  without the mask", 3 * h * w * 2,
       time_us([&] { k::crop_mask_ycbcr(src, 300, 411, h, w, nullptr, out.data(), k::kU8, 1); }));
  line("  -> float32 * 1/255", 3 * h * w * 5 + h * w / 8,
       time_us([&] { k::crop_mask_ycbcr(src, 300, 411, h, w, words.data(), outf.data(), k::kF32, 1 / 255.0f); }));
  const k::CropSource cs{img.data(), 3, H, W, 1, W * 3, 3};
  line("  crop alone (HWC -> CHW deinterleave, no colour)", 3 * h * w * 2,
       time_us([&] { k::crop(cs, out.data(), 1, 300, 411, h, w, 0); }));
  line("1 + 2 (the kernels of one uint8 sample)", 3 * h * w * 2 + h * w / 4, mask + body);
}

void color() {
  const int64_t n = 256;
  const auto img = random_bytes(n * n * 3, 2);
  std::vector<uint8_t> out(3 * n * n);
  std::vector<float> outf(3 * n * n);
  std::puts("rgb_to_ycbcr / ycbcr_to_rgb, 256x256:");
  const k::ColorSource hwc{img.data(), n, n, 1, n * 3, 3}, chw{img.data(), n, n, n * n, n, 1};
  line("rgb_to_ycbcr HWC uint8 -> uint8 (exact)", 6 * n * n,
       time_us([&] { k::convert_color(hwc, k::kU8, out.data(), k::kU8, true, 1); }));
  line("rgb_to_ycbcr CHW uint8 -> uint8 (exact)", 6 * n * n,
       time_us([&] { k::convert_color(chw, k::kU8, out.data(), k::kU8, true, 1); }));
  line("ycbcr_to_rgb CHW uint8 -> uint8 (exact)", 6 * n * n,
       time_us([&] { k::convert_color(chw, k::kU8, out.data(), k::kU8, false, 1); }));
  line("rgb_to_ycbcr HWC uint8 -> float32 * 1/255", 3 * n * n * 5,
       time_us([&] { k::convert_color(hwc, k::kU8, outf.data(), k::kF32, true, 1 / 255.0f); }));
}

void dilation(int64_t n) {
  const auto bools = random_bools(n * n, 0.05, 3);
  std::vector<uint8_t> out(n * n), packed(n * n / 8), pout(n * n / 8);
  const int64_t wpr = k::words_per_row(n);
  std::vector<uint64_t> words(n * wpr), words2(n * wpr);
  std::printf("dilate cross, %lldx%lld:\n", static_cast<long long>(n), static_cast<long long>(n));
  k::pack_bits(bools.data(), packed.data(), n, n, 1, true);
  const double total = time_us([&] { k::dilate(bools.data(), out.data(), 1, n, n, false, 1, false); });
  line("dilate bool -> bool (all stages)", 2 * n * n, total);
  line("  stage: bool bytes -> words", n * n + n * n / 8, time_us([&] {
         for (int64_t r = 0; r < n; ++r) k::bools_to_words(bools.data() + r * n, n, words.data() + r * wpr);
       }));
  line("  stage: dilate words", n * n / 4, time_us([&] { k::dilate_words(words.data(), words2.data(), n, n, false); }));
  line("  stage: words -> bool bytes", n * n + n * n / 8, time_us([&] {
         for (int64_t r = 0; r < n; ++r) k::words_to_bools(words2.data() + r * wpr, n, out.data() + r * n);
       }));
  line("dilate_packed -> packed", n * n / 4,
       time_us([&] { k::dilate(packed.data(), pout.data(), 1, n, n, false, 1, true); }));
}

void fill(int64_t n) {
  const auto bools = random_bools(n * n, 0.3, 4);
  std::vector<uint8_t> packed(n * n / 8);
  k::pack_bits(bools.data(), packed.data(), n, n, 1, true);
  std::vector<float> img(3 * n * n, 0.5f), out(3 * n * n);
  const k::FillView v{1, 3, n, n, 3 * n * n, n * n, n, 1};
  std::printf("mask_fill float32 CHW 3x%lldx%lld, value 0:\n", static_cast<long long>(n), static_cast<long long>(n));
  line("out of place, bool mask", 3 * n * n * 8 + n * n,
       time_us([&] { k::mask_fill(img.data(), v, out.data(), v, 4, bools.data(), 1, false, 0); }));
  line("out of place, packed mask", 3 * n * n * 8 + n * n / 8,
       time_us([&] { k::mask_fill(img.data(), v, out.data(), v, 4, packed.data(), 1, true, 0); }));
  line("in place, bool mask (writes masked pixels only)", 3 * n * n * 4 + n * n,
       time_us([&] { k::mask_fill(out.data(), v, out.data(), v, 4, bools.data(), 1, false, 0); }));
}

void packing() {
  const int64_t planes = 8, n = 256;
  const auto bools = random_bools(planes * n * n, 0.5, 5);
  std::vector<uint8_t> packed(planes * n * n / 8), out(planes * n * n);
  std::puts("pack_bits / unpack_bits, 8 x 256 x 256 bool:");
  const int64_t bytes = planes * n * n;
  line("pack_bits along the last dim", bytes + bytes / 8,
       time_us([&] { k::pack_bits(bools.data(), packed.data(), planes * n, n, 1, true); }));
  line("pack_bits along dim 0 (8 planes -> 1)", bytes + bytes / 8,
       time_us([&] { k::pack_bits(bools.data(), packed.data(), 1, planes, n * n, true); }));
  line("unpack_bits along the last dim", bytes + bytes / 8,
       time_us([&] { k::unpack_bits(packed.data(), out.data(), planes * n, n / 8, 1, n, true); }));
}

void masks() {
  std::vector<uint8_t> out(1024 * 1024);
  std::puts("random_mask p=0.25:");
  line("256x256 -> bool", 256 * 256, time_us([&] { k::random_mask(1, 0.25, 256, 256, false, out.data()); }));
  line("256x256 -> packed", 256 * 256 / 8, time_us([&] { k::random_mask(1, 0.25, 256, 256, true, out.data()); }));
  line("1024x1024 -> bool", 1024 * 1024, time_us([&] { k::random_mask(1, 0.25, 1024, 1024, false, out.data()); }));
}

}  // namespace

int main() {
  std::printf("kernel stages at ISA level %s (compiled: %s); floor = memcpy moving the same bytes\n",
              k::isa_name(k::active_isa()), k::compiled_isas());
  fused();
  color();
  dilation(256);
  dilation(1024);
  fill(256);
  packing();
  masks();
  return 0;
}
