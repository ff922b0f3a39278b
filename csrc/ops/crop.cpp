// Bindings of crop / random_crop (schemas: pyext/fastprep/ops/_crop.py).
#include <cmath>
#include <string>
#include <vector>

#include "kernels/counter_rng.h"
#include "kernels/crop.h"
#include "kernels/float_bits.h"
#include "ops/alloc.h"
#include "ops/checks.h"
#include "ops/views.h"

namespace fastprep::ops {
namespace {

int64_t image_elem_size(const char* op, const Tensor& img) {
  check_tensor(op, "img", img);
  return dtype_size(image_dtype(op, "img", img));
}

void check_positive(const char* op, const char* arg, int64_t v) {
  FASTPREP_CHECK(v > 0, op, ": expected ", arg, " > 0, got ", arg, "=", v);
}

// The element bits of `fill` in img's dtype: float32 first, then rounded to nearest even (as
// torch.tensor(fill).to(dtype)). A finite fill that would round to inf is refused.
uint32_t fill_bits(const char* op, ScalarType t, double fill) {
  if (t == ScalarType::Byte) {
    FASTPREP_CHECK(fill >= 0 && fill <= 255 && fill == static_cast<double>(static_cast<int>(fill)), op,
                   ": expected fill to be an integer in [0, 255] for a torch.uint8 image, got fill=", fill);
    return static_cast<uint32_t>(fill);
  }
  const auto rounds_to_inf = [&] {
    FASTPREP_CHECK(false, op, ": fill=", fill, " rounds to inf in ", dtype_name(t), " (largest finite value ",
                   largest_finite(t), ")");
  };
  // float32 rounds |fill| >= 2^128 - 2^103 (max + half an ulp) to inf; below, the cast is exact or
  // rounds to a finite value.
  if (std::isfinite(fill) && std::abs(fill) >= 3.4028235677973366e38) rounds_to_inf();
  const float f = static_cast<float>(fill);
  const uint32_t bits = t == ScalarType::Half       ? kernels::float_to_half_bits(f)
                        : t == ScalarType::BFloat16 ? kernels::float_to_bf16_bits(f)
                                                    : kernels::float_bits(f);
  const uint32_t inf = t == ScalarType::Half ? 0x7c00u : t == ScalarType::BFloat16 ? 0x7f80u : 0x7f800000u;
  const uint32_t magnitude = t == ScalarType::Float ? bits & 0x7fffffffu : bits & 0x7fffu;
  if (std::isfinite(fill) && magnitude == inf) rounds_to_inf();
  return bits;
}

std::vector<int64_t> crop_sizes(const ImageView& v, int64_t height, int64_t width) {
  std::vector<int64_t> sizes{v.c, height, width};
  if (v.batched) sizes.insert(sizes.begin(), v.n);
  return sizes;
}

std::string window_source(int64_t height, int64_t width) {
  return "height=" + std::to_string(height) + ", width=" + std::to_string(width);
}

// The last check of crop and random_crop, then the allocation.
Tensor new_crop_output(const char* op, const Tensor& img, const ImageView& v, int64_t height, int64_t width) {
  const std::vector<int64_t> sizes = crop_sizes(v, height, width);
  const auto source = [&] { return window_source(height, width); };
  const ScalarType t = image_dtype(op, "img", img);
  return new_output(op, img, sizes, t, source);
}

// hflip: the window is cut from the image flipped left-right, which is the image read from its
// last column with the column stride negated (no flipped copy; flip-then-crop by construction).
void run_crop(const Tensor& img, const ImageView& v, Tensor& out, int64_t i, int64_t es, int64_t top, int64_t left,
              int64_t height, int64_t width, uint32_t fill, bool hflip = false) {
  const char* base = static_cast<const char*>(img.const_data_ptr()) + i * v.sn * es;
  const bool flip = hflip && v.w > 0;  // a 0-wide image has no last column (and nothing to read)
  const kernels::CropSource src{
      flip ? base + (v.w - 1) * v.sw * es : base, v.c, v.h, v.w, v.sc, v.sh, flip ? -v.sw : v.sw};
  char* o = static_cast<char*>(out.mutable_data_ptr()) + i * v.c * height * width * es;
  kernels::crop(src, o, static_cast<int>(es), top, left, height, width, fill);
}

}  // namespace

Tensor crop(Tensor img, int64_t top, int64_t left, int64_t height, int64_t width, StrArg layout) {
  constexpr const char* op = "crop";
  const int64_t es = image_elem_size(op, img);
  const ImageView v = image_view(op, "img", img, parse_layout(op, layout));
  check_positive(op, "height", height);
  check_positive(op, "width", width);
  FASTPREP_CHECK(top >= 0, op, ": expected top >= 0, got top=", top);
  FASTPREP_CHECK(left >= 0, op, ": expected left >= 0, got left=", left);
  FASTPREP_CHECK(sum_at_most(top, height, v.h), op, ": expected top + height <= ", v.h,
                 " (the image height), got top=", top, ", height=", height);
  FASTPREP_CHECK(sum_at_most(left, width, v.w), op, ": expected left + width <= ", v.w,
                 " (the image width), got left=", left, ", width=", width);
  Tensor out = new_crop_output(op, img, v, height, width);
  if (out.numel() > 0) {
    for (int64_t i = 0; i < v.n; ++i) run_crop(img, v, out, i, es, top, left, height, width, 0);
  }
  return out;
}

Tensor random_crop(Tensor img, int64_t height, int64_t width, int64_t seed, StrArg layout, bool pad_if_needed,
                   double fill, bool hflip) {
  constexpr const char* op = "random_crop";
  const int64_t es = image_elem_size(op, img);
  const ImageView v = image_view(op, "img", img, parse_layout(op, layout));
  check_positive(op, "height", height);
  check_positive(op, "width", width);
  FASTPREP_CHECK(pad_if_needed || height <= v.h, op, ": crop height ", height, " is larger than the image height ", v.h,
                 " (pass pad_if_needed=True to pad)");
  FASTPREP_CHECK(pad_if_needed || width <= v.w, op, ": crop width ", width, " is larger than the image width ", v.w,
                 " (pass pad_if_needed=True to pad)");
  const uint32_t fb = fill_bits(op, image_dtype(op, "img", img), fill);
  Tensor out = new_crop_output(op, img, v, height, width);
  if (out.numel() > 0) {
    for (int64_t i = 0; i < v.n; ++i) {
      const int64_t s = v.batched ? kernels::derive_seed(seed, i) : seed;
      const int64_t top =
          kernels::random_crop_offset(kernels::random_word(static_cast<uint64_t>(s), 0), v.h, height, pad_if_needed);
      const int64_t left =
          kernels::random_crop_offset(kernels::random_word(static_cast<uint64_t>(s), 1), v.w, width, pad_if_needed);
      run_crop(img, v, out, i, es, top, left, height, width, fb, hflip);
    }
  }
  return out;
}

}  // namespace fastprep::ops

STABLE_TORCH_LIBRARY_IMPL(fastprep, CPU, m) {
  m.impl("crop", TORCH_BOX(&fastprep::ops::crop));
  m.impl("random_crop", TORCH_BOX(&fastprep::ops::random_crop));
}
