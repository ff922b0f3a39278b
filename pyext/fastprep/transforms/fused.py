"""The fused ops a FusionPlan calls (transforms/plan.py): where an op reads (:class:`Geometry`),
the samples of one op call (:class:`FusedRun`), and one :class:`Fusion` per op: the roles it
fuses, the images it takes, and the call with what the steps drew."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fastprep.ops._library import BELOW_AUTOGRAD
from fastprep.transforms.sample import Item
from fastprep.transforms.window import Window, read_region


class Geometry:
    """Where a fused op reads: rows [top, top + height) and columns [left, left + width) of the
    source image, right to left when `hflip`. Each value is an int (one sample) or a numpy array
    (a chunk, one element per sample): the folds below are the same code for both."""

    def __init__(self, H: Any, W: Any):
        self.top, self.left, self.height, self.width, self.hflip = H * 0, W * 0, H, W, H < 0
        self.out_size: tuple[int, int] | None = None  # what the op writes: the read's size unless resized

    def flip(self, f: Any) -> None:
        """A horizontal flip of what is read so far."""
        self.hflip = self.hflip ^ f

    def crop(self, top: Any, left: Any, height: int, width: int) -> None:
        """A crop of what is read so far: its columns count from the right edge when flipped."""
        self.left = self.left + left + (self.width - 2 * left - width) * self.hflip
        self.top = self.top + top
        self.height, self.width = height, width

    def window(self, W: int) -> Window:
        """One sample's read as a transform's Window (of the image flipped first, when flipped),
        for cutting the sample's masks and boxes alike."""
        win = Window(self.top, self.left, self.height, self.width)
        return win.mirrored(W) if self.hflip else win


FOLDS: dict[str, Callable[[Any, Any, Geometry], None]] = {
    "hflip": lambda step, seed, g: g.flip(step.make_params(seed)),
    "crop": lambda step, seed, g: g.crop(*step.offsets(seed, g.height, g.width), *step.size),
}
"""How each geometric role moves the op's read: (step, its seeds, Geometry) -> None."""


class FusedRun:
    """Samples of one op call, consecutive in their chunk (sample k is the chunk's start + k): each
    one's image (its Item, or None for a plain array or tensor), source and read (top, left,
    height, width, flip), and the seeds of the steps whose draws the op takes, by role ("mask");
    `out_size`: what the op writes for every sample; `size`: the read's when all are one size."""

    __slots__ = ("start", "layout", "size", "out_size", "images", "raws", "sources", "tops", "lefts", "heights",
                 "widths", "hflips", "seeds")

    def __init__(self, start: int, layout: str, images: list[Item | None], raws: list[Any],
                 sources: list[torch.Tensor | None], read: tuple[list[int], list[int], list[int], list[int]],
                 hflips: list[bool], seeds: dict[str, list[int]], out_size: tuple[int, int] | None = None):
        self.start, self.layout, self.images, self.raws, self.sources = start, layout, images, raws, sources
        self.tops, self.lefts, self.heights, self.widths = read
        self.hflips, self.seeds = hflips, seeds
        one = len(set(self.heights)) == 1 and len(set(self.widths)) == 1
        self.size = (self.heights[0], self.widths[0]) if one else None
        self.out_size = out_size or self.size
        for k, src in enumerate(sources):
            if src is None:  # a PIL image or WindowedImage: only its window is read (or decoded)
                top, left = self.tops[k], self.lefts[k]
                sources[k] = read_region(images[k], top, top + self.heights[k], left, left + self.widths[k])
                self.tops[k] = self.lefts[k] = 0

    def __len__(self) -> int:
        return len(self.sources)

    def output_like(self, k: int, image: torch.Tensor) -> Any:
        """Sample k's loaded item with the op's output image in its image's place (its type kept)."""
        raw, item = self.raws[k], self.images[k]
        image = image if item is None else item.wrap(image)
        if type(raw) in (tuple, list):
            items = [image, *raw[1:]]
            return items if type(raw) is list else tuple(items)
        return image


@dataclass(frozen=True)
class Fusion:
    """A row of FusionPlan's table.

    Args:
        op: the op's name (torch.ops.fastprep.<op>).
        pattern: a regular expression over the steps' roles, each followed by a space.
        window: the role of the step that cuts the window (its layout, errors and cut of masks).
        valid: what else the matched steps must satisfy.
        takes_pixels: (group, tensor, layout) -> whether the op takes that image's pixels.
        takes_windowed: (group, item) -> whether it takes a PIL image or WindowedImage (read by window).
        out_dtype: (group) -> the output's dtype.
        run: (group, run, out) -> None: the op on the run's samples into `out` ([n, 3, h, w]).
    """
    op: str
    pattern: str
    window: str
    valid: Callable[[list], bool]
    takes_pixels: Callable[[Any, torch.Tensor, str], bool]
    takes_windowed: Callable[[Any, Item], bool]
    out_dtype: Callable[[Any], torch.dtype]
    run: Callable[[Any, FusedRun, torch.Tensor], None]


def _rgb_uint8(group: Any, t: torch.Tensor, layout: str) -> bool:
    """crop_mask_ycbcr's images: uint8, 3-D, RGB (RGBA with alpha='drop')."""
    if t.dtype != torch.uint8 or t.dim() != 3:
        return False
    c = t.shape[2] if layout == "HWC" else t.shape[0]
    return c == 3 or (c == 4 and group.roles["ycbcr"].alpha == "drop")


def _rgb_mode(group: Any, item: Item) -> bool:
    mode = item.value.mode
    return mode == "RGB" or (mode == "RGBA" and item.pil and group.roles["ycbcr"].alpha == "drop")


def _flips_after_crop_read_chw(steps: list) -> bool:
    """A flip after the crop flips its CHW output: one of HWC layout would flip rows."""
    roles = [s.fusion_role for s in steps]
    return all(s.layout == "CHW" for s in steps[roles.index("crop"):] if s.fusion_role == "hflip")


def _run_crop_mask_ycbcr(group: Any, run: FusedRun, out: torch.Tensor) -> None:
    mask, color = group.roles["mask"], group.roles["ycbcr"]
    sources = run.sources if color.alpha != "drop" else [color.rgb(s, run.layout) for s in run.sources]
    with BELOW_AUTOGRAD():  # the plan's own buffers, never part of a graph: skip the op's Python autograd check
        torch.ops.fastprep.crop_mask_ycbcr_batch.default(sources, run.tops, run.lefts, run.size[0], run.size[1],
                                                         mask.p, run.seeds["mask"], out, run.layout, mask.structure,
                                                         color.scale, True, None, run.hflips)


CROP_MASK_YCBCR = Fusion(
    op="crop_mask_ycbcr_batch",
    pattern=r"(hflip )*crop (hflip )*mask ycbcr ",
    window="crop",
    valid=_flips_after_crop_read_chw,
    takes_pixels=_rgb_uint8,
    takes_windowed=_rgb_mode,
    out_dtype=lambda group: group.roles["ycbcr"].out_dtype or torch.uint8,
    run=_run_crop_mask_ycbcr,
)
