// Bindings of mask_fill / mask_fill_ (schemas: pyext/fastprep/ops/_mask_fill.py).
#include <cmath>
#include <cstring>
#include <string>

#include "kernels/mask_fill.h"
#include "ops/alloc.h"
#include "ops/checks.h"
#include "ops/overlap.h"
#include "ops/views.h"

namespace fastprep::ops {
namespace {

// Largest finite value of each float dtype: larger finite values would overflow to inf.
void check_value(const char* op, double value, ScalarType t) {
  if (t == ScalarType::Byte) {
    FASTPREP_CHECK(value >= 0 && value <= 255 && value == static_cast<double>(static_cast<int>(value)), op,
                   ": value=", value, " is not representable in torch.uint8 (expected an integer in [0, 255])");
    return;
  }
  const double max = largest_finite(t);
  FASTPREP_CHECK(!std::isfinite(value) || std::abs(value) <= max, op, ": value=", value, " is not representable in ",
                 dtype_name(t), " (largest finite value ", max, ")");
}

// `value` as one element of dtype t, in torch's own conversion (torch::stable::full), as bits. That
// is a dispatcher call, ~1 us of a small fill; a fill value rarely changes between calls, so the
// last conversion is kept per thread, keyed by the double's bits (0.0 and -0.0 differ) and dtype.
uint32_t value_bits(double value, ScalarType t) {
  struct Last {
    uint64_t value = 0;
    int32_t dtype = -1;
    uint32_t bits = 0;
  };
  thread_local Last last;
  uint64_t key = 0;
  std::memcpy(&key, &value, sizeof key);
  if (last.dtype == dtype_code(t) && last.value == key) return last.bits;
  const std::vector<int64_t> one{1};
  const Tensor cell = torch::stable::full(torch::headeronly::IntHeaderOnlyArrayRef(one.data(), 1), value, t);
  uint32_t bits = 0;
  std::memcpy(&bits, cell.const_data_ptr(), static_cast<size_t>(cell.element_size()));
  last = Last{key, dtype_code(t), bits};
  return bits;
}

struct Prepared {
  kernels::FillView view;
  Tensor mask;
  int64_t mask_n;
  bool packed;
  uint32_t value_bits;
};

Prepared prepare(const char* op, const Tensor& img, const Tensor& mask, double value, const StrArg& layout) {
  check_tensor(op, "img", img);
  check_tensor(op, "mask", mask);
  const bool hwc = parse_layout(op, layout);
  const ScalarType t = image_dtype(op, "img", img);
  const ImageView v = image_view(op, "img", img, hwc);
  FASTPREP_CHECK(is_dtype(mask, ScalarType::Bool) || is_dtype(mask, ScalarType::Byte), op,
                 ": expected mask to be a torch.bool tensor or a packed torch.uint8 one, got ",
                 dtype_name(dtype_code(mask)));
  const bool packed = is_dtype(mask, ScalarType::Byte);
  const int64_t last = packed ? bytes_for_bits(v.w) : v.w;
  const std::vector<int64_t> got(mask.sizes().begin(), mask.sizes().end());
  const bool ok2 = got == std::vector<int64_t>{v.h, last};
  const bool ok3 = v.batched && got == std::vector<int64_t>{v.n, v.h, last};
  FASTPREP_CHECK(ok2 || ok3, op, ": expected mask to have shape ", shape_str({v.h, last}),
                 v.batched ? " or " + shape_str({v.n, v.h, last}) : std::string(), " to match img",
                 packed ? " (packed)" : "", ", got ", shape_str(got));
  check_value(op, value, t);
  if (std::strcmp(op, "mask_fill") == 0) {  // the out-of-place op allocates an image-sized output
    check_output_bytes(op, sizes_of(img), t, shape_source("img", img));
  } else {  // the in-place op writes img: as torch's masked_fill_, no element twice, mask not in it
    check_no_internal_overlap(op, "img", img);
    check_no_overlap(op, "img", img, "mask", mask);
  }
  const kernels::FillView fv{v.n, v.c, v.h, v.w, v.sn, v.sc, v.sh, v.sw};
  return Prepared{fv, contiguous_input(op, "mask", mask), ok3 ? v.n : 1, packed, value_bits(value, t)};
}

void run(const Tensor& src, const Prepared& ps, const Tensor& dst, const Prepared& pd) {
  if (dst.numel() == 0) return;
  kernels::mask_fill(src.const_data_ptr(), ps.view, dst.mutable_data_ptr(), pd.view,
                     static_cast<int>(dst.element_size()), static_cast<const uint8_t*>(pd.mask.const_data_ptr()),
                     pd.mask_n, pd.packed, pd.value_bits);
}

}  // namespace

Tensor mask_fill(Tensor img, Tensor mask, double value, StrArg layout) {
  constexpr const char* op = "mask_fill";
  const Prepared ps = prepare(op, img, mask, value, layout);
  Tensor out = new_output(op, img, sizes_of(img), image_dtype(op, "img", img), shape_source("img", img));
  Prepared pd = ps;
  const ImageView ov = image_view(op, "img", out, layout.value == "HWC");
  pd.view = kernels::FillView{ov.n, ov.c, ov.h, ov.w, ov.sn, ov.sc, ov.sh, ov.sw};
  run(img, ps, out, pd);
  return out;
}

// Returns nothing (schema `-> ()`): see ops/_mask_fill.py.
void mask_fill_(Tensor img, Tensor mask, double value, StrArg layout) {
  const Prepared p = prepare("mask_fill_", img, mask, value, layout);
  run(img, p, img, p);
}

}  // namespace fastprep::ops

STABLE_TORCH_LIBRARY_IMPL(fastprep, CPU, m) {
  m.impl("mask_fill", TORCH_BOX(&fastprep::ops::mask_fill));
  m.impl("mask_fill_", TORCH_BOX(&fastprep::ops::mask_fill_));
}
