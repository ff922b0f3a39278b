// Outputs of the bindings: the byte count checked for int64 overflow before anything is allocated,
// and allocation failures reported with what and how many bytes (mirror: ops/_checks.py).
#pragma once

#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "ops/checks.h"
#include "ops/views.h"

namespace fastprep::ops {

inline std::string shape_str(const std::vector<int64_t>& s) {
  std::ostringstream ss;
  ss << "[";
  for (size_t i = 0; i < s.size(); ++i) ss << (i ? ", " : "") << s[i];
  ss << "]";
  return ss.str();
}

inline int64_t dtype_size(ScalarType t) {
  switch (t) {
    case ScalarType::Half:
    case ScalarType::BFloat16:
      return 2;
    case ScalarType::Float:
      return 4;
    case ScalarType::Long:
      return 8;
    default:
      return 1;  // bool, uint8: the only other output dtypes
  }
}

// source() for an output shaped by input `arg`: "<arg> of shape [...]" (checks.shape_source's twin).
// Built only when a check fails; t must outlive the returned callable.
inline auto shape_source(const char* arg, const Tensor& t) {
  return [arg, &t] { return std::string(arg) + " of shape " + shape_str(sizes_of(t)); };
}

// Whether the sizes other than 0, times the element size, fit int64 (what torch needs to lay out a
// tensor of these sizes, even an empty one: it refuses [2^40, 2^40, 0]); *bytes gets the byte
// count of the whole tensor (0 when a size is 0) when they do.
inline bool bytes_fit(const std::vector<int64_t>& sizes, ScalarType dtype, int64_t* bytes) {
  int64_t nonzero = dtype_size(dtype);
  bool zero = false;
  for (const int64_t s : sizes) {
    if (s == 0) {
      zero = true;
    } else if (!mul_fits(nonzero, s, &nonzero)) {
      return false;
    }
  }
  *bytes = zero ? 0 : nonzero;
  return true;
}

// An output whose byte count does not fit int64 fails here, before anything is allocated and
// naming the arguments it comes from (source(): called only to fail, as building the text costs
// about a microsecond per call): torch's own overflow error names neither, and the kernels' int64
// offsets must not wrap. Sizes with a 0 count without it: torch cannot lay those out either.
// Mirror: checks.check_output_bytes.
template <typename Source>
void check_output_bytes(const char* op, const std::vector<int64_t>& sizes, ScalarType dtype, const Source& source) {
  int64_t bytes = 0;
  if (bytes_fit(sizes, dtype, &bytes)) return;
  const bool empty = std::find(sizes.begin(), sizes.end(), int64_t{0}) != sizes.end();
  fail(op, ": expected an output of at most 2^63 - 1 bytes, got ", shape_str(sizes), " of ", dtype_name(dtype),
       " from ", source(), empty ? " (its sizes but the 0 multiply past that, which torch cannot lay out)" : "");
}

// The byte count of a contiguous `sizes` tensor of `dtype` as the allocation-failure messages
// print it: "more than 2^63 - 1" when it does not fit int64.
inline std::string byte_count(const std::vector<int64_t>& sizes, ScalarType dtype) {
  int64_t bytes = 0;
  return bytes_fit(sizes, dtype, &bytes) ? std::to_string(bytes) : std::string("more than 2^63 - 1");
}

// Runs alloc(). A failing allocation inside torch reaches here through the stable ABI without
// torch's message ("... API call failed"), so the error says what could not be allocated and its
// size instead, as checks.allocation_failed does on the Numba backend.
template <typename Source, typename Alloc>
Tensor allocating(const char* op, const char* what, const char* arg, const std::vector<int64_t>& sizes,
                  ScalarType dtype, const Source& source, Alloc&& alloc) {
  try {
    return alloc();
  } catch (const std::exception&) {
    const std::string from = source();
    fail(op, ": could not allocate ", what, arg, ", ", shape_str(sizes), " of ", dtype_name(dtype), " (",
         byte_count(sizes, dtype), " bytes)", from.empty() ? "" : " from ", from);
  }
}

// A contiguous uninitialised tensor of `sizes` and `dtype` on `like`'s device, straight from the
// aoti_torch_empty_strided shim: torch::stable::new_empty for a 2.10 target goes through
// torch_call_dispatcher("aten::new_empty"), an operator lookup by name and a boxed call that cost
// 0.5-0.9 us per output. The sizes must fit (new_output's check_output_bytes, or an existing
// tensor's), so the strides below cannot overflow.
inline Tensor empty_contiguous(const std::vector<int64_t>& sizes, ScalarType dtype, int32_t device_type,
                               int32_t device_index) {
  std::vector<int64_t> strides(sizes.size());
  int64_t step = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    strides[i] = step;
    step *= std::max<int64_t>(sizes[i], 1);  // torch's contiguous strides treat a 0 size as 1
  }
  const int32_t code = torch::stable::detail::to<int32_t>(torch::stable::detail::from(dtype));
  AtenTensorHandle handle = nullptr;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(static_cast<int64_t>(sizes.size()), sizes.data(),
                                                         strides.data(), code, device_type, device_index, &handle));
  return Tensor(handle);
}

// The same on `like`'s device.
inline Tensor empty_contiguous(const Tensor& like, const std::vector<int64_t>& sizes, ScalarType dtype) {
  int32_t device_type = 0, device_index = 0;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(like.get(), &device_type));
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_index(like.get(), &device_index));
  return empty_contiguous(sizes, dtype, device_type, device_index);
}

// The op's output, shaped like `sizes` on `like`'s device; source() names the arguments it comes from.
template <typename Source>
Tensor new_output(const char* op, const Tensor& like, const std::vector<int64_t>& sizes, ScalarType dtype,
                  const Source& source) {
  check_output_bytes(op, sizes, dtype, source);
  return allocating(op, "the output", "", sizes, dtype, source, [&] { return empty_contiguous(like, sizes, dtype); });
}

// A contiguous copy of input `arg`, or t itself when already contiguous: asked through the
// is_contiguous shim first, as torch::stable::contiguous is a dispatcher call ("aten::contiguous")
// even when it returns its input.
inline Tensor contiguous_input(const char* op, const char* arg, const Tensor& t) {
  if (t.is_contiguous()) return t;
  return allocating(
      op, "a contiguous copy of ", arg, sizes_of(t), static_cast<ScalarType>(dtype_code(t)),
      [] { return std::string(); }, [&] { return torch::stable::contiguous(t); });
}

}  // namespace fastprep::ops
