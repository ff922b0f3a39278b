// Bindings of pack_bits / unpack_bits (schemas: pyext/fastprep/ops/_pack_bits.py).
#include <string>

#include "kernels/pack_bits.h"
#include "ops/alloc.h"
#include "ops/checks.h"
#include "ops/views.h"

namespace fastprep::ops {
namespace {

// ostream has no operator<< for __int128; only non-negative values are printed.
std::string int128_str(__int128 v) {
  std::string s;
  do {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v > 0);
  return s;
}

}  // namespace

Tensor pack_bits(Tensor x, int64_t dim, StrArg bitorder) {
  constexpr const char* op = "pack_bits";
  check_input(op, "x", x, ScalarType::Bool, 1);
  const int64_t d = wrap_dim(op, dim, x.dim());
  const bool little = parse_bitorder(op, bitorder);
  const Tensor xc = contiguous_input(op, "x", x);
  const std::vector<int64_t> sizes = sizes_with(xc, d, bytes_for_bits(xc.size(d)));
  Tensor out = new_output(op, xc, sizes, ScalarType::Byte, shape_source("x", x));
  if (out.numel() > 0) {
    const AxisView v = axis_view(xc, d);  // a nonempty xc's sizes fit int64
    kernels::pack_bits(static_cast<const uint8_t*>(xc.const_data_ptr()), static_cast<uint8_t*>(out.mutable_data_ptr()),
                       v.outer, v.n, v.inner, little);
  }
  return out;
}

Tensor unpack_bits(Tensor packed, int64_t count, int64_t dim, StrArg bitorder) {
  constexpr const char* op = "unpack_bits";
  check_input(op, "packed", packed, ScalarType::Byte, 1);
  const int64_t d = wrap_dim(op, dim, packed.dim());
  const bool little = parse_bitorder(op, bitorder);
  const int64_t m = packed.size(d);
  // 8 * m in 128 bits: a stride-0 view can have m above INT64_MAX / 8.
  const __int128 bits = static_cast<__int128>(m) * 8;
  FASTPREP_CHECK(count >= 0 && count <= bits, op, ": expected 0 <= count <= ", int128_str(bits), " (8 bits x ", m,
                 " bytes along dim ", dim, "), got count=", count);
  const std::vector<int64_t> sizes = sizes_with(packed, d, count);
  const auto source = [&] { return "count=" + std::to_string(count); };
  check_output_bytes(op, sizes, ScalarType::Bool, source);
  const Tensor pc = contiguous_input(op, "packed", packed);
  Tensor out = new_output(op, pc, sizes, ScalarType::Bool, source);
  if (out.numel() > 0) {
    const AxisView v = axis_view(pc, d);  // a nonempty output has a nonempty pc, whose sizes fit int64
    kernels::unpack_bits(static_cast<const uint8_t*>(pc.const_data_ptr()),
                         static_cast<uint8_t*>(out.mutable_data_ptr()), v.outer, v.n, v.inner, count, little);
  }
  return out;
}

}  // namespace fastprep::ops

STABLE_TORCH_LIBRARY_IMPL(fastprep, CPU, m) {
  m.impl("pack_bits", TORCH_BOX(&fastprep::ops::pack_bits));
  m.impl("unpack_bits", TORCH_BOX(&fastprep::ops::unpack_bits));
}
