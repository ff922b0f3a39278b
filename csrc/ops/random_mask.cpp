// Bindings of random_mask / random_dilated_mask (schemas: pyext/fastprep/ops/_random_mask.py).
//
// These ops take no tensor, so the dispatcher finds no backend key in their arguments and runs
// the CompositeExplicitAutograd kernel (a CPU-key kernel is never reached: torch raises "There
// were no tensor arguments"). The output is always a CPU tensor.
#include <cmath>
#include <string>
#include <vector>

#include "kernels/dilate.h"
#include "kernels/random_mask.h"
#include "ops/alloc.h"
#include "ops/checks.h"
#include "ops/views.h"

namespace fastprep::ops {
namespace {

std::vector<int64_t> mask_out_shape(const char* op, const std::vector<int64_t>& shape, double p, bool packed) {
  FASTPREP_CHECK(!shape.empty(), op, ": expected shape to have at least 1 dimension, got []");
  for (const int64_t s : shape) {
    FASTPREP_CHECK(s >= 0, op, ": expected non-negative sizes in shape, got ", s);
  }
  FASTPREP_CHECK(p >= 0.0 && p <= 1.0, op, ": expected 0 <= p <= 1, got p=", p);
  std::vector<int64_t> out(shape);
  if (packed) out.back() = bytes_for_bits(out.back());
  check_output_bytes(op, out, packed ? ScalarType::Byte : ScalarType::Bool,
                     [&] { return "shape=" + shape_str(shape); });
  return out;
}

Tensor empty_cpu(const char* op, const std::vector<int64_t>& shape, const std::vector<int64_t>& sizes, bool packed) {
  const ScalarType t = packed ? ScalarType::Byte : ScalarType::Bool;
  return allocating(
      op, "the output", "", sizes, t, [&] { return "shape=" + shape_str(shape); },
      [&] { return empty_contiguous(sizes, t, aoti_torch_device_type_cpu(), -1); });  // -1: plain "cpu"
}

int64_t leading_rows(const std::vector<int64_t>& shape, size_t keep) {
  int64_t rows = 1;
  for (size_t i = 0; i + keep < shape.size(); ++i) rows *= shape[i];
  return rows;
}

}  // namespace

Tensor random_mask(std::vector<int64_t> shape, double p, int64_t seed, bool packed) {
  const std::vector<int64_t> sizes = mask_out_shape("random_mask", shape, p, packed);
  Tensor out = empty_cpu("random_mask", shape, sizes, packed);
  if (out.numel() > 0) {
    kernels::random_mask(seed, p, leading_rows(shape, 1), shape.back(), packed,
                         static_cast<uint8_t*>(out.mutable_data_ptr()));
  }
  return out;
}

Tensor random_dilated_mask(std::vector<int64_t> shape, double p, int64_t seed, StrArg structure, int64_t iterations,
                           bool packed) {
  constexpr const char* op = "random_dilated_mask";
  FASTPREP_CHECK(shape.size() >= 2, op, ": expected shape to have at least 2 dimensions, got ", shape.size());
  const std::vector<int64_t> sizes = mask_out_shape(op, shape, p, packed);
  const bool square = parse_structure(op, structure);
  check_iterations(op, iterations);
  Tensor out = empty_cpu(op, shape, sizes, packed);
  if (out.numel() > 0) {
    const int64_t h = shape[shape.size() - 2];
    kernels::random_dilated_mask(seed, p, leading_rows(shape, 2), h, shape.back(), square,
                                 until_unchanged(iterations, h, shape.back()), packed,
                                 static_cast<uint8_t*>(out.mutable_data_ptr()));
  }
  return out;
}

}  // namespace fastprep::ops

STABLE_TORCH_LIBRARY_IMPL(fastprep, CompositeExplicitAutograd, m) {
  m.impl("random_mask", TORCH_BOX(&fastprep::ops::random_mask));
  m.impl("random_dilated_mask", TORCH_BOX(&fastprep::ops::random_dilated_mask));
}
