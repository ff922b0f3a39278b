#include "jpeg/exif.h"

#include <cstring>

namespace fastprep::jpeg {
namespace {

constexpr uint8_t kExifId[6] = {'E', 'x', 'i', 'f', 0, 0};
constexpr uint16_t kOrientationTag = 0x0112, kShortType = 3, kLongType = 4;

// Integer loads in the TIFF's own byte order ("II": little-endian, "MM": big-endian).
uint32_t load(const uint8_t* p, int n, bool little) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i) v = little ? v | (uint32_t{p[i]} << (8 * i)) : (v << 8) | p[i];
  return v;
}

}  // namespace

int exif_orientation(const uint8_t* payload, size_t size) {
  if (size < sizeof(kExifId) + 8 || std::memcmp(payload, kExifId, sizeof(kExifId)) != 0) return 0;
  const uint8_t* tiff = payload + sizeof(kExifId);
  const size_t n = size - sizeof(kExifId);
  const bool little = tiff[0] == 'I' && tiff[1] == 'I';
  if (!little && !(tiff[0] == 'M' && tiff[1] == 'M')) return 0;
  if (load(tiff + 2, 2, little) != 42) return 0;
  const size_t ifd = load(tiff + 4, 4, little);
  if (ifd < 8 || ifd > n - 2) return 0;  // n >= 8: no wrap
  const size_t entries = load(tiff + ifd, 2, little);
  for (size_t i = 0; i < entries; ++i) {
    const size_t at = ifd + 2 + 12 * i;  // ifd < 2^32 and i < 2^16: no overflow
    if (at > n || n - at < 12) return 0;
    const uint8_t* e = tiff + at;
    if (load(e, 2, little) != kOrientationTag) continue;
    // The common forms only: a SHORT of count 1 or 2 (the first is taken) or a LONG of count 1.
    // io/jpeg/_exif.py reads the orientation by Pillow's wider rules (any numeric type, values by
    // offset, joined segments); where the two differ, pack hands this transcoder a minimal segment
    // holding Pillow's value (_pack_item.py), so a folder and its pack turn a photo alike.
    const uint32_t type = load(e + 2, 2, little), count = load(e + 4, 4, little);
    if (!(type == kShortType && (count == 1 || count == 2)) && !(type == kLongType && count == 1)) return 0;
    const uint32_t value = load(e + 8, type == kShortType ? 2 : 4, little);
    return value >= 1 && value <= 8 ? static_cast<int>(value) : 0;
  }
  return 0;
}

int header_orientation(const uint8_t* jpeg, size_t header_size) {
  if (header_size < 4 || jpeg[0] != 0xFF || jpeg[1] != 0xD8) return 0;
  size_t pos = 2;
  while (pos + 4 <= header_size && jpeg[pos] == 0xFF) {
    const int marker = jpeg[pos + 1];
    if (marker == 0xFF) {  // fill byte
      ++pos;
      continue;
    }
    if (marker == 0xDA) break;
    const size_t len = (size_t{jpeg[pos + 2]} << 8) | jpeg[pos + 3];
    if (len < 2 || len > header_size - pos - 2) break;
    if (marker == 0xE1 && len - 2 >= sizeof(kExifId) && std::memcmp(jpeg + pos + 4, kExifId, sizeof(kExifId)) == 0) {
      return exif_orientation(jpeg + pos + 4, len - 2);
    }
    pos += 2 + len;
  }
  return 0;
}

void exif_orientation_segment(int orientation, uint8_t* out) {
  // clang-format off
  static constexpr uint8_t kTemplate[kOrientationSegmentBytes] = {
      'E', 'x', 'i', 'f', 0, 0,                   // EXIF identifier
      'M', 'M', 0, 42, 0, 0, 0, 8,                // big-endian TIFF header, IFD0 at offset 8
      0, 1,                                       // one entry:
      0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 0, 0, 0,  // Orientation, SHORT, count 1, value (byte 25)
      0, 0, 0, 0};                                // no next IFD
  // clang-format on
  std::memcpy(out, kTemplate, sizeof(kTemplate));
  out[25] = static_cast<uint8_t>(orientation);
}

}  // namespace fastprep::jpeg
