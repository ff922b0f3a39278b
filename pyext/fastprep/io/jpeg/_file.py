"""fastprep.io.JpegFile: a JPEG's bytes and header, decoded on demand, whole or by window (the
WindowedImage that ImageFolder(roi=True) and the dataset sources hand out)."""

from __future__ import annotations

from typing import Any

import torch

from fastprep.core._args import check_bool
from fastprep.io._windowed import WindowedImage
from fastprep.io.jpeg import as_bytes, check_crop, check_image_args, decode_jpeg, read_jpeg_header
from fastprep.io.jpeg._exif import jpeg_orientation, upright_size
from fastprep.io.jpeg._scale import reduced_crop
from fastprep.io.jpeg._window_cut import WindowCut
from fastprep.ops._crop import random_crop_params


class JpegFile(WindowedImage):
    """A JPEG's bytes and header, decoded on demand: the whole image or only a window.

    Args:
        data: the file's bytes (or a 1-D uint8 tensor / array) or its path.
        name: what to call it in errors (default: the path, if one was given).
        mode, layout: as in :func:`fastprep.io.decode_jpeg`.
        strict: corrupt JPEG data (a truncated file) raises ValueError when a window is decoded
            (default True, as the sources that hand JpegFiles out: Pillow raises); False decodes
            it as libjpeg recovers it, with a CorruptJpegWarning (decode_jpeg's own default).
        exif: present the image upright by its EXIF orientation (decode_jpeg's `exif`): `height`,
            `width`, windows and `out` are the upright image's; ``orientation`` holds the tag
            (1 without `exif`); `header` stays the stored image's.

    Example:
        >>> f = JpegFile("cat.jpg")
        >>> f.height, f.width
        (1024, 768)
        >>> patch = f.random_crop(256, 256, seed=7)   # == fastprep.random_crop(f.decode(), 256, 256, 7)
    """

    __slots__ = ("data", "name", "mode", "layout", "strict", "header", "orientation")

    def __init__(self, data: Any, *, name: str | None = None, mode: str = "RGB", layout: str = "CHW",
                 strict: bool = True, exif: bool = False):
        check_image_args("JpegFile", mode, layout)
        exif = check_bool("JpegFile", "exif", exif)
        self.data, path = as_bytes("JpegFile", data)
        self.name, self.mode, self.layout = name or path, mode, layout
        self.strict = check_bool("JpegFile", "strict", strict)
        self.header = read_jpeg_header(self.data, name=self.name)
        self.orientation = jpeg_orientation(self.data) if exif else 1

    @property
    def height(self) -> int:
        return upright_size(self.header.height, self.header.width, self.orientation)[0]

    @property
    def width(self) -> int:
        return upright_size(self.header.height, self.header.width, self.orientation)[1]

    source_kind = "jpeg-files"  # a JPEG file read by window (fastprep.monitor's word for it)
    scaled_decode = True  # decode(scale=M) takes libjpeg-turbo's M/8 scales (fastprep.io.jpeg._scale)

    def decode(self, crop: tuple[int, int, int, int] | None = None, *, layout: str | None = None,
               out: torch.Tensor | None = None, scale: int = 8) -> torch.Tensor:
        """The image, or its window `crop` = (top, left, height, width), as a uint8 tensor; with
        `scale` M < 8, of the image decoded at M/8 of its size (decode_jpeg's `scale`)."""
        return decode_jpeg(self.data, crop=crop, mode=self.mode, layout=layout or self.layout, out=out,
                           strict=self.strict, name=self.name, scale=scale, exif=self.orientation != 1)

    def reduced_window(self, crop: tuple[int, int, int, int],
                       at_least: tuple[int, int]) -> tuple[int, tuple[int, int, int, int]]:
        """(M, the window of the M/8 decode) that reads window `crop` for a resize to `at_least`
        (fastprep.io.jpeg._scale.reduced_crop, rounded in the stored image where `exif` turns it)."""
        return reduced_crop(crop, self.height, self.width, at_least, self.orientation)

    def cut(self, crop: tuple[int, int, int, int] | None = None) -> WindowCut:
        """The window `crop` for a device decoder (``Loader(decode_on=...)``, :func:`decode_window_batch`):
        a file has no restart index to cut by, so this is the whole file and the window's place in
        it (no copy); the device decodes all of it. Pack the files (``python -m fastprep pack``) to
        hand it only the window's restart intervals (:meth:`PackedJpeg.cut`)."""
        if self.orientation != 1:
            raise ValueError(f"JpegFile.cut: {self.name or 'the JPEG'} is stored turned (EXIF orientation "
                             f"{self.orientation}) and read upright (exif=True): a device decoder would decode it "
                             f"as stored; read it with decode_on=None, or with exif=False")
        top, left, h, w = check_crop("JpegFile.cut", crop, self.height, self.width)
        data = self.data if isinstance(self.data, (bytes, bytearray, memoryview)) else memoryview(self.data)
        return WindowCut(data, top, left, h, w)

    def random_crop(self, height: int, width: int, seed: int, *, layout: str | None = None,
                    out: torch.Tensor | None = None) -> torch.Tensor:
        """The window ``fastprep.random_crop(self.decode(), height, width, seed)`` cuts (same bits),
        decoding only that window. No padding: the crop must fit in the image."""
        top, left = random_crop_params(self.height, self.width, height, width, seed)
        return self.decode((top, left, height, width), layout=layout, out=out)

    def __repr__(self) -> str:
        h = self.header
        turned = f", EXIF orientation {self.orientation}: read {self.height}x{self.width}" \
            if self.orientation != 1 else ""
        return (f"JpegFile({self.name or '<bytes>'}, {h.height}x{h.width} {h.color_space} {h.subsampling}"
                f"{' progressive' if h.progressive else ''}{turned}, mode={self.mode!r}, layout={self.layout!r})")
