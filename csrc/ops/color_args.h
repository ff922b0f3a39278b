// The colour ops' dtype argument (color.cpp, crop_mask_ycbcr.cpp): kernels/color.h's ColorType
// code of a dtype, -1 for one they do not take.
#pragma once

#include "kernels/color.h"
#include "ops/checks.h"

namespace fastprep::ops {

inline int color_type_code(ScalarType t) {
  switch (t) {
    case ScalarType::Byte:
      return kernels::kU8;
    case ScalarType::Float:
      return kernels::kF32;
    case ScalarType::Half:
      return kernels::kF16;
    case ScalarType::BFloat16:
      return kernels::kBF16;
    default:
      return -1;
  }
}

}  // namespace fastprep::ops
