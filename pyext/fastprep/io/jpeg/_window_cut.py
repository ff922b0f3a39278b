"""A JPEG window as a small JPEG: what a packed record's restart intervals (PackedJpeg.cut) or a whole
file (JpegFile.cut) hand the device decoders and WindowBatch, with the window's place in it."""

from __future__ import annotations

from typing import NamedTuple


class WindowCut(NamedTuple):
    """The JPEG of the restart intervals covering a window (:meth:`PackedJpeg.cut`; a
    :meth:`JpegFile.cut`'s is the whole file), and the window's place in it: decoding `data` and
    cropping (top, left, height, width) gives the window's bits (CPU decoder)."""

    data: bytes
    top: int
    left: int
    height: int
    width: int
