#include "kernels/color.h"
#include "kernels/color_pixel.h"

#include <algorithm>
#include <type_traits>

#include "kernels/color_simd.h"
#include "kernels/isa.h"

namespace fastprep::kernels {
namespace {

using namespace color_pixel;  // NOLINT: the per-pixel formulas shared with crop_mask_ycbcr

// Pixels go through in chunks: a gather pass (the strided / interleaved reads, as int32 or
// float32) and a compute pass over contiguous temporaries, so the arithmetic vectorises whatever
// the source layout. SW / SC: compile-time column / channel strides when known (1 and 0: planar
// rows; 3 and 1: packed HWC), 0 for runtime strides.
template <int SW, int SC, bool Fwd, typename In, typename Out>
struct Rows {
  template <Isa L>
  static FASTPREP_INLINE void run(const In* src, int64_t h, int64_t w, int64_t sc_rt, int64_t sh, int64_t sw_rt,
                                  Out* out, float delta, float scale) {
    using Acc = ChunkAcc<Fwd, In, Out>;
    const int64_t sw = SW ? SW : sw_rt, sc = SC ? SC : sc_rt;
    const int64_t plane = h * w;
    if constexpr (std::is_same_v<In, uint8_t> && std::is_same_v<Out, uint8_t> && Fwd && SW != 0 &&
                  color_simd::kHasExactRows<L>) {
      // Exact uint8 RGB -> YCbCr of packed or planar rows: the SIMD rows (color_simd.h).
      for (int64_t yy = 0; yy < h; ++yy) {
        const In* s = src + yy * sh;
        Out* o = out + yy * w;
        if constexpr (SW == 3) {
          color_simd::rgb_to_ycbcr_packed<L>(s, w, nullptr, o, o + plane, o + 2 * plane);
        } else {
          color_simd::rgb_to_ycbcr_planar<L>(s, s + sc, s + 2 * sc, w, nullptr, o, o + plane, o + 2 * plane);
        }
      }
      return;
    }
    alignas(64) Acc t0[kChunk], t1[kChunk], t2[kChunk];
    for (int64_t yy = 0; yy < h; ++yy) {
      for (int64_t x0 = 0; x0 < w; x0 += kChunk) {
        const int64_t n = std::min(kChunk, w - x0);
        const In* s = src + yy * sh + x0 * sw;
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (std::is_same_v<In, uint8_t>) {
            t0[i] = s[i * sw], t1[i] = s[i * sw + sc], t2[i] = s[i * sw + 2 * sc];
          } else {
            t0[i] = load(s + i * sw), t1[i] = load(s + i * sw + sc), t2[i] = load(s + i * sw + 2 * sc);
          }
        }
        Out* o0 = out + yy * w + x0;
        convert_chunk<Fwd>(t0, t1, t2, n, o0, o0 + plane, o0 + 2 * plane, delta, scale);
      }
    }
  }
};

template <bool Fwd, typename In, typename Out>
void convert_typed(const ColorSource& s, void* out, float delta, float scale) {
  const In* src = static_cast<const In*>(s.data);
  Out* o = static_cast<Out*>(out);
  if (s.sw == 1)
    dispatch<Rows<1, 0, Fwd, In, Out>>(src, s.h, s.w, s.sc, s.sh, s.sw, o, delta, scale);
  else if (s.sw == 3 && s.sc == 1)
    dispatch<Rows<3, 1, Fwd, In, Out>>(src, s.h, s.w, s.sc, s.sh, s.sw, o, delta, scale);
  else
    dispatch<Rows<0, 0, Fwd, In, Out>>(src, s.h, s.w, s.sc, s.sh, s.sw, o, delta, scale);
}

template <bool Fwd, typename In>
void convert_in(const ColorSource& s, void* out, int out_type, float delta, float scale) {
  switch (out_type) {
    case kU8:  // only from uint8: the bindings reject float -> uint8
      if constexpr (std::is_same_v<In, uint8_t>) convert_typed<Fwd, In, uint8_t>(s, out, delta, scale);
      break;
    case kF32:
      convert_typed<Fwd, In, float>(s, out, delta, scale);
      break;
    case kF16:
      convert_typed<Fwd, In, Half>(s, out, delta, scale);
      break;
    default:
      convert_typed<Fwd, In, BF16>(s, out, delta, scale);
      break;
  }
}

template <bool Fwd>
void convert_dir(const ColorSource& s, int in_type, void* out, int out_type, float scale) {
  switch (in_type) {
    case kU8:
      convert_in<Fwd, uint8_t>(s, out, out_type, 128.0f, scale);
      break;
    case kF32:
      convert_in<Fwd, float>(s, out, out_type, 0.5f, scale);
      break;
    case kF16:
      convert_in<Fwd, Half>(s, out, out_type, 0.5f, scale);
      break;
    default:
      convert_in<Fwd, BF16>(s, out, out_type, 0.5f, scale);
      break;
  }
}

}  // namespace

void convert_color(const ColorSource& src, int in_type, void* out, int out_type, bool forward, float scale) {
  if (forward)
    convert_dir<true>(src, in_type, out, out_type, scale);
  else
    convert_dir<false>(src, in_type, out, out_type, scale);
}

}  // namespace fastprep::kernels
