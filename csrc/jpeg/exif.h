// The EXIF orientation of a JPEG, read and written without libjpeg's help: the transcoder
// (transcode.cpp) keeps only this tag of the source's APP1 "Exif" segment, in a minimal segment of
// its own, so a packed record (and every cut of it, which copies the record's JPEG header) still
// says how the photo is meant to be turned. Every offset is checked against the segment's length:
// malformed EXIF reads as "no orientation", never as an error.
#pragma once
#include <cstddef>
#include <cstdint>

namespace fastprep::jpeg {

// Bytes of the APP1 payload (after the marker and its length) exif_orientation_segment writes:
// "Exif\0\0", a big-endian TIFF header, IFD0 of one entry (0x0112 SHORT 1), no next IFD.
constexpr size_t kOrientationSegmentBytes = 32;

// The Orientation tag (0x0112) of IFD0 in an APP1 payload starting with "Exif\0\0": 1..8, or 0
// when the payload is not EXIF, has no such tag, or holds anything malformed on the way to it.
int exif_orientation(const uint8_t* payload, size_t size);

// The orientation (1..8) of the first APP1 "Exif" segment among a JPEG's header bytes
// jpeg[0:header_size) (SOI up to the scan), 0 if none: the segment Pillow's getexif() reads.
int header_orientation(const uint8_t* jpeg, size_t header_size);

// Writes the minimal APP1 payload holding `orientation` (1..8) into out[0:kOrientationSegmentBytes).
void exif_orientation_segment(int orientation, uint8_t* out);

}  // namespace fastprep::jpeg
