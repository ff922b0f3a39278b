"""Pixels as the bytes of an image file, through Pillow: the one encoder of fastprep's writers
(pack's re-encoding of pixel inputs, write_webdataset's image members, the photo folders of
fastprep.tools.photos), so every JPEG they write is made with the same settings."""

from __future__ import annotations

import io

import numpy as np

from fastprep.io._source import pil_image

PIL_FORMATS = {"jpg": "JPEG", "jpeg": "JPEG", "png": "PNG", "ppm": "PPM", "pgm": "PPM", "bmp": "BMP", "tif": "TIFF",
               "tiff": "TIFF", "webp": "WEBP"}
"""Pillow's format for each file extension an image may be encoded as."""


def encode_pixels(pixels: np.ndarray, fmt: str = "JPEG", quality: int = 90, *, who: str = "encode_pixels",
                  progressive: bool = False) -> bytes:
    """HWC (or HW; an HW1 array is grey) uint8 pixels as the bytes of a `fmt` file (Pillow's format
    name); a JPEG at `quality`, Pillow's default 4:2:0 chroma subsampling, baseline unless
    `progressive`.

    Args:
        pixels: the uint8 pixels, 1, 3 or 4 channels.
        fmt: one of PIL_FORMATS' values.
        quality: the JPEG quality (other formats ignore it).
        who: what encodes, the start of the message when Pillow is missing.
        progressive: a progressive JPEG.

    Example:
        >>> data = encode_pixels(np.zeros((8, 8, 3), np.uint8), quality=95)
        >>> data[:2] == b"\\xff\\xd8"
        True
    """
    Image = pil_image(who, "encoding pixels as an image file")  # noqa: N806 (imported once: threads race)
    image = Image.fromarray(pixels[:, :, 0] if pixels.ndim == 3 and pixels.shape[2] == 1 else pixels)
    buf = io.BytesIO()
    image.save(buf, format=fmt, **({"quality": quality, "progressive": progressive} if fmt == "JPEG" else {}))
    return buf.getvalue()
