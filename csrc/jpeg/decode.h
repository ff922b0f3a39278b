// JPEG decoding on raw pointers with libjpeg-turbo (>= 1.5: jpeg_crop_scanline, jpeg_skip_scanlines),
// torch-free and Python-free: the pybind11 module fastprep._jpeg (csrc/jpeg/module.cpp) wraps it.
//
// decode() writes a window of the image into any strided uint8 [channel, row, column] output.
// It decodes only the iMCU rows and columns that the window needs (plus one iMCU column of
// margin on each side when chroma is upsampled horizontally, see decode.cpp) and gives the same
// bits as a full decode cropped afterwards. DCT: JDCT_ISLOW; upsampling: libjpeg's default
// "fancy" (triangular) filter, as Pillow and torchvision decode.
//
// With `scale` M < 8 (libjpeg-turbo's scale_num / scale_denom = M / 8) the image is decoded at M/8 of
// its size by a reduced inverse DCT (fewer output pixels per 8x8 block; entropy decoding is not
// reduced), and the window is in that scaled image's pixels (scaled_extent): the same bits as
// libjpeg-turbo's own scaled decode of the whole image, cropped.
//
// libjpeg's fatal errors never exit(): they longjmp back into decode.cpp and become a JpegError.
// Its warnings (corrupt data it recovered from) are returned as text.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace fastprep::jpeg {

// The libjpeg-turbo version compiled against ("2.1.5").
const char* libjpeg_turbo_version();

enum class ColorSpace { kGray, kYCbCr, kRGB, kCMYK, kYCCK, kOther };
const char* color_space_name(ColorSpace cs);
// The colour space of libjpeg's J_COLOR_SPACE value `jcs` (its jpeg_color_space).
ColorSpace color_space_of(int jcs);

// What the output channels hold. kYCbCr is the JPEG's own Y, Cb, Cr (upsampled, no colour
// conversion) for YCbCr and greyscale JPEGs (grey gets Cb = Cr = 128), and fastprep's rgb_to_ycbcr
// of the RGB for CMYK / YCCK ones (cmyk.h); an RGB-coded JPEG is refused (the caller converts).
// A CMYK / YCCK JPEG gives Pillow's convert("RGB") / convert("L") bits in kRGB / kGray (cmyk.h).
enum class Mode { kRGB, kYCbCr, kGray };
inline int mode_channels(Mode m) { return m == Mode::kGray ? 1 : 3; }

struct Header {
  int64_t height = 0, width = 0;
  int components = 0;
  ColorSpace color_space = ColorSpace::kOther;
  bool progressive = false;
  int h_samp[4] = {0, 0, 0, 0}, v_samp[4] = {0, 0, 0, 0};  // per component (first 4)
  int imcu_width = 0, imcu_height = 0;                     // pixels of one iMCU
};

// libjpeg-turbo's scale_denom for a reduced decode: scales are M / 8, M in 1..8.
constexpr int kScaleDenom = 8;

// The size of an n-pixel axis decoded at scale M / 8 (libjpeg-turbo's jdiv_round_up(n * M, 8)).
inline int64_t scaled_extent(int64_t n, int scale) { return (n * scale + kScaleDenom - 1) / kScaleDenom; }

struct Window {
  int64_t top, left, height, width;
};

// Whether window w lies inside a height x width image. Each test is a subtraction of in-range
// values: no overflow for any int64 window.
inline bool window_inside(const Window& w, int64_t height, int64_t width) {
  return w.top >= 0 && w.left >= 0 && w.height >= 1 && w.width >= 1 && w.top <= height - w.height &&
         w.left <= width - w.width;
}

// "crop (top=.., left=.., height=.., width=..) is not inside the HxW image": the refusal of a window
// outside its image, for the decoder and the restart-interval cut alike.
std::string window_outside(const Window& w, int64_t height, int64_t width);

// Element strides (bytes, uint8) of the output's channel, row and column axes.
struct Output {
  uint8_t* data;
  int64_t sc, sh, sw;
};

class JpegError : public std::runtime_error {
 public:
  JpegError(const std::string& message, int64_t offset) : std::runtime_error(message), offset(offset) {}
  int64_t offset;  // bytes of the input libjpeg had consumed when it failed; -1 if not known
};

// An argument that is wrong whatever the data (a window outside the image, a mode the JPEG's
// colour space cannot give): the binding turns it into ValueError as well, without an offset.
class ArgumentError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

Header read_header(const uint8_t* data, size_t size);

// Decodes `window` of the image (at scale / 8 of its size: the window is in the scaled image's pixels)
// into out ([mode_channels(mode), window.height, window.width]).
// Returns libjpeg's warnings (corrupt data recovered from), at most kMaxWarnings of them, plus a
// line counting the rest; with `strict`, the first warning is a JpegError instead. Throws
// JpegError / ArgumentError. Thread-safe; holds no global state.
std::vector<std::string> decode(const uint8_t* data, size_t size, const Window& window, Mode mode, const Output& out,
                                bool strict, int scale = kScaleDenom);

constexpr int kMaxWarnings = 4;

}  // namespace fastprep::jpeg
