"""Structured samples as torchvision v2 sees them: a tensor, PIL image, numpy array, or a tuple,
list or dict (nested) of them and of plain values.

Which leaves a transform touches, torchvision v2's rules (``Transform._needs_transform_list``):

- ``tv_tensors.Image``, ``Video``, ``Mask``, ``BoundingBoxes``, ``KeyPoints`` by their type, and PIL
  images and ``fastprep.io.WindowedImage`` s (a JpegFile, ...) as images (both read by window: a crop
  converts or decodes only the pixels it keeps);
- plain tensors and numpy arrays (fastprep takes arrays where torchvision passes them through):
  when the sample holds no explicit image (a tv_tensors.Image, a Video or a PIL image), the first
  one in depth-first order is the image and the others pass through; otherwise all pass through;
- everything else (ints, strings, other tv_tensors) passes through untouched.

Every touched leaf gets the same random draw; outputs keep their tv_tensors type (and metadata)
through ``tv_tensors.wrap``. torchvision is never imported here: its classes are looked up in
``sys.modules`` (a tv_tensor can only exist once torchvision is imported).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from fastprep.core._roles import tv_class
from fastprep.core._tree import leaves, tree_map
from fastprep.io._source import as_pil, wants_pil
from fastprep.io._windowed import WindowedImage
from fastprep.transforms._inputs import as_image, check_pil_mode, hw, hwc_tensor, is_pil

GEOMETRY = ("image", "video", "mask", "boxes", "keypoints")
"""The kinds a geometric transform (crop, resize, flip) changes."""
PIXELS = ("image", "video")
"""The kinds a pixel transform (colour, random mask, dtype) changes."""

_TV_KINDS = (("Image", "image"), ("Video", "video"), ("Mask", "mask"), ("BoundingBoxes", "boxes"),
             ("KeyPoints", "keypoints"))


def tv_kind(x: Any) -> str | None:
    """"image", "video", "mask", "boxes", "keypoints" for those tv_tensors, "other" for any other
    tv_tensor, None for what is not a tv_tensor."""
    if not isinstance(x, torch.Tensor) or type(x) is torch.Tensor:
        return None
    for name, kind in _TV_KINDS:
        cls = tv_class(name)
        if cls is not None and isinstance(x, cls):
            return kind
    base = tv_class("TVTensor")
    return "other" if base is not None and isinstance(x, base) else None


def is_plain_array(x: Any) -> bool:
    """A plain tensor (not a tv_tensor) or a numeric numpy array: an image only by position."""
    if isinstance(x, torch.Tensor):
        return tv_kind(x) is None
    return isinstance(x, np.ndarray) and x.dtype.kind in "biuf"


def decode_jpeg_files(sample: Any, for_step: Any = None) -> Any:
    """The sample with every WindowedImage decoded whole (in its own layout), for code that does
    not read them by window: torchvision's transforms would pass one through uncropped. For a
    `for_step` of torchvision's v1 transforms, as the PIL images they take (io.source.wants_pil)."""
    if not any(isinstance(x, WindowedImage) for x in leaves(sample)):
        return sample
    pil = for_step is not None and wants_pil(for_step)
    return tree_map(lambda x: (as_pil(x, "HWC") if pil else x.decode()) if isinstance(x, WindowedImage) else x,
                    sample)


@dataclass
class Item:
    """One leaf a transform changes: `kind` as above, `value` as given, `layout` how its pixels are
    laid out ("HWC" for PIL and numpy, "CHW" for tv_tensors, the transform's for plain tensors)."""
    index: int
    kind: str
    value: Any
    layout: str = "CHW"

    @property
    def pil(self) -> bool:
        return is_pil(self.value)

    @property
    def lazy(self) -> bool:
        """A WindowedImage (a JpegFile, ...): decoded on demand, by window."""
        return isinstance(self.value, WindowedImage)

    @property
    def windowed(self) -> bool:
        """Read by window (a PIL image or a WindowedImage): a crop converts or decodes only its window."""
        return self.pil or self.lazy

    @property
    def dense(self) -> bool:
        return self.kind in ("image", "video", "mask")

    def tensor(self) -> torch.Tensor:
        """The pixels as a plain tensor view in `layout` (images always have a channel dim; a
        mask is [..., H, W]). Not for PIL images, which are read by window; a WindowedImage is decoded
        whole (HWC), for the transforms that need every pixel."""
        x = self.value
        if isinstance(x, WindowedImage):
            return x.decode(layout="HWC")
        if isinstance(x, np.ndarray):
            return hwc_tensor(x)
        t = x.as_subclass(torch.Tensor) if type(x) is not torch.Tensor else x
        if self.kind == "image" and t.dim() == 2:
            t = as_image(t, self.layout)[0]
        return t

    def size(self) -> tuple[int, int]:
        x = self.value
        if self.kind in ("boxes", "keypoints"):
            return tuple(int(v) for v in x.canvas_size)
        if self.pil:
            return (x.size[1], x.size[0])
        if self.lazy:
            return (x.height, x.width)
        t = self.tensor()
        if self.kind == "mask":
            return (t.shape[-2], t.shape[-1])
        return hw(t, self.layout)

    def channels(self) -> int:
        if self.pil:
            return len(self.value.getbands())
        if self.lazy:
            return self.value.channels
        t = self.tensor()
        return t.shape[-1] if self.layout == "HWC" else t.shape[-3]

    def wrap(self, out: torch.Tensor) -> Any:
        """`out` with the input's tv_tensors type and metadata (a plain tensor stays plain; PIL
        images and numpy arrays become CHW tensors, as fastprep's transforms always return)."""
        if tv_kind(self.value) is None:
            return out
        tv = __import__("torchvision.tv_tensors", fromlist=["wrap"])  # imported already: value is one
        return tv.wrap(out, like=self.value)


class Sample:
    """A sample taken apart: its leaves, and the Items among them of the kinds in `kinds`."""

    def __init__(self, sample: Any, layout: str, kinds: tuple[str, ...], owner: Any = None):
        self.tree = sample
        self.flat = leaves(sample)
        explicit = any(is_pil(x) or isinstance(x, WindowedImage) or tv_kind(x) in ("image", "video") for x in self.flat)
        take_plain = not explicit
        self.items: list[Item] = []
        for k, x in enumerate(self.flat):
            kind = tv_kind(x)
            if kind is None and is_pil(x):
                check_pil_mode(x)
                kind = "image"
            elif kind is None and isinstance(x, WindowedImage):
                kind = "image"
            elif kind is None and take_plain and is_plain_array(x):
                kind, take_plain = "image", False
            if kind in kinds:
                self.items.append(Item(k, kind, x, layout if type(x) is torch.Tensor else
                                       "HWC" if (is_pil(x) or isinstance(x, (np.ndarray, WindowedImage))) else "CHW"))
        if len(self.flat) == 1 and not self.items and not isinstance(sample, (tuple, list, dict)):
            if not (is_pil(sample) or isinstance(sample, (np.ndarray, torch.Tensor, WindowedImage))):
                who = f"{owner!r}: " if owner is not None else ""
                raise TypeError(f"{who}expected a PIL image, a numpy array, a tensor, or a tuple, list or dict "
                                f"holding them, got {type(sample).__name__}")

    @property
    def single(self) -> bool:
        """The sample is one image and nothing else."""
        return len(self.flat) == 1 and len(self.items) == 1 and self.items[0].kind == "image" \
            and self.tree is self.flat[0]

    def image(self) -> Item | None:
        """The first image item (the one the fused op runs on), if any."""
        return next((it for it in self.items if it.kind == "image"), None)

    def size(self) -> tuple[int, int]:
        """The (H, W) every geometric item shares, as torchvision's ``query_size``."""
        sizes = {it.size() for it in self.items}
        if not sizes:
            raise TypeError("found no image, video, mask, bounding boxes or key points in the sample")
        if len(sizes) > 1:
            shown = ", ".join(f"{it.kind} {h}x{w}" for it in self.items for h, w in [it.size()])
            raise ValueError(f"the sample's items have different sizes ({shown}); they must share one H x W")
        return sizes.pop()

    def rebuild(self, outputs: dict[int, Any]) -> Any:
        """The sample with leaf k replaced by outputs[k] where given."""
        it = iter(range(len(self.flat)))

        def put(x: Any) -> Any:
            k = next(it)
            return outputs.get(k, x)

        return tree_map(put, self.tree)
