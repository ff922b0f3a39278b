// Bindings of rgb_to_ycbcr / ycbcr_to_rgb (schemas: pyext/fastprep/ops/color.py).
#include <optional>

#include "kernels/color.h"
#include "ops/alloc.h"
#include "ops/checks.h"
#include "ops/color_args.h"
#include "ops/views.h"

namespace fastprep::ops {
namespace {

Tensor convert(const char* op, const Tensor& img, const StrArg& layout, std::optional<DtypeArg> out_dtype, double scale,
               bool forward) {
  check_tensor(op, "img", img);
  const ScalarType in = image_dtype(op, "img", img);
  const ImageView v = image_view(op, "img", img, parse_layout(op, layout));
  FASTPREP_CHECK(v.c == 3, op, ": expected img to have 3 channels, got ", v.c);
  const int32_t out_code = out_dtype ? out_dtype->code : dtype_code(in);
  FASTPREP_CHECK(color_type_code(out_code) >= 0, op,
                 ": expected out_dtype to be torch.uint8, torch.float32, "
                 "torch.float16 or torch.bfloat16, got ",
                 dtype_name(out_code));
  const auto odt = static_cast<ScalarType>(out_code);
  FASTPREP_CHECK(odt != ScalarType::Byte || in == ScalarType::Byte, op,
                 ": out_dtype=torch.uint8 needs a torch.uint8 img, got ", dtype_name(in));
  FASTPREP_CHECK(odt != ScalarType::Byte || scale == 1.0, op,
                 ": expected scale=1 for a torch.uint8 output, got scale=", scale);
  check_scale(op, scale);
  std::vector<int64_t> sizes{3, v.h, v.w};
  if (v.batched) sizes.insert(sizes.begin(), v.n);
  const auto source = shape_source("img", img);
  Tensor out = new_output(op, img, sizes, odt, source);
  if (out.numel() == 0) return out;
  const int64_t ies = img.element_size(), oes = out.element_size();
  for (int64_t i = 0; i < v.n; ++i) {
    const kernels::ColorSource src{
        static_cast<const char*>(img.const_data_ptr()) + i * v.sn * ies, v.h, v.w, v.sc, v.sh, v.sw};
    char* o = static_cast<char*>(out.mutable_data_ptr()) + i * 3 * v.h * v.w * oes;
    kernels::convert_color(src, color_type_code(dtype_code(in)), o, color_type_code(out_code), forward,
                           static_cast<float>(scale));
  }
  return out;
}

}  // namespace

Tensor rgb_to_ycbcr(Tensor img, StrArg layout, std::optional<DtypeArg> out_dtype, double scale) {
  return convert("rgb_to_ycbcr", img, layout, out_dtype, scale, true);
}

Tensor ycbcr_to_rgb(Tensor img, StrArg layout, std::optional<DtypeArg> out_dtype, double scale) {
  return convert("ycbcr_to_rgb", img, layout, out_dtype, scale, false);
}

}  // namespace fastprep::ops

STABLE_TORCH_LIBRARY_IMPL(fastprep, CPU, m) {
  m.impl("rgb_to_ycbcr", TORCH_BOX(&fastprep::ops::rgb_to_ycbcr));
  m.impl("ycbcr_to_rgb", TORCH_BOX(&fastprep::ops::ycbcr_to_rgb));
}
