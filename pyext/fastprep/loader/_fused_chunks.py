"""The Loader's fused batch path for a chunk: which loaded items the plan's fused group takes, and
their op calls' runs (transforms' FusedRun), every sample's read drawn at once.

What a row takes and how its steps fold into a read is the group's (transforms/_group.py: `takes`,
`lone_image`, `geometry`, `new_run`); what a chunk of loaded items is, is the Loader's: items
left alone (:data:`SKIP`), the common chunk of numpy images taken without looking at each item,
runs cut where items stop being consecutive or change layout or output size."""

from __future__ import annotations

from itertools import chain
from operator import attrgetter
from typing import Any

import numpy as np
import torch

SKIP = object()
"""An item of a chunk the fused batch path leaves alone (its loading drew seeds, or failed)."""


class ChunkRuns:
    """The fused batch path of `group` (a FusionPlan's fused group) on a Loader's chunks."""

    def __init__(self, group: Any):
        self.group = group
        self._plain_kind: tuple | None = None  # the last chunk _plain_arrays took whole: its item types...

    def __call__(self, raws: list[Any], draws: np.ndarray) -> list[Any]:
        """The runs of consecutive items of a chunk the op takes, their parameters drawn at once:
        `draws` holds each item's seeds (seeded_draws of its item seed, one column per random
        step). Items it does not take (another structure, dtype or size, a crop that does not fit)
        are left out: run them one by one through the plan, under the same seeds. Array operations
        over the chunk, a Python step per run (the common chunk, numpy images alike: one run)."""
        group = self.group
        found = self._plain_arrays(raws) or self._loader_images(raws)
        if found is None:
            return []
        index, images, inputs, layouts, sizes = found
        n = len(inputs)
        chosen = draws if index is None else draws[index]
        g = group.geometry([chosen[:, k].view(np.uint64) for k in range(chosen.shape[1])], sizes[:, 0], sizes[:, 1])
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

        ends = np.diff(picked) != 1  # cut where items stop being consecutive, change layout or output size
        for v in (g.out_height, g.out_width, None if type(layouts) is str else np.array(layouts)):
            kept = column(v)
            if kept is not None:
                ends |= kept[1:] != kept[:-1]
        cuts = [0, *(np.flatnonzero(ends) + 1).tolist(), m]
        # The op's geometry, a row per sample (its columns are the group's), and each sample's output size.
        table, oh, ow = g.to_table(n), np.broadcast_to(g.out_height, n), np.broadcast_to(g.out_width, n)
        by_role = [(role, (chosen[:, k] if keep is None else chosen[keep, k]).tolist())
                   for role, k in group.seed_fusion_roles]
        if keep is not None:
            table, oh, ow = table[keep], oh[keep], ow[keep]
            images, inputs = [images[i] for i in keep], [inputs[i] for i in keep]
            layouts = layouts if type(layouts) is str else [layouts[i] for i in keep]
        starts = picked[cuts[:-1]].tolist()
        runs = []
        for a, b, start in zip(cuts, cuts[1:], starts):
            cut = slice(a, b)
            runs.append(group.new_run(start, layouts if type(layouts) is str else layouts[a], images[cut],
                                      raws[start:start + b - a], inputs[cut], table[cut],
                                      {role: v[cut] for role, v in by_role}, (int(oh[a]), int(ow[a]))))
        return runs

    def _plain_arrays(self, raws: list[Any]) -> tuple | None:
        """The common chunk without looking at each item: numpy HWC images alone, or each first in
        a flat tuple or list of the same types as the first item's, of one dtype and channel count
        the op takes (what item_image decides for the first decides for all). None: the item by
        item path (_loader_images) decides. (index: None, every item; images; inputs; layout; sizes)."""
        first = raws[0] if raws else None
        if set(map(type, raws)) != {type(first)}:
            return None  # includes SKIP, an item to leave alone
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
        # The structure analysis and the op's check, once for the first item; once per runner for
        # a dataset whose chunks are all alike (the answer is kept per types, dtype and channels).
        chunk_kind = (types, dtype, int(shapes[0, 2]))
        if chunk_kind != self._plain_kind:
            if self.item_image(first, None)[0] is None:
                return None
            self._plain_kind = chunk_kind
        if all(map(_WRITEABLE, arrays)):
            inputs = list(map(torch.from_numpy, arrays))
        else:  # read-only arrays (PIL's): wrapped as the group's plain images are, without torch's warning
            inputs = [self.group.plain_image(a)[0] for a in arrays]
        return None, [None] * n, inputs, "HWC", shapes[:, :2]

    def _loader_images(self, raws: list[Any]) -> tuple | None:
        """_plain_arrays' tuple for any chunk, item by item (item_image); None: the op takes none."""
        found, index = [], []
        kind = None
        for j, raw in enumerate(raws):
            image, kind = self.item_image(raw, kind)
            if image is not None:
                found.append(image)
                index.append(j)
        if not found:
            return None
        sizes = np.array([self.group.image_size(*image) for image in found], dtype=np.int64)
        images, inputs, layouts = (list(v) for v in zip(*found))
        return np.array(index), images, inputs, layouts[0] if len(set(layouts)) == 1 else layouts, sizes

    def item_image(self, raw: Any, kind: Any) -> tuple[tuple | None, Any]:
        """(item or None, pixels or None, layout) of a loaded item's image when the batch path takes
        it: the item itself, or the first element of a flat tuple or list whose other elements are
        not cut by the crop (labels, names...). A plain array or tensor gets no Item (nothing to
        wrap), a PIL image or WindowedImage no pixels (read by window later). `kind`: the previous
        item's types, which skip the structure analysis."""
        if raw is SKIP:
            return None, kind
        group = self.group
        flat = type(raw) in (tuple, list)
        x = raw[0] if flat and raw else raw
        if group.refuses(x):  # a PIL mode the op refuses: the per-sample path runs the steps one by one
            return None, None
        key = (type(raw), len(raw), type(raw[0]), tuple(map(type, raw[1:]))) if flat and raw else (type(raw),)
        if key == kind:
            found = group.plain_image(x)
            if found is not None:
                return ((None, *found) if group.fusion.takes_pixels(group, *found) else None), kind
            item = group.image_item(x)
        else:
            if type(raw) is dict or (flat and any(type(v) in (tuple, list, dict) for v in raw)):
                return None, None
            item = group.lone_image(raw)
            if item is None:
                return None, None
            kind = key
        if item.windowed:
            return ((item, None, "HWC") if group.fusion.takes_windowed(group, item) else None), kind
        t = item.tensor()
        plain = type(item.value) in (np.ndarray, torch.Tensor)
        return ((None if plain else item, t, item.layout) if group.fusion.takes_pixels(group, t, item.layout)
                else None), kind


_DTYPE, _NDIM, _SHAPE, _WRITEABLE = (attrgetter(a) for a in ("dtype", "ndim", "shape", "flags.writeable"))
