"""WindowBatch: a fastprep.Loader batch whose images are still JPEG window cuts (the GPU decode split,
``Loader(decode_on=...)``; docs/real-files.md).

The Loader's threads draw each sample's crop, flip and mask as the fused crop -> mask -> YCbCr path
does, but instead of decoding they cut the window's restart intervals out of the shard (byte
copies) and write the packed mask bits. The batch is those cuts, where each window sits in its
cut, the flips and the masks, plus the other fields as a :class:`CompactBatch` holds them.
``to(device)`` decodes the cuts there (one nvJPEG batch through torchvision on CUDA; the CPU
decoder on "cpu", standing in for a device), crops and flips each window and applies the mask and
colour steps there (:func:`fastprep.mask_ycbcr`): the :class:`CompactBatch` the CPU path makes,
on `device` (bit for bit with the CPU stand-in; nvJPEG's pixels are close to libjpeg-turbo's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from fastprep._tree import leaves, tree_map
from fastprep.args import check_bool
from fastprep.batch import CompactBatch
from fastprep.io.gpu import decode_window_batch
from fastprep.io.packed_items import WindowCut
from fastprep.ops.crop_mask_ycbcr import mask_ycbcr


class WindowCuts:
    """A batch's images before decoding: per sample its :class:`~fastprep.io.WindowCut` (the
    window's small JPEG and the window's place in it) and flip, and the packed masks
    (``[n, height, ceil(width / 8)]`` uint8, a slot's rows in the Loader); the colour step's
    output dtype and scale; `device`, where the Loader decodes them (``decode_on``).

    Example:
        >>> images = batch.data[0]                  # a WindowBatch's image field
        >>> images.decode("cuda").shape             # [n, 3, height, width], YCbCr of images.out_dtype
    """

    __slots__ = ("cuts", "hflips", "masks", "out_dtype", "scale", "device")

    def __init__(self, cuts: list[WindowCut], hflips: list[bool], masks: torch.Tensor, out_dtype: torch.dtype,
                 scale: float, device: torch.device):
        self.cuts, self.hflips, self.masks = cuts, hflips, masks
        self.out_dtype, self.scale, self.device = out_dtype, scale, device

    def __len__(self) -> int:
        return len(self.cuts)

    @property
    def size(self) -> tuple[int, int]:
        """(height, width) of every window."""
        return self.cuts[0].height, self.cuts[0].width

    def tensors(self) -> list[torch.Tensor]:
        return [self.masks]

    def map(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> WindowCuts:
        """The same cuts (immutable bytes) with `fn` of the masks (a clone, a pinned copy)."""
        return WindowCuts(self.cuts, list(self.hflips), fn(self.masks), self.out_dtype, self.scale, self.device)

    @property
    def nbytes(self) -> int:
        """Bytes that cross to the device: the cuts and the packed masks."""
        return sum(len(c.data) for c in self.cuts) + self.masks.numel()

    def decode(self, device: Any, non_blocking: bool = False) -> torch.Tensor:
        """The images ``[n, 3, height, width]`` on `device`: the cuts decoded there in one batch,
        each window cropped (and flipped), then mask + YCbCr (:func:`fastprep.mask_ycbcr`)."""
        dev = torch.device(device)
        if dev.type == "cuda":
            # torchvision's nvJPEG decoder allocates its outputs on this stream but writes them on
            # a stream of its own that does not wait for this one (pytorch/vision#9606): memory
            # freed here while kernels queued on it still read it could be overwritten. Let this
            # stream's queued work (the previous batch's) finish first.
            torch.cuda.current_stream(dev).synchronize()
        images = torch.stack(decode_window_batch(self.cuts, device=dev))
        flipped = [i for i, f in enumerate(self.hflips) if f]
        if flipped:  # the fused op reads a flipped window right to left: the window, reversed
            at = torch.tensor(flipped, device=dev)
            images[at] = images[at].flip(-1)
        return mask_ycbcr(images, self.masks.to(dev, non_blocking=non_blocking), self.out_dtype, self.scale)

    def __repr__(self) -> str:
        h, w = self.size
        return f"WindowCuts({len(self)} windows {h}x{w}, {self.nbytes} bytes, decode on {self.device})"


class WindowBatch(CompactBatch):
    """A CompactBatch whose image field is a :class:`WindowCuts` (what ``Loader(decode_on=...)``'s
    threads make): ``to(device)`` decodes the windows on `device` and returns the CompactBatch the
    CPU path makes of the same samples; ``decode()`` does that on the cuts' own device first.

    Lifetime as a Loader slot's: the masks are the slot's rows, so the batch is valid until
    released, and a slot is reused only after its copy to the device completed (DevicePrefetcher
    waits for the copy's event before releasing it).
    """

    def tensors(self) -> list[torch.Tensor]:
        self._check_alive("tensors")
        out = []
        for x in leaves(self._data):
            out += x.tensors() if isinstance(x, WindowCuts) else [x] if isinstance(x, torch.Tensor) else []
        return out

    @property
    def windows(self) -> WindowCuts:
        """The image field: the window cuts."""
        self._check_alive("windows")
        return next(x for x in leaves(self._data) if isinstance(x, WindowCuts))

    @property
    def nbytes(self) -> int:
        """Bytes that cross to the device: the cuts, the masks, the other fields."""
        self._check_alive("nbytes")
        return sum(x.nbytes if isinstance(x, WindowCuts) else x.numel() * x.element_size()
                   for x in leaves(self._data) if isinstance(x, (WindowCuts, torch.Tensor)))

    @property
    def nbytes_expanded(self) -> int:
        """Bytes of the same batch the usual way: float32 images, int64 labels."""
        w = self.windows
        return super().nbytes_expanded + len(w) * 3 * w.size[0] * w.size[1] * 4

    def to(self, device: Any, non_blocking: bool = False) -> CompactBatch:
        """The batch on `device` with its windows decoded there (see the module)."""
        non_blocking = check_bool("WindowBatch.to", "non_blocking", non_blocking)
        self._check_alive("to")
        out = CompactBatch(tree_map(lambda x: x.decode(device, non_blocking) if isinstance(x, WindowCuts)
                                    else x.to(device, non_blocking=non_blocking) if isinstance(x, torch.Tensor)
                                    else x, self._data), self.layout)
        return self._linked(out)

    def decode(self, *args: Any, **kwargs: Any) -> Any:
        """``to(the cuts' device).decode(...)``: CompactBatch.decode's arguments."""
        return self.to(self.windows.device).decode(*args, **kwargs)

    def _map(self, fn: Callable[[torch.Tensor], torch.Tensor], what: str) -> WindowBatch:
        self._check_alive(what)
        out = WindowBatch(tree_map(lambda x: x.map(fn) if isinstance(x, WindowCuts)
                                   else fn(x) if isinstance(x, torch.Tensor) else x, self._data), self.layout)
        return self._linked(out)

    def _linked(self, out: CompactBatch) -> CompactBatch:
        """`out`, released with this batch when it holds one of this batch's tensors itself (a
        field moved to the device it is on, a pinned tensor pinned again), as CompactBatch.to does."""
        mine = {id(t) for t in self.tensors()}
        if any(id(t) in mine for t in out.tensors()):
            out._base = self
            self._views.add(out)
        return out
