#include "jpeg/rows.h"

#include <cstring>

#include "kernels/isa.h"

namespace fastprep::jpeg {
namespace {

// RGB / YCbCr pixels into three planes: the CHW de-interleave, compiled per ISA level through the
// kernels' dispatch (stride-3 byte loads vectorise with the byte shuffles of SSSE3 and later, not
// with baseline SSE2), so FASTPREP_ISA steers it like every kernel.
struct Deinterleave3 {
  template <kernels::Isa L>
  static FASTPREP_INLINE void run(const uint8_t* __restrict src, uint8_t* __restrict d0, uint8_t* __restrict d1,
                                  uint8_t* __restrict d2, int64_t n) {
    for (int64_t x = 0; x < n; ++x) {
      d0[x] = src[3 * x];
      d1[x] = src[3 * x + 1];
      d2[x] = src[3 * x + 2];
    }
  }
};

void deinterleave3(const uint8_t* src, uint8_t* d0, uint8_t* d1, uint8_t* d2, int64_t n) {
  kernels::dispatch<Deinterleave3>(src, d0, d1, d2, n);
}

}  // namespace

void put_row(const uint8_t* src, int src_channels, const Output& out, int channels, int64_t y, int64_t width) {
  uint8_t* dst = out.data + y * out.sh;
  if (src_channels == channels && out.sc == 1 && out.sw == channels) {  // HWC, contiguous row
    std::memcpy(dst, src, static_cast<size_t>(width * channels));
    return;
  }
  if (src_channels == 3 && out.sw == 1) {  // CHW planes
    deinterleave3(src, dst, dst + out.sc, dst + 2 * out.sc, width);
    return;
  }
  for (int c = 0; c < src_channels; ++c) {
    uint8_t* d = dst + c * out.sc;
    for (int64_t x = 0; x < width; ++x) d[x * out.sw] = src[x * src_channels + c];
  }
  for (int c = src_channels; c < channels; ++c) {  // YCbCr of a grey JPEG: neutral chroma
    uint8_t* d = dst + c * out.sc;
    for (int64_t x = 0; x < width; ++x) d[x * out.sw] = 128;
  }
}

}  // namespace fastprep::jpeg
