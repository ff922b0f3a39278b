// Lossless transcoding of a JPEG into the form a packed shard stores: baseline Huffman (optimised
// tables, as `jpegtran -optimize`), one interleaved scan, a restart marker every K MCUs with K
// dividing the MCUs of a row, and the byte offset of every restart interval. The DCT coefficients
// are libjpeg's own (jpeg_read_coefficients -> jpeg_write_coefficients, as jpegtran): decoding
// the result gives the bits of decoding the input. Of the source's APP markers only the EXIF
// orientation survives (exif.h), in a 32-byte APP1 segment before the tables. Progressive,
// baseline and arithmetic-coded 8-bit grey, YCbCr, RGB, CMYK and YCCK JPEGs are taken (the Adobe
// marker of a CMYK / YCCK one is written again with its transform); 12-bit ones and other
// component counts are refused.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "jpeg/decode.h"
#include "jpeg/markers.h"

namespace fastprep::jpeg {

struct Transcoded {
  std::vector<uint8_t> jpeg;              // SOI .. EOI
  ScanGeometry geometry;                  // of `jpeg`, restart included
  std::vector<uint32_t> interval_starts;  // geometry.intervals() offsets into `jpeg`
  std::vector<std::string> warnings;      // corrupt data libjpeg recovered from (not kept with strict)
  ColorSpace color = ColorSpace::kOther;  // GRAY, YCbCr, RGB (Adobe, no transform), CMYK or YCCK
  int orientation = 0;                    // the source's EXIF orientation 1..8 (0: none or malformed); `jpeg`
                                          // holds it in a minimal APP1 "Exif" segment when it is not 1
};

// K for a row of `mcus_per_row` MCUs: its largest divisor not above `target`; when that is 1 or 2
// and the row has a divisor up to 2 * target, the smallest such one instead.
int64_t choose_restart(int64_t mcus_per_row, int64_t target);

// Transcodes data[0:size). Throws JpegError (not a readable JPEG, corrupt data with `strict`) or
// ArgumentError (a JPEG this format cannot hold: 12-bit, 2 components, ...), with the reason.
Transcoded transcode_with_restarts(const uint8_t* data, size_t size, int64_t restart_target, bool strict);

}  // namespace fastprep::jpeg
