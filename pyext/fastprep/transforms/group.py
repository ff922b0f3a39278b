"""FusedGroup: steps a FusionPlan runs as one fused op call (transforms/plan.py has the design):
their draws, the read they make (fused.py's Geometry), the op on one sample (Compose) or on the
runs of a chunk (fastprep.Loader)."""

from __future__ import annotations

from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np
import torch
from torch import nn

from fastprep.rng import SampleStream, draw_seeds
from fastprep.transforms.base import describe_sample
from fastprep.transforms.fused import FOLDS, FusedRun, Fusion, Geometry
from fastprep.transforms.inputs import CONTEXT_ERRORS, hw, hwc_tensor, in_context
from fastprep.transforms.sample import GEOMETRY, Item, Sample


class FusedGroup:
    """Steps that run as one op call: their draws, their fold into a Geometry, the op's sources."""

    def __init__(self, steps: list[nn.Module], fusion: Fusion, unfused: Any):
        self.steps, self.fusion = steps, fusion
        self.random = [s for s in steps if hasattr(s, "draw")]  # one seed each, in the steps' order
        self.roles = {s.fusion_role: s for s in steps}
        # The step that cuts the window (RandomCrop; RandomResizedCrop or Resize for a resizing
        # row): its layout reads the image, its errors name the transform.
        self.crop = next(s for s in steps if s.fusion_role in fusion.window)
        self.layout = self.crop.layout  # a flip in front reads the image as the crop does (FlipIntoCrop)
        # (fold, step, its column of seeds or None: not random) for the geometric steps, in order
        self.folds = [(FOLDS[s.fusion_role], s, _index(self.random, s)) for s in steps if s.fusion_role in FOLDS]
        self.seed_roles = [(s.fusion_role, k) for k, s in enumerate(self.random)]
        self.out_dtype = fusion.out_dtype(self)
        resize = self.roles.get("resized_crop") or self.roles.get("resize")
        self.reduced = getattr(resize, "decode", "exact") == "reduced"  # JPEG windows read at a reduced scale
        self.unfused = unfused  # the steps one by one: what a sample the op does not take runs
        # Every draw comes from the sample's stream (no step has a generator of its own): a chunk's
        # draws can be made for all its samples at once, and replayed.
        self.vectorised = all(s.generator is None for s in self.random)
        self._plain_kind: tuple | None = None  # the last chunk _plain_arrays took whole: its item types...

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
        run = FusedRun(0, layout, [item], [sample], [t], ([g.top], [g.left], [g.height], [g.width]),
                       ([g.hflip], [g.vflip]), ([g.resized_height], [g.resized_width], [g.out_top], [g.out_left]),
                       {role: [seeds[k]] for role, k in self.seed_roles}, (g.out_height, g.out_width),
                       self.reduced)
        out = torch.empty(1, 3, *run.out_size, dtype=self.out_dtype)
        self.fusion.run(self, run, out)
        return out

    def finish_on_device(self, windows: list[torch.Tensor], flips: tuple[list[bool], list[bool]],
                         place: tuple[list[int], list[int], list[int], list[int]], out_size: tuple[int, int],
                         extras: dict[str, torch.Tensor]) -> torch.Tensor:
        """The row's device half (``fusion.split``, the GPU decode split) on a batch's decoded
        windows: uint8 CHW tensors on the device, each the window a CPU run reads, with the runs'
        flips and placement and the threads' `extras` (moved to the device)."""
        n = len(windows)
        heights, widths = [int(w.shape[-2]) for w in windows], [int(w.shape[-1]) for w in windows]
        run = FusedRun(0, "CHW", [None] * n, [None] * n, list(windows), ([0] * n, [0] * n, heights, widths), flips,
                       place, {}, out_size)
        return self.fusion.split.finish(self, run, extras)

    def batch(self, raws: list[Any], draws: np.ndarray) -> list[FusedRun]:
        """The runs of consecutive items of a chunk the op takes, their parameters drawn at once:
        `draws` holds each item's seeds (seeded_draws of its item seed, one column per random
        step). Items it does not take (another structure, dtype or size, a crop that does not fit)
        are left out: run them one by one through the plan, under the same seeds. Array operations
        over the chunk, a Python step per run (the common chunk, numpy images alike: one run)."""
        found = self._plain_arrays(raws) or self._loader_images(raws)
        if found is None:
            return []
        index, images, sources, layouts, sizes = found
        n = len(sources)
        chosen = draws if index is None else draws[index]
        g = self.geometry([chosen[:, k].view(np.uint64) for k in range(chosen.shape[1])], sizes[:, 0], sizes[:, 1])
        keep = None if np.all(g.fits) else np.flatnonzero(np.broadcast_to(g.fits, n))
        if keep is not None and not len(keep):
            return []
        picked = np.arange(n) if index is None else index
        picked = picked if keep is None else picked[keep]
        m = len(picked)

        def column(v: Any) -> np.ndarray | None:
            """The kept samples' values of a Geometry field (None: one value for all)."""
            if type(v) is not np.ndarray or not v.ndim:
                return None
            return v if keep is None else v[keep]

        def values(v: Any) -> list:
            kept = column(v)
            return [np.asarray(v).item()] * m if kept is None else kept.tolist()

        ends = np.diff(picked) != 1  # cut where items stop being consecutive, change layout or output size
        for v in (g.out_height, g.out_width, None if type(layouts) is str else np.array(layouts)):
            kept = column(v)
            if kept is not None:
                ends |= kept[1:] != kept[:-1]
        cuts = [0, *(np.flatnonzero(ends) + 1).tolist(), m]
        tops, lefts, heights, widths, hflips, vflips, rh, rw, ot, ol, oh, ow = map(values, (
            g.top, g.left, g.height, g.width, g.hflip, g.vflip, g.resized_height, g.resized_width, g.out_top,
            g.out_left, g.out_height, g.out_width))
        by_role = [(role, (chosen[:, k] if keep is None else chosen[keep, k]).tolist()) for role, k in self.seed_roles]
        if keep is not None:
            images, sources = [images[i] for i in keep], [sources[i] for i in keep]
            layouts = layouts if type(layouts) is str else [layouts[i] for i in keep]
        starts = picked[cuts[:-1]].tolist()
        runs = []
        for a, b, start in zip(cuts, cuts[1:], starts):
            cut = slice(a, b)
            runs.append(FusedRun(start, layouts if type(layouts) is str else layouts[a], images[cut],
                                 raws[start:start + b - a], sources[cut], (tops[cut], lefts[cut], heights[cut],
                                                                           widths[cut]),
                                 (hflips[cut], vflips[cut]), (rh[cut], rw[cut], ot[cut], ol[cut]),
                                 {role: v[cut] for role, v in by_role}, (oh[a], ow[a]), self.reduced))
        return runs

    def _plain_arrays(self, raws: list[Any]) -> tuple | None:
        """The common chunk without looking at each item: numpy HWC images alone, or each first in
        a flat tuple or list of the same types as the first item's, of one dtype and channel count
        the op takes (what loader_image decides for the first decides for all). None: the item by
        item path (_loader_images) decides. (index: None, every item; images; sources; layout; sizes)."""
        first = raws[0] if raws else None
        if set(map(type, raws)) != {type(first)}:
            return None  # includes _SKIP, an item to leave alone
        if type(first) in (tuple, list) and first and type(first[0]) is np.ndarray:
            if set(map(len, raws)) != {len(first)}:
                return None
            fields = list(zip(*raws))
            if any(set(map(type, field)) != {type(first[k])} for k, field in enumerate(fields)):
                return None
            arrays, types = fields[0], (type(first), *map(type, first))
        elif type(first) is np.ndarray:
            arrays, types = raws, (np.ndarray,)
        else:
            return None
        dtype = arrays[0].dtype
        if set(map(_DTYPE, arrays)) != {dtype} or set(map(_NDIM, arrays)) != {3}:
            return None
        n = len(arrays)
        shapes = np.fromiter(chain.from_iterable(map(_SHAPE, arrays)), np.int64, 3 * n).reshape(n, 3)
        if (shapes[:, 2] != shapes[0, 2]).any():
            return None
        # The structure analysis and the op's check, once for the first item; once per Loader for
        # a dataset whose chunks are all alike (the answer is kept per types, dtype and channels).
        chunk_kind = (types, dtype, int(shapes[0, 2]))
        if chunk_kind != self._plain_kind:
            if self.loader_image(first, None)[0] is None:
                return None
            self._plain_kind = chunk_kind
        from_numpy = torch.from_numpy if all(map(_WRITEABLE, arrays)) else hwc_tensor
        return None, [None] * n, list(map(from_numpy, arrays)), "HWC", shapes[:, :2]

    def _loader_images(self, raws: list[Any]) -> tuple | None:
        """_plain_arrays' tuple for any chunk, item by item (loader_image); None: the op takes none."""
        found, index = [], []
        kind = None
        for j, raw in enumerate(raws):
            image, kind = self.loader_image(raw, kind)
            if image is not None:
                found.append(image)
                index.append(j)
        if not found:
            return None
        sizes = np.array([item.size() if t is None else hw(t, layout) for item, t, layout in found], dtype=np.int64)
        images, sources, layouts = (list(v) for v in zip(*found))
        return np.array(index), images, sources, layouts[0] if len(set(layouts)) == 1 else layouts, sizes

    def loader_image(self, raw: Any, kind: Any) -> tuple[tuple | None, Any]:
        """(item or None, pixels or None, layout) of a loaded item's image when the batch path takes
        it: the item itself, or the first element of a flat tuple or list whose other elements are
        not cut by the crop (labels, names...). A plain array or tensor gets no Item (nothing to
        wrap), a PIL image or WindowedImage no pixels (read by window later). `kind`: the previous
        item's types, which skip the structure analysis."""
        if not _loaded(raw):
            return None, kind
        flat = type(raw) in (tuple, list)
        key = (type(raw), len(raw), type(raw[0]), tuple(map(type, raw[1:]))) if flat and raw else (type(raw),)
        if key == kind:
            x = raw[0] if flat else raw
            found = plain_pixels(x, self.layout)
            if found is not None:
                return ((None, *found) if self.fusion.takes_pixels(self, *found) else None), kind
            item = Item(0, "image", x, "CHW" if isinstance(x, torch.Tensor) else "HWC")
        else:
            if type(raw) is dict or (flat and any(type(x) in (tuple, list, dict) for x in raw)):
                return None, None
            s = Sample(raw, self.layout, GEOMETRY)
            item = self.image(s)
            if item is None or len(s.items) != 1 or item.index != 0:
                return None, None
            kind = key
        if item.windowed:
            return ((item, None, "HWC") if self.fusion.takes_windowed(self, item) else None), kind
        t = item.tensor()
        plain = type(item.value) in (np.ndarray, torch.Tensor)
        return ((None if plain else item, t, item.layout) if self.fusion.takes_pixels(self, t, item.layout)
                else None), kind


def plain_pixels(x: Any, layout: str) -> tuple[torch.Tensor, str] | None:
    """(pixels, layout) of a numpy array or plain tensor image (read in `layout`): what a Sample
    makes of a sample that is that image alone, without the analysis."""
    if type(x) is np.ndarray:
        return (hwc_tensor(x), "HWC") if x.ndim == 3 and x.dtype.kind in "biuf" else None
    return (x, layout) if type(x) is torch.Tensor and x.dim() == 3 else None


def _index(steps: list, step: Any) -> int | None:
    """The step's position among the random steps (its seed's), None for a deterministic one."""
    return next((k for k, s in enumerate(steps) if s is step), None)


def _loaded(raw: Any) -> bool:
    """An item the batch path may look at (a sentinel object marks items to leave alone)."""
    return type(raw) is not object


_DTYPE, _NDIM, _SHAPE, _WRITEABLE = (attrgetter(a) for a in ("dtype", "ndim", "shape", "flags.writeable"))
