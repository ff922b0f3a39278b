#include "kernels/color.h"

#include <algorithm>
#include <type_traits>

#include "kernels/isa.h"

namespace fastprep::kernels {
namespace {

// uint8 -> uint8 is exact: each output is floor(N / D) for an exact integer N (the formula with
// its decimal constants scaled by D, plus D / 2 for rounding half up), N clamped to [0, 256 D)
// so the result lands in [0, 255]:
//   Y  + 1/2 = (299 R + 587 G + 114 B + 500) / 1000
//   Cb + 1/2 = (-5273 R - 10352 G + 15625 B + 4015625) / 31250     (the 1e-6 constants / 32)
//   Cr + 1/2 = (15625 R - 13084 G - 2541 B + 4015625) / 31250
//   R  + 1/2 = (500 Y + 250 + 701 (Cr - 128)) / 500
//   G  + 1/2 = (125000 Y + 62500 - 43017 (Cb - 128) - 89267 (Cr - 128)) / 125000
//   B  + 1/2 = (250 Y + 125 + 443 (Cb - 128)) / 250
// The division stays in int32 lanes so it vectorises: q0 = (N M) >> S with M = floor(2^S / D)
// (N M < 2^31) is never above floor(N / D) and at most 1 below it on [0, 256 D); the exact
// remainder N - q0 D then decides the last step. tests/test_color.py checks the estimate over
// every N and the end result over all 2^24 colours.
template <int32_t D, int S, int32_t M>
inline int32_t div_clamped(int32_t n) {
  static_assert(M == (int64_t{1} << S) / D && int64_t{256} * D * M < (int64_t{1} << 31), "M, S");
  const int32_t c = std::min<int32_t>(std::max<int32_t>(n, 0), 256 * D - 1);
  const int32_t q0 = (c * M) >> S;
  return q0 + (c - q0 * D >= D ? 1 : 0);
}

inline void rgb_to_ycbcr_u8(int32_t r, int32_t g, int32_t b, int32_t& y, int32_t& cb, int32_t& cr) {
  y = div_clamped<1000, 17, 131>(299 * r + 587 * g + 114 * b + 500);
  cb = div_clamped<31250, 21, 67>(-5273 * r - 10352 * g + 15625 * b + 4015625);
  cr = div_clamped<31250, 21, 67>(15625 * r - 13084 * g - 2541 * b + 4015625);
}

inline void ycbcr_to_rgb_u8(int32_t y, int32_t cb, int32_t cr, int32_t& r, int32_t& g, int32_t& b) {
  cb -= 128;
  cr -= 128;
  r = div_clamped<500, 16, 131>(500 * y + 250 + 701 * cr);
  g = div_clamped<125000, 23, 67>(125000 * y + 62500 - 43017 * cb - 89267 * cr);
  b = div_clamped<250, 15, 131>(250 * y + 125 + 443 * cb);
}

template <typename T> inline float load(const T* p);
template <> inline float load<uint8_t>(const uint8_t* p) { return static_cast<float>(*p); }
template <> inline float load<float>(const float* p) { return *p; }
struct Half { uint16_t bits; };
struct BF16 { uint16_t bits; };
template <> inline float load<Half>(const Half* p) { return half_bits_to_float(p->bits); }
template <> inline float load<BF16>(const BF16* p) { return bf16_bits_to_float(p->bits); }

inline void store(float* p, float v) { *p = v; }
inline void store(Half* p, float v) { p->bits = float_to_half_bits(v); }
inline void store(BF16* p, float v) { p->bits = float_to_bf16_bits(v); }

// The float formulas, evaluated left to right in float32 (the Numba mirror does the same ops).
inline void rgb_to_ycbcr_f(float r, float g, float b, float d, float& y, float& cb, float& cr) {
  y = 0.299f * r + 0.587f * g + 0.114f * b;
  cb = -0.168736f * r - 0.331264f * g + 0.5f * b + d;
  cr = 0.5f * r - 0.418688f * g - 0.081312f * b + d;
}

inline void ycbcr_to_rgb_f(float y, float cb, float cr, float d, float& r, float& g, float& b) {
  r = y + 1.402f * (cr - d);
  g = y - 0.344136f * (cb - d) - 0.714136f * (cr - d);
  b = y + 1.772f * (cb - d);
}

// Pixels go through in chunks: a gather pass (the strided / interleaved reads, as int32 or
// float32) and a compute pass over contiguous temporaries, so the arithmetic vectorises whatever
// the source layout. SW / SC: compile-time column / channel strides when known (1 and 0: planar
// rows; 3 and 1: packed HWC), 0 for runtime strides.
constexpr int64_t kChunk = 256;

template <int SW, int SC, bool Fwd, typename In, typename Out>
FASTPREP_MULTIVERSION void rows(const In* src, int64_t h, int64_t w, int64_t sc_rt, int64_t sh,
                                int64_t sw_rt, Out* out, float delta, float scale) {
  constexpr bool kExact = std::is_same_v<In, uint8_t> && std::is_same_v<Out, uint8_t>;
  using Acc = std::conditional_t<kExact, int32_t, float>;
  const int64_t sw = SW ? SW : sw_rt, sc = SC ? SC : sc_rt;
  const int64_t plane = h * w;
  alignas(64) Acc t0[kChunk], t1[kChunk], t2[kChunk];
  for (int64_t yy = 0; yy < h; ++yy) {
    for (int64_t x0 = 0; x0 < w; x0 += kChunk) {
      const int64_t n = std::min(kChunk, w - x0);
      const In* s = src + yy * sh + x0 * sw;
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (kExact) {
          t0[i] = s[i * sw], t1[i] = s[i * sw + sc], t2[i] = s[i * sw + 2 * sc];
        } else {
          t0[i] = load(s + i * sw), t1[i] = load(s + i * sw + sc), t2[i] = load(s + i * sw + 2 * sc);
        }
      }
      Out* __restrict__ o0 = out + yy * w + x0;
      Out* __restrict__ o1 = o0 + plane;
      Out* __restrict__ o2 = o1 + plane;
      for (int64_t i = 0; i < n; ++i) {
        if constexpr (kExact) {  // in place, narrowed below: mixed widths defeat the vectoriser
          if constexpr (Fwd) rgb_to_ycbcr_u8(t0[i], t1[i], t2[i], t0[i], t1[i], t2[i]);
          else ycbcr_to_rgb_u8(t0[i], t1[i], t2[i], t0[i], t1[i], t2[i]);
        } else {
          float a, b, c;
          if constexpr (Fwd) rgb_to_ycbcr_f(t0[i], t1[i], t2[i], delta, a, b, c);
          else ycbcr_to_rgb_f(t0[i], t1[i], t2[i], delta, a, b, c);
          store(o0 + i, a * scale);
          store(o1 + i, b * scale);
          store(o2 + i, c * scale);
        }
      }
      if constexpr (kExact) {
        for (int64_t i = 0; i < n; ++i) {
          o0[i] = static_cast<uint8_t>(t0[i]), o1[i] = static_cast<uint8_t>(t1[i]);
          o2[i] = static_cast<uint8_t>(t2[i]);
        }
      }
    }
  }
}

template <bool Fwd, typename In, typename Out>
void convert_typed(const ColorSource& s, void* out, float delta, float scale) {
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
