"""The images of a :class:`fastprep.io.PackedDataset`: :class:`PackedJpeg` (a restart-indexed JPEG
record, decoded by window from the intervals covering it) and :class:`PackedRaw` (raw pixels, a
window a view of the memory map), both :class:`fastprep.io.WindowedImage`; and :class:`WindowCut`,
the small JPEG of a window for a GPU decoder.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

import fastprep.io._pack_format as fmt
from fastprep.errors import CorruptJpegWarning
from fastprep.io._windowed import WindowedImage
from fastprep.io.jpeg import LAYOUTS, check_crop, check_out, native, ycbcr_in_layout
from fastprep.io.jpeg._exif import jpeg_orientation
from fastprep.io.jpeg._scale import check_scale, scaled_size
from fastprep.io.jpeg._window_cut import WindowCut


class PackedImage(WindowedImage):
    """One record of a :class:`PackedDataset` (`dataset`: its where(), shard_tensor() and options),
    decoded on demand (whole, or a window)."""

    __slots__ = ("dataset", "index", "shard", "offset", "record", "checksum", "height", "width", "color", "mode",
                 "layout", "strict", "verify")

    def __init__(self, dataset: Any, index: int, shard: int, offset: int, record: memoryview,
                 checksum: int, height: int, width: int, color: int):
        self.dataset, self.index, self.shard, self.offset = dataset, index, shard, offset
        self.record, self.checksum = record, checksum
        self.height, self.width, self.color = height, width, color
        self.mode, self.layout, self.strict, self.verify = dataset.mode, dataset.layout, dataset.strict, dataset.verify

    @property
    def name(self) -> str:
        return self.dataset.where(self.index)

    def _output(self, who: str, shape_hw: tuple[int, int], channels: int, layout: str,
                out: torch.Tensor | None) -> torch.Tensor:
        h, w = shape_hw
        shape = (channels, h, w) if layout == "CHW" else (h, w, channels)
        if out is None:
            return torch.empty(shape, dtype=torch.uint8)
        check_out(who, out, shape, layout)
        return out

    def _bytes(self, window: tuple[int, int, int, int]) -> Any:
        """The record's bytes for a read of `window`: the mapped record, or (a remote pack's shard
        not cached) a buffer with only the bytes the window needs, fetched by range."""
        if self.record is None:
            return self.dataset.window_record(self.index, window)
        return self._mapped()

    def _mapped(self) -> memoryview:
        """The mapped record, its shard file checked first: one truncated since it was mapped would
        kill the process (SIGBUS) on the read; it is a ShardFormatError naming the shard instead."""
        self.dataset.check_record(self.index, self.shard, self.record)
        return self.record

    def _corrupt(self, who: str, exc: Exception) -> fmt.ShardFormatError:
        return fmt.ShardFormatError(f"{who}: {self.name}: {exc}")

    def __reduce__(self) -> tuple:  # the dataset pickles without its memory maps; the item is looked up again
        return _image_of, (self.dataset, self.index)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dataset.where(self.index, source=False)}, {self.height}x{self.width}, " \
               f"mode={self.mode!r}, layout={self.layout!r})"


def _full_scale_window(top: int, left: int, h: int, w: int, scale: int, height: int,
                       width: int) -> tuple[int, int, int, int]:
    """The image's pixels a window of its M/8-scale decode comes from: the 8x8 blocks behind it (a
    scaled pixel y comes from block row y // M), widened by one 4:2:0 MCU (16 px) for the chroma
    context a scaled decode may still upsample from; the window itself at scale 8."""
    if scale == 8:
        return top, left, h, w
    r0, c0 = max(top // scale * 8 - 16, 0), max(left // scale * 8 - 16, 0)
    r1 = min(-(-(top + h) // scale) * 8 + 16, height)
    c1 = min(-(-(left + w) // scale) * 8 + 16, width)
    return r0, c0, r1 - r0, c1 - c0


def _image_of(dataset: Any, index: int) -> PackedImage:
    """Record `index` of `dataset` (unpickling an item: the dataset comes without its memory maps)."""
    return dataset.record_image(index)


class PackedJpeg(PackedImage):
    """A restart-indexed JPEG record: ``decode(crop)`` cuts and decodes only the window's intervals
    (the bits of a full decode, cropped); :meth:`cut` gives the window's small JPEG for a GPU decoder."""

    __slots__ = ()
    source_kind = "packed-jpeg"  # fastprep.monitor's word (a remote pack's dataset says "remote-pack")
    scaled_decode = True  # decode(scale=M) takes libjpeg-turbo's M/8 scales (fastprep.io.jpeg._scale)

    def decode(self, crop: tuple[int, int, int, int] | None = None, *, layout: str | None = None,
               out: torch.Tensor | None = None, scale: int = 8) -> torch.Tensor:
        """The image, or its window `crop` = (top, left, height, width), as a uint8 tensor; with
        `scale` M < 8, of the image decoded at M/8 of its size (`crop` in its pixels), from the
        intervals holding the blocks of the window: decode_jpeg's scaled decode's bits."""
        who = "PackedJpeg.decode"
        layout = layout or self.layout
        if layout not in LAYOUTS:
            raise ValueError(f"{who}: expected layout to be one of {LAYOUTS}, got {layout!r}")
        scaled = scaled_size(self.height, self.width, check_scale(who, scale))
        top, left, h, w = check_crop(who, crop, *scaled, "" if scale == 8 else f"at scale {scale}/8: ")
        mode = self.mode
        if mode == "YCbCr" and self.color == fmt.COLORS["RGB"]:  # an RGB-coded JPEG, as decode_jpeg does it
            if out is not None:
                self._output(who, (h, w), 3, layout, out)
            return ycbcr_in_layout(self._decode(who, top, left, h, w, "RGB", layout, None, scale), layout, out)
        return self._decode(who, top, left, h, w, mode, layout, out, scale)

    def _decode(self, who: str, top: int, left: int, h: int, w: int, mode: str, layout: str,
                out: torch.Tensor | None, scale: int = 8) -> torch.Tensor:
        out = self._output(who, (h, w), 1 if mode == "GRAY" else 3, layout, out)
        planes = out if layout == "CHW" else out.permute(2, 0, 1)
        try:
            record = self._bytes(_full_scale_window(top, left, h, w, scale, self.height, self.width))
            notes = native(who).decode_record_into(record, self.checksum, planes.numpy(), top, left, mode, self.strict,
                                                   self.verify, scale)
        except ValueError as exc:
            raise self._corrupt(who, exc) from None
        if notes:
            warnings.warn(CorruptJpegWarning(f"{who}: {self.name}: libjpeg recovered from corrupt data: "
                                             f"{'; '.join(notes)}"), stacklevel=3)
        return out

    def orientation(self) -> int:
        """The EXIF orientation the record's JPEG header keeps (1-8; 1: none, also for a pack
        written before the transcoder kept it). Read from the header bytes unchecked: every decode
        and cut checks them (their CRC), so a corrupt byte fails the read instead of turning the
        image wrongly."""
        record = self._mapped() if self.record is not None else self.dataset.record_head(self.index)
        start, size = int.from_bytes(record[8:12], "little"), int.from_bytes(record[12:16], "little")
        return jpeg_orientation(record[start:start + size])

    def cut(self, crop: tuple[int, int, int, int] | None = None) -> WindowCut:
        """The JPEG of only the restart intervals covering `crop` (byte copies, no entropy decoding):
        what the GPU decode split leaves to the CPU. ``decode_jpeg(c.data, crop=(c.top, c.left,
        c.height, c.width))`` equals ``self.decode(crop)``."""
        who = "PackedJpeg.cut"
        top, left, h, w = check_crop(who, crop, self.height, self.width)
        try:
            data, sub_top, sub_left = native(who).cut_record(self._bytes((top, left, h, w)), self.checksum, top, left,
                                                             h, w, self.verify)
        except ValueError as exc:
            raise self._corrupt(who, exc) from None
        return WindowCut(data, sub_top, sub_left, h, w)


class PackedRaw(PackedImage):
    """A raw-pixel record: ``decode(crop)`` is the window of the memory-mapped shard itself, a
    strided view (no decode, no copy; with `out`, a copy into it), after the CRCs of the row bands
    it covers were checked. The map is copy-on-write: writing into a view never changes the file,
    but this process then reads the changed pixels, and their CRC check fails (an error, never a
    wrong image): clone a view before changing it in place. Holds RGB; mode "YCbCr" converts with
    fastprep.rgb_to_ycbcr."""

    __slots__ = ()
    source_kind = "packed-raw"  # fastprep.monitor's word (a remote pack's dataset says "remote-pack")

    def decode(self, crop: tuple[int, int, int, int] | None = None, *, layout: str | None = None,
               out: torch.Tensor | None = None) -> torch.Tensor:
        """The image, or its window `crop` = (top, left, height, width), as a uint8 tensor view of
        the shard (or written into `out`)."""
        who = "PackedRaw.decode"
        layout = layout or self.layout
        if layout not in LAYOUTS:
            raise ValueError(f"{who}: expected layout to be one of {LAYOUTS}, got {layout!r}")
        if self.mode == "GRAY":
            raise ValueError(f"{who}: {self.name} holds RGB pixels (packed raw); read it with mode 'RGB' or 'YCbCr'")
        top, left, h, w = check_crop(who, crop, self.height, self.width)
        mod = native(who)
        if out is not None:
            self._output(who, (h, w), 3, layout, out)
        if out is not None and self.mode == "RGB":
            planes = out if layout == "CHW" else out.permute(2, 0, 1)
            try:
                mod.read_raw_into(self._mapped(), self.checksum, planes.numpy(), top, left, self.verify)
            except ValueError as exc:
                raise self._corrupt(who, exc) from None
            return out
        try:
            pixels, row_bytes, c = mod.check_raw_window(self._mapped(), self.checksum, top, left, h, w, self.verify)
        except ValueError as exc:
            raise self._corrupt(who, exc) from None
        start = self.offset + pixels + top * row_bytes + left * c
        view = self.dataset.shard_tensor(self.shard).as_strided((h, w, c), (row_bytes, c, 1), start)
        rgb = view if layout == "HWC" else view.permute(2, 0, 1)
        return rgb if self.mode == "RGB" else ycbcr_in_layout(rgb, layout, out)
