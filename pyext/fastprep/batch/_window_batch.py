"""WindowBatch: a fastprep.Loader batch whose images are still JPEG window cuts (the GPU decode split,
``Loader(decode_on=...)``; docs/real-files.md).

The Loader's threads draw each sample's window, flips and the rest as the transform's fused row
does, but instead of decoding they cut the window's restart intervals out of the shard (byte
copies) and make what the row's device half asks for (the seed row's packed masks). The batch is
those cuts, where each window sits in its cut, the fused op's geometry rows, the host tensors, plus the
other fields as a :class:`CompactBatch` holds them. ``to(device)`` decodes the cuts there (one
nvJPEG batch through torchvision on CUDA; the CPU decoder on "cpu", standing in for a device),
crops each window and runs the row's device half there (``DeviceSplit.finish``: mask + YCbCr, or
resize + dtype + normalize): the :class:`CompactBatch` the CPU path makes, on `device` (bit for
bit with the CPU stand-in; nvJPEG's pixels are close to libjpeg-turbo's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from fastprep.batch._compact import CompactBatch, TensorHolder
from fastprep.core._tree import leaves
from fastprep.io.jpeg._gpu import decode_window_batch
from fastprep.io.jpeg._window_cut import WindowCut


class WindowCuts(TensorHolder):
    """A batch's images before decoding: per sample its :class:`~fastprep.io.WindowCut` (the
    window's small JPEG and the window's place in it) and row of the fused op's `geometry` (an int64
    table, carried as the row made it: transforms/_fused.py's FusedRun); `extras`: the row's host tensors by
    name (``[n, ...]``, a slot's rows in the Loader: the seed row's packed masks); `group`: the
    fused group whose row's device half finishes them; `out_size`: every image's (height, width);
    `device`: where the Loader decodes them (``decode_on``); `decoders`: the Loader's
    :class:`~fastprep.io.jpeg._device_decoders.DecoderChain` (or a ``jpeg_decoder`` choice).

    Example:
        >>> images = batch.data[0]                  # a WindowBatch's image field
        >>> images.decode("cuda").shape             # [n, 3, height, width], the row's output dtype
    """

    __slots__ = ("cuts", "geometry", "extras", "group", "out_size", "device", "decoders")

    def __init__(self, cuts: list[WindowCut], geometry: Any, extras: dict[str, torch.Tensor], group: Any,
                 out_size: tuple[int, int], device: torch.device, decoders: Any = "auto"):
        self.cuts, self.geometry, self.extras = cuts, geometry, extras
        self.group, self.out_size, self.device, self.decoders = group, out_size, device, decoders

    def __len__(self) -> int:
        return len(self.cuts)

    @property
    def out_dtype(self) -> torch.dtype:
        return self.group.out_dtype

    def tensors(self) -> list[torch.Tensor]:
        return list(self.extras.values())

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> WindowCuts:
        """The same cuts (immutable bytes) with `fn` of the host tensors (a clone, a pinned copy)."""
        return WindowCuts(self.cuts, self.geometry, {k: fn(v) for k, v in self.extras.items()}, self.group,
                          self.out_size, self.device, self.decoders)

    @property
    def nbytes(self) -> int:
        """Bytes that cross to the device: the cuts and the host tensors."""
        return sum(len(c.data) for c in self.cuts) + sum(t.numel() * t.element_size() for t in self.extras.values())

    def decode(self, device: Any, non_blocking: bool = False) -> torch.Tensor:
        """The images ``[n, 3, height, width]`` on `device`: the cuts decoded there in one batch,
        each cropped to its window, then the row's device half (``DeviceSplit.finish``)."""
        dev = torch.device(device)
        windows = decode_window_batch(self.cuts, device=dev, jpeg_decoder=self.decoders)
        extras = {k: v.to(dev, non_blocking=non_blocking) for k, v in self.extras.items()}
        return self.group.finish_on_device(windows, self.geometry, self.out_size, extras)

    def to(self, device: Any, non_blocking: bool = False) -> torch.Tensor:
        """A batch's to(device): the images decoded there."""
        return self.decode(device, non_blocking)

    def __repr__(self) -> str:
        h, w = self.out_size
        return f"WindowCuts({len(self)} windows to {h}x{w}, {self.nbytes} bytes, decode on {self.device})"


class WindowBatch(CompactBatch):
    """A CompactBatch whose image field is a :class:`WindowCuts` (what ``Loader(decode_on=...)``'s
    threads make): ``to(device)`` decodes the windows on `device` and returns the CompactBatch the
    CPU path makes of the same samples; ``expand()`` does that on the cuts' own device first.
    Its tensors are listed, copied, moved and linked by CompactBatch's own TensorHolder protocol.

    Lifetime as a Loader slot's: the masks are the slot's rows, so the batch is valid until
    released, and a slot is reused only after its copy to the device completed (DevicePrefetcher
    waits for the copy's event before releasing it).
    """

    @property
    def windows(self) -> WindowCuts:
        """The image field: the window cuts."""
        self._check_alive("windows")
        return next(x for x in leaves(self._data) if isinstance(x, WindowCuts))

    @property
    def nbytes_expanded(self) -> int:
        """Bytes of the same batch the usual way: float32 images, int64 labels."""
        w = self.windows
        return super().nbytes_expanded + len(w) * 3 * w.out_size[0] * w.out_size[1] * 4

    def expand(self, *args: Any, **kwargs: Any) -> Any:
        """``to(the cuts' device).expand(...)``: CompactBatch.expand's arguments."""
        return self.to(self.windows.device).expand(*args, **kwargs)
