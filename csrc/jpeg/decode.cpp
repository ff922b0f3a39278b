// libjpeg-turbo driven through setjmp/longjmp (libjpeg_errors.h). The functions that call libjpeg
// (run_header, run_decode) keep only trivially destructible state in their frames, since a
// longjmp skips destructors; C++ objects (strings, vectors, exceptions) are made after they return.
#include "jpeg/decode.h"

#include <algorithm>
#include <cstring>

#include "jpeg/cmyk.h"
#include "jpeg/libjpeg_errors.h"
#include "jpeg/rows.h"

namespace fastprep::jpeg {
namespace {

struct Session {
  jpeg_decompress_struct cinfo;
  ErrorManager err;
  const uint8_t* data;
  size_t size;
  int64_t failed_at;  // input offset when libjpeg failed
};

void start(Session& s, const uint8_t* data, size_t size, bool stop_on_warning) {
  std::memset(&s, 0, sizeof(s));
  s.data = data;
  s.size = size;
  s.cinfo.err = install_error_manager(s.err, stop_on_warning);
}

int64_t consumed(const Session& s) {
  return s.cinfo.src != nullptr ? static_cast<int64_t>(s.size - s.cinfo.src->bytes_in_buffer) : -1;
}

// After a longjmp: what libjpeg had read, then everything it allocated is released.
void fail(Session& s) {
  s.failed_at = consumed(s);
  jpeg_destroy_decompress(&s.cinfo);
}

void fill_header(const jpeg_decompress_struct& cinfo, Header& h) {
  h.height = cinfo.image_height;
  h.width = cinfo.image_width;
  h.components = cinfo.num_components;
  h.color_space = color_space_of(cinfo.jpeg_color_space);
  h.progressive = cinfo.progressive_mode;
  for (int c = 0; c < std::min(cinfo.num_components, 4); ++c) {
    h.h_samp[c] = cinfo.comp_info[c].h_samp_factor;
    h.v_samp[c] = cinfo.comp_info[c].v_samp_factor;
  }
  h.imcu_width = cinfo.max_h_samp_factor * DCTSIZE;
  h.imcu_height = cinfo.max_v_samp_factor * DCTSIZE;
}

bool run_header(Session& s, Header& h) {
  if (setjmp(s.err.jump)) {
    fail(s);
    return false;
  }
  jpeg_create_decompress(&s.cinfo);
  jpeg_mem_src(&s.cinfo, s.data, static_cast<unsigned long>(s.size));
  jpeg_read_header(&s.cinfo, TRUE);
  fill_header(s.cinfo, h);
  jpeg_destroy_decompress(&s.cinfo);
  return true;
}

struct DecodeJob {
  Window window;
  Mode mode;
  Output out;
  int scale;  // M of the M / 8 scale
};

enum class Verdict { kOk, kFailed, kStalled, kWindowOutside, kNoDecoding, kYCbCrOfRGB };
constexpr int kRows = 16;

bool is_cmyk(ColorSpace cs) { return cs == ColorSpace::kCMYK || cs == ColorSpace::kYCCK; }

// Whether the job's mode fits the image's colour space.
Verdict check_kind(const Header& h, const DecodeJob& job) {
  if (h.color_space == ColorSpace::kOther) return Verdict::kNoDecoding;
  if (job.mode == Mode::kYCbCr && h.color_space == ColorSpace::kRGB) return Verdict::kYCbCrOfRGB;
  return Verdict::kOk;
}

#if JPEG_LIB_VERSION >= 70
int dct_scaled_width(const jpeg_component_info& c) { return c.DCT_h_scaled_size; }
int min_dct_scaled_width(const jpeg_decompress_struct& cinfo) { return cinfo.min_DCT_h_scaled_size; }
#else
int dct_scaled_width(const jpeg_component_info& c) { return c.DCT_scaled_size; }
int min_dct_scaled_width(const jpeg_decompress_struct& cinfo) { return cinfo.min_DCT_scaled_size; }
#endif

Verdict run_decode(Session& s, const DecodeJob& job, Header& h) {
  if (setjmp(s.err.jump)) {
    fail(s);
    return Verdict::kFailed;
  }
  jpeg_decompress_struct& cinfo = s.cinfo;
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, s.data, static_cast<unsigned long>(s.size));
  jpeg_read_header(&cinfo, TRUE);
  fill_header(cinfo, h);
  const Verdict verdict = check_kind(h, job);
  if (verdict != Verdict::kOk) {
    jpeg_destroy_decompress(&cinfo);
    return verdict;
  }
  const J_COLOR_SPACE source = cinfo.jpeg_color_space;
  const bool cmyk = is_cmyk(h.color_space);
  if (cmyk) {
    cinfo.out_color_space = JCS_CMYK;  // libjpeg turns YCCK into CMYK; cmyk.h makes each mode of it
  } else if (job.mode == Mode::kRGB) {
    cinfo.out_color_space = JCS_RGB;
  } else if (job.mode == Mode::kYCbCr && source == JCS_YCbCr) {
    cinfo.out_color_space = JCS_YCbCr;  // no colour conversion: the JPEG's own samples
  } else {
    cinfo.out_color_space = JCS_GRAYSCALE;  // kGray, or kYCbCr of a grey JPEG (check() allows no other)
  }
  cinfo.dct_method = JDCT_ISLOW;
  cinfo.do_fancy_upsampling = TRUE;
  cinfo.scale_num = static_cast<unsigned int>(job.scale);
  cinfo.scale_denom = kScaleDenom;
  jpeg_calc_output_dimensions(&cinfo);  // the scaled size and each component's scaled DCT size
  const Window& w = job.window;
  if (!window_inside(w, cinfo.output_height, cinfo.output_width)) {
    h.height = cinfo.output_height;  // the caller names the scaled image the window is outside of
    h.width = cinfo.output_width;
    jpeg_destroy_decompress(&cinfo);
    return Verdict::kWindowOutside;
  }
  jpeg_start_decompress(&cinfo);

  const JDIMENSION image_width = cinfo.output_width;
  // jpeg_crop_scanline makes the columns it keeps an image of their own, and the fancy
  // horizontal upsampling (h2v1, h2v2) treats that image's first and last column as image edges:
  // those pixels come out different from a full decode (libjpeg.txt, "Partial image
  // decompression"). The filter reads one chroma sample each side, so one iMCU column of margin
  // each side (kept only where the image goes on) makes every pixel of the window exact. A reduced
  // decode may need no upsampling: libjpeg-turbo scales subsampled chroma up in its inverse DCT
  // where it can (4:2:0 at every M < 8), so a component is upsampled only where its scaled block is
  // narrower than the iMCU's share of it.
  const int64_t imcu_width = static_cast<int64_t>(cinfo.max_h_samp_factor) * min_dct_scaled_width(cinfo);
  bool h_upsampled = false;
  for (int c = 0; c < cinfo.num_components; ++c) {
    const jpeg_component_info& comp = cinfo.comp_info[c];
    h_upsampled = h_upsampled || static_cast<int64_t>(comp.h_samp_factor) * dct_scaled_width(comp) != imcu_width;
  }
  const int64_t margin = h_upsampled ? imcu_width : 0;
  const int64_t x0 = std::max<int64_t>(0, w.left - margin);
  const int64_t x1 = std::min<int64_t>(image_width, w.left + w.width + margin);
  JDIMENSION crop_x = static_cast<JDIMENSION>(x0), crop_w = static_cast<JDIMENSION>(x1 - x0);
  if (crop_w < image_width) jpeg_crop_scanline(&cinfo, &crop_x, &crop_w);  // crop_x moves left to an iMCU
  const int src_channels = cinfo.output_components;
  const int64_t skip_columns = w.left - static_cast<int64_t>(crop_x);

  if (w.top > 0) jpeg_skip_scanlines(&cinfo, static_cast<JDIMENSION>(w.top));
  const int channels = mode_channels(job.mode);
  const bool hwc = job.out.sc == 1 && job.out.sw == channels;
  const bool direct = skip_columns == 0 && static_cast<int64_t>(crop_w) == w.width && src_channels == channels && hwc;
  // CMYK rows are converted (cmyk.h): straight into a contiguous HWC output row, else into `converted`
  // and from there laid out as any other row.
  JSAMPARRAY converted = cmyk && !hwc ? (*cinfo.mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(&cinfo), JPOOL_IMAGE,
                                                                   static_cast<JDIMENSION>(w.width * channels), 1)
                                      : nullptr;
  // Up to kRows rows a call: libjpeg's per-call overhead once per batch of rows.
  JSAMPROW rows[kRows];
  JSAMPARRAY buffer = direct ? nullptr
                             : (*cinfo.mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(&cinfo), JPOOL_IMAGE,
                                                          crop_w * static_cast<JDIMENSION>(src_channels), kRows);
  for (int64_t y = 0; y < w.height;) {
    const JDIMENSION want = static_cast<JDIMENSION>(std::min<int64_t>(kRows, w.height - y));
    for (JDIMENSION i = 0; i < want; ++i) rows[i] = direct ? job.out.data + (y + i) * job.out.sh : buffer[i];
    const JDIMENSION got = jpeg_read_scanlines(&cinfo, rows, want);
    if (got == 0) {  // only a suspending source returns no rows; the memory source never does
      jpeg_destroy_decompress(&cinfo);
      return Verdict::kStalled;
    }
    for (JDIMENSION i = 0; i < got && !direct; ++i) {
      const uint8_t* row = rows[i] + skip_columns * src_channels;
      if (!cmyk) {
        put_row(row, src_channels, job.out, channels, y + i, w.width);
      } else if (hwc) {
        convert_cmyk(row, job.out.data + (y + i) * job.out.sh, w.width, job.mode);
      } else {
        convert_cmyk(row, converted[0], w.width, job.mode);
        put_row(converted[0], channels, job.out, channels, y + i, w.width);
      }
    }
    y += got;
  }
  // Rows below the window are never decoded; destroy frees everything without finishing.
  jpeg_destroy_decompress(&cinfo);
  return Verdict::kOk;
}

std::string failure(const Session& s, const char* what) {
  std::string msg = std::string(what) + ": " + s.err.message;
  if (s.failed_at >= 0) msg += " (at byte " + std::to_string(s.failed_at) + " of " + std::to_string(s.size) + ")";
  return msg;
}

}  // namespace

std::string window_outside(const Window& w, int64_t height, int64_t width) {
  return "crop (top=" + std::to_string(w.top) + ", left=" + std::to_string(w.left) +
         ", height=" + std::to_string(w.height) + ", width=" + std::to_string(w.width) + ") is not inside the " +
         std::to_string(height) + "x" + std::to_string(width) + " image";
}

#define FASTPREP_STR2(x) #x
#define FASTPREP_STR(x) FASTPREP_STR2(x)
const char* libjpeg_turbo_version() { return FASTPREP_STR(LIBJPEG_TURBO_VERSION); }

const char* color_space_name(ColorSpace cs) {
  switch (cs) {
    case ColorSpace::kGray:
      return "GRAY";
    case ColorSpace::kYCbCr:
      return "YCbCr";
    case ColorSpace::kRGB:
      return "RGB";
    case ColorSpace::kCMYK:
      return "CMYK";
    case ColorSpace::kYCCK:
      return "YCCK";
    default:
      return "other";
  }
}

ColorSpace color_space_of(int jcs) {
  switch (jcs) {
    case JCS_GRAYSCALE:
      return ColorSpace::kGray;
    case JCS_YCbCr:
      return ColorSpace::kYCbCr;
    case JCS_RGB:
      return ColorSpace::kRGB;
    case JCS_CMYK:
      return ColorSpace::kCMYK;
    case JCS_YCCK:
      return ColorSpace::kYCCK;
    default:
      return ColorSpace::kOther;
  }
}

Header read_header(const uint8_t* data, size_t size) {
  Session s;
  start(s, data, size, false);
  Header h;
  if (!run_header(s, h)) throw JpegError(failure(s, "not a readable JPEG"), s.failed_at);
  return h;
}

std::vector<std::string> decode(const uint8_t* data, size_t size, const Window& window, Mode mode, const Output& out,
                                bool strict, int scale) {
  if (scale < 1 || scale > kScaleDenom) {
    throw ArgumentError("scale: expected M of a scale M/8 in 1..8, got " + std::to_string(scale));
  }
  Session s;
  start(s, data, size, strict);
  Header h;
  switch (run_decode(s, DecodeJob{window, mode, out, scale}, h)) {
    case Verdict::kOk:
      break;
    case Verdict::kFailed:
      throw JpegError(failure(s, "corrupt JPEG"), s.failed_at);
    case Verdict::kStalled:
      throw JpegError("libjpeg stopped returning rows", -1);
    case Verdict::kWindowOutside:  // h holds the scaled size
      throw ArgumentError(
          window_outside(window, h.height, h.width) +
          (scale != kScaleDenom ? " (the image decoded at scale " + std::to_string(scale) + "/8)" : ""));
    case Verdict::kNoDecoding:
      throw ArgumentError("a JPEG of " + std::to_string(h.components) +
                          " components in no colour space libjpeg knows is not decoded (fastprep reads 1: grey, "
                          "3: YCbCr or RGB, 4: CMYK or YCCK)");
    case Verdict::kYCbCrOfRGB:
      throw ArgumentError("mode YCbCr: this JPEG stores RGB, not YCbCr; decode it as RGB and convert");
  }
  std::vector<std::string> warnings;
  for (long i = 0; i < std::min<long>(s.err.n_warnings, kMaxWarnings); ++i) warnings.emplace_back(s.err.warnings[i]);
  if (s.err.n_warnings > kMaxWarnings) {
    warnings.push_back("and " + std::to_string(s.err.n_warnings - kMaxWarnings) + " more warnings");
  }
  return warnings;
}

}  // namespace fastprep::jpeg
