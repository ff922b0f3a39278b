// libjpeg driven through setjmp/longjmp (libjpeg_errors.h): run_transcode keeps only trivially
// destructible state in its frame and in Session; C++ objects are made after it returns.
#include "jpeg/transcode.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "jpeg/decode.h"
#include "jpeg/exif.h"
#include "jpeg/libjpeg_errors.h"

#include <jerror.h>  // ERREXIT1, after jpeglib.h

namespace fastprep::jpeg {
namespace {

// libjpeg's output into a buffer this file owns (malloc / realloc), so that a longjmp out of
// jpeg_write_coefficients never leaves it pointing at memory libjpeg freed (jpeg_mem_dest's
// buffer is handed back only by term_destination).
struct Destination {
  jpeg_destination_mgr pub;  // first member: libjpeg hands &pub back as cinfo->dest
  uint8_t* buffer;
  size_t capacity, size;
};

void dest_init(j_compress_ptr cinfo) {
  auto* d = reinterpret_cast<Destination*>(cinfo->dest);
  d->pub.next_output_byte = d->buffer;
  d->pub.free_in_buffer = d->capacity;
}

boolean dest_grow(j_compress_ptr cinfo) {  // libjpeg calls this with the buffer full
  auto* d = reinterpret_cast<Destination*>(cinfo->dest);
  const size_t grown = d->capacity * 2;
  auto* bigger = static_cast<uint8_t*>(grown > d->capacity ? std::realloc(d->buffer, grown) : nullptr);
  if (bigger == nullptr) ERREXIT1(cinfo, JERR_OUT_OF_MEMORY, 10);
  d->buffer = bigger;
  d->pub.next_output_byte = bigger + d->capacity;
  d->pub.free_in_buffer = grown - d->capacity;
  d->capacity = grown;
  return TRUE;
}

void dest_term(j_compress_ptr cinfo) {
  auto* d = reinterpret_cast<Destination*>(cinfo->dest);
  d->size = d->capacity - d->pub.free_in_buffer;
}

struct Session {
  jpeg_decompress_struct src;
  jpeg_compress_struct dst;
  ErrorManager err;  // one for both, as jpegtran: either one's failure lands in the same setjmp
  Destination out;
  bool src_made, dst_made;
  int color;  // the source's J_COLOR_SPACE
  int64_t restart_target, restart;
  int orientation;  // the source's EXIF orientation (0: none), kept in the output when not 1
};

enum class Verdict { kOk, kFailed, kComponents };

void release(Session& s) {
  if (s.dst_made) jpeg_destroy_compress(&s.dst);
  if (s.src_made) jpeg_destroy_decompress(&s.src);
  s.dst_made = s.src_made = false;
}

int64_t scan_mcus_per_row(const jpeg_decompress_struct& cinfo) {
  const int64_t width = cinfo.image_width;
  if (cinfo.num_components == 1) return (width + 7) / 8;  // one block per MCU: not interleaved
  const int64_t mcu = int64_t{8} * cinfo.max_h_samp_factor;
  return (width + mcu - 1) / mcu;
}

// The source's EXIF orientation, from its first APP1 "Exif" segment (the one Pillow reads), into
// a minimal APP1 of the output when it turns the image (not 1): the copy of the coefficients drops
// every APP marker, and a packed photo must still say which way up it is. Right after
// jpeg_write_coefficients, so it follows SOI and the JFIF / Adobe marker and precedes the tables.
void write_orientation(Session& s) {
  for (jpeg_saved_marker_ptr m = s.src.marker_list; m != nullptr; m = m->next) {
    if (m->marker != JPEG_APP0 + 1 || m->data_length < 6 || std::memcmp(m->data, "Exif\0", 6) != 0) continue;
    s.orientation = exif_orientation(m->data, m->data_length);
    break;
  }
  if (s.orientation < 2) return;
  JOCTET segment[kOrientationSegmentBytes];
  exif_orientation_segment(s.orientation, segment);
  jpeg_write_marker(&s.dst, JPEG_APP0 + 1, segment, kOrientationSegmentBytes);
}

Verdict run_transcode(Session& s, const uint8_t* data, size_t size) {
  if (setjmp(s.err.jump)) {
    release(s);
    return Verdict::kFailed;
  }
  jpeg_create_decompress(&s.src);
  s.src_made = true;
  jpeg_mem_src(&s.src, data, static_cast<unsigned long>(size));
  jpeg_save_markers(&s.src, JPEG_APP0 + 1, 0xFFFF);  // APP1: the EXIF orientation is kept
  jpeg_read_header(&s.src, TRUE);
  const int n = s.src.num_components;
  if ((n != 1 && n != 3 && n != 4) || color_space_of(s.src.jpeg_color_space) == ColorSpace::kOther) {
    release(s);
    return Verdict::kComponents;
  }
  s.color = s.src.jpeg_color_space;
  jvirt_barray_ptr* coefficients = jpeg_read_coefficients(&s.src);
  s.restart = choose_restart(scan_mcus_per_row(s.src), s.restart_target);

  jpeg_create_compress(&s.dst);
  s.dst_made = true;
  jpeg_copy_critical_parameters(&s.src, &s.dst);  // sequential, Huffman: whatever the input was
  s.dst.optimize_coding = TRUE;
  s.dst.restart_interval = static_cast<unsigned int>(s.restart);
  s.dst.dest = &s.out.pub;
  jpeg_write_coefficients(&s.dst, coefficients);
  write_orientation(s);
  jpeg_finish_compress(&s.dst);
  jpeg_finish_decompress(&s.src);
  release(s);
  return Verdict::kOk;
}

}  // namespace

// Why K is chosen so: a window's cut keeps whole intervals, so it decodes up to an interval's
// worth of MCUs beyond the window on each side of every row it covers: a large K wastes decode
// time on every window. A small K puts a marker every K MCUs, each costing the marker, the
// padding to a byte and a DC predictor reset (absolute DC values cost more bits), and
// libjpeg-turbo's decoder leaves its fast Huffman path at each marker: 1-MCU intervals cost +6-24%
// size and decode slower (measured for issue 25), 4-MCU ones +1.4-5.8%. So K = the largest divisor
// of the row not above the target (4: 64 px of a 4:2:0 row, a quarter of a 256 px window); a row
// whose best such divisor is 1 or 2 (a prime or twice a prime count) takes a divisor up to twice
// the target instead where one exists, trading a little decode for the size.
int64_t choose_restart(int64_t mcus_per_row, int64_t target) {
  int64_t best = 1;
  for (int64_t k = std::min(target, mcus_per_row); k >= 1; --k) {
    if (mcus_per_row % k == 0) {
      best = k;
      break;
    }
  }
  if (best <= 2) {
    for (int64_t k = target + 1; k <= 2 * target && k <= mcus_per_row; ++k) {
      if (mcus_per_row % k == 0) return k;
    }
  }
  return best;
}

Transcoded transcode_with_restarts(const uint8_t* data, size_t size, int64_t restart_target, bool strict) {
  if (restart_target < 1 || restart_target > 65535) {
    throw ArgumentError("restart: expected MCUs per restart interval in [1, 65535], got " +
                        std::to_string(restart_target));
  }
  Session s;
  std::memset(&s, 0, sizeof(s));
  s.src.err = install_error_manager(s.err, strict);
  s.dst.err = &s.err.pub;
  s.restart_target = restart_target;
  s.out.capacity = size + size / 8 + 4096;
  s.out.buffer = static_cast<uint8_t*>(std::malloc(s.out.capacity));
  if (s.out.buffer == nullptr) throw std::bad_alloc();
  s.out.pub.init_destination = dest_init;
  s.out.pub.empty_output_buffer = dest_grow;
  s.out.pub.term_destination = dest_term;
  const Verdict verdict = run_transcode(s, data, size);
  Transcoded t;
  if (verdict == Verdict::kOk) t.jpeg.assign(s.out.buffer, s.out.buffer + s.out.size);
  std::free(s.out.buffer);
  switch (verdict) {
    case Verdict::kOk:
      break;
    case Verdict::kFailed:
      throw JpegError(std::string("not a readable JPEG: ") + s.err.message, -1);
    case Verdict::kComponents:
      throw ArgumentError("a JPEG of " + std::to_string(s.src.num_components) +
                          " components is not packed (grey, YCbCr, RGB, CMYK and YCCK JPEGs are)");
  }
  t.color = color_space_of(s.color);
  t.orientation = s.orientation;
  for (long i = 0; i < std::min<long>(s.err.n_warnings, kMaxWarnings); ++i) t.warnings.emplace_back(s.err.warnings[i]);
  std::string err = parse_scan_geometry(t.jpeg.data(), t.jpeg.size(), true, t.geometry);
  if (err.empty()) err = find_restart_intervals(t.jpeg.data(), t.jpeg.size(), t.geometry, t.interval_starts);
  if (!err.empty()) throw ArgumentError("the transcoded JPEG cannot be indexed: " + err);
  return t;
}

}  // namespace fastprep::jpeg
