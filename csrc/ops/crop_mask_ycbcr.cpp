// Bindings of crop_mask_ycbcr and its batched form crop_mask_ycbcr_batch (schemas and definitions:
// pyext/fastprep/ops/crop_mask_ycbcr.py). Both run one sample at a time through run_sample, so a
// batch has the per-sample op's bits by construction: the per-sample op draws its window from its
// seed, the batch op takes each sample's drawn window (top, left, flip) and mask seed.
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/crop.h"
#include "kernels/crop_mask_ycbcr.h"
#include "kernels/dilate.h"
#include "kernels/random_mask.h"
#include "ops/alloc.h"
#include "ops/checks.h"
#include "ops/output_args.h"
#include "ops/overlap.h"
#include "ops/views.h"

namespace fastprep::ops {
namespace {

// Mask words that grow without being zero-filled (std::vector::resize writes every element first)
// and serve every sample of a batch: the kernel overwrites them at once.
class Scratch {
 public:
  uint64_t* get(size_t n) {
    if (n > size_) {
      data_.reset(new uint64_t[n]);
      size_ = n;
    }
    return data_.get();
  }

 private:
  std::unique_ptr<uint64_t[]> data_;
  size_t size_ = 0;
};

void check_crop_size(const char* op, int64_t height, int64_t width) {
  FASTPREP_CHECK(height > 0 && width > 0, op, ": expected a positive crop size, got height=", height, " width=", width);
}

struct Sample {
  int64_t height, width;
  double p;
  bool square;
  OutputType out;
};

// What every sample shares, checked (the crop size is checked before, with the image).
Sample check_shared(const char* op, int64_t height, int64_t width, double p, const StrArg& structure, int32_t out_code,
                    double scale) {
  FASTPREP_CHECK(p >= 0.0 && p <= 1.0, op, ": expected 0 <= p <= 1, got p=", p);  // NaN fails too
  const bool square = parse_structure(op, structure);
  return Sample{height, width, p, square, check_output(op, out_code, scale)};
}

// One source image (`arg` names it in messages): uint8, 3-D, 3 channels.
ImageView check_image(const char* op, const char* arg, const Tensor& img, bool hwc) {
  check_tensor(op, arg, img);
  check_dtype(op, arg, img, ScalarType::Byte);
  FASTPREP_CHECK(img.dim() == 3, op, ": expected ", arg, " to be a 3-D ", hwc ? "[H, W, C]" : "[C, H, W]",
                 " image, got a ", img.dim(), "-D tensor");
  const ImageView v = image_view(op, arg, img, hwc);
  FASTPREP_CHECK(v.c == 3, op, ": expected ", arg, " to have 3 channels, got ", v.c);
  return v;
}

void check_fits(const char* op, const ImageView& v, int64_t height, int64_t width) {
  FASTPREP_CHECK(height <= v.h && width <= v.w, op, ": crop ", height, "x", width, " is larger than the image ", v.h,
                 "x", v.w);
}

// One sample into out ([3, height, width] contiguous) and, when mask_out is given, its packed mask
// ([height, ceil(width / 8)]): the window at (top, left) of the image (checked inside it), the mask
// drawn from `mask_seed`. The mask is made once, as words (scratch), which the kernel applies and
// whose rows are the packed mask's bytes (little-endian words: bit i of a row's bytes is pixel i).
// hflip: the window's columns are read right to left (from the image's last column with the
// column stride negated, as random_crop does); the mask stays in output coordinates.
void run_sample(const Sample& s, const Tensor& img, const ImageView& v, int64_t top, int64_t left, int64_t mask_seed,
                bool apply_mask, bool hflip, uint8_t* mask_out, void* out, Scratch& scratch) {
  uint64_t* words = nullptr;
  if (apply_mask || mask_out != nullptr) {
    const int64_t wpr = kernels::words_per_row(s.width);  // the mask's byte size fits: checked by the caller
    words = scratch.get(static_cast<size_t>(s.height * wpr));
    kernels::random_dilated_mask_words(mask_seed, s.p, s.height, s.width, s.square, words);
    for (int64_t r = 0; mask_out != nullptr && r < s.height; ++r) {
      kernels::words_to_packed(words + r * wpr, s.width, mask_out + r * bytes_for_bits(s.width));
    }
  }
  const auto* base = static_cast<const uint8_t*>(img.const_data_ptr());  // v.w >= s.width > 0
  const kernels::RgbSource src{hflip ? base + (v.w - 1) * v.sw : base, v.sc, v.sh, hflip ? -v.sw : v.sw};
  // In the flipped read the window's columns are counted from the image's right edge.
  kernels::crop_mask_ycbcr(src, top, hflip ? v.w - left - s.width : left, s.height, s.width,
                           apply_mask ? words : nullptr, out, s.out.type, s.out.scale);
}

// Where crop_mask_ycbcr_batch reads sample `i`: tops[i] / lefts[i] place the window in imgs[i].
void check_window_at(const char* op, int64_t i, const ImageView& v, int64_t top, int64_t left, int64_t height,
                     int64_t width) {
  FASTPREP_CHECK(top >= 0 && top <= v.h - height, op, ": expected tops[", i, "] in [0, ", v.h - height, "] (imgs[", i,
                 "] is ", v.h, "x", v.w, ", the crop ", height, "x", width, "), got ", top);
  FASTPREP_CHECK(left >= 0 && left <= v.w - width, op, ": expected lefts[", i, "] in [0, ", v.w - width, "] (imgs[", i,
                 "] is ", v.h, "x", v.w, ", the crop ", height, "x", width, "), got ", left);
}

// An output argument the caller provides: dtype, contiguity and exact shape.
void check_out(const char* op, const char* arg, const Tensor& t, const std::vector<int64_t>& want) {
  FASTPREP_CHECK(t.is_contiguous() && sizes_of(t) == want, op, ": expected ", arg, " to be a contiguous ",
                 shape_str(want), " tensor, got ", shape_str(sizes_of(t)),
                 t.is_contiguous() ? "" : " (not contiguous)");
}

}  // namespace

std::tuple<Tensor, Tensor> crop_mask_ycbcr(Tensor img, int64_t height, int64_t width, double p, int64_t seed,
                                           StrArg layout, StrArg structure, std::optional<DtypeArg> out_dtype,
                                           double scale, bool apply_mask, bool return_mask,
                                           std::optional<int64_t> mask_seed, bool hflip) {
  constexpr const char* op = "crop_mask_ycbcr";
  check_tensor(op, "img", img);
  check_dtype(op, "img", img, ScalarType::Byte);
  const bool hwc = parse_layout(op, layout);
  const ImageView v = check_image(op, "img", img, hwc);
  check_crop_size(op, height, width);
  check_fits(op, v, height, width);
  const int32_t out_code = out_dtype ? out_dtype->code : dtype_code(ScalarType::Byte);
  const Sample s = check_shared(op, height, width, p, structure, out_code, scale);
  const auto odt = static_cast<ScalarType>(out_code);
  const std::vector<int64_t> sizes{3, height, width};
  const auto source = [&] { return "height=" + std::to_string(height) + ", width=" + std::to_string(width); };
  // The image first, the largest allocation: if anything cannot be allocated, it is this.
  Tensor out = new_output(op, img, sizes, odt, source);
  const std::vector<int64_t> mask_sizes{height, bytes_for_bits(width)};
  Tensor mask = new_output(op, img, return_mask ? mask_sizes : std::vector<int64_t>{0}, ScalarType::Byte, source);
  Scratch scratch;
  // The seed's window, drawn over the image as the crop sees it (flipped or not: the same sizes),
  // is at the mirrored columns of the image itself when flipped.
  const uint64_t useed = static_cast<uint64_t>(seed);
  const int64_t top = kernels::random_crop_offset(kernels::random_word(useed, 0), v.h, height, false);
  const int64_t drawn_left = kernels::random_crop_offset(kernels::random_word(useed, 1), v.w, width, false);
  run_sample(s, img, v, top, hflip ? v.w - drawn_left - width : drawn_left,
             mask_seed.value_or(kernels::derive_seed(seed, 1)), apply_mask, hflip,
             return_mask ? static_cast<uint8_t*>(mask.mutable_data_ptr()) : nullptr, out.mutable_data_ptr(), scratch);
  return {out, mask};
}

void crop_mask_ycbcr_batch(std::vector<Tensor> imgs, std::vector<int64_t> tops, std::vector<int64_t> lefts,
                           int64_t height, int64_t width, double p, std::vector<int64_t> mask_seeds, Tensor out,
                           StrArg layout, StrArg structure, double scale, bool apply_mask, std::optional<Tensor> masks,
                           std::optional<std::vector<bool>> hflips) {
  constexpr const char* op = "crop_mask_ycbcr_batch";
  check_tensor(op, "out", out);
  const bool hwc = parse_layout(op, layout);
  const ScalarType odt = image_dtype(op, "out", out);
  check_crop_size(op, height, width);
  const Sample s = check_shared(op, height, width, p, structure, dtype_code(odt), scale);
  const int64_t n = static_cast<int64_t>(imgs.size());
  const auto check_count = [&](size_t got, const char* one, const char* arg) {
    FASTPREP_CHECK(static_cast<int64_t>(got) == n, op, ": expected one ", one, " per image (", n, "), got ", got, " ",
                   arg);
  };
  check_count(tops.size(), "top", "tops");
  check_count(lefts.size(), "left", "lefts");
  check_count(mask_seeds.size(), "mask seed", "mask_seeds");
  if (hflips) check_count(hflips->size(), "hflip", "hflips");
  check_out(op, "out", out, {n, 3, height, width});
  if (masks) {
    check_dtype(op, "masks", *masks, ScalarType::Byte);
    check_out(op, "masks", *masks, {n, height, bytes_for_bits(width)});
  }
  // Every image and window is checked before the first is written: a bad one leaves out
  // untouched. Nothing the op reads may share memory with what it writes.
  std::vector<ImageView> views;
  views.reserve(imgs.size());
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    const std::string arg = "imgs[" + std::to_string(i) + "]";
    const Tensor& img = imgs[k];
    views.push_back(check_image(op, arg.c_str(), img, hwc));
    check_fits(op, views.back(), height, width);
    check_window_at(op, i, views.back(), tops[k], lefts[k], height, width);
    check_no_overlap(op, "out", out, arg.c_str(), img);
    if (masks) check_no_overlap(op, "masks", *masks, arg.c_str(), img);
  }
  if (masks) check_outputs_apart(op, "out", out, "masks", *masks);
  if (n == 0) return;  // out may then be [0, 3, height, width] with sizes whose product overflows
  // out and masks exist with these shapes, so their per-sample sizes fit int64.
  const int64_t image_bytes = 3 * height * width * dtype_size(odt), mask_bytes = height * bytes_for_bits(width);
  Scratch scratch;
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    uint8_t* mask_out = masks ? static_cast<uint8_t*>(masks->mutable_data_ptr()) + i * mask_bytes : nullptr;
    run_sample(s, imgs[k], views[k], tops[k], lefts[k], mask_seeds[k], apply_mask, hflips && (*hflips)[k], mask_out,
               static_cast<char*>(out.mutable_data_ptr()) + i * image_bytes, scratch);
  }
}

}  // namespace fastprep::ops

STABLE_TORCH_LIBRARY_IMPL(fastprep, CPU, m) {
  m.impl("crop_mask_ycbcr", TORCH_BOX(&fastprep::ops::crop_mask_ycbcr));
  m.impl("crop_mask_ycbcr_batch", TORCH_BOX(&fastprep::ops::crop_mask_ycbcr_batch));
}
