"""FusionPlan: how a list of transforms runs, for Compose and for fastprep.Loader alike.

Each fastprep transform says what part it can play in a fused op (its ``fusion_role``) and draws
its parameters as a value (``make_params`` / ``offsets``, on ints for one sample or on numpy
arrays for a chunk, with the same bits). The plan cuts the steps into segments: a run of steps
whose roles match a row of :data:`FUSIONS` is one :class:`FusedGroup`, one op call; a flip in front
of a crop is read into the crop's window (:class:`FlipIntoCrop`); every other step runs as it is.

A group draws one seed per random step in the steps' order (what the steps would draw), folds the
geometric steps into one read of the source (:class:`Geometry`: window and flip) and calls the op
with what was drawn. Compose does that per sample; the Loader per chunk, with every sample's seeds
from one ``seeded_draws`` call and one op call into its batch slot (loader/apply.py).

Adding a fused step (say RandomVerticalFlip): the transform gets a ``fusion_role`` and a
``make_params`` that takes ints and arrays; its role goes into a row's pattern below and, if it
moves the read, into :class:`Geometry` and :data:`FOLDS`; the op (ops/<family>.py, its kernels)
takes the new parameter in the row's ``run``. Nothing in the Loader changes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from fastprep._tree import leaves
from fastprep.transforms.base import Transform, describe_sample
from fastprep.transforms.fused import CROP_MASK_YCBCR, Fusion, FusedRun, Geometry
from fastprep.transforms.geometry import RandomCrop, RandomHorizontalFlip, RandomResizedCrop
from fastprep.transforms.inputs import error_context, hwc_tensor, require_rgb
from fastprep.transforms.pixels import RGBToYCbCr
from fastprep.transforms.sample import GEOMETRY, Item, Sample, decode_jpeg_files

FUSIONS: tuple[Fusion, ...] = (CROP_MASK_YCBCR,)
"""The table: steps whose roles match a row's pattern (and its `valid`) run as its op."""

FOLDS: dict[str, Callable[[Any, Any, Geometry], None]] = {
    "hflip": lambda step, seed, g: g.flip(step.make_params(seed)),
    "crop": lambda step, seed, g: g.crop(*step.offsets(seed, g.height, g.width), *step.size),
}
"""How each geometric role moves the op's read: (step, its seeds, Geometry) -> None."""


class FusedGroup:
    """Steps that run as one op call: their draws, their fold into a Geometry, the op's source."""

    def __init__(self, steps: list[nn.Module], fusion: Fusion):
        self.steps, self.fusion = steps, fusion
        self.random = [s for s in steps if hasattr(s, "draw")]  # one seed each, in the steps' order
        self.roles = {s.fusion_role: s for s in steps}
        self.crop = self.roles["crop"]
        # (fold, step, its column of seeds) for the geometric steps, in order
        self.folds = [(FOLDS[s.fusion_role], s, self.random.index(s)) for s in steps if s.fusion_role in FOLDS]
        self.layout = self.crop.layout  # a flip in front reads the image as the crop does (FlipIntoCrop)
        self.out_dtype = fusion.out_dtype(self)
        self.unfused = FusionPlan(steps, fuse=False)

    def step(self, role: str) -> Any:
        return self.roles[role]

    @property
    def vectorised(self) -> bool:
        """Every draw comes from the sample's stream (no step has a generator of its own)."""
        return all(s.generator is None for s in self.random)

    def image(self, s: Sample) -> Item | None:
        """The sample's one image when the op takes it (else the steps run one by one)."""
        images = [it for it in s.items if it.kind in ("image", "video")]
        if len(images) != 1 or images[0].kind != "image":
            return None
        return images[0] if self.takes(images[0]) else None

    def takes(self, item: Item) -> bool:
        return self.fusion.accepts(self, item)

    def geometry(self, seeds: list[Any], H: Any, W: Any) -> Geometry:
        """The read the steps' draws make of an H x W image: ints, or arrays (one per sample)."""
        g = Geometry(H, W)
        for fold, step, k in self.folds:
            fold(step, seeds[k], g)
        return g

    def seeds_by_role(self, seeds: list[Any]) -> dict[str, Any]:
        return {step.fusion_role: seeds[k] for k, step in enumerate(self.random)}

    def __call__(self, sample: Any) -> Any:
        """One sample (Compose): the op into a fresh output, the sample's other items cut at its window."""
        s = Sample(sample, self.layout, GEOMETRY)
        item = self.image(s)
        if item is None:
            return self.unfused(sample)
        seeds = [step.draw() for step in self.random]
        H, W = s.size()
        with error_context(self.crop, describe_sample(s)):
            self.crop.check_fits(H, W)
            g = self.geometry(seeds, H, W)
            run = FusedRun(0, self.layout_of(item))
            run.add(item, sample, g, self.seeds_by_role(seeds))
            out = torch.empty(1, 3, g.height, g.width, dtype=self.out_dtype)
            self.fusion.run(self, run, out)
        outs = {item.index: item.wrap(out[0])}
        win, crop_seed = g.window(W), seeds[self.random.index(self.crop)]
        for other in s.items:
            if other is not item:
                outs[other.index] = self.crop.cut(other, win, crop_seed, H, W)
        return s.rebuild(outs)

    def layout_of(self, item: Item) -> str:
        return "HWC" if item.windowed else item.layout

    def batch(self, raws: list[Any], draws: np.ndarray) -> list[FusedRun]:
        """The runs of consecutive items of a chunk the op takes, their parameters drawn at once:
        `draws` holds each item's seeds (seeded_draws of its item seed, one column per random
        step). Items it does not take (another structure, dtype or size) are left out: run them
        one by one through the plan, under the same seeds."""
        picked: list[tuple[int, Item]] = []
        sizes: list[tuple[int, int]] = []
        kind = None
        for j, raw in enumerate(raws):
            item, kind = self.loader_image(raw, kind)
            if item is None:
                continue
            H, W = item.size()
            if H >= self.crop.size[0] and W >= self.crop.size[1]:
                picked.append((j, item))
                sizes.append((H, W))
        if not picked:
            return []
        rows = [j for j, _ in picked]
        hw = np.array(sizes, dtype=np.int64)
        chosen = draws[rows]
        seeds = [chosen[:, k].view(np.uint64) for k in range(chosen.shape[1])]
        g = self.geometry(seeds, hw[:, 0], hw[:, 1])
        by_role = {role: s.view(np.int64).tolist() for role, s in self.seeds_by_role(seeds).items()}
        tops, lefts = g.top.tolist(), g.left.tolist()
        flips = g.hflip.tolist()
        runs: list[FusedRun] = []
        for n, (j, item) in enumerate(picked):
            layout = self.layout_of(item)
            if not runs or runs[-1].layout != layout or runs[-1].start + len(runs[-1].items) != j:
                runs.append(FusedRun(j, layout))
            at = Geometry.at(tops[n], lefts[n], g.height, g.width, flips[n])
            runs[-1].add(item, raws[j], at, {role: v[n] for role, v in by_role.items()})
        return runs

    def loader_image(self, raw: Any, kind: Any) -> tuple[Item | None, Any]:
        """The image of a loaded item when the batch path takes it: the item itself, or the first
        element of a flat tuple or list whose other elements are not cut by the crop (labels,
        names...). `kind`: the previous item's types, which skip the structure analysis."""
        if not _loaded(raw):
            return None, kind
        flat = type(raw) in (tuple, list)
        key = (type(raw), len(raw), type(raw[0]), tuple(map(type, raw[1:]))) if flat and raw else (type(raw),)
        if key != kind:
            if type(raw) is dict or (flat and any(type(x) in (tuple, list, dict) for x in raw)):
                return None, None
            s = Sample(raw, self.layout, GEOMETRY)
            item = self.image(s)
            ok = item is not None and len(s.items) == 1 and item.index == 0
            return (item if ok else None), (key if ok else None)
        image = raw[0] if flat else raw
        if type(image) is np.ndarray:  # as a tensor once: Item.tensor() would wrap it at every use
            item = Item(0, "image", hwc_tensor(image), "HWC")
        else:
            item = Item(0, "image", image, self.layout if type(image) is torch.Tensor else
                        "CHW" if isinstance(image, torch.Tensor) else "HWC")
        return (item if self.takes(item) else None), kind


def _loaded(raw: Any) -> bool:
    """An item the batch path may look at (a sentinel object marks items to leave alone)."""
    return type(raw) is not object


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
        return self.step(sample if self.fastprep else decode_jpeg_files(sample))


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
        roles = [f"{getattr(s, 'fusion_role', None)} " for s in self.steps]
        i = 0
        while i < len(self.steps):
            n, seg = self._segment(i, "".join(roles[i:]), fuse)
            self.segments.append(seg)
            i += n

    @classmethod
    def of(cls, transform: Any) -> FusionPlan:
        """The plan of a transform the Loader was given: a Compose's own, else the one step."""
        plan = getattr(transform, "plan", None)
        return plan if isinstance(plan, FusionPlan) else cls([transform])

    def _segment(self, i: int, tail: str, fuse: bool) -> tuple[int, Any]:
        """The segment starting at step i; `tail`: the roles from step i on."""
        steps = self.steps
        for fusion in FUSIONS if fuse else ():
            m = re.match(fusion.pattern, tail)
            if m is not None:
                n = m.group(0).count(" ")
                if fusion.valid(steps[i:i + n]):
                    return n, FusedGroup(steps[i:i + n], fusion)
        nxt = steps[i + 1] if i + 1 < len(steps) else None
        if type(steps[i]) is RandomHorizontalFlip and type(nxt) in (RandomCrop, RandomResizedCrop):
            return 2, FlipIntoCrop(steps[i], nxt)
        return 1, Step(steps[i])

    @property
    def fused(self) -> FusedGroup | None:
        """The group when the whole plan is one fused op call (the Loader's batch path)."""
        only = self.segments[0] if len(self.segments) == 1 else None
        return only if isinstance(only, FusedGroup) else None

    def __call__(self, sample: Any) -> Any:
        if self.rgb_check:
            for x in leaves(sample):  # the PIL mode is gone after a crop
                require_rgb(x, "Compose (it has an RGBToYCbCr step)")
        for segment in self.segments:
            sample = segment(sample)
        return sample

    def apply_item(self, raw: Any) -> Any:
        """The plan on a Loader item: the whole item (a structured sample) when every step is
        fastprep's; otherwise its image (the item, or its first element), decoded whole."""
        if self.fastprep_only:
            return self(raw)
        if isinstance(raw, (tuple, list)) and raw:
            items = [self(decode_jpeg_files(raw[0])), *raw[1:]]
            return items if isinstance(raw, list) else tuple(items)
        return self(decode_jpeg_files(raw))
