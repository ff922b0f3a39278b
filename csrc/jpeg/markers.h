// Reading a JPEG's markers without libjpeg: the header of a baseline Huffman JPEG with restart
// markers (what the transcoder writes and a packed record holds), and the restart intervals of its
// entropy-coded data. Every length and offset is checked against the buffer before it is read;
// a problem comes back as text (empty on success), so the caller names the file or record.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fastprep::jpeg {

// The single scan of a sequential JPEG and the geometry of its MCUs.
struct ScanGeometry {
  int64_t height = 0, width = 0;
  int components = 0;  // 1 (grey), 3 (YCbCr, RGB) or 4 (CMYK, YCCK)
  int h_samp[4] = {0, 0, 0, 0}, v_samp[4] = {0, 0, 0, 0};
  int mcu_width = 0, mcu_height = 0;  // pixels of one MCU of the scan (one 8x8 block for a single component)
  int64_t mcus_per_row = 0, mcu_rows = 0;
  int64_t restart = 0;  // MCUs per restart interval (DRI); 0 without restart markers
  // Pixels of neighbours that libjpeg's fancy upsampling reads beyond a pixel's own chroma sample,
  // horizontally and vertically: one chroma sample (2 px for 4:2:x), 0 where chroma is not upsampled.
  int h_margin = 0, v_margin = 0;
  size_t sof_offset = 0;   // the SOF marker's FF byte
  size_t scan_offset = 0;  // the first entropy-coded byte (after SOS)
  int64_t intervals() const { return restart > 0 ? mcu_rows * (mcus_per_row / restart) : 0; }
};

// Parses data[0:size) up to its SOS: one baseline or extended Huffman frame (SOF0 / SOF1), 8-bit,
// 1, 3 or 4 components with integer sampling ratios, one scan holding every component. With
// `need_restart`, a DRI whose interval divides the MCUs of a row is required too.
std::string parse_scan_geometry(const uint8_t* data, size_t size, bool need_restart, ScanGeometry& out);

// The offset of every restart interval's first byte in data[geometry.scan_offset:size): the scan
// start, then the byte after each RSTn marker (RST0, RST1, ..., RST7, RST0, ...), ending at the
// EOI marker, which must end the data. Expects geometry.intervals() intervals.
std::string find_restart_intervals(const uint8_t* data, size_t size, const ScanGeometry& geometry,
                                   std::vector<uint32_t>& starts);

// A restart interval's marker (RST0 + k mod 8) after interval k.
inline uint8_t rst_marker(int64_t k) { return static_cast<uint8_t>(0xD0 + (k & 7)); }

}  // namespace fastprep::jpeg
