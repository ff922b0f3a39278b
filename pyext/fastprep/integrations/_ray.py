"""Preprocessing on a Ray Data cluster, streamed into the training loop as CompactBatches.

When one host's cores can't feed its GPUs, Ray Data runs the transforms on other machines' CPUs
("data servers") and streams the results to the trainer. fastprep plugs in at both ends::

    ds = ds.map_batches(fastprep.ray.CompactMap(transform, seed=0), batch_format="numpy")
    for batch in fastprep.ray.iter_compact_batches(ds, batch_size=256):       # CompactBatch
        ...                                   # or DevicePrefetcher(..., expand=True) as usual

Row r's randomness comes from `item_seed(seed, r[key_column], epoch)`, the seed SeedByIndex gives
item r in a DataLoader, so a sample is the same however Ray splits blocks, and the same as the
in-process pipeline's. Needs `pip install 'fastprep[ray]'`.
"""

from __future__ import annotations

import json
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

from fastprep.batch._compact import CompactBatch, Leaf
from fastprep.batch._labels import check_label_dtype, narrow_labels, smallest_int_dtype
from fastprep.core._args import check_int
from fastprep.core._rng import check_epoch, draw_seed, item_seed, seed_argument, seeded
from fastprep.core._roles import ROLES, check_fields, field_role

ROLES_COLUMN = "__fastprep_roles__"
"""The column CompactMap writes: every row holds the same JSON {column: [role, width, packed]},
how each column was stored (a packed mask's unpacked width), read back by to_compact_batch. The
name is reserved: an input column or a transform output of that name is an error."""


class CompactMap:
    """A batch function for ``Dataset.map_batches(..., batch_format="numpy")``.

    Runs `transform` on each row's `image_column` (an HWC array, as Ray's image readers give)
    under torch's generator seeded with ``item_seed(seed, row[key_column], epoch)``, so fastprep
    transforms (and anything else drawing from torch's generator) are reproducible per row.
    The transform returns a tensor (written to `image_column`) or a dict of named tensors; every
    output and column gets a role by CompactCollate's rules (fastprep/core/_roles.py) or `fields`:
    images stay uint8, masks are packed into bits along the last dim, other tensors are kept as
    they are. The roles (and packed widths) travel in the reserved column ``__fastprep_roles__``,
    which to_compact_batch reads; no user column is read as metadata. Labels are narrowed to
    `label_dtype`, or to the smallest integer dtype holding ``[0, num_classes)``; a label outside
    ``[0, num_classes)`` or the dtype is an error naming it and the row. Every other column passes
    through (an output may replace only `image_column`). `load`, when given, turns the column's
    value into the image first (decode bytes, read a path), inside the same Ray task.
    """

    def __init__(self, transform: Callable[[Any], Any], seed: int | None = None, *,
                 image_column: str = "image", key_column: str = "id", label_column: str = "label",
                 num_classes: int | None = None, label_dtype: torch.dtype | None = None,
                 epoch: int = 0, load: Callable[[Any], Any] | None = None,
                 fields: dict[str, str] | None = None):
        if not callable(transform):
            raise TypeError(f"CompactMap: expected transform to be callable, got {transform!r}")
        if load is not None and not callable(load):
            raise TypeError(f"CompactMap: expected load to be callable or None, got {load!r}")
        check_label_dtype("CompactMap", label_dtype)
        self.num_classes = None if num_classes is None else check_int("CompactMap", "num_classes", num_classes, 1)
        for name, column in (("image_column", image_column), ("key_column", key_column),
                             ("label_column", label_column)):
            if not isinstance(column, str) or column == ROLES_COLUMN:
                raise ValueError(f"CompactMap: expected {name} to be a column name (str, not "
                                 f"{ROLES_COLUMN!r}), got {column!r}")
        self.transform = transform
        # drawn on the driver, like SeedByIndex
        self.seed = draw_seed() if seed is None else seed_argument("CompactMap", "seed", seed)
        self.image_column, self.key_column, self.label_column = image_column, key_column, label_column
        self.label_dtype = label_dtype or (smallest_int_dtype(0, self.num_classes - 1) if self.num_classes else None)
        self.epoch, self.load = check_epoch("CompactMap", epoch), load
        self.fields = check_fields("CompactMap", fields)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for column in (self.image_column, self.key_column):
            if column not in batch:
                raise ValueError(f"CompactMap: the batch has no column {column!r} (columns: "
                                 f"{sorted(batch)}); set image_column / key_column")
        if ROLES_COLUMN in batch:
            raise ValueError(f"CompactMap: the batch already has a column {ROLES_COLUMN!r}, which fastprep "
                             f"reserves for the roles it records (was it mapped twice? rename the column)")
        keys, images = batch[self.key_column], batch[self.image_column]
        rows = [self._one(images[i], keys[i]) for i in range(len(keys))]
        out = {k: v for k, v in batch.items() if k != self.image_column}
        names = list(rows[0]) if rows else []
        clash = [n for n in names if n == ROLES_COLUMN or (n in batch and n != self.image_column)]
        if clash:
            raise ValueError(f"CompactMap: the transform's output {clash[0]!r} would overwrite "
                             f"{'the reserved column' if clash[0] == ROLES_COLUMN else 'the input column'} "
                             f"{clash[0]!r}; name it otherwise")
        missing = [n for n in self.fields if n not in names and n not in out]
        if missing:
            raise ValueError(f"CompactMap: fields names {missing}, which neither the transform's outputs "
                             f"{names} nor the batch's columns {sorted(out)} hold")
        roles: dict[str, Leaf] = {}
        for name in names:
            out[name], roles[name] = self._output(name, [r[name] for r in rows], keys)
        if self.label_column in out and self.label_dtype is not None:
            out[self.label_column] = self._labels(out[self.label_column], keys)
        for name, column in out.items():
            if name not in roles and len(keys):
                roles[name] = self._column_role(name, np.asarray(column))
        encoded = json.dumps({n: [leaf.role, leaf.width, leaf.packed] for n, leaf in roles.items()},
                             separators=(",", ":"))
        out[ROLES_COLUMN] = np.full(len(keys), encoded)
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

    def _output(self, name: str, tensors: list[torch.Tensor], keys: np.ndarray) -> tuple[np.ndarray, Leaf]:
        first = tensors[0]
        for i, t in enumerate(tensors):
            if t.shape != first.shape or t.dtype != first.dtype:
                raise ValueError(f"CompactMap: output {name!r} of row {_py(keys[i])!r} is "
                                 f"{(tuple(t.shape), t.dtype)}, the first row's is "
                                 f"{(tuple(first.shape), first.dtype)}; a batch needs equal shapes")
        role = field_role("CompactMap", first, self.fields.get(name), f"output {name!r} of row {_py(keys[0])!r}")
        if role == "mask":
            packed = [torch.ops.fastprep.pack_bits.default(t, -1, "little") for t in tensors]
            return torch.stack(packed).numpy(), Leaf("mask", width=first.shape[-1], packed=True)
        return torch.stack([t.cpu() for t in tensors]).numpy(), Leaf(role)

    def _column_role(self, name: str, column: np.ndarray) -> Leaf:
        if name == self.label_column and self.label_dtype is not None:
            return Leaf("label")
        role = column_role("CompactMap", name, column, self.fields.get(name))
        return Leaf(role)

    def _labels(self, labels: np.ndarray, keys: np.ndarray) -> np.ndarray:
        if not np.issubdtype(labels.dtype, np.integer):
            raise ValueError(f"CompactMap: expected integer labels in {self.label_column!r}, got "
                             f"dtype {labels.dtype}")
        if self.num_classes is not None:
            bad = np.flatnonzero((labels < 0) | (labels >= self.num_classes))
            if bad.size:
                i = int(bad[0])
                raise ValueError(f"CompactMap: label {int(labels[i])} of row {_py(keys[i])!r} is not a class "
                                 f"index for num_classes={self.num_classes} (expected 0 <= label < "
                                 f"{self.num_classes})")
        return narrow_labels("CompactMap", labels, self.label_dtype, lambda i: f"of row {_py(keys[i])!r}")


def _py(key: Any) -> Any:
    return key.item() if isinstance(key, np.generic) else key


def column_role(owner: str, name: str, column: np.ndarray, role: str | None) -> str:
    """The role of a numpy column, one row per sample: CompactCollate's rules on its first row
    (an int per row is a label, a uint8 [C, H, W] with C in {1, 3, 4} an image, ...), or `role`.
    A column that is not numbers (strings, objects) is "other", a list."""
    if column.dtype.kind not in "biufc":
        if role is not None:
            raise ValueError(f"{owner}: fields gives column {name!r} the role {role!r}, but it holds "
                             f"{column.dtype} values, not numbers")
        return "other"
    if len(column) == 0:
        return role or "tensor"
    return field_role(owner, np.asarray(column[0]), role, f"column {name!r}")


def _recorded_roles(batch: dict[str, np.ndarray]) -> dict[str, Leaf]:
    if ROLES_COLUMN not in batch:
        return {}
    values = set(np.asarray(batch[ROLES_COLUMN]).tolist())
    if len(values) > 1:
        raise ValueError(f"to_compact_batch: the rows of this batch record different roles in "
                         f"{ROLES_COLUMN!r} ({sorted(values)}): they come from differently mapped data "
                         f"(masks of different widths?); a batch needs one layout")
    if not values:
        return {}
    try:
        recorded = json.loads(values.pop())
        leaves = {name: Leaf(role, width=int(width), packed=bool(packed))
                  for name, (role, width, packed) in recorded.items()}
    except (ValueError, TypeError, AttributeError) as exc:
        raise ValueError(f"to_compact_batch: column {ROLES_COLUMN!r} is reserved for the roles CompactMap "
                         f"records, and this one does not read as them ({exc}); rename the column") from None
    for name, leaf in leaves.items():
        if leaf.role not in (*ROLES, "other"):
            raise ValueError(f"to_compact_batch: {ROLES_COLUMN!r} records {name!r} as {leaf.role!r}, "
                             f"which is not a role; the column is reserved for CompactMap's records")
    return leaves


def to_compact_batch(batch: dict[str, np.ndarray], fields: dict[str, str] | None = None) -> CompactBatch:
    """A CompactBatch (a dict of tensors, one per column) from a numpy batch of CompactMap's output.

    Roles come from what CompactMap recorded in ``__fastprep_roles__`` (packed masks with their
    width); columns it did not record (a dataset not mapped by CompactMap) get CompactCollate's
    rules on their first row, or the role `fields` gives them. No other column is read as metadata:
    a column named ``image_width`` is just a column. Columns of strings come back as lists.
    """
    fields = check_fields("to_compact_batch", fields)
    recorded = _recorded_roles(batch)
    missing = [n for n in fields if n not in batch or n == ROLES_COLUMN]
    if missing:
        raise ValueError(f"to_compact_batch: fields names {missing}, which the batch does not have "
                         f"(columns: {sorted(n for n in batch if n != ROLES_COLUMN)})")
    data: dict[str, Any] = {}
    spec: dict[str, Leaf] = {}
    for name, arr in batch.items():
        if name == ROLES_COLUMN:
            continue
        arr = np.asarray(arr)
        leaf = recorded.get(name)
        if leaf is not None and name in fields and fields[name] != leaf.role:
            raise ValueError(f"to_compact_batch: fields gives {name!r} the role {fields[name]!r}, but "
                             f"CompactMap stored it as {leaf.role!r}")
        if leaf is None:
            leaf = Leaf(column_role("to_compact_batch", name, arr, fields.get(name)))
        if leaf.role == "other" or arr.dtype.kind not in "biufc":
            data[name], spec[name] = arr.tolist(), Leaf("other")
        else:
            data[name], spec[name] = _tensor(arr), leaf
    return CompactBatch(data, spec)


def _tensor(arr: np.ndarray) -> torch.Tensor:
    # Ray may hand out read-only views of its object store: copy those, writing would fault.
    return torch.from_numpy(arr if arr.flags.writeable else arr.copy())


class CompactCollateFn(NumpyBatchCollateFn):
    """``collate_fn`` for ``Dataset.iter_torch_batches`` (needs Ray Train installed):
    ``ds.iter_torch_batches(batch_size=256, collate_fn=CompactCollateFn())``; `fields` as in
    :func:`to_compact_batch`."""

    def __init__(self, fields: dict[str, str] | None = None):
        super().__init__()
        self.fields = check_fields("CompactCollateFn", fields)

    def __call__(self, batch: dict[str, np.ndarray]) -> CompactBatch:
        return to_compact_batch(batch, self.fields)


def iter_compact_batches(ds: ray.data.Dataset, batch_size: int = 256, fields: dict[str, str] | None = None,
                         **iter_batches_kwargs: Any) -> Iterator[CompactBatch]:
    """CompactBatches out of `ds` (`fields` as in :func:`to_compact_batch`; other keyword arguments
    go to ``Dataset.iter_batches``: prefetch_batches, drop_last, local_shuffle_buffer_size, ...).
    Needs only Ray Data, not Ray Train."""
    fields = check_fields("iter_compact_batches", fields)
    for batch in ds.iter_batches(batch_size=batch_size, batch_format="numpy", **iter_batches_kwargs):
        yield to_compact_batch(batch, fields)


from fastprep.integrations._ray_sources import PackedImages, read_packed  # noqa: E402 (packed shards as a Ray source)

__all__ = ["CompactCollateFn", "CompactMap", "PackedImages", "iter_compact_batches", "read_packed", "to_compact_batch"]
