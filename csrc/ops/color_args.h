// The colour ops' dtype arguments (color.cpp, crop_mask_ycbcr.cpp): kernels/color.h's ColorType
// code of a dtype, and DtypeArg, the `ScalarType?` argument read as its raw dtype code.
#pragma once

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
