"""The EXIF orientation of a JPEG and the geometry of turning an image upright by it.

A camera stores the sensor's pixels as they came and writes how to turn them upright in the EXIF
Orientation tag (0x0112, values 1-8). torchvision's ``decode_jpeg(data,
apply_exif_orientation=True)`` and Pillow's ``ImageOps.exif_transpose`` apply it; Pillow's plain
``Image.open(f).convert("RGB")`` (torchvision's ImageFolder) does not. fastprep applies it when
asked (``exif=True``): :func:`jpeg_orientation` reads the tag from the bytes before the first scan,
:func:`stored_window` maps a window of the upright image to the stored image's window (only that
is decoded) and :func:`to_upright` flips / transposes the decoded window.

The tag is read by Pillow's rules, so that a file turns as ``exif_transpose`` turns it: the APP1
"Exif" segments before the scan joined, the first entry Pillow keeps, of any numeric type, stored
in the entry or by offset (tests/io/test_exif_pillow_fuzz.py fuzzes this against Pillow). Only the
EXIF tag is read (as torchvision does): Pillow's ``getexif`` also takes an XMP
``tiff:Orientation`` when the EXIF has none, so a JPEG with only an XMP orientation is turned by
``exif_transpose`` and not here.
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import torch

ORIENTATION_TAG = 0x0112
_SOS, _APP1 = 0xDA, 0xE1
_EXIF = b"Exif\x00\x00"
# Markers Pillow reads without a length (0x01, libjpeg's TEM, too); any other below 0xC0 makes
# Pillow refuse the file.
_NO_LENGTH = frozenset([0x01, 0xC8, *range(0xD0, 0xDA), *range(0xF0, 0xFE)])
# The TIFF headers Pillow's EXIF reader takes, and their byte order ("MM\0+" is BigTIFF's, which
# Pillow reads as a plain TIFF; "II+\0", BigTIFF little-endian, makes it raise).
_TIFF_ORDERS = {b"MM\x00*": "big", b"II*\x00": "little", b"MM*\x00": "big", b"II\x00*": "little", b"MM\x00+": "big"}
# TIFF field type -> bytes per value, for the types Pillow reads (it skips an entry of any other).
_TYPE_SIZES = {1: 1, 2: 1, 3: 2, 4: 4, 5: 8, 6: 1, 7: 1, 8: 2, 9: 4, 10: 8, 11: 4, 12: 8, 13: 4, 16: 8}
_INTS, _SIGNED, _FLOATS, _RATIONALS = (3, 4, 6, 8, 9, 13, 16), (6, 8, 9, 10), {11: "f", 12: "d"}, (5, 10)

# orientation -> (transpose, flip the rows, flip the columns): the upright image is the stored one
# transposed (if so), then flipped. The names are Pillow's exif_transpose methods.
STEPS = {
    1: (False, False, False),  # as stored
    2: (False, False, True),   # FLIP_LEFT_RIGHT
    3: (False, True, True),    # ROTATE_180
    4: (False, True, False),   # FLIP_TOP_BOTTOM
    5: (True, False, False),   # TRANSPOSE
    6: (True, False, True),    # ROTATE_270 (90 degrees clockwise)
    7: (True, True, True),     # TRANSVERSE
    8: (True, True, False),    # ROTATE_90 (90 degrees counterclockwise)
}


def jpeg_orientation(data: Any) -> int:
    """The EXIF orientation (1-8) of a JPEG's bytes, as Pillow's ``ImageOps.exif_transpose`` reads
    it: tag 0x0112 of IFD0 of the EXIF that the APP1 "Exif" segments before the first scan hold
    (joined, as Pillow joins them), of any type whose first value is a whole number (SHORT, LONG,
    their signed kinds, rationals, floats), stored in the entry or by offset; 1 when there is
    none, and for anything malformed (never raises). Reads only the segments before the scan.

    Args:
        data: the JPEG's bytes (bytes, bytearray, memoryview, or a 1-D uint8 array).

    Example:
        >>> jpeg_orientation(open("phone_photo.jpg", "rb").read())
        6
    """
    try:
        mv = memoryview(data).cast("B")
    except (TypeError, ValueError):  # not a buffer, or not a contiguous one
        return 1
    segments = exif_segments(mv)
    if not segments:
        return 1
    first, *rest = (bytes(mv[start:end]) for start, end in segments)
    return tiff_orientation(first[len(_EXIF):] + b"".join(p[len(_EXIF):] for p in rest))


def exif_segments(mv: memoryview) -> list[tuple[int, int]]:
    """(start, end) in `mv` (a JPEG's bytes) of the payload (from "Exif") of each APP1 "Exif"
    segment before the first scan, walking the segments as Pillow does (bytes between them that
    are not a marker are skipped); [] for no JPEG, or a marker Pillow refuses. A segment cut short
    by the data's end ends there."""
    n = len(mv)
    if n < 3 or mv[0] != 0xFF or mv[1] != 0xD8 or mv[2] != 0xFF:
        return []
    found, pos = [], 2
    while pos + 1 < n:  # each step moves pos on: ends at the data's end at the latest
        if mv[pos] != 0xFF:  # junk before a marker: on to the next 0xFF
            skip = bytes(mv[pos:pos + 4096]).find(b"\xff")
            pos += 4096 if skip < 0 else skip
            continue
        marker = mv[pos + 1]
        if marker in (0xFF, 0x00):  # a fill byte; a stuffed 0xFF00, skipped whole
            pos += 1 if marker == 0xFF else 2
            continue
        if marker == _SOS:
            break
        if marker in _NO_LENGTH:
            pos += 2
            continue
        if marker < 0xC0:
            return []
        if pos + 4 > n:
            break
        length = (mv[pos + 2] << 8) | mv[pos + 3]
        if length < 2:  # Pillow reads no payload and goes on after the length
            pos += 4
            continue
        end = pos + 2 + length
        if marker == _APP1 and mv[pos + 4:pos + 10] == _EXIF:
            found.append((pos + 4, min(end, n)))
        pos = end
    return found


def tiff_orientation(tiff: bytes) -> int:
    """Tag 0x0112 of IFD0 of an EXIF block's TIFF structure, read by Pillow's rules (Image.Exif,
    TiffImagePlugin.ImageFileDirectory_v2): the first entry of the tag that Pillow keeps (a type
    it reads, a count above 0, its value inside the TIFF), its first value if that is a whole
    number in 1..8; else 1. An entry Pillow cannot read ends the IFD for it, as here."""
    if tiff[:len(_EXIF)] == _EXIF:  # Pillow strips a second "Exif\0\0" too
        tiff = tiff[len(_EXIF):]
    order = _TIFF_ORDERS.get(tiff[:4])
    n = len(tiff)
    if order is None or n < 8:
        return 1

    def uint(at: int, size: int) -> int:
        return int.from_bytes(tiff[at:at + size], order)

    ifd = uint(4, 4)
    if ifd + 2 > n:
        return 1
    kept: set[int] = set()  # tags Pillow has read: a later entry of one is skipped
    by_offset = 0  # bytes of the values stored by offset so far: past the TIFF's size, Pillow skips a tag
    for k in range(uint(ifd, 2)):
        at = ifd + 2 + 12 * k
        if at + 12 > n:
            return 1
        tag, kind, count = uint(at, 2), uint(at + 2, 2), uint(at + 4, 4)
        if tag in kept or kind not in _TYPE_SIZES:
            continue
        size = count * _TYPE_SIZES[kind]
        if size > 4:
            by_offset += size
            if by_offset > n:
                continue
            offset = uint(at + 8, 4)
            if offset + size > n:  # a short read: Pillow stops reading the IFD
                return 1
            value = tiff[offset:offset + size]
        else:
            value = tiff[at + 8:at + 8 + size]
        if not value:  # count 0: not kept
            continue
        if tag == ORIENTATION_TAG:
            return _orientation_value(kind, value, order)
        kept.add(tag)
    return 1


def _orientation_value(kind: int, value: bytes, order: str) -> int:
    """The orientation a tag of TIFF type `kind` holding `value` gives exif_transpose: its first
    value where that equals 1..8 (Pillow's dict lookup: 6, 6.0 and 12/2 alike), else 1. Bytes
    (BYTE, UNDEFINED) and text (ASCII) never do."""
    size = _TYPE_SIZES[kind]
    if kind in _INTS:
        number: float = int.from_bytes(value[:size], order, signed=kind in _SIGNED)
    elif kind in _FLOATS:
        number = struct.unpack((">" if order == "big" else "<") + _FLOATS[kind], value[:size])[0]
    elif kind in _RATIONALS:
        num, den = (int.from_bytes(value[i:i + 4], order, signed=kind in _SIGNED) for i in (0, 4))
        if den == 0 or num % den:
            return 1
        number = num // den
    else:
        return 1
    return int(number) if number in STEPS else 1


def with_orientation(data: bytes, orientation: int) -> bytes:
    """JPEG `data` with its APP1 "Exif" segments (before the first scan) replaced by one minimal
    segment holding `orientation` (none for 1), right after SOI: what pack hands the transcoder
    where the transcoder's own EXIF reader (C++: the first segment's tag, a SHORT or LONG inside
    the entry) reads another orientation than :func:`jpeg_orientation`. The transcoder keeps no
    other EXIF, so the record is the same but for that tag."""
    mv = memoryview(data).cast("B")
    kept, last = [], 2
    for start, end in exif_segments(mv):
        kept.append(mv[last:start - 4])  # up to the segment's marker
        last = end
    kept.append(mv[last:])
    segment = b"" if orientation == 1 else (b"\xff\xe1\x00\x22" + _EXIF + b"MM\x00*\x00\x00\x00\x08\x00\x01"
                                            + struct.pack(">HHIH", ORIENTATION_TAG, 3, 1, orientation) + b"\x00" * 6)
    return bytes(mv[:2]) + segment + b"".join(bytes(part) for part in kept)


def upright_size(height: int, width: int, orientation: int) -> tuple[int, int]:
    """(height, width) of a stored height x width image turned upright by `orientation`."""
    return (width, height) if STEPS[orientation][0] else (height, width)


def stored_window(crop: tuple[int, int, int, int], height: int, width: int,
                  orientation: int) -> tuple[int, int, int, int]:
    """The window (top, left, h, w) of the stored image whose pixels make window `crop` of the
    upright image (`height` x `width`: the upright size; `crop` inside it, checked by the caller)."""
    top, left, h, w = crop
    transpose, flip_rows, flip_cols = STEPS[orientation]
    if flip_rows:
        top = height - top - h
    if flip_cols:
        left = width - left - w
    return (left, top, w, h) if transpose else (top, left, h, w)


def upright_window(window: tuple[int, int, int, int], height: int, width: int,
                   orientation: int) -> tuple[int, int, int, int]:
    """The window (top, left, h, w) of the upright image (`height` x `width`) whose pixels are
    window `window` of the stored image: the inverse of :func:`stored_window`."""
    transpose, flip_rows, flip_cols = STEPS[orientation]
    top, left, h, w = (window[1], window[0], window[3], window[2]) if transpose else window
    if flip_rows:
        top = height - top - h
    if flip_cols:
        left = width - left - w
    return top, left, h, w


def to_upright(hwc: torch.Tensor, orientation: int, layout: str, out: torch.Tensor | None = None) -> torch.Tensor:
    """A decoded stored window (HWC uint8) turned upright, in `layout`: written into `out` (checked
    by the caller: the upright window's shape) and returned, else a new contiguous tensor. One copy
    through numpy, whose flips are views (negative strides) and which copies in the calling thread:
    torch's copy of a permuted uint8 tensor goes to its intra-op threads, measured 100x slower on a
    busy 2-core machine than one thread."""
    transpose, flip_rows, flip_cols = STEPS[orientation]
    a = hwc.numpy()
    a = a.transpose(1, 0, 2) if transpose else a
    a = a[::-1 if flip_rows else 1, ::-1 if flip_cols else 1]
    if layout == "CHW":
        a = a.transpose(2, 0, 1)
    if out is None:  # a copy, never a view: a 1-pixel flipped axis counts as contiguous with a negative stride
        return torch.from_numpy(a.copy(order="C"))
    np.copyto(out.numpy(), a)
    return out
