"""The fused ops a FusionPlan calls (transforms/plan.py): where an op reads (:class:`Geometry`),
the samples of one op call (:class:`FusedRun`), and one :class:`Fusion` per op: the roles it
fuses, the images it takes, and the call with what the steps drew."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from fastprep.transforms.sample import Item
from fastprep.transforms.window import Window, read_region


class Geometry:
    """Where a fused op reads: rows [top, top + height) and columns [left, left + width) of the
    source image, right to left when `hflip`. Each value is an int (one sample) or a numpy array
    (a chunk, one element per sample): the folds below are the same code for both."""

    def __init__(self, H: Any, W: Any):
        self.top, self.left, self.height, self.width, self.hflip = H * 0, W * 0, H, W, H < 0

    @classmethod
    def at(cls, top: int, left: int, height: int, width: int, hflip: bool) -> Geometry:
        g = cls(height, width)
        g.top, g.left, g.hflip = top, left, hflip
        return g

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


@dataclass
class FusedRun:
    """Consecutive samples of one op call: item k is the chunk's item start + k."""
    start: int
    layout: str
    items: list[Item] = field(default_factory=list)
    raws: list[Any] = field(default_factory=list)
    sources: list[torch.Tensor] = field(default_factory=list)
    tops: list[int] = field(default_factory=list)
    lefts: list[int] = field(default_factory=list)
    hflips: list[bool] = field(default_factory=list)
    seeds: dict[str, list[int]] = field(default_factory=dict)
    size: tuple[int, int] = (0, 0)

    def add(self, item: Item, raw: Any, g: Geometry, seeds: dict[str, int]) -> None:
        """A sample read at `g`: a tensor whole, a PIL image or WindowedImage at its window only."""
        if item.windowed:
            src = read_region(item, g.top, g.top + g.height, g.left, g.left + g.width)
            top = left = 0
        else:
            src, top, left = item.tensor(), g.top, g.left
        self.items.append(item)
        self.raws.append(raw)
        self.sources.append(src)
        self.tops.append(top)
        self.lefts.append(left)
        self.hflips.append(bool(g.hflip))
        for role, seed in seeds.items():
            self.seeds.setdefault(role, []).append(seed)
        self.size = (g.height, g.width)

    def output_like(self, k: int, image: torch.Tensor) -> Any:
        """Sample k's loaded item with the op's output image in its image's place."""
        raw = self.raws[k]
        if type(raw) in (tuple, list):
            items = [self.items[k].wrap(image), *raw[1:]]
            return items if type(raw) is list else tuple(items)
        return self.items[k].wrap(image)


@dataclass(frozen=True)
class Fusion:
    """A row of FusionPlan's table.

    Args:
        op: the op's name (torch.ops.fastprep.<op>).
        pattern: a regular expression over the steps' roles, each followed by a space.
        valid: what else the matched steps must satisfy.
        accepts: (group, image item) -> whether the op takes that image.
        out_dtype: (group) -> the output's dtype.
        run: (group, run, out) -> None: the op on the run's samples into `out` ([n, 3, h, w]).
    """
    op: str
    pattern: str
    valid: Callable[[list], bool]
    accepts: Callable[[Any, Item], bool]
    out_dtype: Callable[[Any], torch.dtype]
    run: Callable[[Any, FusedRun, torch.Tensor], None]


def _rgb_uint8(group: Any, item: Item) -> bool:
    """crop_mask_ycbcr's images: uint8, 3-D, RGB (RGBA with alpha='drop')."""
    alpha = group.roles["ycbcr"].alpha == "drop"
    if item.pil:
        return item.value.mode == "RGB" or (alpha and item.value.mode == "RGBA")
    if item.lazy:
        return item.value.mode == "RGB"
    t = item.tensor()
    c = t.shape[-1] if item.layout == "HWC" else t.shape[-3]
    return t.dtype == torch.uint8 and t.dim() == 3 and (c == 3 or (alpha and c == 4))


def _flips_after_crop_read_chw(steps: list) -> bool:
    """A flip after the crop flips its CHW output: one of HWC layout would flip rows."""
    roles = [s.fusion_role for s in steps]
    return all(s.layout == "CHW" for s in steps[roles.index("crop"):] if s.fusion_role == "hflip")


def _run_crop_mask_ycbcr(group: Any, run: FusedRun, out: torch.Tensor) -> None:
    mask, color = group.step("mask"), group.step("ycbcr")
    sources = run.sources if color.alpha != "drop" else [color.rgb(s, run.layout) for s in run.sources]
    torch.ops.fastprep.crop_mask_ycbcr_batch.default(sources, run.tops, run.lefts, run.size[0], run.size[1], mask.p,
                                                     run.seeds["mask"], out, run.layout, mask.structure, color.scale,
                                                     True, None, run.hflips)


CROP_MASK_YCBCR = Fusion(
    op="crop_mask_ycbcr_batch",
    pattern=r"(hflip )*crop (hflip )*mask ycbcr ",
    valid=_flips_after_crop_read_chw,
    accepts=_rgb_uint8,
    out_dtype=lambda group: group.step("ycbcr").out_dtype or torch.uint8,
    run=_run_crop_mask_ycbcr,
)
