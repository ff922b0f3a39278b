// Bindings of rgb_to_ycbcr / ycbcr_to_rgb (schemas: pyext/fastprep/ops/_color.py).
#include <optional>

#include "kernels/color.h"
#include "ops/alloc.h"
#include "ops/checks.h"
#include "ops/output_args.h"
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
  // Only a uint8 out_dtype fails this, and check_output's dtype check passes it: checked first, it
  // gives the messages in the same order as checked between check_output's dtype and scale checks.
  FASTPREP_CHECK(out_code != dtype_code(ScalarType::Byte) || in == ScalarType::Byte, op,
                 ": out_dtype=torch.uint8 needs a torch.uint8 img, got ", dtype_name(in));
  const OutputType o = check_output(op, out_code, scale);
  const auto odt = static_cast<ScalarType>(out_code);
  std::vector<int64_t> sizes{3, v.h, v.w};
  if (v.batched) sizes.insert(sizes.begin(), v.n);
  const auto source = shape_source("img", img);
  Tensor out = new_output(op, img, sizes, odt, source);
  if (out.numel() == 0) return out;
  const int64_t ies = img.element_size(), oes = out.element_size();
  for (int64_t i = 0; i < v.n; ++i) {
    const kernels::ColorSource src{
        static_cast<const char*>(img.const_data_ptr()) + i * v.sn * ies, v.h, v.w, v.sc, v.sh, v.sw};
    char* dst = static_cast<char*>(out.mutable_data_ptr()) + i * 3 * v.h * v.w * oes;
    kernels::convert_color(src, color_type_code(dtype_code(in)), dst, o.type, forward, o.scale);
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
