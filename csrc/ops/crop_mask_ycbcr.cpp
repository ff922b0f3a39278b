// Binding of crop_mask_ycbcr (schema and definition: pyext/fastprep/ops/crop_mask_ycbcr.py).
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/crop.h"
#include "kernels/crop_mask_ycbcr.h"
#include "kernels/dilate.h"
#include "ops/alloc.h"
#include "ops/checks.h"
#include "ops/color_args.h"
#include "ops/views.h"

namespace fastprep::ops {

std::tuple<Tensor, Tensor> crop_mask_ycbcr(Tensor img, int64_t height, int64_t width, double p, int64_t seed,
                                           StrArg layout, StrArg structure, std::optional<ScalarType> out_dtype,
                                           double scale, bool apply_mask, bool return_mask,
                                           std::optional<int64_t> mask_seed) {
  constexpr const char* op = "crop_mask_ycbcr";
  check_dtype(op, "img", img, ScalarType::Byte);
  const bool hwc = parse_layout(op, layout);
  FASTPREP_CHECK(img.dim() == 3, op, ": expected img to be a 3-D ", hwc ? "[H, W, C]" : "[C, H, W]", " image, got a ",
                 img.dim(), "-D tensor");
  const ImageView v = image_view(op, "img", img, hwc);
  FASTPREP_CHECK(v.c == 3, op, ": expected img to have 3 channels, got ", v.c);
  FASTPREP_CHECK(height > 0 && width > 0, op, ": expected a positive crop size, got height=", height, " width=", width);
  FASTPREP_CHECK(height <= v.h && width <= v.w, op, ": crop ", height, "x", width, " is larger than the image ", v.h,
                 "x", v.w);
  FASTPREP_CHECK(p >= 0.0 && p <= 1.0, op, ": expected 0 <= p <= 1, got p=", p);  // NaN fails too
  const bool square = parse_structure(op, structure);
  const ScalarType odt = out_dtype.value_or(ScalarType::Byte);
  FASTPREP_CHECK(color_type_code(odt) >= 0, op,
                 ": expected out_dtype to be torch.uint8, "
                 "torch.float32, torch.float16 or torch.bfloat16, got ",
                 dtype_name(odt));
  FASTPREP_CHECK(odt != ScalarType::Byte || scale == 1.0, op,
                 ": expected scale=1 for a torch.uint8 output, got scale=", scale);
  const std::vector<int64_t> sizes{3, height, width};
  const auto source = [&] { return "height=" + std::to_string(height) + ", width=" + std::to_string(width); };
  check_output_bytes(op, sizes, odt, source);

  // The crop uses `seed` as random_crop does; the mask its own stream (derive_seed(seed, 1)).
  const uint64_t s = static_cast<uint64_t>(seed);
  const int64_t top = kernels::random_crop_offset(kernels::random_word(s, 0), v.h, height, false);
  const int64_t left = kernels::random_crop_offset(kernels::random_word(s, 1), v.w, width, false);
  const int64_t mseed = mask_seed.value_or(kernels::derive_seed(seed, 1));
  // The image first, the largest allocation: if anything cannot be allocated, it is this.
  Tensor out = new_output(op, img, sizes, odt, source);
  // The mask leaves as bits (return_mask) and/or is applied from bool bytes (apply_mask), which
  // the gather reads in step with the pixels; each is drawn from the same generator, so they hold
  // the same mask.
  const std::vector<int64_t> mask_sizes{height, bytes_for_bits(width)};
  Tensor mask = new_output(op, img, return_mask ? mask_sizes : std::vector<int64_t>{0}, ScalarType::Byte, source);
  if (return_mask) {
    kernels::random_dilated_mask(mseed, p, 1, height, width, square, 1, true,
                                 static_cast<uint8_t*>(mask.mutable_data_ptr()));
  }
  std::vector<uint8_t> bools;
  if (apply_mask) {
    bools.resize(static_cast<size_t>(height * width));
    kernels::random_dilated_mask(mseed, p, 1, height, width, square, 1, false, bools.data());
  }
  const kernels::RgbSource src{static_cast<const uint8_t*>(img.const_data_ptr()), v.sc, v.sh, v.sw};
  kernels::crop_mask_ycbcr(src, top, left, height, width, apply_mask ? bools.data() : nullptr, out.mutable_data_ptr(),
                           color_type_code(odt), static_cast<float>(scale));
  return {out, mask};
}

}  // namespace fastprep::ops

STABLE_TORCH_LIBRARY_IMPL(fastprep, CPU, m) { m.impl("crop_mask_ycbcr", TORCH_BOX(&fastprep::ops::crop_mask_ycbcr)); }
