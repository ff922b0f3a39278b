#include "jpeg/markers.h"

#include <algorithm>
#include <cstring>

namespace fastprep::jpeg {
namespace {

uint32_t be16(const uint8_t* p) { return (uint32_t{p[0]} << 8) | p[1]; }

std::string hex(int marker) {
  const char* digits = "0123456789ABCDEF";
  return std::string("0xFF") + digits[(marker >> 4) & 15] + digits[marker & 15];
}

std::string frame_kind(int marker) {
  switch (marker) {
    case 0xC2:
    case 0xC6:
      return "progressive";
    case 0xC3:
    case 0xC7:
    case 0xCB:
    case 0xCF:
      return "lossless";
    default:
      return marker >= 0xC9 ? "arithmetic-coded" : "hierarchical";
  }
}

std::string parse_sof(const uint8_t* seg, uint32_t len, ScanGeometry& out) {
  if (len < 8) return "SOF segment of " + std::to_string(len) + " bytes";
  const int precision = seg[4];
  out.height = be16(seg + 5);
  out.width = be16(seg + 7);
  out.components = seg[9];
  if (precision != 8) return std::to_string(precision) + "-bit samples (only 8-bit JPEGs are read)";
  if (out.components != 1 && out.components != 3 && out.components != 4) {
    return std::to_string(out.components) + " components (1, 3 or 4 are read)";
  }
  if (len != 8 + 3u * out.components) return "SOF segment of " + std::to_string(len) + " bytes";
  if (out.height < 1 || out.width < 1) {
    return "image size " + std::to_string(out.height) + "x" + std::to_string(out.width) + " in the SOF";
  }
  int max_h = 1, max_v = 1, min_h = 4, min_v = 4;
  for (int c = 0; c < out.components; ++c) {
    const int h = seg[11 + 3 * c] >> 4, v = seg[11 + 3 * c] & 15;
    if (h < 1 || h > 4 || v < 1 || v > 4) {
      return "sampling factors " + std::to_string(h) + "x" + std::to_string(v) + " of component " + std::to_string(c);
    }
    out.h_samp[c] = h;
    out.v_samp[c] = v;
    max_h = std::max(max_h, h), max_v = std::max(max_v, v), min_h = std::min(min_h, h), min_v = std::min(min_v, v);
  }
  for (int c = 0; c < out.components; ++c) {
    if (max_h % out.h_samp[c] || max_v % out.v_samp[c]) return "fractional chroma sampling";
  }
  if (out.components == 1) {  // a single-component scan is not interleaved: its MCU is one block
    out.mcu_width = out.mcu_height = 8;
  } else {
    out.mcu_width = 8 * max_h;
    out.mcu_height = 8 * max_v;
    out.h_margin = max_h != min_h ? max_h / min_h : 0;
    out.v_margin = max_v != min_v ? max_v / min_v : 0;
  }
  out.mcus_per_row = (out.width + out.mcu_width - 1) / out.mcu_width;
  out.mcu_rows = (out.height + out.mcu_height - 1) / out.mcu_height;
  return "";
}

}  // namespace

std::string parse_scan_geometry(const uint8_t* data, size_t size, bool need_restart, ScanGeometry& out) {
  out = ScanGeometry{};
  if (size < 4 || data[0] != 0xFF || data[1] != 0xD8) return "not a JPEG (no SOI marker)";
  bool have_sof = false;
  size_t pos = 2;
  while (true) {
    if (pos + 4 > size) return "header ends at byte " + std::to_string(size) + " before the scan";
    if (data[pos] != 0xFF) return "no marker at byte " + std::to_string(pos) + " of the header";
    const int marker = data[pos + 1];
    if (marker == 0xFF) {  // a fill byte before a marker
      ++pos;
      continue;
    }
    if (marker == 0xD8 || marker == 0xD9 || marker == 0x01 || marker == 0x00 || (marker >= 0xD0 && marker <= 0xD7)) {
      return "unexpected marker " + hex(marker) + " at byte " + std::to_string(pos) + " of the header";
    }
    const uint32_t len = be16(data + pos + 2);
    if (len < 2 || len > size - pos - 2) {
      return "segment " + hex(marker) + " at byte " + std::to_string(pos) + " claims " + std::to_string(len) +
             " bytes, past the end";
    }
    const uint8_t* seg = data + pos;
    if (marker == 0xC0 || marker == 0xC1) {
      if (have_sof) return "two SOF segments";
      have_sof = true;
      out.sof_offset = pos;
      std::string err = parse_sof(seg, len, out);
      if (!err.empty()) return err;
    } else if ((marker >= 0xC2 && marker <= 0xCF) && marker != 0xC4 && marker != 0xC8 && marker != 0xCC) {
      return "frame type SOF " + hex(marker) + " (" + frame_kind(marker) + "); only baseline Huffman JPEGs are read";
    } else if (marker == 0xCC) {
      return "arithmetic coding conditioning (DAC); only Huffman-coded JPEGs are read";
    } else if (marker == 0xDD) {
      if (len != 4) return "DRI segment of " + std::to_string(len) + " bytes";
      out.restart = be16(seg + 4);
    } else if (marker == 0xDA) {
      if (!have_sof) return "SOS before any SOF";
      if (len < 6 || seg[4] != out.components || len != 6u + 2u * seg[4]) {
        return "a scan of " + std::to_string(len < 6 ? 0 : seg[4]) + " of the " + std::to_string(out.components) +
               " components (one interleaved scan of all of them is read)";
      }
      out.scan_offset = pos + 2 + len;
      break;
    }
    pos += 2 + len;
  }
  if (need_restart) {
    if (out.restart < 1) return "no restart interval (DRI)";
    if (out.mcus_per_row % out.restart) {
      return "restart interval of " + std::to_string(out.restart) + " MCUs does not divide the " +
             std::to_string(out.mcus_per_row) + " MCUs of a row";
    }
  }
  return "";
}

std::string find_restart_intervals(const uint8_t* data, size_t size, const ScanGeometry& geometry,
                                   std::vector<uint32_t>& starts) {
  const int64_t expected = geometry.intervals();
  if (size > UINT32_MAX) return "JPEG of " + std::to_string(size) + " bytes (at most 4 GiB)";
  starts.clear();
  starts.reserve(static_cast<size_t>(expected));
  starts.push_back(static_cast<uint32_t>(geometry.scan_offset));
  size_t pos = geometry.scan_offset;
  while (true) {
    const void* hit = pos < size ? std::memchr(data + pos, 0xFF, size - pos) : nullptr;
    if (hit == nullptr || static_cast<const uint8_t*>(hit) + 1 >= data + size) return "the scan has no EOI marker";
    pos = static_cast<size_t>(static_cast<const uint8_t*>(hit) - data);
    const int next = data[pos + 1];
    if (next == 0x00 || next == 0xFF) {  // a stuffed 0xFF byte, or fill before a marker
      pos += next == 0x00 ? 2 : 1;
      continue;
    }
    if (next == 0xD9) {
      if (pos + 2 != size) return "data after the EOI marker";
      break;
    }
    const int64_t k = static_cast<int64_t>(starts.size()) - 1;  // the interval this marker ends
    if (next < 0xD0 || next > 0xD7) return "marker " + hex(next) + " inside the scan at byte " + std::to_string(pos);
    if (next != rst_marker(k)) {
      return "restart marker " + hex(next) + " after interval " + std::to_string(k) + ", expected " +
             hex(rst_marker(k));
    }
    if (static_cast<int64_t>(starts.size()) >= expected) {
      return "more than the " + std::to_string(expected) + " restart intervals the header implies";
    }
    pos += 2;
    starts.push_back(static_cast<uint32_t>(pos));
  }
  if (static_cast<int64_t>(starts.size()) != expected) {
    return std::to_string(starts.size()) + " restart intervals where the header implies " + std::to_string(expected);
  }
  return "";
}

}  // namespace fastprep::jpeg
