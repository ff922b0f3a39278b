#include "kernels/crop_mask_ycbcr.h"

#include <type_traits>

#include "kernels/color_pixel.h"
#include "kernels/isa.h"

namespace fastprep::kernels {
namespace {

using namespace color_pixel;  // NOLINT: the formulas rgb_to_ycbcr applies, for the same bits

// SW / SC: compile-time column / channel strides when known (3 and 1: packed HWC; 1 and 0:
// planar rows), 0 for runtime strides, so the common layouts vectorise.
template <int SW, int SC, typename Out>
void rows(const RgbSource& s, int64_t top, int64_t left, int64_t height, int64_t width,
          const uint8_t* mask, bool apply_mask, Out* out, float scale) {
  const int64_t sw = SW ? SW : s.sw, sc = SC ? SC : s.sc;
  const int64_t plane = height * width, mask_row = (width + 7) / 8;
  for (int64_t y = 0; y < height; ++y) {
    const uint8_t* row = s.data + (top + y) * s.sh + left * s.sw;
    const uint8_t* m = mask + y * mask_row;
    Out* o0 = out + y * width;
    Out* o1 = o0 + plane;
    Out* o2 = o1 + plane;
    for (int64_t x = 0; x < width; ++x) {
      const uint8_t* p = row + x * sw;
      // mask_fill's zero, branch-free: keep is 0 on masked pixels and 0xFF elsewhere.
      const int32_t keep = apply_mask ? (((m[x >> 3] >> (x & 7)) & 1) - 1) & 0xFF : 0xFF;
      const int32_t r = p[0] & keep, g = p[sc] & keep, b = p[2 * sc] & keep;
      if constexpr (std::is_same_v<Out, uint8_t>) {
        rgb_to_ycbcr_u8(r, g, b, o0[x], o1[x], o2[x]);
      } else {
        float a, c, d;
        rgb_to_ycbcr_f(static_cast<float>(r), static_cast<float>(g), static_cast<float>(b), 128.0f,
                       a, c, d);
        store(o0 + x, a * scale);
        store(o1 + x, c * scale);
        store(o2 + x, d * scale);
      }
    }
  }
}

template <typename Out>
FASTPREP_MULTIVERSION void run(const RgbSource& s, int64_t top, int64_t left, int64_t height,
                               int64_t width, const uint8_t* mask, bool apply_mask, void* out,
                               float scale) {
  Out* o = static_cast<Out*>(out);
  if (s.sw == 3 && s.sc == 1) rows<3, 1>(s, top, left, height, width, mask, apply_mask, o, scale);
  else if (s.sw == 1) rows<1, 0>(s, top, left, height, width, mask, apply_mask, o, scale);
  else rows<0, 0>(s, top, left, height, width, mask, apply_mask, o, scale);
}

}  // namespace

void crop_mask_ycbcr(const RgbSource& src, int64_t top, int64_t left, int64_t height, int64_t width,
                     const uint8_t* mask, bool apply_mask, void* out, int out_type, float scale) {
  switch (out_type) {
    case kU8: run<uint8_t>(src, top, left, height, width, mask, apply_mask, out, scale); break;
    case kF32: run<float>(src, top, left, height, width, mask, apply_mask, out, scale); break;
    case kF16: run<Half>(src, top, left, height, width, mask, apply_mask, out, scale); break;
    default: run<BF16>(src, top, left, height, width, mask, apply_mask, out, scale); break;
  }
}

}  // namespace fastprep::kernels
