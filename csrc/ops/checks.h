// Argument checks of the bindings: each failure raises RuntimeError in Python with a message that
// names the argument and the bad value, word for word the Numba backend's
// (pyext/fastprep/ops/checks.py), so both backends raise the same type and text.
#pragma once

#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/util/Exception.h>

#include <sstream>
#include <stdexcept>
#include <string>

#include "ops/str_arg.h"

namespace fastprep::ops {

using torch::headeronly::ScalarType;
using torch::stable::Tensor;

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream ss;
  (ss << ... << args);
  throw std::runtime_error(ss.str());
}

// Raises RuntimeError in Python with exactly the given text.
#define FASTPREP_CHECK(cond, ...)         \
  do {                                    \
    if (!(cond)) {                        \
      ::fastprep::ops::fail(__VA_ARGS__); \
    }                                     \
  } while (0)

inline const char* dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Bool:
      return "torch.bool";
    case ScalarType::Byte:
      return "torch.uint8";
    case ScalarType::Char:
      return "torch.int8";
    case ScalarType::Short:
      return "torch.int16";
    case ScalarType::Int:
      return "torch.int32";
    case ScalarType::Long:
      return "torch.int64";
    case ScalarType::Half:
      return "torch.float16";
    case ScalarType::BFloat16:
      return "torch.bfloat16";
    case ScalarType::Float:
      return "torch.float32";
    case ScalarType::Double:
      return "torch.float64";
    default:
      return torch::headeronly::toString(t);
  }
}

inline void check_dtype(const char* op, const char* arg, const Tensor& t, ScalarType want) {
  FASTPREP_CHECK(t.scalar_type() == want, op, ": expected ", arg, " to be a ", dtype_name(want), " tensor, got ",
                 dtype_name(t.scalar_type()));
}

inline void check_min_dim(const char* op, const char* arg, const Tensor& t, int64_t min_dim) {
  FASTPREP_CHECK(t.dim() >= min_dim, op, ": expected ", arg, " to have at least ", min_dim, " dimension(s), got a ",
                 t.dim(), "-D tensor");
}

// Python-style negative dims; returns the dim in [0, ndim).
inline int64_t wrap_dim(const char* op, int64_t dim, int64_t ndim) {
  FASTPREP_CHECK(dim >= -ndim && dim < ndim, op, ": dim ", dim, " is out of range for a ", ndim,
                 "-D tensor (expected -", ndim, " <= dim < ", ndim, ")");
  return dim < 0 ? dim + ndim : dim;
}

// true for "little", false for "big".
inline bool parse_bitorder(const char* op, const StrArg& bitorder) {
  FASTPREP_CHECK(bitorder.value == "little" || bitorder.value == "big", op,
                 ": expected bitorder to be 'little' or 'big', got '", bitorder.value, "'");
  return bitorder.value == "little";
}

// true for "HWC", false for "CHW".
inline bool parse_layout(const char* op, const StrArg& layout) {
  FASTPREP_CHECK(layout.value == "CHW" || layout.value == "HWC", op, ": expected layout to be 'CHW' or 'HWC', got '",
                 layout.value, "'");
  return layout.value == "HWC";
}

// true for "square" (8-neighbour), false for "cross" (4-neighbour): the mask ops' structure.
inline bool parse_structure(const char* op, const StrArg& structure) {
  FASTPREP_CHECK(structure.value == "cross" || structure.value == "square", op,
                 ": expected structure to be 'cross' or 'square', got '", structure.value, "'");
  return structure.value == "square";
}

inline void check_iterations(const char* op, int64_t iterations) {
  FASTPREP_CHECK(iterations >= 0, op, ": expected iterations >= 0, got iterations=", iterations);
}

}  // namespace fastprep::ops
