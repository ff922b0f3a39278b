#include "kernels/crop.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/isa.h"

namespace fastprep::kernels {
namespace {

// Row y of every output plane. [x0, x1) is the part of the row inside the image. A negative sw
// is a left-right flipped read (ops/crop.cpp): its two common forms get reversals that vectorise,
// packed RGB through `rowbuf` (3 * width elements).
template <typename T>
struct CropRows {
  template <Isa L>
  static FASTPREP_INLINE void run(const T* src, T* out, int64_t c, int64_t sc, int64_t sh, int64_t sw, int64_t h,
                                  int64_t top, int64_t left, int64_t height, int64_t width, int64_t x0, int64_t x1,
                                  T fill, T* rowbuf) {
    const int64_t plane = height * width;
    for (int64_t y = 0; y < height; ++y) {
      const int64_t sy = top + y;
      T* orow = out + y * width;
      if (sy < 0 || sy >= h) {
        for (int64_t ch = 0; ch < c; ++ch) std::fill(orow + ch * plane, orow + ch * plane + width, fill);
        continue;
      }
      for (int64_t ch = 0; ch < c; ++ch) {
        std::fill(orow + ch * plane, orow + ch * plane + x0, fill);
        std::fill(orow + ch * plane + x1, orow + ch * plane + width, fill);
      }
      const int64_t n = x1 - x0;
      if (n <= 0) continue;
      const T* srow = src + sy * sh + (left + x0) * sw;
      if (c == 3 && sc == 1 && sw == -3) {
        // The n pixels end at srow: reversed elementwise (pixels right to left, channels B, G, R),
        // then split into planes with B and R swapped back.
        const T* lo = srow - 3 * (n - 1);
        for (int64_t i = 0; i < 3 * n; ++i) rowbuf[i] = lo[3 * n - 1 - i];
        T* o0 = orow + x0;
        T* o1 = o0 + plane;
        T* o2 = o1 + plane;
        for (int64_t x = 0; x < n; ++x) {
          o0[x] = rowbuf[3 * x + 2];
          o1[x] = rowbuf[3 * x + 1];
          o2[x] = rowbuf[3 * x];
        }
      } else if (sw == -1) {
        for (int64_t ch = 0; ch < c; ++ch) {
          const T* s = srow + ch * sc;
          T* o = orow + ch * plane + x0;
          for (int64_t x = 0; x < n; ++x) o[x] = s[-x];
        }
      } else if (c == 3 && sc == 1 && sw == 3) {
        // Packed HWC RGB, the common decoder output: deinterleave in one pass over the row.
        T* o0 = orow + x0;
        T* o1 = o0 + plane;
        T* o2 = o1 + plane;
        for (int64_t x = 0; x < n; ++x) {
          o0[x] = srow[3 * x];
          o1[x] = srow[3 * x + 1];
          o2[x] = srow[3 * x + 2];
        }
      } else if (sw == 1) {
        for (int64_t ch = 0; ch < c; ++ch) {
          std::memcpy(orow + ch * plane + x0, srow + ch * sc, static_cast<size_t>(n) * sizeof(T));
        }
      } else if (sc < sw) {
        // Interleaved (HWC-like): walk pixels once, scatter channels to their planes.
        for (int64_t x = 0; x < n; ++x) {
          for (int64_t ch = 0; ch < c; ++ch) orow[ch * plane + x0 + x] = srow[x * sw + ch * sc];
        }
      } else {
        for (int64_t ch = 0; ch < c; ++ch) {
          const T* s = srow + ch * sc;
          T* o = orow + ch * plane + x0;
          for (int64_t x = 0; x < n; ++x) o[x] = s[x * sw];
        }
      }
    }
  }
};

template <typename T>
void crop_typed(const CropSource& s, void* out, int64_t top, int64_t left, int64_t height, int64_t width,
                uint32_t fill_bits) {
  T fill;
  std::memcpy(&fill, &fill_bits, sizeof(T));  // little-endian: the low bytes
  const int64_t x0 = std::clamp<int64_t>(-left, 0, width);
  const int64_t x1 = std::clamp<int64_t>(s.w - left, x0, width);
  std::vector<T> rowbuf(s.c == 3 && s.sc == 1 && s.sw == -3 ? static_cast<size_t>(3 * (x1 - x0)) : 0);
  dispatch<CropRows<T>>(static_cast<const T*>(s.data), static_cast<T*>(out), s.c, s.sc, s.sh, s.sw, s.h, top, left,
                        height, width, x0, x1, fill, rowbuf.data());
}

}  // namespace

void crop(const CropSource& src, void* out, int elem_size, int64_t top, int64_t left, int64_t height, int64_t width,
          uint32_t fill_bits) {
  switch (elem_size) {
    case 1:
      crop_typed<uint8_t>(src, out, top, left, height, width, fill_bits);
      break;
    case 2:
      crop_typed<uint16_t>(src, out, top, left, height, width, fill_bits);
      break;
    default:
      crop_typed<uint32_t>(src, out, top, left, height, width, fill_bits);
      break;
  }
}

}  // namespace fastprep::kernels
