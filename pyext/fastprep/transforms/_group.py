"""FusedGroup: steps a FusionPlan runs as one fused op call (transforms/_plan.py has the design):
their draws, the read they make (_fold.py's Geometry), the op on one sample (Compose); for the
Loader's batch path (loader/_fused_chunks.py), what an item's image is, whether the op takes it,
and the op's runs."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn

from fastprep.core._rng import SampleStream, draw_seeds
from fastprep.transforms._base import describe_sample
from fastprep.transforms._fold import FOLDS, Geometry
from fastprep.transforms._fused import FusedRun, Fusion, whole_reads
from fastprep.transforms._inputs import CONTEXT_ERRORS, hw, hwc_tensor, in_context
from fastprep.transforms._sample import GEOMETRY, Item, Sample


class FusedGroup:
    """Steps that run as one op call: their draws, their fold into a Geometry, the op's inputs."""

    def __init__(self, steps: list[nn.Module], fusion: Fusion, unfused: Any):
        self.steps, self.fusion = steps, fusion
        self.random = [s for s in steps if hasattr(s, "draw")]  # one seed each, in the steps' order
        self.by_fusion_role = {s.fusion_role: s for s in steps}
        # The step that cuts the window (RandomCrop; RandomResizedCrop or Resize for a resizing
        # row): its layout reads the image, its errors name the transform.
        self.crop = next(s for s in steps if s.fusion_role in fusion.window)
        self.layout = self.crop.layout  # a flip in front reads the image as the crop does (FlipIntoCrop)
        # (fold, step, its column of seeds or None: not random) for the geometric steps, in order
        self.folds = [(FOLDS[s.fusion_role], s, _index(self.random, s)) for s in steps if s.fusion_role in FOLDS]
        self.seed_fusion_roles = [(s.fusion_role, k) for k, s in enumerate(self.random)]
        self.out_dtype = fusion.out_dtype(self)
        size = fusion.out_size(self)
        # What the op makes of every sample, declared (None: its size follows each image's): the
        # Loader lays its slots' images out from it.
        self.makes = None if size is None else ((3, *size), self.out_dtype)
        resize = self.by_fusion_role.get("resized_crop") or self.by_fusion_role.get("resize")
        self.reduced = getattr(resize, "jpeg_scale", "exact") == "reduced"  # JPEG windows read at a reduced scale
        self.unfused = unfused  # the steps one by one: what a sample the op does not take runs
        # Every draw comes from the sample's stream (no step has a generator of its own): a chunk's
        # draws can be made for all its samples at once, and replayed.
        self.vectorised = all(s.generator is None for s in self.random)

    def takes(self, item: Item, t: torch.Tensor | None = None) -> bool:
        """Whether the op takes this image (its pixels `t`, when read already)."""
        if item.windowed:
            return self.fusion.takes_windowed(self, item)
        return self.fusion.takes_pixels(self, item.tensor() if t is None else t, item.layout)

    def image(self, s: Sample) -> Item | None:
        """The sample's one image when the op takes it (else the steps run one by one)."""
        images = [it for it in s.items if it.kind in ("image", "video")]
        if len(images) != 1 or images[0].kind != "image":
            return None
        return images[0] if self.takes(images[0]) else None

    def geometry(self, seeds: list[Any], H: Any, W: Any) -> Geometry:
        """The read the steps' draws make of an H x W image: ints, or arrays (one per sample)."""
        g = Geometry(H, W)
        for fold, step, k in self.folds:
            fold(step, None if k is None else seeds[k], g)
        return g

    def replay(self, sample: Any, seeds: list[int]) -> Any:
        """The steps one by one on `sample`, with the seeds drawn already (vectorised groups)."""
        with SampleStream(0, seeds):
            return self.unfused(sample)

    def __call__(self, sample: Any) -> Any:
        """One sample (Compose): the op into a fresh output; the sample's masks, boxes and key points
        through the steps one by one with the same draws."""
        found, s = plain_pixels(sample, self.layout), None
        if found is None or not self.fusion.takes_pixels(self, *found):
            s = Sample(sample, self.layout, GEOMETRY)
            item = self.image(s)
            if item is None or (len(s.items) > 1 and not self.vectorised):
                return self.unfused(sample)
            found = (None, "HWC") if item.windowed else (item.tensor(), item.layout)
        t, layout = found
        seeds: list[int] = []
        try:
            H, W = s.size() if s is not None else hw(t, layout)
            # A crop that does not fit runs as the steps (its error, or padding): a group whose draws
            # cannot be replayed decides before drawing (fitting does not depend on the draws).
            fits = self.vectorised or self.geometry([0] * len(self.random), H, W).fits
            if fits:
                seeds = draw_seeds(len(self.random)) if self.vectorised else [step.draw() for step in self.random]
                g = self.geometry(seeds, H, W)
                fits = g.fits
            if fits:
                out = self._run(g, layout, None if s is None else item, sample, t, seeds)
        except CONTEXT_ERRORS as exc:
            new = in_context(self.crop, describe_sample(s or Sample(sample, self.layout, GEOMETRY)), exc)
            if new is exc:
                raise
            raise new from exc
        if not fits:
            return self.replay(sample, seeds) if seeds else self.unfused(sample)
        if s is None:
            return out[0]  # a plain array or tensor: no type to keep, nothing else to cut
        outs = {item.index: item.wrap(out[0])}
        others = [other for other in s.items if other is not item]
        if others:  # masks, boxes, key points: a tuple of tv_tensors, whatever the sample's structure
            outs.update(zip((o.index for o in others), self.replay(tuple(o.value for o in others), seeds)))
        return s.rebuild(outs)

    def _run(self, g: Geometry, layout: str, item: Item | None, sample: Any, t: torch.Tensor | None,
             seeds: list[int]) -> torch.Tensor:
        """The op on one sample into a fresh [1, 3, h, w] output."""
        run = FusedRun(0, layout, [item], [sample], [t], g.to_table(1),
                       {role: [seeds[k]] for role, k in self.seed_fusion_roles}, (g.out_height, g.out_width),
                       self.reduced)
        out = torch.empty(1, 3, *run.out_size, dtype=self.out_dtype)
        self.fusion.run(self, run, out)
        return out

    def finish_on_device(self, windows: list[torch.Tensor], geometry: np.ndarray, out_size: tuple[int, int],
                         extras: dict[str, torch.Tensor]) -> torch.Tensor:
        """The row's device half (``fusion.split``, the GPU decode split) on a batch's decoded
        windows: uint8 CHW tensors on the device, each the window a CPU run reads, with the runs'
        geometry rows (their flips and placement: each window is read whole) and the threads'
        `extras` (moved to the device)."""
        n = len(windows)
        run = FusedRun(0, "CHW", [None] * n, [None] * n, list(windows), whole_reads(geometry, windows), {}, out_size)
        return self.fusion.split.finish(self, run, extras)

    # What the Loader's fused batch path (loader/_fused_chunks.py) asks of the group: what an item's
    # image is, whether the op takes it, and the op's runs.

    def refuses(self, x: Any) -> bool:
        """Whether the op refuses image `x` before looking at it (AbsorbingGroup: a PIL mode)."""
        return False

    def plain_image(self, x: Any) -> tuple[torch.Tensor, str] | None:
        """(pixels, layout) of a numpy array or plain tensor image, read as the group reads it."""
        return plain_pixels(x, self.layout)

    def image_item(self, x: Any) -> Item:
        """`x` as the lone image of a sample (a PIL image, tv_tensors Image, WindowedImage...)."""
        return Item(0, "image", x, "CHW" if isinstance(x, torch.Tensor) else "HWC")

    def lone_image(self, raw: Any) -> Item | None:
        """The image of a loaded item when it is the item's first element and nothing else in it is
        cut by the crop (labels, names...), and the op takes it; else None."""
        s = Sample(raw, self.layout, GEOMETRY)
        item = self.image(s)
        return None if item is None or len(s.items) != 1 or item.index != 0 else item

    @staticmethod
    def image_size(item: Item | None, t: torch.Tensor | None, layout: str) -> tuple[int, int]:
        """(height, width) of an image found for the batch path: its pixels', or its Item's."""
        return item.size() if t is None else hw(t, layout)

    def new_run(self, start: int, layout: str, images: list[Item | None], raws: list[Any],
                inputs: list[torch.Tensor | None], geometry: np.ndarray, seeds: dict[str, list[int]],
                out_size: tuple[int, int]) -> FusedRun:
        """A run of the op's samples (FusedRun's arguments), read at the group's decode scale."""
        return FusedRun(start, layout, images, raws, inputs, geometry, seeds, out_size, self.reduced)


def plain_pixels(x: Any, layout: str) -> tuple[torch.Tensor, str] | None:
    """(pixels, layout) of a numpy array or plain tensor image (read in `layout`): what a Sample
    makes of a sample that is that image alone, without the analysis."""
    if type(x) is np.ndarray:
        return (hwc_tensor(x), "HWC") if x.ndim == 3 and x.dtype.kind in "biuf" else None
    return (x, layout) if type(x) is torch.Tensor and x.dim() == 3 else None


def _index(steps: list, step: Any) -> int | None:
    """The step's position among the random steps (its seed's), None for a deterministic one."""
    return next((k for k, s in enumerate(steps) if s is step), None)
