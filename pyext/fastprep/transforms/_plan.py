"""FusionPlan: how a list of transforms runs, for Compose and for fastprep.Loader alike.

Each fastprep transform says what part it can play in a fused op (its ``fusion_role``) and draws
its parameters as a value (``make_params``, on ints for one sample or on numpy
arrays for a chunk, with the same bits). The plan cuts the steps into segments: a run of steps
whose roles match a row of :data:`FUSIONS` is one :class:`FusedGroup`, one op call; a flip in front
of a crop is read into the crop's window (:class:`FlipIntoCrop`); every other step runs as it is.
Steps marked ``fusion_noop`` (ToImage, PILToTensor: conversions whose output a fused run reads
the same as their input) are absorbed by a run they stand in front of, inside or right after; an
image the run refuses (a PIL mode whose pixels are not uint8 or float32: "I", "1", "I;16", "P")
runs the conversions and the steps one by one instead, as ``fuse=False`` would
(:class:`AbsorbingGroup`).

A group (transforms/_group.py) draws one seed per random step in the steps' order (what the steps
would draw), folds the geometric steps into one read of the source (_fold.py's Geometry: window
and flip) and calls the op with what was drawn. Compose does that per sample; the Loader per
chunk, with every sample's seeds from one ``seeded_draws`` call and one op call into its batch
slot (loader/_apply.py).

Adding a fused step (as RandomRotate90 was): the transform gets a ``fusion_role`` and a
``make_params`` that takes ints and numpy arrays; its role goes into a row's pattern (_fused.py,
listed in :data:`FUSIONS` below) and, if it moves the read or the write, into _fold.py's Geometry
and FOLDS; a new per-sample parameter of the op is a new column of its geometry table
(ops/_resize_checks.py's GEOMETRY_COLUMNS, the kernels). Nothing in the Loader changes
(docs/transforms.md walks through it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from fastprep.core._tree import leaves
from fastprep.transforms._base import Transform
from fastprep.transforms._flips import RandomHorizontalFlip
from fastprep.transforms._fused import CROP_MASK_YCBCR, RESIZED_CROP, Fusion
from fastprep.transforms._geometry import RandomCrop
from fastprep.transforms._group import FusedGroup
from fastprep.transforms._inputs import check_pil_mode, is_pil, require_rgb
from fastprep.transforms._pixels import RGBToYCbCr
from fastprep.transforms._resized_crop import RandomResizedCrop
from fastprep.transforms._sample import GEOMETRY, Sample, decode_jpeg_files

FUSIONS: tuple[Fusion, ...] = (CROP_MASK_YCBCR, RESIZED_CROP)
"""The table: steps whose roles match a row's pattern (and its `valid`) run as its op."""


def _noop(step: Any) -> bool:
    """A conversion (ToImage, PILToTensor) a fused run reads past: its output reads as its input."""
    return getattr(step, "fusion_noop", False) is True


def _past_noops(steps: list[Any], j: int) -> int:
    """The index after the no-op conversions from step j on."""
    while j < len(steps) and _noop(steps[j]):
        j += 1
    return j


def _refused_by_mode(x: Any) -> bool:
    """A PIL image whose mode a fused run refuses (its pixels are not uint8 or float32)."""
    if not is_pil(x):
        return False
    try:
        check_pil_mode(x)
    except ValueError:
        return True
    return False


class AbsorbingGroup(FusedGroup):
    """A fused run that absorbed conversions (ToImage, PILToTensor) in front of, among or after its
    steps. `unfused`: the conversions and the steps one by one, in order: what a sample the op does
    not take runs, so that it gets what ``fuse=False`` gives. A PIL image whose mode the op refuses
    (int32 "I", 1-bit "1", 16-bit, palette) goes there before the op looks at it: the conversions
    make a tensor of its own dtype, as torchvision's, which the steps take as they are."""

    def __call__(self, sample: Any) -> Any:
        if type(sample) in (np.ndarray, torch.Tensor):  # no PIL image in it: the op's own checks
            return super().__call__(sample)
        if any(_refused_by_mode(x) for x in leaves(sample)):  # leaves(x) of a lone image is [x]
            return self.unfused(sample)
        return super().__call__(sample)

    def refuses(self, x: Any) -> bool:
        """An image whose mode the op refuses: the Loader leaves its item to the per-sample path
        (this group's __call__)."""
        return _refused_by_mode(x)


@dataclass
class FlipIntoCrop:
    """RandomHorizontalFlip then RandomCrop / RandomResizedCrop: the crop reads the mirrored window
    and reverses it; the whole image is never flipped (same draws and bits as the two steps)."""
    flip: RandomHorizontalFlip
    crop: Any

    def __call__(self, sample: Any) -> Any:
        flip = bool(self.flip.make_params(self.flip.draw()))
        return self.crop.apply(Sample(sample, self.crop.layout, GEOMETRY), self.crop.draw(), flip)


@dataclass
class Step:
    """A step that runs as it is; a step not fastprep's gets WindowedImages decoded first."""
    step: Any
    fastprep: bool = field(init=False)

    def __post_init__(self) -> None:
        self.fastprep = isinstance(self.step, Transform)

    def __call__(self, sample: Any) -> Any:
        return self.step(sample if self.fastprep else decode_jpeg_files(sample, self.step))


class FusionPlan:
    """The segments a list of steps runs as, in order (see the module's docstring).

    Args:
        steps: transforms (fastprep's, torchvision's, any callable).
        fuse: match rows of the table (False: every step alone, as the unfused chain).
    """

    def __init__(self, steps: list[Any], fuse: bool = True):
        self.steps = list(steps)
        self.fastprep_only = all(getattr(s, "fastprep_only", False) for s in self.steps)
        # The seeds a sample draws, known ahead: one per random fastprep step (nested plans too).
        self.draws = sum(getattr(s, "plan", None).draws if isinstance(getattr(s, "plan", None), FusionPlan)
                         else int(hasattr(s, "draw")) for s in self.steps)
        self.rgb_check = any(isinstance(s, RGBToYCbCr) for s in self.steps)
        self.segments: list[Any] = []
        i = 0
        while i < len(self.steps):
            n, seg = self._segment(i, fuse)
            self.segments.append(seg)
            i += n

    @classmethod
    def of(cls, transform: Any) -> FusionPlan:
        """The plan of a transform the Loader was given: a Compose's own, else the one step."""
        plan = getattr(transform, "plan", None)
        return plan if isinstance(plan, FusionPlan) else cls([transform])

    def _segment(self, i: int, fuse: bool) -> tuple[int, Any]:
        """(how many steps, the segment) starting at step i. The table's rows match the roles of the
        steps from i on with the no-op conversions left out; a run takes the conversions in front
        of it, among its steps and right after it (it reads PIL images, arrays and windows itself
        and returns a tensor, which they would leave as it is)."""
        steps = self.steps
        core = [j for j in range(i, len(steps)) if not _noop(steps[j])]  # the steps that do something
        roles = [getattr(steps[j], "fusion_role", None) for j in core]
        for fusion in FUSIONS if fuse else ():
            n = fusion.pattern.match(roles)
            if n and fusion.valid([steps[j] for j in core[:n]]):
                run, count = [steps[j] for j in core[:n]], _past_noops(steps, core[n - 1] + 1) - i
                if count == n:
                    return n, FusedGroup(run, fusion, FusionPlan(run, fuse=False))
                return count, AbsorbingGroup(run, fusion, FusionPlan(steps[i:i + count], fuse=False))
        if core and core[0] != i:  # conversions in front of a step no row takes: they run as they are
            return 1, Step(steps[i])
        nxt = steps[core[1]] if len(core) > 1 else None
        if core and type(steps[i]) is RandomHorizontalFlip and type(nxt) in (RandomCrop, RandomResizedCrop):
            return core[1] + 1 - i, FlipIntoCrop(steps[i], nxt)  # the crop reads PIL, arrays, windows itself
        return 1, Step(steps[i])

    @staticmethod
    def split_pipelines() -> list[str]:
        """The pipelines the GPU decode split runs (each row of the table with a device half)."""
        return [f.split.pipeline for f in FUSIONS if f.split is not None]

    @property
    def fused(self) -> FusedGroup | None:
        """The group when the whole plan is one fused op call (the Loader's batch path)."""
        only = self.segments[0] if len(self.segments) == 1 else None
        return only if isinstance(only, FusedGroup) else None

    def __call__(self, sample: Any) -> Any:
        if self.rgb_check and type(sample) not in (np.ndarray, torch.Tensor):  # those have no colour mode
            for x in leaves(sample):  # the PIL mode is gone after a crop
                require_rgb(x, "Compose (it has an RGBToYCbCr step)")
        for segment in self.segments:
            sample = segment(sample)
        return sample

    def apply_item(self, raw: Any) -> Any:
        """The plan on a Loader item: the whole item (a structured sample) when every step is
        fastprep's; otherwise its image (the item, or its first element), which a step that is not
        fastprep's gets decoded whole (torchvision's v1 transforms: as a PIL image)."""
        if self.fastprep_only:
            return self(raw)
        if isinstance(raw, (tuple, list)) and raw:  # each step decodes what it cannot read by window
            items = [self(raw[0]), *raw[1:]]
            return items if isinstance(raw, list) else tuple(items)
        return self(raw)
