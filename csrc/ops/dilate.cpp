// Bindings of dilate / dilate_packed (schemas: pyext/fastprep/ops/_dilate.py).
#include <string>

#include "kernels/dilate.h"
#include "ops/alloc.h"
#include "ops/checks.h"
#include "ops/views.h"

namespace fastprep::ops {
namespace {

Tensor run_dilate(const char* op, const char* arg, const Tensor& x, int64_t width, bool packed, StrArg& structure,
                  int64_t iterations) {
  const bool square = parse_structure(op, structure);
  check_iterations(op, iterations);
  const Tensor xc = contiguous_input(op, arg, x);
  Tensor out = new_output(op, xc, sizes_of(xc), static_cast<ScalarType>(dtype_code(xc)), shape_source(arg, x));
  if (out.numel() > 0) {
    const AxisView v = axis_view(xc, xc.dim() - 2);  // [images, H, row bytes]; a nonempty xc's sizes fit
    kernels::dilate(static_cast<const uint8_t*>(xc.const_data_ptr()), static_cast<uint8_t*>(out.mutable_data_ptr()),
                    v.outer, v.n, width, square, until_unchanged(iterations, v.n, width), packed);
  }
  return out;
}

}  // namespace

Tensor dilate(Tensor mask, StrArg structure, int64_t iterations) {
  constexpr const char* op = "dilate";
  check_input(op, "mask", mask, ScalarType::Bool, 2);
  return run_dilate(op, "mask", mask, mask.size(mask.dim() - 1), false, structure, iterations);
}

Tensor dilate_packed(Tensor packed, int64_t width, StrArg structure, int64_t iterations) {
  constexpr const char* op = "dilate_packed";
  check_input(op, "packed", packed, ScalarType::Byte, 2);
  const int64_t nb = packed.size(packed.dim() - 1);
  FASTPREP_CHECK(width >= 0 && bytes_for_bits(width) == nb, op, ": width=", width, " needs ",
                 width >= 0 ? bytes_for_bits(width) : 0, " bytes per row but packed has ", nb, " (last dim)");
  return run_dilate(op, "packed", packed, width, true, structure, iterations);
}

}  // namespace fastprep::ops

STABLE_TORCH_LIBRARY_IMPL(fastprep, CPU, m) {
  m.impl("dilate", TORCH_BOX(&fastprep::ops::dilate));
  m.impl("dilate_packed", TORCH_BOX(&fastprep::ops::dilate_packed));
}
