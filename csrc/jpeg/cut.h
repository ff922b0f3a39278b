// Random-access windows of packed records: the JPEG of only the restart intervals that cover a
// window (a "cut"), decoded by decode.h; and raw records' windows, copied. Torch-free.
//
// A cut keeps, of every MCU row the window touches, the restart intervals covering the window's
// columns, plus the neighbours libjpeg's fancy upsampling reads (ScanGeometry::h_margin / v_margin:
// one chroma sample each side, where the image goes on): without them, the cut's first and last
// pixel rows and columns would be upsampled as image edges and differ from a full decode. Its SOF
// gets the cut's size, its DRI stays, its RST markers are renumbered from RST0 and its last
// interval ends in EOI. Each interval restarts the DC predictions, so the cut decodes to the bits
// of the same pixels in a full decode of the record's JPEG (and of the file it was transcoded from).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "jpeg/decode.h"
#include "jpeg/record.h"

namespace fastprep::jpeg {

struct Cut {
  int64_t r0 = 0, r1 = 0, c0 = 0, c1 = 0;  // MCU rows [r0, r1), restart-interval columns [c0, c1)
  int64_t top = 0, left = 0;               // where the cut starts in the image, in pixels
  int64_t height = 0, width = 0;           // the cut's size (its SOF)
  size_t bytes = 0;                        // of the cut's JPEG
  bool whole = false;                      // the cut is the record's JPEG itself
};

// The cut for `window` (throws ArgumentError when it is not inside the image).
Cut plan_cut(const JpegRecord& rec, const Window& window);
// Writes the cut's JPEG (cut.bytes bytes) to out. verify_rows(rec, cut.r0, cut.r1) must have passed.
void write_cut(const JpegRecord& rec, const Cut& cut, uint8_t* out);

// Checks the record (its checksum, then the CRCs of the rows the window uses: without `crcs`
// only their structure), cuts and decodes `window` into out as decode() does; at `scale` / 8
// (decode.h) the window is in the scaled image's pixels and the cut holds the blocks those come
// from. Throws RecordError, ArgumentError or JpegError.
std::vector<std::string> decode_record_window(const uint8_t* record, size_t size, uint32_t checksum,
                                              const Window& window, Mode mode, const Output& out, bool strict,
                                              bool crcs = true, int scale = kScaleDenom);

// Checks a raw record and the CRCs of the bands the window uses, and copies the window into out
// ([channels, H, W] strides; channels must be the record's).
void read_raw_window(const uint8_t* record, size_t size, uint32_t checksum, const Window& window, const Output& out,
                     int channels, bool crcs = true);

// Checks a raw record and the CRCs of the bands `window` covers, for a caller that reads the
// pixels in place (a view of the memory map); returns the record.
RawRecord check_raw_window(const uint8_t* record, size_t size, uint32_t checksum, const Window& window,
                           bool crcs = true);

// Checks every CRC of a record (any kind), as a whole-record read does.
void verify_record(const uint8_t* record, size_t size, uint32_t checksum);

}  // namespace fastprep::jpeg
