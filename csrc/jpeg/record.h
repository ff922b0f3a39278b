// The records of fastprep's packed shards (fastprep/io/packed/_pack.py writes them, _dataset.py reads them):
// what one image is in a shard file, built and checked here so the format is defined once.
//
// All integers little-endian. A record starts with a 64-byte meta block:
//
//   JPEG record ("FPRJ"): meta, then the restart index, then the JPEG (baseline Huffman, a
//   restart marker every K MCUs, K dividing the MCUs of a row: transcode.h).
//     0 magic "FPRJ" | 4 u16 version | 6 u8 kind = 1 | 7 u8 0 | 8 u32 jpeg offset | 12 u32 jpeg bytes
//     16 u32 height | 20 u32 width | 24 u32 MCU rows | 28 u32 intervals | 32 u32 CRC of the JPEG's
//     header (its bytes before the entropy-coded data) | 36..63 zero
//     at 64: u32 row_start[MCU rows] (where each MCU row's first interval starts, in the JPEG),
//            u32 row_crc[MCU rows] (CRC of the row's bytes up to the next row's first byte, the
//            last row's up to the JPEG's end), u16 interval_len[intervals] (from one interval's
//            first byte to the next one's: its data and the RST marker after it; the last
//            interval's up to the EOI marker)
//   raw record ("FPRR"): meta, the band CRCs, the pixels (uint8, rows of width * channels).
//     0 magic "FPRR" | 4 u16 version | 6 u8 kind = 2 | 7 u8 channels | 8 u32 height | 12 u32 width
//     16 u32 band (pixels per CRC band of a row) | 20 u32 CRC table offset | 24 u64 pixel offset
//     32 u64 pixel bytes | 40 u32 CRC of the band CRC table (version 2; 0 in version 1) | 44..63 zero
//     band CRCs: u32 [height][ceil(width / band)], the CRC of each band of each row
//
// The record's checksum (kept in the shard's table and the index) is the CRC-32C of its meta
// block, plus the restart index for a JPEG record. It covers every pixel: a JPEG's row CRCs and
// header CRC are in its restart index, a raw record's band table CRC in its meta block (version 1
// raw records, which lack it, are still read), so a record of other pixels, from another pack, is
// refused when it is opened. Every other byte a read uses is under a CRC named there, checked
// before use: a window read checks the JPEG header and the MCU rows it cuts, or the pixel bands it
// copies. Corruption is an error, never a wrong image.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "jpeg/decode.h"  // ArgumentError
#include "jpeg/markers.h"
#include "jpeg/transcode.h"

namespace fastprep::jpeg {

constexpr uint16_t kRecordVersion = 2;  // 2: a raw record's meta holds its band table's CRC
constexpr size_t kMetaBytes = 64;
constexpr int64_t kRawBand = 64;  // pixels per CRC band of a raw record's row

// A record that is not what its checksum, version or structure say: the reader names the shard
// and record.
class RecordError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct BuiltRecord {
  std::vector<uint8_t> bytes;
  uint32_t checksum = 0;
};

BuiltRecord build_jpeg_record(const Transcoded& t);
// pixels: height rows of width * channels bytes, rows `row_stride` bytes apart.
BuiltRecord build_raw_record(const uint8_t* pixels, int64_t height, int64_t width, int channels, int64_t row_stride);

// Little-endian loads from unaligned addresses.
inline uint32_t le32(const uint8_t* p) {
  return uint32_t{p[0]} | (uint32_t{p[1]} << 8) | (uint32_t{p[2]} << 16) | (uint32_t{p[3]} << 24);
}
inline uint16_t le16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint64_t le64(const uint8_t* p) { return uint64_t{le32(p)} | (uint64_t{le32(p + 4)} << 32); }

// A JPEG record whose meta block, restart index and JPEG header were checked.
struct JpegRecord {
  const uint8_t* jpeg = nullptr;
  size_t jpeg_size = 0;
  ScanGeometry geometry;
  const uint8_t* row_start = nullptr;     // u32 [mcu_rows]
  const uint8_t* row_crc = nullptr;       // u32 [mcu_rows]
  const uint8_t* interval_len = nullptr;  // u16 [intervals]
  size_t row_begin(int64_t r) const { return le32(row_start + 4 * r); }
  size_t row_end(int64_t r) const { return r + 1 < geometry.mcu_rows ? row_begin(r + 1) : jpeg_size; }
};

struct RawRecord {
  const uint8_t* pixels = nullptr;
  int64_t height = 0, width = 0, band = 0, bands = 0;
  int channels = 0;
  const uint8_t* band_crc = nullptr;  // u32 [height][bands]
  uint16_t version = 0;
  uint32_t table_crc = 0;  // of band_crc's 4 * height * bands bytes (version 2)
};

// Where the CRC of band b of pixel row y lies in a raw record: its bytes in the pixels (`band`
// pixels a band, a row's last band shorter) and its u32 in the band CRC table. The one statement
// of the bands' byte spans, which the writer and the readers share.
struct BandSpan {
  int64_t offset, size;  // bytes [offset, offset + size) of the pixels
  int64_t crc_offset;    // the table's bytes [crc_offset, crc_offset + 4)
};
inline BandSpan band_span(int64_t y, int64_t b, int64_t width, int64_t channels, int64_t band, int64_t bands) {
  const int64_t x0 = b * band, x1 = std::min(width, x0 + band);
  return BandSpan{(y * width + x0) * channels, (x1 - x0) * channels, 4 * (y * bands + b)};
}

// 1 (JPEG) or 2 (raw), from the magic; throws RecordError for anything else.
int record_kind(const uint8_t* record, size_t size);
JpegRecord open_jpeg_record(const uint8_t* record, size_t size, uint32_t checksum);
RawRecord open_raw_record(const uint8_t* record, size_t size, uint32_t checksum);

// Checks MCU rows [r0, r1): their bounds and restart markers (always: what a cut copies must be
// inside the JPEG) and, with `crcs`, their CRCs. Throws RecordError.
void verify_rows(const JpegRecord& rec, int64_t r0, int64_t r1, bool crcs = true);

// Checks a raw record's band CRC table against the CRC its meta block holds (version 2; a version 1
// record has none). Reading every band checks the table too; this is the whole-record check's part.
void verify_raw_table(const RawRecord& r);

}  // namespace fastprep::jpeg
