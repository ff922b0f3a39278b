// Bindings of resized_crop and its batched form resized_crop_batch (schemas and definitions:
// pyext/fastprep/ops/_resize.py); the batch's per-image geometry is one int64 table (GeometryColumn).
// Both run one image at a time through run_image, so a batch has
// the per-sample op's bits by construction. An image's output is the sub-rectangle at (out_top,
// out_left) of its window resized to (resized_height, resized_width) (0: the output's size), so
// Resize then CenterCrop is one pass.
#include <cmath>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "kernels/resize.h"
#include "ops/alloc.h"
#include "ops/checks.h"
#include "ops/output_args.h"
#include "ops/overlap.h"
#include "ops/views.h"

namespace fastprep::ops {
namespace {

// The batched op's geometry table: one int64 row per image, these columns in this order (the
// names are pyext/fastprep/ops/_resize_checks.py's GEOMETRY_COLUMNS: tests/ops/test_resize_table.py
// checks both agree through the column-count message below).
enum GeometryColumn : int64_t {
  kTop,
  kLeft,
  kHeight,
  kWidth,
  kHflip,
  kVflip,
  kResizedHeight,
  kResizedWidth,
  kOutTop,
  kOutLeft,
  kTranspose,
  kColumns
};
constexpr const char* kColumnNames[kColumns] = {"top",     "left",     "height",         "width",
                                                "hflip",   "vflip",    "resized_height", "resized_width",
                                                "out_top", "out_left", "transpose"};

// The window of one image and what its arguments are called in messages: `prefix` + "top" ("top",
// or "geometry[1].top" in a batch), the image as "the image" or "imgs[1]".
struct Window {
  int64_t top, left, height, width;
  std::string prefix, image;  // "" or "geometry[1]."; the image's name
};

// Where an image's output lies in its resized window: rows [top, top + out_h) and columns
// [left, left + out_w) of the window resized to height x width.
struct Placement {
  int64_t height, width, top, left;
  bool vflip;
};

constexpr int64_t kMaxResized = int64_t{1} << 24;

// The placement of an out_h x out_w output from the op's arguments (named `prefix` + "resized_height",
// ...; the output's sizes `oh`, `ow`); a resized size of 0 is the output's.
Placement check_placement(const char* op, int64_t resized_h, int64_t resized_w, int64_t top, int64_t left,
                          int64_t out_h, int64_t out_w, bool vflip, const std::string& prefix, const char* oh,
                          const char* ow) {
  const std::string rh = prefix + "resized_height", rw = prefix + "resized_width";
  const std::string ot = prefix + "out_top", ol = prefix + "out_left";
  FASTPREP_CHECK(resized_h >= 0, op, ": expected ", rh, " >= 0 (0: the output's), got ", rh, "=", resized_h);
  FASTPREP_CHECK(resized_w >= 0, op, ": expected ", rw, " >= 0 (0: the output's), got ", rw, "=", resized_w);
  // The resize's weight tables are computed whole (their precision is the whole table's).
  FASTPREP_CHECK(resized_h <= kMaxResized, op, ": expected ", rh, " <= ", kMaxResized,
                 " (the resize's weights are computed for every row), got ", rh, "=", resized_h);
  FASTPREP_CHECK(resized_w <= kMaxResized, op, ": expected ", rw, " <= ", kMaxResized,
                 " (the resize's weights are computed for every column), got ", rw, "=", resized_w);
  FASTPREP_CHECK(top >= 0, op, ": expected ", ot, " >= 0, got ", ot, "=", top);
  FASTPREP_CHECK(left >= 0, op, ": expected ", ol, " >= 0, got ", ol, "=", left);
  const Placement p{resized_h == 0 ? out_h : resized_h, resized_w == 0 ? out_w : resized_w, top, left, vflip};
  FASTPREP_CHECK(sum_at_most(top, out_h, p.height), op, ": expected ", ot, " + ", oh, " <= ", rh, " (", p.height,
                 "), got ", ot, "=", top, ", ", oh, "=", out_h);
  FASTPREP_CHECK(sum_at_most(left, out_w, p.width), op, ": expected ", ol, " + ", ow, " <= ", rw, " (", p.width,
                 "), got ", ol, "=", left, ", ", ow, "=", out_w);
  return p;
}

void check_window(const char* op, const Window& w, const ImageView& v) {
  const std::string top = w.prefix + "top", left = w.prefix + "left";
  const std::string height = w.prefix + "height", width = w.prefix + "width";
  FASTPREP_CHECK(w.height > 0, op, ": expected ", height, " > 0, got ", height, "=", w.height);
  FASTPREP_CHECK(w.width > 0, op, ": expected ", width, " > 0, got ", width, "=", w.width);
  FASTPREP_CHECK(w.top >= 0, op, ": expected ", top, " >= 0, got ", top, "=", w.top);
  FASTPREP_CHECK(w.left >= 0, op, ": expected ", left, " >= 0, got ", left, "=", w.left);
  FASTPREP_CHECK(sum_at_most(w.top, w.height, v.h), op, ": expected ", top, " + ", height, " <= ", v.h,
                 " (the height of ", w.image, "), got ", top, "=", w.top, ", ", height, "=", w.height);
  FASTPREP_CHECK(sum_at_most(w.left, w.width, v.w), op, ": expected ", left, " + ", width, " <= ", v.w,
                 " (the width of ", w.image, "), got ", left, "=", w.left, ", ", width, "=", w.width);
}

// mean or std as c float32 values (one given value serves every channel); std must not be 0.
std::vector<float> per_channel(const char* op, const char* arg, const std::vector<double>& values, int64_t c,
                               bool nonzero) {
  const int64_t n = static_cast<int64_t>(values.size());
  FASTPREP_CHECK(n == 1 || n == c, op, ": expected ", arg, " to have 1 or ", c, " values (one per channel), got ", n);
  std::vector<float> out;
  for (int64_t i = 0; i < c; ++i) {
    const double x = values[static_cast<size_t>(n == 1 ? 0 : i)];
    const std::string name = std::string(arg) + "[" + std::to_string(n == 1 ? 0 : i) + "]";
    FASTPREP_CHECK(std::isfinite(x) && std::abs(x) <= 3.4028234663852886e38, op, ": expected ", name,
                   " to be a finite float32 value, got ", name, "=", x);
    FASTPREP_CHECK(!nonzero || static_cast<float>(x) != 0.0f, op, ": expected ", name,
                   " to be nonzero in float32 (Normalize divides by it), got ", name, "=", x);
    out.push_back(static_cast<float>(x));
  }
  return out;
}

// What every image's output shares: its type, scale and normalisation (kernels/resize.h).
struct OutputArgs {
  OutputType out;
  std::vector<float> mean, std;
};

// check_output's checks, then the normalisation's. A uint8 output passes check_output only with
// scale=1, so its mean/std check comes after check_output's scale checks with the same messages
// whichever arguments are bad.
OutputArgs check_output_args(const char* op, int32_t out_code, double scale,
                             const std::optional<std::vector<double>>& mean,
                             const std::optional<std::vector<double>>& std, int64_t c) {
  OutputArgs a{check_output(op, out_code, scale), {}, {}};
  FASTPREP_CHECK(a.out.type != kernels::kU8 || (!mean && !std), op,
                 ": expected mean=None and std=None for a torch.uint8 output (Normalize needs a float output)");
  FASTPREP_CHECK(mean.has_value() == std.has_value(), op, ": expected mean and std together, got only ",
                 mean ? "mean" : "std");
  if (mean) {
    a.mean = per_channel(op, "mean", *mean, c, false);
    a.std = per_channel(op, "std", *std, c, true);
  }
  return a;
}

// Image i of `img` (its view v), window w, placed at p, into `out` (its [c, out_h, out_w] bytes).
void run_image(const char* op, const Tensor& img, const ImageView& v, int64_t i, const Window& w, const Placement& p,
               int64_t out_h, int64_t out_w, bool hflip, bool transpose, bool antialias, const OutputArgs& a, void* out,
               kernels::ResizeScratch& scratch) {
  const auto* base = static_cast<const uint8_t*>(img.const_data_ptr()) + i * v.sn;
  const kernels::ResizeOutput o{out,
                                a.out.type,
                                a.out.scale,
                                a.mean.empty() ? nullptr : a.mean.data(),
                                a.std.empty() ? nullptr : a.std.data(),
                                p.vflip,
                                transpose};
  try {
    // Only the rows and columns the outputs read; the tables of the previous image when they are its.
    const kernels::NarrowedAxis& rows = scratch.rows.get(w.height, p.height, antialias, false, p.top, out_h);
    const kernels::NarrowedAxis& cols = scratch.cols.get(w.width, p.width, antialias, hflip, p.left, out_w);
    const int64_t top = w.top + rows.first, left = w.left + cols.first;
    const kernels::ResizeSource src{base + top * v.sh + left * v.sw, v.c, rows.extent, cols.extent, v.sc, v.sh, v.sw};
    kernels::resized_crop(src, rows.table, cols.table, o, scratch);
  } catch (const std::bad_alloc&) {  // a window or output size past this machine's memory
    fail(op, ": could not allocate the resampling buffers for ", w.image, " (window ", w.height, "x", w.width, " -> ",
         p.height, "x", p.width, ")");
  }
}

}  // namespace

Tensor resized_crop(Tensor img, int64_t top, int64_t left, int64_t height, int64_t width, int64_t out_height,
                    int64_t out_width, StrArg layout, bool hflip, bool antialias, std::optional<DtypeArg> out_dtype,
                    double scale, std::optional<std::vector<double>> mean, std::optional<std::vector<double>> std,
                    bool vflip, int64_t resized_height, int64_t resized_width, int64_t out_top, int64_t out_left) {
  constexpr const char* op = "resized_crop";
  check_tensor(op, "img", img);
  check_dtype(op, "img", img, ScalarType::Byte);
  const ImageView v = image_view(op, "img", img, parse_layout(op, layout));
  const Window w{top, left, height, width, "", "the image"};
  check_window(op, w, v);
  FASTPREP_CHECK(out_height > 0, op, ": expected out_height > 0, got out_height=", out_height);
  FASTPREP_CHECK(out_width > 0, op, ": expected out_width > 0, got out_width=", out_width);
  const int32_t out_code = out_dtype ? out_dtype->code : dtype_code(ScalarType::Byte);
  const OutputArgs a = check_output_args(op, out_code, scale, mean, std, v.c);
  const Placement p = check_placement(op, resized_height, resized_width, out_top, out_left, out_height, out_width,
                                      vflip, "", "out_height", "out_width");
  std::vector<int64_t> sizes{v.c, out_height, out_width};
  if (v.batched) sizes.insert(sizes.begin(), v.n);
  const auto source = [&] {
    return "out_height=" + std::to_string(out_height) + ", out_width=" + std::to_string(out_width);
  };
  Tensor out = new_output(op, img, sizes, static_cast<ScalarType>(out_code), source);
  if (out.numel() == 0) return out;
  const int64_t image_bytes = v.c * out_height * out_width * out.element_size();  // fits: out exists
  kernels::ResizeScratch scratch;
  for (int64_t i = 0; i < v.n; ++i) {
    run_image(op, img, v, i, w, p, out_height, out_width, hflip, false, antialias, a,
              static_cast<char*>(out.mutable_data_ptr()) + i * image_bytes, scratch);
  }
  return out;
}

// Column `col` of row i of the geometry table, a flip column's value checked to be 0 or 1.
int64_t flip_value(const char* op, const int64_t* row, int64_t i, int64_t col) {
  const int64_t v = row[col];
  FASTPREP_CHECK(v == 0 || v == 1, op, ": expected geometry[", i, "].", kColumnNames[col],
                 " to be 0 or 1, got geometry[", i, "].", kColumnNames[col], "=", v);
  return v;
}

void resized_crop_batch(std::vector<Tensor> imgs, Tensor geometry, Tensor out, StrArg layout, bool antialias,
                        double scale, std::optional<std::vector<double>> mean, std::optional<std::vector<double>> std) {
  constexpr const char* op = "resized_crop_batch";
  check_tensor(op, "out", out);
  const bool hwc = parse_layout(op, layout);
  const ScalarType odt = image_dtype(op, "out", out);
  const int64_t n = static_cast<int64_t>(imgs.size());
  FASTPREP_CHECK(out.dim() == 4 && out.is_contiguous() && out.size(0) == n, op, ": expected out to be a contiguous [",
                 n, ", C, out_height, out_width] tensor (one image per input), got ", shape_str(sizes_of(out)),
                 out.is_contiguous() ? "" : " (not contiguous)");
  const int64_t c = out.size(1), out_h = out.size(2), out_w = out.size(3);
  FASTPREP_CHECK(out_h > 0 && out_w > 0, op, ": expected out's height and width > 0, got out of shape ",
                 shape_str(sizes_of(out)));
  check_tensor(op, "geometry", geometry);
  check_dtype(op, "geometry", geometry, ScalarType::Long);
  std::string columns;
  for (const char* name : kColumnNames) columns += std::string(columns.empty() ? "" : ", ") + name;
  FASTPREP_CHECK(geometry.dim() == 2 && geometry.size(0) == n && geometry.size(1) == kColumns, op,
                 ": expected geometry to be a [", n, ", ", static_cast<int64_t>(kColumns),
                 "] table (one row per image; ", "columns ", columns, "), got ", shape_str(sizes_of(geometry)));
  const Tensor table = contiguous_input(op, "geometry", geometry);
  const auto* rows = static_cast<const int64_t*>(table.const_data_ptr());
  const OutputArgs a = check_output_args(op, dtype_code(odt), scale, mean, std, c);
  // Every image is checked before the first is written: a bad one leaves out untouched.
  std::vector<ImageView> views;
  std::vector<Window> windows;
  std::vector<Placement> placements;
  std::vector<bool> hflips, transposes;
  for (int64_t i = 0; i < n; ++i) {
    const size_t k = static_cast<size_t>(i);
    const int64_t* row = rows + i * kColumns;
    const std::string arg = "imgs[" + std::to_string(i) + "]", prefix = "geometry[" + std::to_string(i) + "].";
    check_tensor(op, arg.c_str(), imgs[k]);
    check_dtype(op, arg.c_str(), imgs[k], ScalarType::Byte);
    FASTPREP_CHECK(imgs[k].dim() == 3, op, ": expected ", arg, " to be a 3-D ", hwc ? "[H, W, C]" : "[C, H, W]",
                   " image, got a ", imgs[k].dim(), "-D tensor");
    views.push_back(image_view(op, arg.c_str(), imgs[k], hwc));
    FASTPREP_CHECK(views.back().c == c, op, ": expected ", arg, " to have ", c, " channels (as out), got ",
                   views.back().c);
    check_no_overlap(op, "out", out, arg.c_str(), imgs[k]);
    windows.push_back(Window{row[kTop], row[kLeft], row[kHeight], row[kWidth], prefix, arg});
    check_window(op, windows.back(), views.back());
    hflips.push_back(flip_value(op, row, i, kHflip) != 0);
    const bool vflip = flip_value(op, row, i, kVflip) != 0;
    // A transposed image is resized and placed as out_w x out_h, then written as out's out_h x out_w.
    const bool turned = flip_value(op, row, i, kTranspose) != 0;
    transposes.push_back(turned);
    placements.push_back(check_placement(op, row[kResizedHeight], row[kResizedWidth], row[kOutTop], row[kOutLeft],
                                         turned ? out_w : out_h, turned ? out_h : out_w, vflip, prefix,
                                         turned ? "out's width (transposed)" : "out's height",
                                         turned ? "out's height (transposed)" : "out's width"));
  }
  const int64_t image_bytes = c * out_h * out_w * out.element_size();  // fits: out exists
  kernels::ResizeScratch scratch;
  for (int64_t i = 0; i < n && image_bytes > 0; ++i) {
    const size_t k = static_cast<size_t>(i);
    const bool turned = transposes[k];
    run_image(op, imgs[k], views[k], 0, windows[k], placements[k], turned ? out_w : out_h, turned ? out_h : out_w,
              hflips[k], turned, antialias, a, static_cast<char*>(out.mutable_data_ptr()) + i * image_bytes, scratch);
  }
}

}  // namespace fastprep::ops

STABLE_TORCH_LIBRARY_IMPL(fastprep, CPU, m) {
  m.impl("resized_crop", TORCH_BOX(&fastprep::ops::resized_crop));
  m.impl("resized_crop_batch", TORCH_BOX(&fastprep::ops::resized_crop_batch));
}
