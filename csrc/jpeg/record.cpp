#include "jpeg/record.h"

#include <cstring>
#include <limits>

#include "jpeg/crc32c.h"

namespace fastprep::jpeg {
namespace {

constexpr uint8_t kJpegKind = 1, kRawKind = 2;

void put16(uint8_t* p, uint32_t v) {
  p[0] = static_cast<uint8_t>(v);
  p[1] = static_cast<uint8_t>(v >> 8);
}
void put32(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
void put64(uint8_t* p, uint64_t v) {
  put32(p, v);
  put32(p + 4, v >> 32);
}

size_t align64(size_t n) { return (n + 63) & ~size_t{63}; }

void check_fits_u32(uint64_t v, const char* what) {
  if (v > std::numeric_limits<uint32_t>::max()) {
    throw ArgumentError(std::string(what) + " of " + std::to_string(v) + " is over what a record holds (4 GiB)");
  }
}

// The checks every kind shares: size, magic, version.
void check_meta(const uint8_t* record, size_t size, const char* magic) {
  if (size < kMetaBytes) throw RecordError("record of " + std::to_string(size) + " bytes, shorter than its header");
  if (std::memcmp(record, magic, 4) != 0) throw RecordError("record does not start with " + std::string(magic));
  const uint16_t version = le16(record + 4);
  if (version > kRecordVersion) {
    throw RecordError("record format version " + std::to_string(version) + " is newer than this fastprep reads (" +
                      std::to_string(kRecordVersion) + "): upgrade fastprep");
  }
}

void check_checksum(uint32_t got, uint32_t expected, const char* what) {
  if (got != expected) {
    throw RecordError(std::string("checksum mismatch in ") + what + " (CRC-32C " + std::to_string(got) + ", expected " +
                      std::to_string(expected) + "): the shard is corrupt");
  }
}

}  // namespace

BuiltRecord build_jpeg_record(const Transcoded& t) {
  const ScanGeometry& L = t.geometry;
  const int64_t rows = L.mcu_rows, n = L.intervals(), per_row = L.mcus_per_row / L.restart;
  const size_t table = static_cast<size_t>(8 * rows + 2 * n);
  const size_t jpeg_offset = align64(kMetaBytes + table);
  check_fits_u32(jpeg_offset + t.jpeg.size(), "a record");
  BuiltRecord r;
  r.bytes.assign(jpeg_offset + t.jpeg.size(), 0);
  uint8_t* m = r.bytes.data();
  std::memcpy(m, "FPRJ", 4);
  put16(m + 4, kRecordVersion);
  m[6] = kJpegKind;
  put32(m + 8, jpeg_offset);
  put32(m + 12, t.jpeg.size());
  put32(m + 16, static_cast<uint64_t>(L.height));
  put32(m + 20, static_cast<uint64_t>(L.width));
  put32(m + 24, static_cast<uint64_t>(rows));
  put32(m + 28, static_cast<uint64_t>(n));
  put32(m + 32, crc32c(t.jpeg.data(), L.scan_offset));
  const size_t eoi = t.jpeg.size() - 2;
  for (int64_t i = 0; i < n; ++i) {
    const size_t next = i + 1 < n ? t.interval_starts[i + 1] : eoi;
    const size_t len = next - t.interval_starts[i];
    if (len > 0xFFFF) throw ArgumentError("a restart interval of " + std::to_string(len) + " bytes (at most 65535)");
    put16(m + kMetaBytes + 8 * rows + 2 * i, static_cast<uint32_t>(len));
  }
  for (int64_t row = 0; row < rows; ++row) {
    const size_t begin = t.interval_starts[row * per_row];
    const size_t end = row + 1 < rows ? t.interval_starts[(row + 1) * per_row] : t.jpeg.size();
    put32(m + kMetaBytes + 4 * row, begin);
    put32(m + kMetaBytes + 4 * (rows + row), crc32c(t.jpeg.data() + begin, end - begin));
  }
  std::memcpy(m + jpeg_offset, t.jpeg.data(), t.jpeg.size());
  r.checksum = crc32c(m, kMetaBytes + table);
  return r;
}

BuiltRecord build_raw_record(const uint8_t* pixels, int64_t height, int64_t width, int channels, int64_t row_stride) {
  if (height < 1 || width < 1 || (channels != 1 && channels != 3)) {
    throw ArgumentError("raw record: expected a height x width x 1 or 3 image, got " + std::to_string(height) + "x" +
                        std::to_string(width) + "x" + std::to_string(channels));
  }
  const int64_t bands = (width + kRawBand - 1) / kRawBand, row_bytes = width * channels;
  const uint64_t table = 4 * static_cast<uint64_t>(height) * bands;
  const uint64_t pixel_offset = align64(kMetaBytes + table);
  const uint64_t pixel_bytes = static_cast<uint64_t>(height) * row_bytes;
  check_fits_u32(height, "a height");
  check_fits_u32(width, "a width");
  BuiltRecord r;
  r.bytes.assign(pixel_offset + pixel_bytes, 0);
  uint8_t* m = r.bytes.data();
  std::memcpy(m, "FPRR", 4);
  put16(m + 4, kRecordVersion);
  m[6] = kRawKind;
  m[7] = static_cast<uint8_t>(channels);
  put32(m + 8, height);
  put32(m + 12, width);
  put32(m + 16, kRawBand);
  put32(m + 20, kMetaBytes);
  put64(m + 24, pixel_offset);
  put64(m + 32, pixel_bytes);
  uint8_t* band_crc = m + kMetaBytes;
  for (int64_t y = 0; y < height; ++y) {
    std::memcpy(m + pixel_offset + y * row_bytes, pixels + y * row_stride, static_cast<size_t>(row_bytes));
    for (int64_t b = 0; b < bands; ++b) {
      const BandSpan s = band_span(y, b, width, channels, kRawBand, bands);
      put32(band_crc + s.crc_offset, crc32c(m + pixel_offset + s.offset, static_cast<size_t>(s.size)));
    }
  }
  put32(m + 40, crc32c(band_crc, static_cast<size_t>(table)));  // the checksum below covers every pixel
  r.checksum = crc32c(m, kMetaBytes);
  return r;
}

int record_kind(const uint8_t* record, size_t size) {
  if (size >= 4 && std::memcmp(record, "FPRJ", 4) == 0) return kJpegKind;
  if (size >= 4 && std::memcmp(record, "FPRR", 4) == 0) return kRawKind;
  throw RecordError("not a record (no FPRJ or FPRR magic): the index or shard is corrupt");
}

JpegRecord open_jpeg_record(const uint8_t* record, size_t size, uint32_t checksum) {
  check_meta(record, size, "FPRJ");
  const uint64_t rows = le32(record + 24), n = le32(record + 28);
  const uint64_t table = 8 * rows + 2 * n;  // < 2^36: no overflow
  if (record[6] != kJpegKind || table > size - kMetaBytes) throw RecordError("record header is corrupt");
  check_checksum(crc32c(record, kMetaBytes + table), checksum, "the record's header and restart index");
  JpegRecord rec;
  const uint64_t offset = le32(record + 8), jpeg_size = le32(record + 12);
  if (offset < kMetaBytes + table || offset > size || jpeg_size > size - offset || jpeg_size < 4) {
    throw RecordError("record's JPEG at " + std::to_string(offset) + " (" + std::to_string(jpeg_size) +
                      " bytes) is not inside its " + std::to_string(size) + " bytes");
  }
  rec.jpeg = record + offset;
  rec.jpeg_size = jpeg_size;
  const std::string err = parse_scan_geometry(rec.jpeg, rec.jpeg_size, true, rec.geometry);
  if (!err.empty()) throw RecordError("record's JPEG: " + err);
  const ScanGeometry& L = rec.geometry;
  if (static_cast<uint64_t>(L.height) != le32(record + 16) || static_cast<uint64_t>(L.width) != le32(record + 20) ||
      static_cast<uint64_t>(L.mcu_rows) != rows || static_cast<uint64_t>(L.intervals()) != n) {
    throw RecordError("record's JPEG header disagrees with the record (size or restart intervals)");
  }
  check_checksum(crc32c(rec.jpeg, L.scan_offset), le32(record + 32), "the JPEG header");
  if (rec.jpeg[jpeg_size - 2] != 0xFF || rec.jpeg[jpeg_size - 1] != 0xD9) throw RecordError("JPEG without EOI");
  rec.row_start = record + kMetaBytes;
  rec.row_crc = rec.row_start + 4 * rows;
  rec.interval_len = rec.row_crc + 4 * rows;
  return rec;
}

void verify_rows(const JpegRecord& rec, int64_t r0, int64_t r1, bool crcs) {
  const ScanGeometry& L = rec.geometry;
  const int64_t per_row = L.mcus_per_row / L.restart, n = L.intervals();
  constexpr int64_t kBatch = 64;
  const uint8_t* ptrs[kBatch];
  size_t sizes[kBatch];
  uint32_t got[kBatch];
  for (int64_t first = r0; first < r1; first += kBatch) {
    const int64_t count = std::min(kBatch, r1 - first);
    for (int64_t k = 0; k < count; ++k) {
      const int64_t r = first + k;
      const size_t begin = rec.row_begin(r), end = rec.row_end(r);
      if (begin < L.scan_offset || end > rec.jpeg_size || end < begin + 2) {
        throw RecordError("MCU row " + std::to_string(r) + " at bytes [" + std::to_string(begin) + ", " +
                          std::to_string(end) + ") is not inside the scan");
      }
      ptrs[k] = rec.jpeg + begin;
      sizes[k] = end - begin;
    }
    if (crcs) crc32c_many(ptrs, sizes, got, static_cast<size_t>(count));
    for (int64_t k = 0; k < count; ++k) {
      const int64_t r = first + k;
      if (crcs && got[k] != le32(rec.row_crc + 4 * r)) {
        throw RecordError("checksum mismatch in MCU row " + std::to_string(r) + ": the shard is corrupt");
      }
      // The intervals must tile the row, each but the image's last ending in its RST marker.
      size_t pos = rec.row_begin(r);
      for (int64_t i = r * per_row; i < (r + 1) * per_row; ++i) {
        pos += le16(rec.interval_len + 2 * i);
        if (i + 1 < n && (pos > rec.jpeg_size || rec.jpeg[pos - 2] != 0xFF || rec.jpeg[pos - 1] != rst_marker(i))) {
          throw RecordError("restart interval " + std::to_string(i) + " does not end in its RST marker");
        }
      }
      if (pos != (r + 1 < L.mcu_rows ? rec.row_end(r) : rec.jpeg_size - 2)) {
        throw RecordError("the restart intervals of MCU row " + std::to_string(r) + " do not fill it");
      }
    }
  }
}

RawRecord open_raw_record(const uint8_t* record, size_t size, uint32_t checksum) {
  check_meta(record, size, "FPRR");
  check_checksum(crc32c(record, kMetaBytes), checksum, "the record's header");
  RawRecord r;
  r.channels = record[7];
  r.height = le32(record + 8);
  r.width = le32(record + 12);
  r.band = le32(record + 16);
  const uint64_t table_offset = le32(record + 20), pixel_offset = le64(record + 24), pixel_bytes = le64(record + 32);
  if (record[6] != kRawKind || (r.channels != 1 && r.channels != 3) || r.height < 1 || r.width < 1 || r.band < 1) {
    throw RecordError("raw record header is corrupt");
  }
  r.bands = (r.width + r.band - 1) / r.band;
  uint64_t table = 0, expected = 0;  // products of u32 fields and small factors may pass 2^64
  const bool overflow =
      __builtin_mul_overflow(static_cast<uint64_t>(r.height), static_cast<uint64_t>(r.bands) * 4, &table) ||
      __builtin_mul_overflow(static_cast<uint64_t>(r.height), static_cast<uint64_t>(r.width) * r.channels, &expected);
  if (overflow || table_offset < kMetaBytes || table_offset > size || table > size - table_offset ||
      pixel_offset > size || pixel_bytes != expected || pixel_bytes > size - pixel_offset) {
    throw RecordError("raw record's tables or pixels are not inside its " + std::to_string(size) + " bytes");
  }
  r.band_crc = record + table_offset;
  r.pixels = record + pixel_offset;
  r.version = le16(record + 4);
  r.table_crc = le32(record + 40);
  return r;
}

void verify_raw_table(const RawRecord& r) {
  if (r.version < 2) return;  // version 1: no table CRC (its checksum covered the meta block only)
  check_checksum(crc32c(r.band_crc, static_cast<size_t>(4 * r.height * r.bands)), r.table_crc,
                 "the record's band CRC table");
}

}  // namespace fastprep::jpeg
