#include "kernels/color.h"
#include "kernels/color_pixel.h"

#include <algorithm>
#include <type_traits>

#include "kernels/isa.h"

namespace fastprep::kernels {
namespace {

using namespace color_pixel;  // NOLINT: the per-pixel formulas shared with crop_mask_ycbcr

// SW / SC: compile-time column / channel strides when known (1 and 0: planar rows; 3 and 1:
// packed HWC), 0 for runtime strides. Known strides let the compiler vectorise the loads.
template <int SW, int SC, bool Fwd, typename In, typename Out>
void rows(const In* src, int64_t h, int64_t w, int64_t sc_rt, int64_t sh, int64_t sw_rt, Out* out,
          float delta, float scale) {
  const int64_t sw = SW ? SW : sw_rt, sc = SC ? SC : sc_rt;
  const int64_t plane = h * w;
  for (int64_t yy = 0; yy < h; ++yy) {
    const In* s = src + yy * sh;
    Out* o0 = out + yy * w;
    Out* o1 = o0 + plane;
    Out* o2 = o1 + plane;
    for (int64_t x = 0; x < w; ++x) {
      const In* p = s + x * sw;
      if constexpr (std::is_same_v<In, uint8_t> && std::is_same_v<Out, uint8_t>) {
        if constexpr (Fwd) rgb_to_ycbcr_u8(p[0], p[sc], p[2 * sc], o0[x], o1[x], o2[x]);
        else ycbcr_to_rgb_u8(p[0], p[sc], p[2 * sc], o0[x], o1[x], o2[x]);
      } else {
        float a, b, c;
        if constexpr (Fwd) rgb_to_ycbcr_f(load(p), load(p + sc), load(p + 2 * sc), delta, a, b, c);
        else ycbcr_to_rgb_f(load(p), load(p + sc), load(p + 2 * sc), delta, a, b, c);
        store(o0 + x, a * scale);
        store(o1 + x, b * scale);
        store(o2 + x, c * scale);
      }
    }
  }
}

template <bool Fwd, typename In, typename Out>
FASTPREP_MULTIVERSION void convert_typed(const ColorSource& s, void* out, float delta, float scale) {
  const In* src = static_cast<const In*>(s.data);
  Out* o = static_cast<Out*>(out);
  if (s.sw == 1) rows<1, 0, Fwd>(src, s.h, s.w, s.sc, s.sh, s.sw, o, delta, scale);
  else if (s.sw == 3 && s.sc == 1) rows<3, 1, Fwd>(src, s.h, s.w, s.sc, s.sh, s.sw, o, delta, scale);
  else rows<0, 0, Fwd>(src, s.h, s.w, s.sc, s.sh, s.sw, o, delta, scale);
}

template <bool Fwd, typename In>
void convert_in(const ColorSource& s, void* out, int out_type, float delta, float scale) {
  switch (out_type) {
    case kU8:  // only from uint8: the bindings reject float -> uint8
      if constexpr (std::is_same_v<In, uint8_t>) convert_typed<Fwd, In, uint8_t>(s, out, delta, scale);
      break;
    case kF32: convert_typed<Fwd, In, float>(s, out, delta, scale); break;
    case kF16: convert_typed<Fwd, In, Half>(s, out, delta, scale); break;
    default: convert_typed<Fwd, In, BF16>(s, out, delta, scale); break;
  }
}

template <bool Fwd>
void convert_dir(const ColorSource& s, int in_type, void* out, int out_type, float scale) {
  switch (in_type) {
    case kU8: convert_in<Fwd, uint8_t>(s, out, out_type, 128.0f, scale); break;
    case kF32: convert_in<Fwd, float>(s, out, out_type, 0.5f, scale); break;
    case kF16: convert_in<Fwd, Half>(s, out, out_type, 0.5f, scale); break;
    default: convert_in<Fwd, BF16>(s, out, out_type, 0.5f, scale); break;
  }
}

}  // namespace

void convert_color(const ColorSource& src, int in_type, void* out, int out_type, bool forward,
                   float scale) {
  if (forward) convert_dir<true>(src, in_type, out, out_type, scale);
  else convert_dir<false>(src, in_type, out, out_type, scale);
}

}  // namespace fastprep::kernels
