// How the bindings see a tensor's memory: an image as [N, C, H, W] sizes and strides whatever its
// layout, or a contiguous tensor as [outer, n, inner] around one dim. No copies.
#pragma once

#include <torch/csrc/stable/tensor.h>

#include <vector>

#include "ops/checks.h"

namespace fastprep::ops {

// An image or batch of images as [N, C, H, W] sizes and element strides, whatever its layout and
// strides (no copy): kernels read HWC or strided views directly.
struct ImageView {
  int64_t n = 1, c = 1, h = 1, w = 1;
  int64_t sn = 0, sc = 0, sh = 0, sw = 0;
  bool batched = false;
};

inline ImageView image_view(const char* op, const char* arg, const Tensor& t, bool hwc) {
  FASTPREP_CHECK(t.dim() == 3 || t.dim() == 4, op, ": expected ", arg, " to be a 3-D ", hwc ? "[H, W, C]" : "[C, H, W]",
                 " image or a 4-D batch of them, got a ", t.dim(), "-D tensor");
  ImageView v;
  v.batched = t.dim() == 4;
  const int64_t b = v.batched ? 1 : 0;
  if (v.batched) {
    v.n = t.size(0);
    v.sn = t.stride(0);
  }
  const int64_t ic = hwc ? b + 2 : b, ih = hwc ? b : b + 1, iw = hwc ? b + 1 : b + 2;
  v.c = t.size(ic), v.h = t.size(ih), v.w = t.size(iw);
  v.sc = t.stride(ic), v.sh = t.stride(ih), v.sw = t.stride(iw);
  return v;
}

// The [outer, n, inner] view of a contiguous tensor around dim.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

inline AxisView axis_view(const Tensor& t, int64_t dim) {
  AxisView v;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d < dim)
      v.outer *= t.size(d);
    else if (d == dim)
      v.n = t.size(d);
    else
      v.inner *= t.size(d);
  }
  return v;
}

inline std::vector<int64_t> sizes_of(const Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

inline std::vector<int64_t> sizes_with(const Tensor& t, int64_t dim, int64_t size) {
  std::vector<int64_t> s(t.sizes().begin(), t.sizes().end());
  s[static_cast<size_t>(dim)] = size;
  return s;
}

// ceil(bits / 8) for bits >= 0: (bits + 7) / 8 would overflow for sizes near INT64_MAX, which
// arguments and stride-0 views can carry.
inline int64_t bytes_for_bits(int64_t bits) { return bits / 8 + (bits % 8 != 0 ? 1 : 0); }

}  // namespace fastprep::ops
