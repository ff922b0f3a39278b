#include "jpeg/cmyk.h"

#include "kernels/color_pixel.h"

namespace fastprep::jpeg {
namespace {

// Pillow's MULDIV255(a, b): round(a * b / 255) for a, b in [0, 255].
inline int muldiv255(int a, int b) {
  const int t = a * b + 128;
  return ((t >> 8) + t) >> 8;
}

// Pillow's cmyk2rgb of libjpeg's samples c, m, y, k (its C, M, Y, K being 255 minus them).
inline void pixel_rgb(const uint8_t* p, int& r, int& g, int& b) {
  const int nk = p[3];  // Pillow's 255 - K
  r = nk - muldiv255(255 - p[0], nk);
  g = nk - muldiv255(255 - p[1], nk);
  b = nk - muldiv255(255 - p[2], nk);
}

}  // namespace

void convert_cmyk(const uint8_t* cmyk, uint8_t* out, int64_t n, Mode mode) {
  int r, g, b;
  switch (mode) {
    case Mode::kRGB:
      for (int64_t x = 0; x < n; ++x, cmyk += 4, out += 3) {
        pixel_rgb(cmyk, r, g, b);
        out[0] = static_cast<uint8_t>(r), out[1] = static_cast<uint8_t>(g), out[2] = static_cast<uint8_t>(b);
      }
      return;
    case Mode::kGray:
      for (int64_t x = 0; x < n; ++x, cmyk += 4) {
        pixel_rgb(cmyk, r, g, b);
        out[x] = static_cast<uint8_t>((19595 * r + 38470 * g + 7471 * b + 0x8000) >> 16);
      }
      return;
    case Mode::kYCbCr:
      for (int64_t x = 0; x < n; ++x, cmyk += 4, out += 3) {
        pixel_rgb(cmyk, r, g, b);
        float y, cb, cr;
        kernels::color_pixel::rgb_to_ycbcr_u8(static_cast<float>(r), static_cast<float>(g), static_cast<float>(b), y,
                                              cb, cr);
        out[0] = static_cast<uint8_t>(y), out[1] = static_cast<uint8_t>(cb), out[2] = static_cast<uint8_t>(cr);
      }
      return;
  }
}

}  // namespace fastprep::jpeg
