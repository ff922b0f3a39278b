// Argument checks of the bindings: each failure raises RuntimeError in Python with a message that
// names the argument and the bad value, word for word the Numba backend's
// (pyext/fastprep/ops/_checks.py), so both backends raise the same type and text.
#pragma once

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
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

// torch's Python name of every dtype, by its shim dtype code (the value of c10::ScalarType, which the
// stable ABI keeps fixed: AOTInductor packages store it). Read from the raw code because a 2.10
// target's Tensor::scalar_type() throws "Not yet supported ScalarType N" for the dtypes it does not
// convert (quantized, bits, uint1..7, int1..7, float8_e8m0fnu, ...), and a bad input can be any.
inline const char* dtype_name(int32_t code) {
  // clang-format off
  static constexpr const char* kNames[] = {
      "torch.uint8", "torch.int8", "torch.int16", "torch.int32",
      "torch.int64", "torch.float16", "torch.float32", "torch.float64",
      "torch.complex32", "torch.complex64", "torch.complex128", "torch.bool",
      "torch.qint8", "torch.quint8", "torch.qint32", "torch.bfloat16",
      "torch.quint4x2", "torch.quint2x4", "torch.bits1x8", "torch.bits2x4",
      "torch.bits4x2", "torch.bits8", "torch.bits16", "torch.float8_e5m2",
      "torch.float8_e4m3fn", "torch.float8_e5m2fnuz", "torch.float8_e4m3fnuz", "torch.uint16",
      "torch.uint32", "torch.uint64", "torch.uint1", "torch.uint2",
      "torch.uint3", "torch.uint4", "torch.uint5", "torch.uint6",
      "torch.uint7", "torch.int1", "torch.int2", "torch.int3",
      "torch.int4", "torch.int5", "torch.int6", "torch.int7",
      "torch.float8_e8m0fnu", "torch.float4_e2m1fn_x2", "torch.bcomplex32",  // 46: torch 2.14
  };
  // clang-format on
  constexpr int32_t n = static_cast<int32_t>(sizeof(kNames) / sizeof(kNames[0]));
  return code >= 0 && code < n ? kNames[code] : "an unknown dtype";
}

inline int32_t dtype_code(ScalarType t) { return static_cast<int32_t>(t); }
inline const char* dtype_name(ScalarType t) { return dtype_name(dtype_code(t)); }

// t's dtype code, whatever the dtype (see dtype_name).
inline int32_t dtype_code(const Tensor& t) {
  int32_t code = 0;
  STABLE_TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(t.get(), &code));
  return code;
}

// A tensor argument given as None reaches a kernel as an undefined tensor, on which every query
// fails with torch's internal text; each binding checks its tensors first (checks.check_tensor).
inline void check_tensor(const char* op, const char* arg, const Tensor& t) {
  FASTPREP_CHECK(t.defined(), op, ": expected ", arg, " to be a tensor, got None");
}

inline bool is_dtype(const Tensor& t, ScalarType want) { return dtype_code(t) == dtype_code(want); }

inline void check_dtype(const char* op, const char* arg, const Tensor& t, ScalarType want) {
  FASTPREP_CHECK(is_dtype(t, want), op, ": expected ", arg, " to be a ", dtype_name(want), " tensor, got ",
                 dtype_name(dtype_code(t)));
}

// t's dtype when it is an image dtype (uint8, float32, float16, bfloat16); otherwise fails naming
// `arg` and its dtype.
inline ScalarType image_dtype(const char* op, const char* arg, const Tensor& t) {
  const int32_t code = dtype_code(t);
  for (const ScalarType s : {ScalarType::Byte, ScalarType::Float, ScalarType::Half, ScalarType::BFloat16}) {
    if (code == dtype_code(s)) return s;
  }
  fail(op, ": expected ", arg, " to be a torch.uint8, torch.float32, torch.float16 or torch.bfloat16 tensor, got ",
       dtype_name(code));
}

// A str argument as Python's repr shows it, with every byte outside printable ASCII escaped
// (\xNN, \t, \n, \r) and always single-quoted: an embedded NUL would otherwise cut the message
// (what() is a C string). checks.quoted is the twin, so both backends print the same text.
inline std::string quoted(const std::string& s) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "'";
  for (const char ch : s) {
    const auto b = static_cast<unsigned char>(ch);
    if (b == '\\' || b == '\'') {
      out += '\\';
      out += ch;
    } else if (b == '\t') {
      out += "\\t";
    } else if (b == '\n') {
      out += "\\n";
    } else if (b == '\r') {
      out += "\\r";
    } else if (b < 0x20 || b > 0x7e) {
      out += "\\x";
      out += kHex[b >> 4];
      out += kHex[b & 15];
    } else {
      out += ch;
    }
  }
  return out + "'";
}

// Sums and products of argument values in overflow-checked arithmetic: a signed overflow is
// undefined behaviour, and a wrapped result would pass the very check it was formed for
// (crop(img, 2**63 - 1, 0, 1, 1) once returned a crop of fill). Mirror: exact Python ints.

// Whether a + b <= limit, exactly.
inline bool sum_at_most(int64_t a, int64_t b, int64_t limit) {
  int64_t s = 0;
  if (__builtin_add_overflow(a, b, &s)) return a < 0;  // the exact sum is below INT64_MIN or above INT64_MAX
  return s <= limit;
}

// a * b into *out; false (and *out unspecified) when it does not fit int64.
inline bool mul_fits(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

inline void check_min_dim(const char* op, const char* arg, const Tensor& t, int64_t min_dim) {
  FASTPREP_CHECK(t.dim() >= min_dim, op, ": expected ", arg, " to have at least ", min_dim, " dimension(s), got a ",
                 t.dim(), "-D tensor");
}

// An input of one dtype and at least min_dim dims (the bit ops' x, packed and mask), checked in
// that order: None, dtype, dims.
inline void check_input(const char* op, const char* arg, const Tensor& t, ScalarType dtype, int64_t min_dim) {
  check_tensor(op, arg, t);
  check_dtype(op, arg, t, dtype);
  check_min_dim(op, arg, t, min_dim);
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
                 ": expected bitorder to be 'little' or 'big', got ", quoted(bitorder.value));
  return bitorder.value == "little";
}

// true for "HWC", false for "CHW".
inline bool parse_layout(const char* op, const StrArg& layout) {
  FASTPREP_CHECK(layout.value == "CHW" || layout.value == "HWC", op, ": expected layout to be 'CHW' or 'HWC', got ",
                 quoted(layout.value));
  return layout.value == "HWC";
}

// true for "square" (8-neighbour), false for "cross" (4-neighbour): the mask ops' structure.
inline bool parse_structure(const char* op, const StrArg& structure) {
  FASTPREP_CHECK(structure.value == "cross" || structure.value == "square", op,
                 ": expected structure to be 'cross' or 'square', got ", quoted(structure.value));
  return structure.value == "square";
}

// The largest finite value of a float image dtype: a larger finite fill value would become inf.
inline double largest_finite(ScalarType t) {
  return t == ScalarType::Half ? 65504.0 : t == ScalarType::BFloat16 ? 3.3895313892515355e38 : 3.4028234663852886e38;
}

inline void check_iterations(const char* op, int64_t iterations) {
  FASTPREP_CHECK(iterations >= 0, op, ": expected iterations >= 0, got iterations=", iterations);
}

// The dilation count the kernels run for `iterations` on h x width images: 0 means "until nothing
// changes" (scipy.ndimage.binary_dilation's iterations < 1), which h + width steps always reach:
// every pixel is within h + width - 2 steps of every other, and the kernels cap larger counts
// there (h, width >= 0).
inline int64_t until_unchanged(int64_t iterations, int64_t h, int64_t width) {
  if (iterations != 0) return iterations;
  return sum_at_most(h, width, INT64_MAX) ? h + width : INT64_MAX;
}

}  // namespace fastprep::ops
