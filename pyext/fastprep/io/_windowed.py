"""WindowedImage: what fastprep's transforms and the Loader read by window.

A source that can produce any rectangle of its image without producing the rest (a JPEG decoded
at the crop's window, a restart-indexed JPEG cut to the window's intervals, raw pixels in a memory
map, a chunked HDF5 array) subclasses :class:`WindowedImage`. The transforms treat an instance as
an image laid out HWC and read only the rows and columns they keep (``decode(crop)``); a transform
that is not fastprep's gets ``decode()``, the whole image, first.
"""

from __future__ import annotations

import torch


class WindowedImage:
    """An image read on demand, whole or by window, as uint8 pixels.

    Subclasses set ``height``, ``width``, ``mode`` ("RGB", "YCbCr" or "GRAY": what the pixels
    are), ``layout`` ("CHW" or "HWC": what ``decode`` returns by default) and ``name`` (for
    errors, or None), and implement :meth:`decode`. ``decode(crop)`` must equal ``decode()``
    cropped, bit for bit.
    """

    __slots__ = ()
    # What the image is, in fastprep.monitor's words (its SOURCES): subclasses that are more say so.
    source_kind = "windowed"
    height: int
    width: int
    mode: str
    layout: str
    name: str | None

    @property
    def channels(self) -> int:
        return 1 if self.mode == "GRAY" else 3

    def decode(self, crop: tuple[int, int, int, int] | None = None, *, layout: str | None = None,
               out: torch.Tensor | None = None) -> torch.Tensor:
        """The image, or its window `crop` = (top, left, height, width), as a uint8 tensor in
        `layout` (default: the image's). `out`: a uint8 CPU tensor of the result's shape, any
        strides whose elements do not share memory (a slice of a batch, a permuted view), written
        and returned itself; any other `out` is a ValueError naming it and what is wrong, raised
        before anything is read or written."""
        raise NotImplementedError

    def describe(self) -> str:
        """What it is, for error messages."""
        kind = type(self).__name__
        return f"a {kind}{' of ' + self.name if self.name else ''}, {self.height}x{self.width}, mode {self.mode!r}"
