#include "kernels/crop_mask_ycbcr.h"

#include <algorithm>
#include <memory>
#include <type_traits>

#include "kernels/color_pixel.h"
#include "kernels/color_simd.h"
#include "kernels/isa.h"
#include "kernels/mask_rows.h"

namespace fastprep::kernels {
namespace {

using namespace color_pixel;  // NOLINT: the arithmetic rgb_to_ycbcr runs, for the same bits

// A flipped read of packed RGB (column stride -3), on levels with no reversed rows of their own
// (color_simd.h), is turned into planar R, G, B rows first (rowbuf: 6 * n bytes): the window's
// bytes reversed (pixels right to left, each B, G, R), then split into planes; both loops
// vectorise, as crop.cpp's.
FASTPREP_INLINE void reversed_planes(const uint8_t* lo, int64_t n, uint8_t* rowbuf) {
  const int64_t bytes = 3 * n;
  uint8_t* rev = rowbuf;
  uint8_t* r = rowbuf + bytes;
  for (int64_t i = 0; i < bytes; ++i) rev[i] = lo[bytes - 1 - i];
  for (int64_t x = 0; x < n; ++x) {
    r[x] = rev[3 * x + 2];
    r[n + x] = rev[3 * x + 1];
    r[2 * n + x] = rev[3 * x];
  }
}

// A flipped read of planar rows (column stride -1): each plane's pixels reversed into rowbuf, from
// rowbuf + 3 n where reversed_planes puts its planes (a loop that vectorises; through runtime
// strides the flipped CHW window took 4x the unflipped one). row is the window's rightmost pixel.
FASTPREP_INLINE void reversed_plane_rows(const uint8_t* row, int64_t sc, int64_t n, uint8_t* rowbuf) {
  uint8_t* planes = rowbuf + 3 * n;
  for (int64_t ch = 0; ch < 3; ++ch) {
    const uint8_t* lo = row + ch * sc - (n - 1);
    for (int64_t i = 0; i < n; ++i) planes[ch * n + i] = lo[n - 1 - i];
  }
}

// The window's rows lie a source row apart, so a crop of a large image starts a new stream every
// row: the hardware prefetcher (which follows streams within a page) misses each row's first lines.
// Touching the row kPrefetchRows ahead hides that (a cold 256^2 window of a 1024^2 image: ~3 us).
constexpr int64_t kPrefetchRows = 4;

// The window's row at `row`: `width` pixels `sw` bytes apart (sw < 0: a flipped read, right to
// left), channels `sc` apart. A prefetch never faults, so the rounding past either end is harmless.
FASTPREP_INLINE void prefetch_row(const uint8_t* row, int64_t width, int64_t sw, int64_t sc) {
  const int64_t span = width * (sw < 0 ? -sw : sw);
  const bool planar = (sc < 0 ? -sc : sc) >= span;  // channels in planes: three rows
  for (int ch = 0; ch < (planar ? 3 : 1); ++ch) {
    const uint8_t* lo = row + ch * sc + (sw < 0 ? width * sw : 0);
    for (int64_t i = 0; i < span + 63; i += 64) __builtin_prefetch(lo + i);
  }
}

// As color.cpp: a gather pass (strided reads, the mask applied as mask_fill's zero) into
// contiguous temporaries, then convert_chunk. SW / SC: compile-time column / channel strides
// when known (3 and 1: packed HWC; 1 and 0: planar rows; -3 and 1, -1 and 0: packed HWC and planar
// rows read right to left, made planar rows in `rowbuf` first), 0 for runtime strides.
template <int SW, int SC, typename Out>
struct Rows {
  static constexpr bool kReversed = SW == -3 || SW == -1;
  static constexpr int kSW = kReversed ? 1 : SW;  // the column stride of the row the gather reads

  // mw: the row's mask words or null; mrow: width bytes of scratch for them as bytes.
  template <Isa L>
  static FASTPREP_INLINE void one_row(const uint8_t* row, int64_t sw, int64_t sc, int64_t width, const uint64_t* mw,
                                      uint8_t* mrow, Out* o, int64_t plane, float scale) {
    using Acc = ChunkAcc<true, uint8_t, Out>;
    if constexpr (std::is_same_v<Out, uint8_t> && kSW != 0 && color_simd::kHasExactRows<L>) {
      // uint8 out on packed or planar rows: the exact SIMD rows (color_simd.h), which apply the
      // mask words as the (0, 128, 128) a zeroed pixel converts to.
      if constexpr (kSW == 3) {
        color_simd::rgb_to_ycbcr_packed<L>(row, width, mw, o, o + plane, o + 2 * plane);
      } else {
        color_simd::rgb_to_ycbcr_planar<L>(row, row + sc, row + 2 * sc, width, mw, o, o + plane, o + 2 * plane);
      }
      return;
    }
    const uint8_t* m = nullptr;  // the gather reads the mask a byte a pixel
    if (mw != nullptr) mask_rows::words_to_bools<L>(mw, width, mrow), m = mrow;
    alignas(64) Acc t0[kChunk], t1[kChunk], t2[kChunk];
    for (int64_t x0 = 0; x0 < width; x0 += kChunk) {
      const int64_t n = std::min(kChunk, width - x0);
      const uint8_t* p = row + x0 * sw;
      if (m) {
        for (int64_t i = 0; i < n; ++i) {
          // mask_fill's zero, branch-free: keep is 0 on masked pixels and 0xFF elsewhere.
          const int32_t keep = m[x0 + i] ? 0 : 0xFF;
          t0[i] = static_cast<Acc>(p[i * sw] & keep);
          t1[i] = static_cast<Acc>(p[i * sw + sc] & keep);
          t2[i] = static_cast<Acc>(p[i * sw + 2 * sc] & keep);
        }
      } else {
        for (int64_t i = 0; i < n; ++i) {
          t0[i] = static_cast<Acc>(p[i * sw]);
          t1[i] = static_cast<Acc>(p[i * sw + sc]);
          t2[i] = static_cast<Acc>(p[i * sw + 2 * sc]);
        }
      }
      Out* o0 = o + x0;
      convert_chunk<true>(t0, t1, t2, n, o0, o0 + plane, o0 + 2 * plane, 128.0f, scale);
    }
  }

  // rowbuf: 7 * width bytes of scratch (a flipped row's planes, then a row of mask bytes). trow:
  // null, or 3 * width elements: a transposed write makes each row there (planes width apart),
  // then copies it into out's column y (the same values: the conversion is per pixel).
  template <Isa L>
  static FASTPREP_INLINE void run(const RgbSource s, int64_t top, int64_t left, int64_t height, int64_t width,
                                  const uint64_t* mask, Out* out, float scale, uint8_t* rowbuf, Out* trow) {
    const int64_t sw = kSW ? kSW : s.sw, sc = kReversed ? width : SC ? SC : s.sc;
    const int64_t plane = height * width, wpr = words_per_row(width);
    const int64_t row_plane = trow ? width : plane;
    for (int64_t y = 0; y < height; ++y) {
      const uint8_t* row = s.data + (top + y) * s.sh + left * s.sw;
      const uint64_t* mw = mask ? mask + y * wpr : nullptr;
      Out* o = trow ? trow : out + y * width;
      if (y + kPrefetchRows < height) prefetch_row(row + kPrefetchRows * s.sh, width, s.sw, s.sc);
      if constexpr (SW == -3 && std::is_same_v<Out, uint8_t> && color_simd::kHasReversedRows<L>) {
        // row is the window's rightmost pixel
        color_simd::rgb_to_ycbcr_packed_reversed<L>(row - 3 * (width - 1), width, mw, o, o + row_plane,
                                                    o + 2 * row_plane);
      } else {
        if constexpr (SW == -3) reversed_planes(row - 3 * (width - 1), width, rowbuf);  // row: the rightmost pixel
        if constexpr (SW == -1) reversed_plane_rows(row, s.sc, width, rowbuf);
        if constexpr (kReversed) row = rowbuf + 3 * width;  // its R plane; G and B follow
        one_row<L>(row, sw, sc, width, mw, rowbuf + 6 * width, o, row_plane, scale);
      }
      if (trow) {  // out is [3, width, height]: the row is its column y
        for (int64_t ch = 0; ch < 3; ++ch) {
          for (int64_t x = 0; x < width; ++x) out[ch * plane + x * height + y] = trow[ch * width + x];
        }
      }
    }
  }
};

template <typename Out>
void run(const RgbSource& s, int64_t top, int64_t left, int64_t height, int64_t width, const uint64_t* mask, void* out,
         float scale, bool transpose) {
  Out* o = static_cast<Out*>(out);
  // Not zero-filled: every byte a row uses is written before it is read.
  const std::unique_ptr<uint8_t[]> rowbuf(new uint8_t[static_cast<size_t>(7 * width)]);
  const std::unique_ptr<Out[]> trow(transpose ? new Out[static_cast<size_t>(3 * width)] : nullptr);
  if (s.sw == 3 && s.sc == 1) {
    dispatch<Rows<3, 1, Out>>(s, top, left, height, width, mask, o, scale, rowbuf.get(), trow.get());
  } else if (s.sw == -3 && s.sc == 1) {
    dispatch<Rows<-3, 1, Out>>(s, top, left, height, width, mask, o, scale, rowbuf.get(), trow.get());
  } else if (s.sw == 1) {
    dispatch<Rows<1, 0, Out>>(s, top, left, height, width, mask, o, scale, rowbuf.get(), trow.get());
  } else if (s.sw == -1) {
    dispatch<Rows<-1, 0, Out>>(s, top, left, height, width, mask, o, scale, rowbuf.get(), trow.get());
  } else {
    dispatch<Rows<0, 0, Out>>(s, top, left, height, width, mask, o, scale, rowbuf.get(), trow.get());
  }
}

}  // namespace

void crop_mask_ycbcr(const RgbSource& src, int64_t top, int64_t left, int64_t height, int64_t width,
                     const uint64_t* mask, void* out, int out_type, float scale, bool transpose) {
  switch (out_type) {
    case kU8:
      run<uint8_t>(src, top, left, height, width, mask, out, scale, transpose);
      break;
    case kF32:
      run<float>(src, top, left, height, width, mask, out, scale, transpose);
      break;
    case kF16:
      run<Half>(src, top, left, height, width, mask, out, scale, transpose);
      break;
    default:
      run<BF16>(src, top, left, height, width, mask, out, scale, transpose);
      break;
  }
}

}  // namespace fastprep::kernels
