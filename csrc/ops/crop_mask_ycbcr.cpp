// Bindings of crop_mask_ycbcr and its batched form crop_mask_ycbcr_batch (schemas and definitions:
// pyext/fastprep/ops/_crop_mask_ycbcr.py). Both run one sample at a time through run_sample, so a
// batch has the per-sample op's bits by construction: the per-sample op draws its window from its
// seed, the batch op takes each sample's drawn window (top, left, flips, transpose) and mask seed.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
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

// How a sample's window is read: columns right to left (hflip), rows bottom-up (vflip), then its
// rows written as the output's columns (transpose: a quarter turn's, transforms/_fold.py).
struct Flips {
  bool hflip = false, vflip = false, transpose = false;
};

// The window's size in the image: the output's (height x width), or width x height when transposed.
std::pair<int64_t, int64_t> read_size(const Sample& s, bool transpose) {
  return transpose ? std::pair{s.width, s.height} : std::pair{s.height, s.width};
}

// The mask's words [height, words_per_row(width)] transposed into `to` ([width, words_per_row(height)],
// zero-filled first: padding bits stay zero): a bit moves, so the same mask on the transposed read.
void transpose_words(const uint64_t* from, int64_t height, int64_t width, uint64_t* to) {
  const int64_t wpr = kernels::words_per_row(width), twpr = kernels::words_per_row(height);
  std::fill(to, to + width * twpr, uint64_t{0});
  for (int64_t r = 0; r < height; ++r) {
    for (int64_t c = 0; c < width; ++c) {
      const uint64_t bit = (from[r * wpr + c / 64] >> (c % 64)) & 1u;
      to[c * twpr + r / 64] |= bit << (r % 64);
    }
  }
}

// One sample into out ([3, height, width] contiguous) and, when mask_out is given, its packed mask
// ([height, ceil(width / 8)]): the window at (top, left) of the image (checked inside it), the mask
// drawn from `mask_seed`. The mask is made once, as words (scratch), which the kernel applies and
// whose rows are the packed mask's bytes (little-endian words: bit i of a row's bytes is pixel i).
// f.hflip / f.vflip: the window's columns / rows are read right to left / bottom-up (from the
// image's last column / row with that stride negated, as random_crop does); f.transpose: the
// window is width x height, its rows written as out's columns. The mask is drawn in output
// coordinates (the kernel gets it transposed with the read: `turned`).
void run_sample(const Sample& s, const Tensor& img, const ImageView& v, int64_t top, int64_t left, int64_t mask_seed,
                bool apply_mask, Flips f, uint8_t* mask_out, void* out, Scratch& scratch, Scratch& turned) {
  uint64_t* words = nullptr;
  if (apply_mask || mask_out != nullptr) {
    const int64_t wpr = kernels::words_per_row(s.width);  // the mask's byte size fits: checked by the caller
    words = scratch.get(static_cast<size_t>(s.height * wpr));
    kernels::random_dilated_mask_words(mask_seed, s.p, s.height, s.width, s.square, words);
    for (int64_t r = 0; mask_out != nullptr && r < s.height; ++r) {
      kernels::words_to_packed(words + r * wpr, s.width, mask_out + r * bytes_for_bits(s.width));
    }
    if (apply_mask && f.transpose) {
      uint64_t* t = turned.get(static_cast<size_t>(s.width * kernels::words_per_row(s.height)));
      transpose_words(words, s.height, s.width, t);
      words = t;
    }
  }
  const auto [rh, rw] = read_size(s, f.transpose);
  const auto* base = static_cast<const uint8_t*>(img.const_data_ptr());  // v.h >= rh > 0, v.w >= rw > 0
  const kernels::RgbSource src{base + (f.hflip ? (v.w - 1) * v.sw : 0) + (f.vflip ? (v.h - 1) * v.sh : 0), v.sc,
                               f.vflip ? -v.sh : v.sh, f.hflip ? -v.sw : v.sw};
  // In a flipped read the window's columns (rows) are counted from the image's right (bottom) edge.
  kernels::crop_mask_ycbcr(src, f.vflip ? v.h - top - rh : top, f.hflip ? v.w - left - rw : left, rh, rw,
                           apply_mask ? words : nullptr, out, s.out.type, s.out.scale, f.transpose);
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
  Scratch scratch, turned;
  // The seed's window, drawn over the image as the crop sees it (flipped or not: the same sizes),
  // is at the mirrored columns of the image itself when flipped.
  const uint64_t useed = static_cast<uint64_t>(seed);
  const int64_t top = kernels::random_crop_offset(kernels::random_word(useed, 0), v.h, height, false);
  const int64_t drawn_left = kernels::random_crop_offset(kernels::random_word(useed, 1), v.w, width, false);
  run_sample(s, img, v, top, hflip ? v.w - drawn_left - width : drawn_left,
             mask_seed.value_or(kernels::derive_seed(seed, 1)), apply_mask, Flips{hflip, false, false},
             return_mask ? static_cast<uint8_t*>(mask.mutable_data_ptr()) : nullptr, out.mutable_data_ptr(), scratch,
             turned);
  return {out, mask};
}

void crop_mask_ycbcr_batch(std::vector<Tensor> imgs, std::vector<int64_t> tops, std::vector<int64_t> lefts,
                           int64_t height, int64_t width, double p, std::vector<int64_t> mask_seeds, Tensor out,
                           StrArg layout, StrArg structure, double scale, bool apply_mask, std::optional<Tensor> masks,
                           std::optional<std::vector<bool>> hflips, std::optional<std::vector<bool>> vflips,
                           std::optional<std::vector<bool>> transposes) {
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
  if (vflips) check_count(vflips->size(), "vflip", "vflips");
  if (transposes) check_count(transposes->size(), "transpose", "transposes");
  const auto flips_of = [&](size_t k) {
    return Flips{hflips && (*hflips)[k], vflips && (*vflips)[k], transposes && (*transposes)[k]};
  };
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
    const auto [rh, rw] = read_size(s, flips_of(k).transpose);  // a transposed sample reads width x height
    check_fits(op, views.back(), rh, rw);
    check_window_at(op, i, views.back(), tops[k], lefts[k], rh, rw);
    check_no_overlap(op, "out", out, arg.c_str(), img);
    if (masks) check_no_overlap(op, "masks", *masks, arg.c_str(), img);
  }
  if (masks) check_outputs_apart(op, "out", out, "masks", *masks);
  if (n == 0) return;  // out may then be [0, 3, height, width] with sizes whose product overflows
  // out and masks exist with these shapes, so their per-sample sizes fit int64.
  const int64_t image_bytes = 3 * height * width * dtype_size(odt), mask_bytes = height * bytes_for_bits(width);
  Scratch scratch, turned;
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    uint8_t* mask_out = masks ? static_cast<uint8_t*>(masks->mutable_data_ptr()) + i * mask_bytes : nullptr;
    run_sample(s, imgs[k], views[k], tops[k], lefts[k], mask_seeds[k], apply_mask, flips_of(k), mask_out,
               static_cast<char*>(out.mutable_data_ptr()) + i * image_bytes, scratch, turned);
  }
}

}  // namespace fastprep::ops

STABLE_TORCH_LIBRARY_IMPL(fastprep, CPU, m) {
  m.impl("crop_mask_ycbcr", TORCH_BOX(&fastprep::ops::crop_mask_ycbcr));
  m.impl("crop_mask_ycbcr_batch", TORCH_BOX(&fastprep::ops::crop_mask_ycbcr_batch));
}
