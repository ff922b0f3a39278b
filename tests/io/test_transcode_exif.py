"""The transcoder keeps a photo's EXIF orientation: a packed record's JPEG header (and every cut of
it) holds a minimal APP1 "Exif" segment with the source's Orientation tag when it is not 1, which
Pillow's getexif() reads back; malformed EXIF is ignored (no orientation), never a failed pack.
Plain reference: Pillow reading the source file's own orientation."""

import io
import struct

import numpy as np
import pytest
from PIL import Image

import fastprep.io as fio

from helpers.jpeg_photos import needs_decoder

pytestmark = [needs_decoder, pytest.mark.one_backend]
_jpeg = fio.jpeg._jpeg


def _photo(orientation=None, size=(37, 53), extra_tags=True):
    rng = np.random.default_rng(7)
    img = Image.fromarray(rng.integers(0, 256, (*size, 3), dtype=np.uint8))
    buf = io.BytesIO()
    if orientation is None:
        img.save(buf, "JPEG", quality=90)
    else:
        exif = Image.Exif()
        exif[0x0112] = orientation
        if extra_tags:  # tags around it that the transcoder drops
            exif[0x010F], exif[0x0110] = "maker", "model"
        img.save(buf, "JPEG", quality=90, exif=exif)
    return buf.getvalue()


def _with_app1(payload):
    """A JPEG whose first segment after SOI is an APP1 of `payload`."""
    data = _photo()
    return data[:2] + b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload + data[2:]


def _record_jpeg(record):
    offset, size = struct.unpack_from("<II", record, 8)
    return record[offset:offset + size]


def _orientation(jpeg):
    return Image.open(io.BytesIO(jpeg)).getexif().get(0x0112)


@pytest.mark.parametrize("orientation", [None, 1, 2, 3, 5, 6, 8])
def test_the_record_keeps_the_orientation_pillow_reads(orientation):
    source = _photo(orientation)
    assert _orientation(source) == orientation  # the reference
    record, checksum, info, _ = _jpeg.transcode_record(source, 4, True)
    jpeg = _record_jpeg(record)
    kept = orientation if orientation not in (None, 1) else None
    header = _jpeg.record_info(record, checksum)
    assert info["orientation"] == (orientation or 0) and header["orientation"] == (kept or 0)
    assert _orientation(jpeg) == kept
    # The orientation lies in the header bytes the record keeps before the scan, which every cut copies.
    assert _orientation(jpeg[:header["header_bytes"]] + b"\xff\xd9") == kept
    cut, _, _ = _jpeg.cut_record(record, checksum, 16, 16, 8, 8)
    assert _orientation(cut) == kept
    # A minimal segment, and the same pixels as the source.
    assert len(jpeg) - len(_record_jpeg(_jpeg.transcode_record(_photo(), 4, True)[0])) == (36 if kept else 0)
    np.testing.assert_array_equal(fio.decode_jpeg(jpeg), fio.decode_jpeg(source))


TIFF = b"MM\x00\x2a\x00\x00\x00\x08"
ENTRY = struct.pack(">HHIHH", 0x0112, 3, 1, 6, 0)


@pytest.mark.parametrize("payload, expected", [
    (b"Exif\0\0" + TIFF + b"\x00\x01" + ENTRY + b"\0\0\0\0", 6),                       # well-formed, big-endian
    (b"Exif\0\0II\x2a\x00\x08\x00\x00\x00\x01\x00" + struct.pack("<HHIHH", 0x0112, 3, 1, 3, 0), 3),  # little
    (b"Exif\0\0" + TIFF + b"\x00\x02" + ENTRY.replace(b"\x01\x12", b"\x01\x0f", 1), 0),  # 2 claimed, 1 there
    (b"Exif\0\0" + TIFF + b"\x00\x01" + ENTRY[:7], 0),                                 # entry cut short
    (b"Exif\0\0" + b"MM\x00\x2a\xff\xff\xff\xf0", 0),                                  # IFD past the end
    (b"Exif\0\0" + b"XX\x00\x2a\x00\x00\x00\x08\x00\x00", 0),                          # no byte order
    (b"Exif\0\0" + TIFF + b"\x00\x01" + struct.pack(">HHIHH", 0x0112, 4, 1, 6, 0), 0),  # LONG, not SHORT
    (b"Exif\0\0" + TIFF + b"\x00\x01" + struct.pack(">HHIHH", 0x0112, 3, 1, 9, 0), 0),  # 9: no orientation
    (b"Exif\0\0" + TIFF + b"\x00\x01" + struct.pack(">HHIHH", 0x0112, 3, 1, 0, 0), 0),
    (b"Exif\0\0MM", 0),                                                                  # truncated header
    (b"XMP not exif", 0),
])
def test_malformed_exif_is_no_orientation_and_never_fails(payload, expected):
    record, checksum, info, _ = _jpeg.transcode_record(_with_app1(payload), 4, True)
    assert info["orientation"] == expected
    assert _jpeg.record_info(record, checksum)["orientation"] == (expected if expected > 1 else 0)
    assert _orientation(_record_jpeg(record)) == (expected if expected > 1 else None)


def test_a_cmyk_photo_keeps_its_orientation_beside_its_adobe_marker():
    buf = io.BytesIO()
    exif = Image.Exif()
    exif[0x0112] = 7
    Image.fromarray(np.full((24, 40, 4), 90, np.uint8), "CMYK").save(buf, "JPEG", exif=exif)
    record, checksum, info, _ = _jpeg.transcode_record(buf.getvalue(), 4, True)
    jpeg = _record_jpeg(record)
    assert info["color_space"] == "CMYK" and info["orientation"] == 7 and _orientation(jpeg) == 7
    np.testing.assert_array_equal(fio.decode_jpeg(jpeg), fio.decode_jpeg(buf.getvalue()))
