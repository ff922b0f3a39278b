"""fastprep.io.OrientedImage: any WindowedImage presented upright by an EXIF orientation (a packed
JPEG record read with ``PackedDataset(..., exif=True)``, or an image whose orientation you know).

A window of the upright image decodes only the stored window under it, then flips / transposes
it (fastprep.io.jpeg._exif): the bits of decoding the whole stored image and applying Pillow's
``ImageOps.exif_transpose`` (torchvision's ``apply_exif_orientation=True``), cropped.
"""

from __future__ import annotations

from typing import Any

import torch

from fastprep.io._windowed import WindowedImage
from fastprep.io.jpeg import LAYOUTS, check_crop, check_out
from fastprep.io.jpeg._exif import STEPS, stored_window, to_upright, upright_size, upright_window
from fastprep.io.jpeg._scale import DENOMINATOR, check_scale, reduced_read, scaled_size


def oriented(image: WindowedImage, orientation: int) -> WindowedImage:
    """`image` presented upright by EXIF `orientation` (1-8): itself for 1, else an OrientedImage
    (one that also takes ``decode(scale=M)`` where `image` does).

    Example:
        >>> upright = oriented(packed_record, 6)   # stored 480x640, read 640x480
    """
    if not isinstance(orientation, int) or isinstance(orientation, bool) or orientation not in STEPS:
        raise ValueError(f"oriented: expected orientation to be an int in 1..8 (the EXIF tag), got {orientation!r}")
    if orientation == 1:
        return image
    if not isinstance(image, WindowedImage):
        raise ValueError(f"oriented: expected a WindowedImage, got {type(image).__name__}")
    cls = ScaledOrientedImage if getattr(type(image), "scaled_decode", False) else OrientedImage
    return cls(image, orientation)


class OrientedImage(WindowedImage):
    """`image` (a WindowedImage, as stored) turned upright by EXIF `orientation` (2-8): `height` and
    `width` are the upright image's (swapped for 5-8); ``decode(crop)`` takes a window of the upright
    image and decodes only the stored window under it. No ``cut``: a device decoder would decode
    the stored pixels (read it with ``decode_on=None``).

    Args:
        image: the stored image.
        orientation: its EXIF orientation (:func:`fastprep.io.jpeg_orientation`).
    """

    __slots__ = ("image", "orientation")

    def __init__(self, image: WindowedImage, orientation: int):
        self.image, self.orientation = image, orientation

    @property
    def height(self) -> int:
        return upright_size(self.image.height, self.image.width, self.orientation)[0]

    @property
    def width(self) -> int:
        return upright_size(self.image.height, self.image.width, self.orientation)[1]

    @property
    def mode(self) -> str:
        return self.image.mode

    @property
    def layout(self) -> str:
        return self.image.layout

    @property
    def name(self) -> str | None:
        return self.image.name

    def decode(self, crop: tuple[int, int, int, int] | None = None, *, layout: str | None = None,
               out: torch.Tensor | None = None) -> torch.Tensor:
        """The upright image, or its window `crop` = (top, left, height, width), as a uint8 tensor
        in `layout` (default: the image's), written into `out` if given (see WindowedImage.decode)."""
        return self._decode("OrientedImage.decode", crop, layout, out, 8)

    def _decode(self, who: str, crop: Any, layout: str | None, out: torch.Tensor | None, scale: int) -> torch.Tensor:
        layout = layout or self.layout
        if layout not in LAYOUTS:
            raise ValueError(f"{who}: expected layout to be one of {LAYOUTS}, got {layout!r}")
        size = upright_size(*scaled_size(self.image.height, self.image.width, scale), self.orientation)
        top, left, h, w = check_crop(who, crop, *size, "" if scale == 8 else f"at scale {scale}/8: ")
        if out is not None:
            check_out(who, out, (self.channels, h, w) if layout == "CHW" else (h, w, self.channels), layout)
        window = stored_window((top, left, h, w), *size, self.orientation)
        if scale == 8:
            stored = self.image.decode(window, layout="HWC")
        else:
            stored = self.image.decode(window, layout="HWC", scale=scale)
        return to_upright(stored, self.orientation, layout, out)

    def describe(self) -> str:
        return f"{self.image.describe()}, read turned upright by EXIF orientation {self.orientation}"

    def __repr__(self) -> str:
        return f"OrientedImage({self.image!r}, orientation={self.orientation}: {self.height}x{self.width})"


class ScaledOrientedImage(OrientedImage):
    """An OrientedImage of an image that decodes at libjpeg-turbo's M/8 scales (a JPEG):
    ``decode(crop, scale=M)`` takes a window of the upright image decoded at M/8."""

    __slots__ = ()
    scaled_decode = True  # decode(scale=M), as JpegFile's and PackedJpeg's (fastprep.io.jpeg._scale)

    def decode(self, crop: tuple[int, int, int, int] | None = None, *, layout: str | None = None,
               out: torch.Tensor | None = None, scale: int = 8) -> torch.Tensor:
        """As OrientedImage.decode; with `scale` M < 8, of the image decoded at M/8 of its size."""
        return self._decode("OrientedImage.decode", crop, layout, out, check_scale("OrientedImage.decode", scale))

    def reduced_window(self, crop: tuple[int, int, int, int],
                       at_least: tuple[int, int]) -> tuple[int, tuple[int, int, int, int]]:
        """(M, the window of the upright M/8 decode) that reads window `crop` of the upright image
        for a resize to `at_least` (fastprep.io.jpeg._scale.reduced_crop): chosen for the stored
        window under it, where the scaled decode's grid starts, then turned upright."""
        transpose = STEPS[self.orientation][0]
        stored = stored_window(crop, self.height, self.width, self.orientation)
        scale, window = reduced_read(self.image, stored, (at_least[1], at_least[0]) if transpose else at_least)
        if scale == DENOMINATOR:
            return scale, tuple(crop)
        size = upright_size(*scaled_size(self.image.height, self.image.width, scale), self.orientation)
        return scale, upright_window(window, *size, self.orientation)
