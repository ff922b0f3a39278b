// Memory overlap of what an op writes in place, checked as torch checks its in-place and out=
// ops (at::assert_no_internal_overlap, at::assert_no_partial_overlap) so that no result depends on
// the order elements are written: mask_fill_ on an expand()ed image, or with a mask that is a view
// of the image, would otherwise give write-order-dependent bits. Mirror: ops/_checks.py.
#pragma once

#include <torch/csrc/stable/tensor.h>

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "ops/alloc.h"
#include "ops/checks.h"
#include "ops/views.h"

namespace fastprep::ops {

inline std::vector<int64_t> strides_of(const Tensor& t) {
  std::vector<int64_t> s;
  for (int64_t d = 0; d < t.dim(); ++d) s.push_back(t.stride(d));
  return s;
}

// Whether two elements of t share memory. A dim of size > 1 with stride 0 (expand()) is torch's
// case; strides that as_strided can make cross too, so the test is general: taken by increasing
// stride, each dim's stride must exceed the extent of the dims before it. (A tensor failing it can
// still be free of overlap, as (sizes [3, 2], strides [2, 3]): rare enough to refuse with the rest.)
inline bool has_internal_overlap(const Tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, size) of the dims of size > 1
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) == 0) return false;  // no elements
    if (t.size(d) > 1) dims.emplace_back(t.stride(d), t.size(d));
  }
  std::sort(dims.begin(), dims.end());
  __int128 extent = 1;  // elements spanned by the dims so far: 1 + sum (size - 1) * stride
  for (const auto& [stride, size] : dims) {
    if (stride < extent) return true;
    extent += static_cast<__int128>(size - 1) * stride;
  }
  return false;
}

inline void check_no_internal_overlap(const char* op, const char* arg, const Tensor& t) {
  FASTPREP_CHECK(!has_internal_overlap(t), op, ": ", arg, " has elements that share memory (sizes ",
                 shape_str(sizes_of(t)), ", strides ", shape_str(strides_of(t)),
                 ", e.g. from expand()), so writing it in place would depend on the order of the writes; pass ", arg,
                 ".clone()");
}

// Whether the bytes t's elements lie in, [first element, last element], intersect those of u's.
inline bool memory_overlaps(const Tensor& t, const Tensor& u) {
  if (t.numel() == 0 || u.numel() == 0) return false;
  const auto span = [](const Tensor& x) {
    __int128 last = 0;  // element offset of the last element (torch strides are >= 0)
    for (int64_t d = 0; d < x.dim(); ++d) last += static_cast<__int128>(x.size(d) - 1) * x.stride(d);
    const auto begin = static_cast<__int128>(reinterpret_cast<uintptr_t>(x.const_data_ptr()));
    return std::pair<__int128, __int128>{begin, begin + (last + 1) * x.element_size()};
  };
  const auto [tb, te] = span(t);
  const auto [ub, ue] = span(u);
  return tb < ue && ub < te;
}

// `read` (an input) must not share memory with `written` (what the op writes), else a write could
// change what is read later.
inline void check_no_overlap(const char* op, const char* written, const Tensor& w, const char* read, const Tensor& r) {
  FASTPREP_CHECK(!memory_overlaps(w, r), op, ": ", read, " overlaps ", written, " in memory, so writing ", written,
                 " would change ", read, " while it is read; pass ", read, ".clone()");
}

// Two outputs of one op must not share memory: the op writes both.
inline void check_outputs_apart(const char* op, const char* a, const Tensor& ta, const char* b, const Tensor& tb) {
  FASTPREP_CHECK(!memory_overlaps(ta, tb), op, ": ", a, " and ", b, " overlap in memory; pass separate buffers");
}

}  // namespace fastprep::ops
