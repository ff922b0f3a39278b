// Shared by the op bindings: argument checks whose messages name the argument and the bad value,
// the mapping from a tensor's shape to the kernels' [outer, n, inner] view, and a `str` argument
// type that does not leak.
#pragma once

#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/util/Exception.h>

#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace fastprep::ops {

using torch::stable::Tensor;
using torch::headeronly::ScalarType;

// A `str` argument. torch 2.13's stable header converts `str` to std::string by leaking a heap
// copy on every call; this type takes the string handle itself and frees it.
struct StrArg {
  std::string value;
};

template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream ss;
  (ss << ... << args);
  throw std::runtime_error(ss.str());
}

// Raises RuntimeError in Python with exactly the given text: the messages match the Numba
// backend's (pyext/fastprep/_checks.py), so both backends raise the same type and text.
#define FASTPREP_CHECK(cond, ...)        \
  do {                                  \
    if (!(cond)) {                      \
      ::fastprep::ops::fail(__VA_ARGS__); \
    }                                   \
  } while (0)

inline const char* dtype_name(ScalarType t) {
  switch (t) {
    case ScalarType::Bool: return "torch.bool";
    case ScalarType::Byte: return "torch.uint8";
    case ScalarType::Char: return "torch.int8";
    case ScalarType::Short: return "torch.int16";
    case ScalarType::Int: return "torch.int32";
    case ScalarType::Long: return "torch.int64";
    case ScalarType::Half: return "torch.float16";
    case ScalarType::BFloat16: return "torch.bfloat16";
    case ScalarType::Float: return "torch.float32";
    case ScalarType::Double: return "torch.float64";
    default: return torch::headeronly::toString(t);
  }
}

inline void check_dtype(const char* op, const char* arg, const Tensor& t, ScalarType want) {
  FASTPREP_CHECK(t.scalar_type() == want, op, ": expected ", arg, " to be a ", dtype_name(want),
                 " tensor, got ", dtype_name(t.scalar_type()));
}

inline void check_min_dim(const char* op, const char* arg, const Tensor& t, int64_t min_dim) {
  FASTPREP_CHECK(t.dim() >= min_dim, op, ": expected ", arg, " to have at least ", min_dim,
                 " dimension(s), got a ", t.dim(), "-D tensor");
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
  FASTPREP_CHECK(layout.value == "CHW" || layout.value == "HWC", op,
                 ": expected layout to be 'CHW' or 'HWC', got '", layout.value, "'");
  return layout.value == "HWC";
}

// An image or batch of images as [N, C, H, W] sizes and element strides, whatever its layout and
// strides (no copy): kernels read HWC or strided views directly.
struct ImageView {
  int64_t n = 1, c = 1, h = 1, w = 1;
  int64_t sn = 0, sc = 0, sh = 0, sw = 0;
  bool batched = false;
};

inline ImageView image_view(const char* op, const char* arg, const Tensor& t, bool hwc) {
  FASTPREP_CHECK(t.dim() == 3 || t.dim() == 4, op, ": expected ", arg, " to be a 3-D ",
                 hwc ? "[H, W, C]" : "[C, H, W]", " image or a 4-D batch of them, got a ", t.dim(),
                 "-D tensor");
  ImageView v;
  v.batched = t.dim() == 4;
  const int64_t b = v.batched ? 1 : 0;
  if (v.batched) {
    v.n = t.size(0);
    v.sn = t.stride(0);
  }
  const int64_t ic = hwc ? b + 2 : b, ih = hwc ? b : b + 1, iw = hwc ? b + 1 : b + 2;
  v.c = t.size(ic), v.h = t.size(ih), v.w = t.size(iw);
  v.sc = t.stride(ic), v.sh = t.stride(ih), v.sw = t.stride(iw);
  return v;
}

// The [outer, n, inner] view of a contiguous tensor around dim.
struct AxisView {
  int64_t outer = 1, n = 1, inner = 1;
};

inline AxisView axis_view(const Tensor& t, int64_t dim) {
  AxisView v;
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (d < dim) v.outer *= t.size(d);
    else if (d == dim) v.n = t.size(d);
    else v.inner *= t.size(d);
  }
  return v;
}

inline std::vector<int64_t> sizes_of(const Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

inline std::vector<int64_t> sizes_with(const Tensor& t, int64_t dim, int64_t size) {
  std::vector<int64_t> s(t.sizes().begin(), t.sizes().end());
  s[static_cast<size_t>(dim)] = size;
  return s;
}

// ceil(bits / 8) for bits >= 0: (bits + 7) / 8 would overflow for sizes near INT64_MAX, which
// arguments and stride-0 views can carry.
inline int64_t bytes_for_bits(int64_t bits) { return bits / 8 + (bits % 8 != 0 ? 1 : 0); }

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
    case ScalarType::BFloat16: return 2;
    case ScalarType::Float: return 4;
    default: return 1;  // bool, uint8: the only other output dtypes
  }
}

// source() for an output shaped by input `arg`: "<arg> of shape [...]" (_checks.shape_source's twin).
// Built only when a check fails; t must outlive the returned callable.
inline auto shape_source(const char* arg, const Tensor& t) {
  return [arg, &t] { return std::string(arg) + " of shape " + shape_str(sizes_of(t)); };
}

// An output whose byte count does not fit int64 fails here, before anything is allocated and
// naming the arguments it comes from (source(): called only to fail, as building the text costs
// about a microsecond per call): torch's own overflow error names neither, and the kernels' int64
// offsets must not wrap. An empty output is left to torch. Mirror: _checks.check_output_bytes.
template <typename Source>
void check_output_bytes(const char* op, const std::vector<int64_t>& sizes, ScalarType dtype, const Source& source) {
  int64_t bytes = dtype_size(dtype);
  bool overflow = false;
  for (const int64_t s : sizes) {
    if (s == 0) return;
    overflow = __builtin_mul_overflow(bytes, s, &bytes) || overflow;
  }
  FASTPREP_CHECK(!overflow, op, ": expected an output of at most 2^63 - 1 bytes, got ", shape_str(sizes),
                 " of ", dtype_name(dtype), " from ", source());
}

// The bytes of a contiguous `sizes` tensor of `dtype`, for sizes already known not to overflow.
inline int64_t byte_count(const std::vector<int64_t>& sizes, ScalarType dtype) {
  int64_t bytes = dtype_size(dtype);
  for (const int64_t s : sizes) bytes *= s;
  return bytes;
}

// Runs alloc(). A failing allocation inside torch reaches here through the stable ABI without
// torch's message ("... API call failed"), so the error says what could not be allocated and its
// size instead, as _checks.allocating does on the Numba backend.
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

// The op's output, shaped like `sizes` on `like`'s device; source() names the arguments it comes from.
template <typename Source>
Tensor new_output(const char* op, const Tensor& like, const std::vector<int64_t>& sizes, ScalarType dtype,
                  const Source& source) {
  return allocating(op, "the output", "", sizes, dtype, source, [&] {
    return torch::stable::new_empty(like, torch::headeronly::IntHeaderOnlyArrayRef(sizes.data(), sizes.size()),
                                    dtype);
  });
}

// A contiguous copy of input `arg` (t itself when already contiguous).
inline Tensor contiguous_input(const char* op, const char* arg, const Tensor& t) {
  return allocating(op, "a contiguous copy of ", arg, sizes_of(t), t.scalar_type(), [] { return std::string(); },
                    [&] { return torch::stable::contiguous(t); });
}

}  // namespace fastprep::ops

HIDDEN_NAMESPACE_BEGIN(torch, stable, detail)
template <>
struct ToImpl<fastprep::ops::StrArg> {
  static fastprep::ops::StrArg call(StableIValue val, uint64_t /*version*/, bool /*is_internal*/) {
    StringHandle handle = to<StringHandle>(val);
    size_t length = 0;
    const char* data = nullptr;
    STABLE_TORCH_ERROR_CODE_CHECK(torch_string_length(handle, &length));
    STABLE_TORCH_ERROR_CODE_CHECK(torch_string_c_str(handle, &data));
    fastprep::ops::StrArg out{std::string(data, length)};
    STABLE_TORCH_ERROR_CODE_CHECK(torch_delete_string(handle));
    return out;
  }
};
HIDDEN_NAMESPACE_END(torch, stable, detail)

// Shared by the colour ops (color.cpp, crop_mask_ycbcr.cpp): kernels/color.h's type codes, -1
// for a dtype they do not take.
namespace fastprep::ops {

inline int color_type_code(ScalarType t) {
  switch (t) {
    case ScalarType::Byte: return 0;
    case ScalarType::Float: return 1;
    case ScalarType::Half: return 2;
    case ScalarType::BFloat16: return 3;
    default: return -1;
  }
}

}  // namespace fastprep::ops

// Shared by the mask ops (random_mask.cpp, dilate.cpp): structure / iterations arguments.
namespace fastprep::ops {

// true for "square" (8-neighbour), false for "cross" (4-neighbour).
inline bool parse_structure(const char* op, const StrArg& structure) {
  FASTPREP_CHECK(structure.value == "cross" || structure.value == "square", op,
                 ": expected structure to be 'cross' or 'square', got '", structure.value, "'");
  return structure.value == "square";
}

inline void check_iterations(const char* op, int64_t iterations) {
  FASTPREP_CHECK(iterations >= 0, op, ": expected iterations >= 0, got iterations=", iterations);
}

}  // namespace fastprep::ops
