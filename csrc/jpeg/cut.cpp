#include "jpeg/cut.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "jpeg/crc32c.h"
#include "jpeg/rows.h"

namespace fastprep::jpeg {
namespace {

void check_window(const Window& w, int64_t height, int64_t width) {
  if (!window_inside(w, height, width)) throw ArgumentError(window_outside(w, height, width));
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

size_t interval_len(const JpegRecord& rec, int64_t i) { return le16(rec.interval_len + 2 * i); }

// Bytes of row r's intervals before column c0, and of columns [c0, c1).
void row_span(const JpegRecord& rec, int64_t r, int64_t c0, int64_t c1, size_t& before, size_t& span) {
  const int64_t first = r * (rec.geometry.mcus_per_row / rec.geometry.restart);
  before = span = 0;
  for (int64_t c = 0; c < c0; ++c) before += interval_len(rec, first + c);
  for (int64_t c = c0; c < c1; ++c) span += interval_len(rec, first + c);
}

void put_be16(uint8_t* p, int64_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}

// A growing per-thread buffer for the cuts the CPU decodes (no allocation per window).
uint8_t* scratch(size_t bytes) {
  thread_local std::unique_ptr<uint8_t[]> buffer;
  thread_local size_t capacity = 0;
  if (bytes > capacity) {
    capacity = std::max(bytes, capacity * 2);
    buffer.reset(new uint8_t[capacity]);
  }
  return buffer.get();
}

}  // namespace

namespace {

// The cut for window w with v_margin / h_margin pixels of context each side (where the image goes on).
Cut plan_cut_with(const JpegRecord& rec, const Window& w, int64_t v_margin, int64_t h_margin) {
  const ScanGeometry& L = rec.geometry;
  check_window(w, L.height, L.width);
  const int64_t per_row = L.mcus_per_row / L.restart, interval_width = L.restart * L.mcu_width;
  Cut cut;
  cut.r0 = std::max<int64_t>(0, w.top - v_margin) / L.mcu_height;
  cut.r1 = ceil_div(std::min(L.height, w.top + w.height + v_margin), L.mcu_height);
  cut.c0 = std::max<int64_t>(0, w.left - h_margin) / interval_width;
  cut.c1 = ceil_div(std::min(L.width, w.left + w.width + h_margin), interval_width);
  cut.top = cut.r0 * L.mcu_height;
  cut.left = cut.c0 * interval_width;
  cut.height = cut.r1 == L.mcu_rows ? L.height - cut.top : (cut.r1 - cut.r0) * L.mcu_height;
  cut.width = cut.c1 == per_row ? L.width - cut.left : (cut.c1 - cut.c0) * interval_width;
  cut.whole = cut.r0 == 0 && cut.r1 == L.mcu_rows && cut.c0 == 0 && cut.c1 == per_row;
  if (cut.whole) {
    cut.bytes = rec.jpeg_size;
    return cut;
  }
  size_t bytes = L.scan_offset, before, span;
  for (int64_t r = cut.r0; r < cut.r1; ++r) {
    row_span(rec, r, cut.c0, cut.c1, before, span);
    bytes += span;
  }
  const bool ends_image = cut.r1 == L.mcu_rows && cut.c1 == per_row;  // no RST after its last interval
  cut.bytes = bytes + (ends_image ? 2 : 0);
  return cut;
}

}  // namespace

Cut plan_cut(const JpegRecord& rec, const Window& w) {
  return plan_cut_with(rec, w, rec.geometry.v_margin, rec.geometry.h_margin);
}

void write_cut(const JpegRecord& rec, const Cut& cut, uint8_t* out) {
  const ScanGeometry& L = rec.geometry;
  if (cut.whole) {
    std::memcpy(out, rec.jpeg, rec.jpeg_size);
    return;
  }
  const int64_t per_row = L.mcus_per_row / L.restart, n = L.intervals();
  std::memcpy(out, rec.jpeg, L.scan_offset);
  put_be16(out + L.sof_offset + 5, cut.height);
  put_be16(out + L.sof_offset + 7, cut.width);
  size_t pos = L.scan_offset, before, span;
  int64_t j = 0;  // intervals of the cut so far
  for (int64_t r = cut.r0; r < cut.r1; ++r) {
    row_span(rec, r, cut.c0, cut.c1, before, span);
    std::memcpy(out + pos, rec.jpeg + rec.row_begin(r) + before, span);
    size_t end = pos;
    for (int64_t c = cut.c0; c < cut.c1; ++c, ++j) {
      const int64_t i = r * per_row + c;
      end += interval_len(rec, i);
      if (i + 1 < n) out[end - 1] = rst_marker(j);
    }
    pos += span;
  }
  if (cut.r1 == L.mcu_rows && cut.c1 == per_row) {  // the image's last interval: no marker after it
    out[pos] = 0xFF;
    out[pos + 1] = 0xD9;
  } else {
    out[pos - 1] = 0xD9;  // the RST after the cut's last interval becomes its EOI
  }
}

namespace {

// Whether libjpeg-turbo's decode at scale M / 8 still upsamples a component along an axis. It
// scales subsampled chroma up in the inverse DCT instead where it can (jdmaster.c): a component's
// scaled block size starts at M and doubles while it is under 8 and twice it still divides
// max_samp * M along both axes; what that leaves short of the iMCU's share is upsampled. So 4:2:0
// is never upsampled at M < 8, 4:2:2 always horizontally (its vertical factors stop the doubling).
void scaled_upsampling(const ScanGeometry& L, int scale, bool& vertical, bool& horizontal) {
  int max_h = 1, max_v = 1;
  for (int c = 0; c < L.components; ++c) max_h = std::max(max_h, L.h_samp[c]), max_v = std::max(max_v, L.v_samp[c]);
  vertical = horizontal = false;
  for (int c = 0; c < L.components; ++c) {
    int size = scale;
    while (size < kScaleDenom && (max_h * scale) % (L.h_samp[c] * size * 2) == 0 &&
           (max_v * scale) % (L.v_samp[c] * size * 2) == 0) {
      size *= 2;
    }
    horizontal = horizontal || L.h_samp[c] * size != max_h * scale;
    vertical = vertical || L.v_samp[c] * size != max_v * scale;
  }
}

// The image's pixels [lo, lo + n) along an axis of `size` pixels whose blocks give scaled pixels
// [lo', lo' + n') at scale M / 8: every 8 pixels of a block make M scaled ones.
void source_span(int64_t lo, int64_t n, int scale, int64_t size, int64_t& first, int64_t& count) {
  first = lo / scale * kScaleDenom;
  count = std::min(size, ceil_div(lo + n, scale) * kScaleDenom) - first;
}

}  // namespace

std::vector<std::string> decode_record_window(const uint8_t* record, size_t size, uint32_t checksum,
                                              const Window& window, Mode mode, const Output& out, bool strict,
                                              bool crcs, int scale) {
  const JpegRecord rec = open_jpeg_record(record, size, checksum);
  if (scale < 1 || scale > kScaleDenom) {
    throw ArgumentError("scale: expected M of a scale M/8 in 1..8, got " + std::to_string(scale));
  }
  const ScanGeometry& L = rec.geometry;
  Window source = window;  // the image's pixels the window's scaled pixels come from
  if (scale != kScaleDenom) {
    const int64_t sh = scaled_extent(L.height, scale), sw = scaled_extent(L.width, scale);
    if (!window_inside(window, sh, sw)) {
      throw ArgumentError(window_outside(window, sh, sw) + " (the image decoded at scale " + std::to_string(scale) +
                          "/8)");
    }
    source_span(window.top, window.height, scale, L.height, source.top, source.height);
    source_span(window.left, window.width, scale, L.width, source.left, source.width);
  }
  // Context for the fancy upsampling's neighbouring chroma samples, only along an axis the decode
  // upsamples: at full scale, the record's margins; reduced, one MCU (a chroma block) each side.
  int64_t v_margin = L.v_margin, h_margin = L.h_margin;
  if (scale != kScaleDenom) {
    bool vertical, horizontal;
    scaled_upsampling(L, scale, vertical, horizontal);
    v_margin = vertical ? L.mcu_height : 0;
    h_margin = horizontal ? L.mcu_width : 0;
  }
  const Cut cut = plan_cut_with(rec, source, v_margin, h_margin);
  verify_rows(rec, cut.r0, cut.r1, crcs);
  if (cut.whole) return decode(rec.jpeg, rec.jpeg_size, window, mode, out, strict, scale);
  uint8_t* buffer = scratch(cut.bytes);
  write_cut(rec, cut, buffer);
  // cut.top and cut.left are whole MCUs (multiples of 8): their scaled offsets are exact.
  const Window inside{window.top - cut.top * scale / kScaleDenom, window.left - cut.left * scale / kScaleDenom,
                      window.height, window.width};
  return decode(buffer, cut.bytes, inside, mode, out, strict, scale);
}

namespace {

// Checks the CRCs of bands [b0, b1) of pixel rows [y0, y1), up to kMaxRanges at a time.
void check_bands(const RawRecord& r, int64_t y0, int64_t y1, int64_t b0, int64_t b1) {
  constexpr int64_t kMaxRanges = 256;
  const uint8_t* ptrs[kMaxRanges];
  size_t sizes[kMaxRanges];
  uint32_t crcs[kMaxRanges];
  int64_t ys[kMaxRanges], bs[kMaxRanges], crc_offsets[kMaxRanges];
  int64_t k = 0;
  auto flush = [&] {
    crc32c_many(ptrs, sizes, crcs, static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) {
      if (crcs[i] != le32(r.band_crc + crc_offsets[i])) {
        throw RecordError("checksum mismatch in pixel row " + std::to_string(ys[i]) + ", band " +
                          std::to_string(bs[i]) + ": the shard is corrupt");
      }
    }
    k = 0;
  };
  for (int64_t y = y0; y < y1; ++y) {
    for (int64_t b = b0; b < b1; ++b) {
      const BandSpan s = band_span(y, b, r.width, r.channels, r.band, r.bands);
      ptrs[k] = r.pixels + s.offset;
      sizes[k] = static_cast<size_t>(s.size);
      ys[k] = y, bs[k] = b, crc_offsets[k] = s.crc_offset;
      if (++k == kMaxRanges) flush();
    }
  }
  if (k) flush();
}

}  // namespace

RawRecord check_raw_window(const uint8_t* record, size_t size, uint32_t checksum, const Window& w, bool crcs) {
  const RawRecord r = open_raw_record(record, size, checksum);
  check_window(w, r.height, r.width);
  if (crcs) check_bands(r, w.top, w.top + w.height, w.left / r.band, ceil_div(w.left + w.width, r.band));
  return r;
}

void read_raw_window(const uint8_t* record, size_t size, uint32_t checksum, const Window& w, const Output& out,
                     int channels, bool crcs) {
  const RawRecord r = open_raw_record(record, size, checksum);
  check_window(w, r.height, r.width);
  if (channels != r.channels) {
    throw ArgumentError("out: expected " + std::to_string(r.channels) + " channels for this record, got " +
                        std::to_string(channels));
  }
  const int64_t row_bytes = r.width * r.channels, b0 = w.left / r.band, b1 = ceil_div(w.left + w.width, r.band);
  constexpr int64_t kRows = 8;  // rows checked, then copied while they are in cache
  for (int64_t y0 = 0; y0 < w.height; y0 += kRows) {
    const int64_t y1 = std::min(w.height, y0 + kRows);
    if (crcs) check_bands(r, w.top + y0, w.top + y1, b0, b1);
    for (int64_t y = y0; y < y1; ++y) {
      put_row(r.pixels + (w.top + y) * row_bytes + w.left * r.channels, r.channels, out, channels, y, w.width);
    }
  }
}

void verify_record(const uint8_t* record, size_t size, uint32_t checksum) {
  if (record_kind(record, size) == 1) {
    const JpegRecord rec = open_jpeg_record(record, size, checksum);
    verify_rows(rec, 0, rec.geometry.mcu_rows);
    return;
  }
  const RawRecord r = open_raw_record(record, size, checksum);
  verify_raw_table(r);
  check_bands(r, 0, r.height, 0, r.bands);
}

}  // namespace fastprep::jpeg
