"""Preprocessing on a Ray Data cluster, streamed into the training loop as CompactBatches.

When one host's cores can't feed its GPUs, Ray Data runs the transforms on other machines' CPUs
("data servers") and streams the results to the trainer. fastprep plugs in at both ends::

    ds = ds.map_batches(fastprep.ray.CompactMap(transform, seed=0), batch_format="numpy")
    for batch in fastprep.ray.iter_compact_batches(ds, batch_size=256):       # CompactBatch
        ...                                   # or DevicePrefetcher(..., decode=True) as usual

Row r's randomness comes from `item_seed(seed, r[key_column], epoch)`, the seed SeedByIndex gives
item r in a DataLoader, so a sample is the same however Ray splits blocks, and the same as the
in-process pipeline's. Needs `pip install 'fastprep[ray]'`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

try:
    import ray.data
    from ray.data.collate_fn import NumpyBatchCollateFn
except ImportError as exc:  # pragma: no cover (the extra is installed in CI)
    raise ImportError(f"fastprep.ray needs Ray Data ({exc}); install it with "
                      f"pip install 'fastprep[ray]'") from exc

from fastprep.batch import CompactBatch, Leaf
from fastprep.collate import check_label_dtype, smallest_int_dtype
from fastprep.rng import draw_seed, item_seed, seeded

WIDTH_SUFFIX = "_width"
"""A packed mask column `m` travels with `m_width`, its unpacked last-dim size per row."""


class CompactMap:
    """A batch function for ``Dataset.map_batches(..., batch_format="numpy")``.

    Runs `transform` on each row's `image_column` (an HWC array, as Ray's image readers give)
    under torch's generator seeded with ``item_seed(seed, row[key_column], epoch)``, so fastprep
    transforms (and anything else drawing from torch's generator) are reproducible per row.
    The transform returns a tensor (written to `image_column`) or a dict of named tensors. uint8
    outputs stay uint8, bool outputs are packed into bits along the last dim (with a
    ``<name>_width`` column), floats are kept. Labels are narrowed to `label_dtype`, or to the
    smallest integer dtype holding ``[0, num_classes)``; a label outside it is an error naming
    the row. Every other column passes through. `load`, when given, turns the column's value
    into the image first (decode bytes, read a path), inside the same Ray task.
    """

    def __init__(self, transform: Callable[[Any], Any], seed: int | None = None, *,
                 image_column: str = "image", key_column: str = "id", label_column: str = "label",
                 num_classes: int | None = None, label_dtype: torch.dtype | None = None,
                 epoch: int = 0, load: Callable[[Any], Any] | None = None):
        if not callable(transform):
            raise TypeError(f"CompactMap: expected transform to be callable, got {transform!r}")
        if load is not None and not callable(load):
            raise TypeError(f"CompactMap: expected load to be callable or None, got {load!r}")
        check_label_dtype("CompactMap", label_dtype)
        if num_classes is not None and (isinstance(num_classes, bool) or not isinstance(num_classes, int)
                                        or num_classes < 1):
            raise ValueError(f"CompactMap: expected num_classes to be an int >= 1, got {num_classes!r}")
        self.transform = transform
        self.seed = draw_seed() if seed is None else seed  # drawn on the driver, like SeedByIndex
        self.image_column, self.key_column, self.label_column = image_column, key_column, label_column
        self.label_dtype = label_dtype or (smallest_int_dtype(0, num_classes - 1) if num_classes else None)
        self.epoch, self.load = epoch, load

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for column in (self.image_column, self.key_column):
            if column not in batch:
                raise ValueError(f"CompactMap: the batch has no column {column!r} (columns: "
                                 f"{sorted(batch)}); set image_column / key_column")
        keys, images = batch[self.key_column], batch[self.image_column]
        rows = [self._one(images[i], keys[i]) for i in range(len(keys))]
        out = {k: v for k, v in batch.items() if k != self.image_column}
        for name in rows[0] if rows else ():
            out.update(_column(name, [r[name] for r in rows], keys))
        if self.label_column in out and self.label_dtype is not None:
            out[self.label_column] = self._labels(out[self.label_column], keys)
        return out

    def _one(self, image: Any, key: Any) -> dict[str, torch.Tensor]:
        with seeded(item_seed(self.seed, _py(key), self.epoch)):
            result = self.transform(self.load(image) if self.load is not None else image)
        if isinstance(result, torch.Tensor):
            return {self.image_column: result}
        if isinstance(result, dict) and all(isinstance(v, torch.Tensor) for v in result.values()):
            return result
        raise TypeError(f"CompactMap: the transform must return a tensor or a dict of tensors, "
                        f"got {type(result).__name__} for row {_py(key)!r}")

    def _labels(self, labels: np.ndarray, keys: np.ndarray) -> np.ndarray:
        info = torch.iinfo(self.label_dtype)
        if not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"CompactMap: expected integer labels in {self.label_column!r}, got "
                             f"dtype {labels.dtype}")
        bad = np.flatnonzero((labels < info.min) | (labels > info.max))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"CompactMap: label {int(labels[i])} of row {_py(keys[i])!r} does not "
                             f"fit label_dtype={self.label_dtype} [{info.min}, {info.max}]")
        return labels.astype(_NUMPY[self.label_dtype])


_NUMPY = {torch.uint8: np.uint8, torch.int8: np.int8, torch.int16: np.int16,
          torch.int32: np.int32, torch.int64: np.int64}


def _py(key: Any) -> Any:
    return key.item() if isinstance(key, np.generic) else key


def _column(name: str, tensors: list[torch.Tensor], keys: np.ndarray) -> dict[str, np.ndarray]:
    first = tensors[0]
    for i, t in enumerate(tensors):
        if t.shape != first.shape or t.dtype != first.dtype:
            raise ValueError(f"CompactMap: output {name!r} of row {_py(keys[i])!r} is "
                             f"{(tuple(t.shape), t.dtype)}, the first row's is "
                             f"{(tuple(first.shape), first.dtype)}; a batch needs equal shapes")
    if first.dtype == torch.bool:
        packed = [torch.ops.fastprep.pack_bits(t, -1, "little") for t in tensors]
        width = np.full(len(tensors), first.shape[-1], dtype=np.int32)
        return {name: torch.stack(packed).numpy(), name + WIDTH_SUFFIX: width}
    return {name: torch.stack(tensors).numpy()}


def to_compact_batch(batch: dict[str, np.ndarray]) -> CompactBatch:
    """A CompactBatch (a dict of tensors, one per column) from a numpy batch of CompactMap's
    output: uint8 arrays are images, packed masks come back with their width, 1-D integer
    columns are labels, floats stay floats, anything else (strings) is passed as a list."""
    data: dict[str, Any] = {}
    layout: dict[str, Leaf] = {}
    for name, arr in batch.items():
        mask_of = name[:-len(WIDTH_SUFFIX)] if name.endswith(WIDTH_SUFFIX) else None
        if mask_of is not None and mask_of in batch:
            continue
        width = batch.get(name + WIDTH_SUFFIX)
        arr = np.asarray(arr)
        if width is not None and len(width):
            if np.any(width != width[0]):
                raise ValueError(f"to_compact_batch: mask {name!r} has rows of widths "
                                 f"{sorted(set(width.tolist()))}; a batch needs one")
            data[name], layout[name] = _tensor(arr), Leaf("mask", width=int(width[0]))
        elif arr.dtype == np.uint8 and arr.ndim >= 2:
            data[name], layout[name] = _tensor(arr), Leaf("image")
        elif arr.ndim == 1 and np.issubdtype(arr.dtype, np.integer):
            data[name], layout[name] = _tensor(arr), Leaf("label")
        elif np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer):
            tensor = _tensor(arr)
            data[name], layout[name] = tensor, Leaf("float", dtype=tensor.dtype)
        else:
            data[name], layout[name] = arr.tolist(), Leaf("other")
    return CompactBatch(data, layout)


def _tensor(arr: np.ndarray) -> torch.Tensor:
    # Ray may hand out read-only views of its object store: copy those, writing would fault.
    return torch.from_numpy(arr if arr.flags.writeable else arr.copy())


class CompactCollateFn(NumpyBatchCollateFn):
    """``collate_fn`` for ``Dataset.iter_torch_batches`` (needs Ray Train installed):
    ``ds.iter_torch_batches(batch_size=256, collate_fn=CompactCollateFn())``."""

    def __call__(self, batch: dict[str, np.ndarray]) -> CompactBatch:
        return to_compact_batch(batch)


def iter_compact_batches(ds: ray.data.Dataset, batch_size: int = 256, **iter_batches_kwargs: Any
                         ) -> Iterator[CompactBatch]:
    """CompactBatches out of `ds` (keyword arguments go to ``Dataset.iter_batches``: prefetch_batches,
    drop_last, local_shuffle_buffer_size, ...). Needs only Ray Data, not Ray Train."""
    for batch in ds.iter_batches(batch_size=batch_size, batch_format="numpy", **iter_batches_kwargs):
        yield to_compact_batch(batch)
