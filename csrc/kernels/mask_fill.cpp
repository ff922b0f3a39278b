#include "kernels/mask_fill.h"

#include <cstddef>
#include <vector>

#include "kernels/isa.h"

namespace fastprep::kernels {
namespace {

// One image row's mask as 0/1 bytes, so the fill loops below are branch-free selects.
void row_bits(const uint8_t* mrow, int64_t w, bool packed, uint8_t* bits) {
  if (packed) {
    for (int64_t x = 0; x < w; ++x) bits[x] = static_cast<uint8_t>((mrow[x >> 3] >> (x & 7)) & 1);
  } else {
    for (int64_t x = 0; x < w; ++x) bits[x] = mrow[x] != 0;
  }
}

template <typename T>
FASTPREP_MULTIVERSION void fill_typed(T* data, const FillView& v, const uint8_t* mask, int64_t mask_n,
                                      bool packed, T value) {
  const int64_t row_bytes = packed ? (v.w + 7) / 8 : v.w;
  std::vector<uint8_t> bits(static_cast<size_t>(v.w));
  // Pixel-major (HWC-like: channels closer than pixels) vs plane-major loops: the inner loop
  // always walks the smaller stride.
  const bool pixel_major = v.sc < v.sw;
  for (int64_t n = 0; n < v.n; ++n) {
    const uint8_t* mimg = mask + (mask_n == 1 ? 0 : n) * v.h * row_bytes;
    for (int64_t y = 0; y < v.h; ++y) {
      row_bits(mimg + y * row_bytes, v.w, packed, bits.data());
      T* row = data + n * v.sn + y * v.sh;
      if (pixel_major) {
        for (int64_t x = 0; x < v.w; ++x) {
          if (!bits[x]) continue;
          T* px = row + x * v.sw;
          for (int64_t c = 0; c < v.c; ++c) px[c * v.sc] = value;
        }
      } else if (v.sw == 1) {
        for (int64_t c = 0; c < v.c; ++c) {
          T* plane = row + c * v.sc;
          for (int64_t x = 0; x < v.w; ++x) plane[x] = bits[x] ? value : plane[x];
        }
      } else {
        for (int64_t c = 0; c < v.c; ++c) {
          T* plane = row + c * v.sc;
          for (int64_t x = 0; x < v.w; ++x) {
            if (bits[x]) plane[x * v.sw] = value;
          }
        }
      }
    }
  }
}

}  // namespace

void mask_fill(void* data, int elem_size, const FillView& v, const uint8_t* mask, int64_t mask_n,
               bool packed, uint32_t value_bits) {
  switch (elem_size) {
    case 1:
      fill_typed(static_cast<uint8_t*>(data), v, mask, mask_n, packed, static_cast<uint8_t>(value_bits));
      break;
    case 2:
      fill_typed(static_cast<uint16_t*>(data), v, mask, mask_n, packed, static_cast<uint16_t>(value_bits));
      break;
    default:
      fill_typed(static_cast<uint32_t*>(data), v, mask, mask_n, packed, value_bits);
      break;
  }
}

}  // namespace fastprep::kernels
