// The output arguments of the ops that write uint8 or float images (color.cpp, crop_mask_ycbcr.cpp,
// resize.cpp): kernels/color.h's ColorType code of a dtype, check_output (out_dtype and scale, the
// one place they are checked), and DtypeArg, the `ScalarType?` argument read as its raw dtype code.
#pragma once

#include <cmath>

#include <torch/csrc/stable/library.h>

#include "kernels/color.h"
#include "ops/checks.h"

namespace fastprep::ops {

// The ColorType of a dtype code, -1 for a dtype the colour kernels do not take.
inline int color_type_code(int32_t code) {
  if (code == dtype_code(ScalarType::Byte)) return kernels::kU8;
  if (code == dtype_code(ScalarType::Float)) return kernels::kF32;
  if (code == dtype_code(ScalarType::Half)) return kernels::kF16;
  if (code == dtype_code(ScalarType::BFloat16)) return kernels::kBF16;
  return -1;
}

// What an op writes and by what it multiplies, as the kernels take them.
struct OutputType {
  int type;     // kernels/color.h's ColorType
  float scale;  // float outputs are float(x) * scale
};

// The output dtype (its code: the argument's, or the dtype of a given `out`) and `scale` of an op:
// one of the four dtypes the kernels write; scale 1 for a uint8 output (the kernels copy those
// bytes); scale a finite float32 value, as it multiplies in float32 (inf, nan or 1e300 would turn
// every output into inf or nan).
inline OutputType check_output(const char* op, int32_t out_code, double scale) {
  const int type = color_type_code(out_code);
  FASTPREP_CHECK(type >= 0, op,
                 ": expected out_dtype to be torch.uint8, torch.float32, torch.float16 or torch.bfloat16, got ",
                 dtype_name(out_code));
  FASTPREP_CHECK(type != kernels::kU8 || scale == 1.0, op,
                 ": expected scale=1 for a torch.uint8 output, got scale=", scale);
  FASTPREP_CHECK(std::isfinite(scale) && std::abs(scale) <= 3.4028234663852886e38, op,
                 ": expected scale to be a finite float32 value, got scale=", scale);
  return OutputType{type, static_cast<float>(scale)};
}

// A `ScalarType` argument as its dtype code. torch's own conversion to ScalarType throws "Not yet
// supported ScalarType N" for the dtypes a 2.10 target does not know (out_dtype=torch.quint8, ...)
// before the binding can name the argument; this one takes any, and the binding checks it.
struct DtypeArg {
  int32_t code;
};

}  // namespace fastprep::ops

HIDDEN_NAMESPACE_BEGIN(torch, stable, detail)
template <>
struct ToImpl<fastprep::ops::DtypeArg> {
  static fastprep::ops::DtypeArg call(StableIValue val, uint64_t /*version*/, bool /*is_internal*/) {
    return fastprep::ops::DtypeArg{to<int32_t>(val)};
  }
};
HIDDEN_NAMESPACE_END(torch, stable, detail)
