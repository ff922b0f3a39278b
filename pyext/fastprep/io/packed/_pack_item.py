"""One source image into one packed record: the per-item work of :func:`fastprep.io.pack`, run in its
threads (the transcoder, libjpeg and Pillow release the GIL).

A JPEG is transcoded losslessly (``mode="jpeg"``) or decoded (``mode="raw"``); anything else
(PNG, pixels from a dataset, ...) is stored as raw pixels (``non_jpeg="raw"``, lossless: the
default) or encoded once as a JPEG at ``quality`` (``non_jpeg="encode"``: lossy, smaller).
``max_side`` shrinks larger images first (then a JPEG is re-encoded: lossy). Each record says what
became of its input (its `how`, a kind of pack_summary.KINDS) and the input's size.
"""

from __future__ import annotations

import io
import json
import numbers
import os
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fastprep.errors import PackSourceError
from fastprep.io import jpeg as jpeg_io
from fastprep.io._encode import encode_pixels
from fastprep.io._files import read_file
from fastprep.io._pack_format import COLORS, KIND_JPEG, KIND_RAW
from fastprep.io._source import JPEG_MAGIC, pil_image
from fastprep.io._windowed import WindowedImage
from fastprep.io.jpeg._exif import jpeg_orientation, with_orientation
from fastprep.io.jpeg._file import JpegFile


class Unreadable(Exception):  # noqa: N818 (a verdict, not a bug: the packer skips the input and says why)
    """An input the packer cannot read: skipped, its name and this reason reported."""


@dataclass(frozen=True)
class Options:
    mode: str = "jpeg"
    max_side: int | None = None
    quality: int = 90
    non_jpeg: str = "raw"
    restart: int = 4
    strict: bool = True  # which inputs are bad, like on_error: not part of the pack's identity

    def as_dict(self) -> dict:
        return {"mode": self.mode, "max_side": self.max_side, "quality": self.quality, "non_jpeg": self.non_jpeg,
                "restart": self.restart}


@dataclass
class Packed:
    """A record ready for a shard, with what the index keeps of it."""

    record: bytes
    checksum: int
    kind: int
    color: int
    height: int
    width: int
    label: int
    extras: list | None
    warnings: list[str]
    how: str = ""  # the kind (pack_summary.KINDS): what became of the input
    bytes_in: int = 0  # the input's size: its encoded bytes, or its pixels' as given
    shrunk: bool = False  # max_side shrank it


def label_of(value: Any, where: str) -> int:
    """An item's label as the int64 the index holds; PackSourceError names the item and the value."""
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_floating_point():
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise PackSourceError(f"pack: {where}: expected an int label (the item's second field), got "
                              f"{_short(value)}")
    if not -(1 << 63) <= int(value) < 1 << 63:
        raise PackSourceError(f"pack: {where}: label {int(value)} does not fit the index's int64 labels "
                              f"([-2**63, 2**63))")
    return int(value)


def _short(value: Any) -> str:
    text = repr(value)
    return f"a {type(value).__name__} ({text[:60]}...)" if len(text) > 80 else text


def extras_of(values: tuple, where: str) -> list | None:
    """The item's fields after the label, as JSON (what the index can hold), or None if there are none."""
    if not values:
        return None
    out = [v.item() if isinstance(v, np.generic) else v for v in values]
    try:
        json.dumps(out)
    except (TypeError, ValueError) as exc:
        raise PackSourceError(f"pack: {where}: the fields after the label must be JSON values (numbers, str, "
                              f"lists, dicts) to be packed: {exc}") from None
    return out


def read_input(path: str | os.PathLike) -> bytes:
    """A source file's bytes; Unreadable (the item is skipped) when it cannot be read."""
    try:
        return read_file("pack", path)  # regular files only, bounded: never a FIFO or /dev/zero
    except OSError as exc:
        raise Unreadable(f"cannot read it: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise Unreadable(str(exc).split(": ", 2)[-1]) from None


def _pil_pixels(data: bytes) -> np.ndarray:
    Image = pil_image("pack", "an input is not a JPEG; decoding it")  # noqa: N806 (imported once: threads race)
    try:
        with Image.open(io.BytesIO(data)) as img:
            return np.asarray(img.convert("L" if img.mode in ("L", "1") else "RGB"))
    except Image.UnidentifiedImageError:
        raise Unreadable("neither a JPEG nor an image file Pillow can identify") from None
    except (OSError, ValueError, Image.DecompressionBombError) as exc:
        raise Unreadable(f"not a JPEG, and Pillow cannot decode it: {exc}") from None


def pixels_of(image: Any) -> np.ndarray:
    """An image that is not encoded bytes as HWC (or HW grey) uint8 pixels."""
    if isinstance(image, WindowedImage):
        return image.decode(layout="HWC").numpy()
    if hasattr(image, "convert") and hasattr(image, "mode"):  # PIL
        return np.asarray(image.convert("L" if image.mode in ("L", "1") else "RGB"))
    if isinstance(image, torch.Tensor):
        t = image.detach().cpu()
        image = (t if t.dim() == 2 else t.permute(1, 2, 0)).numpy()
    arr = np.asarray(image)
    if arr.dtype != np.uint8 or arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (1, 3)):
        raise TypeError(f"pack: expected an image as JPEG/PNG bytes, a path, a PIL image, an HWC uint8 array or a "
                        f"CHW uint8 tensor, got {type(image).__name__} {getattr(arr, 'dtype', '')} "
                        f"{getattr(arr, 'shape', '')}")
    return arr


def _shrunk(pixels: np.ndarray, max_side: int | None) -> np.ndarray:
    h, w = pixels.shape[:2]
    if max_side is None or max(h, w) <= max_side:
        return pixels
    Image = pil_image("pack", "resizing an input to max_side")  # noqa: N806 (imported once: threads race)
    scale = max_side / max(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    img = Image.fromarray(pixels[:, :, 0] if pixels.ndim == 3 and pixels.shape[2] == 1 else pixels)
    return np.asarray(img.resize(size, Image.Resampling.LANCZOS))


def _jpeg_record(data: bytes, opts: Options) -> Packed:
    rec, checksum, info, notes = _transcode(data, opts)
    orientation = jpeg_orientation(data)
    if max(info["orientation"], 1) != orientation:
        # The transcoder's own EXIF reader (C++) keeps the first segment's tag by narrower rules
        # than Pillow's (types, offsets, segments): the record must keep the orientation the
        # files are read by (io/jpeg/_exif.py), so the transcoder is handed that one alone.
        rec, checksum, info, notes = _transcode(with_orientation(data, orientation), opts)
    return Packed(rec, checksum, KIND_JPEG, COLORS[info["color_space"]], info["height"], info["width"], 0, None,
                  list(notes))


def _transcode(data: bytes, opts: Options) -> tuple:
    try:
        return jpeg_io.native("pack").transcode_record(data, opts.restart, opts.strict)
    except ValueError as exc:
        raise Unreadable(str(exc)) from None


def _raw_record(pixels: np.ndarray) -> Packed:
    rgb = np.repeat(pixels.reshape(*pixels.shape[:2], 1), 3, axis=2) if pixels.ndim == 2 or pixels.shape[2] == 1 \
        else pixels
    rec, checksum = jpeg_io.native("pack").raw_record(np.ascontiguousarray(rgb))
    return Packed(rec, checksum, KIND_RAW, COLORS["RGB"], rgb.shape[0], rgb.shape[1], 0, None, [])


def _check_pixels(height: int, width: int) -> None:
    limit = jpeg_io.MAX_IMAGE_PIXELS
    if limit is not None and height * width > limit:
        raise Unreadable(f"{height}x{width} pixels is over fastprep.io.jpeg.MAX_IMAGE_PIXELS ({limit}): "
                         f"a decompression bomb?")


def make_record(image: Any, opts: Options) -> Packed:
    """The record of one image (JPEG bytes, other encoded bytes, a path, or pixels), with what became
    of it (`how`) and its input size. Raises Unreadable for inputs to skip."""
    if isinstance(image, (str, os.PathLike)):
        image = read_input(image)
    elif isinstance(image, JpegFile):
        image = bytes(image.data)
    if isinstance(image, (bytes, bytearray, memoryview)):
        data = bytes(image)
        if data[:3] == JPEG_MAGIC:
            return _record(_jpeg_input(data, opts), len(data))
        pixels = _pil_pixels(data)
        size = len(data)
    else:
        pixels = pixels_of(image)
        size = pixels.nbytes
    _check_pixels(*pixels.shape[:2])
    small = _shrunk(pixels, opts.max_side)
    if opts.mode == "jpeg" and opts.non_jpeg == "encode":
        p = _jpeg_record(encode_pixels(small, "JPEG", opts.quality, who="pack"), opts)
        p.how = "non_jpeg_encoded"
    else:
        p = _raw_record(small)
        p.how = "non_jpeg_raw"
    p.shrunk = small is not pixels
    return _record(p, size)


def _record(p: Packed, size: int) -> Packed:
    p.bytes_in = size
    return p


def _jpeg_input(data: bytes, opts: Options) -> Packed:
    """A JPEG's record: transcoded losslessly, else (max_side, mode "raw") decoded first."""
    try:
        header = jpeg_io.read_jpeg_header(data)
    except ValueError as exc:
        raise Unreadable(str(exc).removeprefix("read_jpeg_header: ")) from None
    _check_pixels(header.height, header.width)
    too_big = opts.max_side is not None and max(header.height, header.width) > opts.max_side
    if opts.mode == "jpeg" and not too_big:
        p = _jpeg_record(data, opts)
        p.how = "jpeg_transcoded"
        return p
    try:
        pixels = jpeg_io.decode_jpeg(data, layout="HWC", strict=opts.strict).numpy()
    except ValueError as exc:
        raise Unreadable(str(exc).removeprefix("decode_jpeg: ")) from None
    pixels = _shrunk(pixels, opts.max_side)
    if opts.mode == "jpeg":
        p = _jpeg_record(encode_pixels(pixels, "JPEG", opts.quality, who="pack"), opts)
        p.how = "jpeg_reencoded"
    else:
        p = _raw_record(pixels)
        p.how = "jpeg_raw"
    p.shrunk = too_big
    return p
