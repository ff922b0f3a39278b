"""The EXIF orientation of a JPEG and the geometry of turning an image upright by it.

A camera stores the sensor's pixels as they came and writes how to turn them upright in the EXIF
Orientation tag (0x0112, values 1-8). torchvision's ``decode_jpeg(data,
apply_exif_orientation=True)`` and Pillow's ``ImageOps.exif_transpose`` apply it; Pillow's plain
``Image.open(f).convert("RGB")`` (torchvision's ImageFolder) does not. fastprep applies it when
asked (``exif=True``): :func:`jpeg_orientation` reads the tag from the bytes before the first scan,
:func:`stored_window` maps a window of the upright image to the stored image's window (only that
is decoded) and :func:`to_upright` flips / transposes the decoded window.

Only the EXIF tag is read (as torchvision does). Pillow's ``getexif`` also takes an XMP
``tiff:Orientation`` when the EXIF has none: a JPEG with only an XMP orientation is turned by
``exif_transpose`` and not here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

ORIENTATION_TAG = 0x0112
_SOS, _EOI, _APP1 = 0xDA, 0xD9, 0xE1
_EXIF = b"Exif\x00\x00"
_SHORT, _LONG = 3, 4  # TIFF field types

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
    """The EXIF orientation (1-8) of a JPEG's bytes: tag 0x0112 of IFD0 in the first APP1 "Exif"
    segment before the first scan (the one Pillow and torchvision read); 1 when there is none, and
    for anything malformed (never raises). Reads only the segment headers and that segment.

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
    n = len(mv)
    if n < 4 or mv[0] != 0xFF or mv[1] != 0xD8:
        return 1
    pos = 2
    while True:  # each segment moves pos on by 2 bytes or more: ends at the data's end at the latest
        while pos + 1 < n and mv[pos] == 0xFF and mv[pos + 1] == 0xFF:  # fill bytes before a marker
            pos += 1
        if pos + 4 > n or mv[pos] != 0xFF:
            return 1
        marker = mv[pos + 1]
        if marker in (_SOS, _EOI):
            return 1
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:  # markers without a length
            pos += 2
            continue
        end = pos + 2 + ((mv[pos + 2] << 8) | mv[pos + 3])
        if end < pos + 4:
            return 1
        if marker == _APP1 and mv[pos + 4:pos + 10] == _EXIF:
            return tiff_orientation(bytes(mv[pos + 10:min(end, n)]))
        pos = end
    return 1


def tiff_orientation(tiff: bytes) -> int:
    """Tag 0x0112 of IFD0 of an EXIF block's TIFF structure ("II*\\0" or "MM\\0*"): a SHORT (the
    first, of at most two held in the entry) or a LONG of count 1, in 1..8; else 1."""
    if len(tiff) < 8:
        return 1
    order = {b"II*\x00": "little", b"MM\x00*": "big"}.get(tiff[:4])
    if order is None:
        return 1

    def uint(at: int, size: int) -> int:
        return int.from_bytes(tiff[at:at + size], order)

    ifd = uint(4, 4)
    if ifd + 2 > len(tiff):
        return 1
    entries = min(uint(ifd, 2), (len(tiff) - ifd - 2) // 12)
    for k in range(entries):
        at = ifd + 2 + 12 * k
        if uint(at, 2) != ORIENTATION_TAG:
            continue
        kind, count = uint(at + 2, 2), uint(at + 4, 4)
        if not (kind == _SHORT and count in (1, 2) or kind == _LONG and count == 1):
            return 1  # (two SHORTs: Pillow warns and takes the first, as here)
        value = uint(at + 8, 2 if kind == _SHORT else 4)
        return value if value in STEPS else 1
    return 1


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
