// Binding of seeded_draws (schema and definition: pyext/fastprep/ops/_seeded_draws.py).
#include <string>
#include <vector>

#include "kernels/seeded_draws.h"
#include "ops/alloc.h"
#include "ops/checks.h"

namespace fastprep::ops {

Tensor seeded_draws(Tensor seeds, int64_t count) {
  constexpr const char* op = "seeded_draws";
  check_tensor(op, "seeds", seeds);
  check_dtype(op, "seeds", seeds, ScalarType::Long);
  FASTPREP_CHECK(seeds.dim() == 1, op, ": expected seeds to be a 1-D tensor, got a ", seeds.dim(), "-D tensor");
  FASTPREP_CHECK(count >= 0 && count <= kernels::kMaxSeededDraws, op,
                 ": expected 0 <= count <= ", kernels::kMaxSeededDraws, ", got count=", count);
  const std::vector<int64_t> sizes{seeds.size(0), count};
  Tensor out = new_output(op, seeds, sizes, ScalarType::Long, shape_source("seeds", seeds));
  const Tensor sc = contiguous_input(op, "seeds", seeds);
  kernels::seeded_draws(static_cast<const int64_t*>(sc.const_data_ptr()), sc.size(0), count,
                        static_cast<int64_t*>(out.mutable_data_ptr()));
  return out;
}

}  // namespace fastprep::ops

STABLE_TORCH_LIBRARY_IMPL(fastprep, CPU, m) { m.impl("seeded_draws", TORCH_BOX(&fastprep::ops::seeded_draws)); }
