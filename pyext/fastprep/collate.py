"""Compact collate: batches in the dtypes that are cheap to ship, written straight into place.

Replaces `default_collate` in a DataLoader. For each field of the samples (tuples, lists, dicts,
namedtuples): uint8 images are stacked as uint8; bool masks are packed into bits along the last
dim; integer labels take the smallest integer dtype holding them (or the one you give); float
tensors are kept, or narrowed to `float_dtype`; anything else goes to `default_collate`. In a
worker process the batch is allocated in shared memory, as default_collate does, so it crosses
to the main process without another copy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from torch.utils.data import default_collate, get_worker_info

from fastprep._tree import is_namedtuple
from fastprep.batch import CompactBatch, Leaf
from fastprep.shared_slots import SharedSlots

LABEL_DTYPES = (torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64)


def check_label_dtype(owner: str, label_dtype: torch.dtype | None) -> None:
    if label_dtype is not None and label_dtype not in LABEL_DTYPES:
        raise ValueError(f"{owner}: expected label_dtype to be one of "
                         f"{[str(d) for d in LABEL_DTYPES]} or None, got {label_dtype}")


def smallest_int_dtype(lo: int, hi: int) -> torch.dtype:
    """The smallest integer dtype holding every value in [lo, hi] (uint8 preferred)."""
    for dtype in LABEL_DTYPES:
        info = torch.iinfo(dtype)
        if info.min <= lo and hi <= info.max:
            return dtype
    raise ValueError(f"labels in [{lo}, {hi}] do not fit in int64")


class BufferPool:
    """Batch buffers handed back by consumers (CompactBatch.release), reused by the next collate:
    a fresh 50 MB buffer costs more in page faults than the copy into it."""

    def __init__(self) -> None:
        self._free: dict[tuple, list[torch.Tensor]] = {}

    def take(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        free = self._free.get((tuple(shape), dtype))
        return free.pop() if free else torch.empty(shape, dtype=dtype)

    def give(self, t: torch.Tensor) -> None:
        self._free.setdefault((tuple(t.shape), t.dtype), []).append(t)


def _alloc(shape: Sequence[int], dtype: torch.dtype, pool: Any = None) -> torch.Tensor:
    """A batch buffer: from `pool` (a BufferPool in-process, a worker's SlotBuffers), else fresh."""
    if pool is not None:
        return pool.take(shape, dtype)
    if get_worker_info() is None:
        return torch.empty(shape, dtype=dtype)
    # As default_collate: shared memory, so the batch is not copied again to cross processes.
    proto = torch.empty(0, dtype=dtype)
    storage = proto._typed_storage()._new_shared(math.prod(shape), device=proto.device)
    return proto.new(storage).resize_(*shape)


def _as_tensor(x: Any) -> Any:
    return torch.from_numpy(x) if isinstance(x, np.ndarray) else x


def _is_int_label(x: Any) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, (int, np.integer)):
        return True
    return isinstance(x, torch.Tensor) and x.dim() == 0 and not x.dtype.is_floating_point \
        and x.dtype != torch.bool and not x.dtype.is_complex


class CompactCollate:
    """`collate_fn` for a DataLoader that returns :class:`CompactBatch` es.

    Args:
        label_dtype: integer dtype for labels; None picks the smallest that holds the batch's
            labels (a value outside the given dtype's range is an error naming it).
        float_dtype: narrow float tensors to this (torch.bfloat16 / torch.float16); None keeps.
        pack_masks: pack bool tensors into bits along the last dim (decode() unpacks them).
        reuse: collate into buffers used before instead of fresh ones. In-process
            (num_workers=0), buffers of released batches (CompactBatch.release(), or
            DevicePrefetcher(release=True)) are kept and refilled. In DataLoader workers, each
            worker keeps a few slots of shared memory and refills one once the training process
            is done with its batch: pinned by the DataLoader (pin_memory=True), released by
            DevicePrefetcher(release=True) or by hand; until then a worker falls back to fresh
            shared memory. Either way, do not keep a batch's tensors past its release.
    """

    def __init__(self, label_dtype: torch.dtype | None = None, float_dtype: torch.dtype | None = None,
                 pack_masks: bool = True, reuse: bool = False):
        check_label_dtype("CompactCollate", label_dtype)
        if float_dtype is not None and not float_dtype.is_floating_point:
            raise ValueError(f"CompactCollate: expected float_dtype to be a floating dtype or None, "
                             f"got {float_dtype}")
        self.label_dtype = label_dtype
        self.float_dtype = float_dtype
        self.pack_masks = pack_masks
        self.pool = BufferPool() if reuse else None
        self.shared = SharedSlots() if reuse else None
        self._batch_pool: Any = None  # where the batch being collated takes its buffers

    def __call__(self, samples: Sequence[Any]) -> CompactBatch:
        if len(samples) == 0:
            raise ValueError("CompactCollate: got an empty list of samples")
        worker = get_worker_info()
        if worker is None:
            self._batch_pool = self.pool
        else:
            self._batch_pool = self.shared.claim(worker.id) if self.shared is not None else None
        try:
            data, layout = self._collate(list(samples), "sample")
        except BaseException:
            if worker is not None and self._batch_pool is not None:
                self._batch_pool.give(None)  # the slot was never handed out
            raise
        return CompactBatch(data, layout, pool=self._batch_pool)

    def _collate(self, items: list[Any], where: str) -> tuple[Any, Any]:
        first = items[0]
        if isinstance(first, (Mapping, tuple, list)) and not isinstance(first, str):
            kind = Mapping if isinstance(first, Mapping) else (tuple, list)
            for i, s in enumerate(items):
                if not isinstance(s, kind):
                    raise ValueError(f"CompactCollate: {where} of sample {i} is "
                                     f"{type(s).__name__}, sample 0's is {type(first).__name__}")
        if isinstance(first, Mapping):
            pairs = {k: self._collate([s[k] for s in items], f"{where}[{k!r}]") for k in first}
            return ({k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()})
        if isinstance(first, (tuple, list)) and not isinstance(first, str):
            for i, s in enumerate(items):
                if len(s) != len(first):
                    raise ValueError(f"CompactCollate: {where} of sample {i} has {len(s)} fields, "
                                     f"sample 0's has {len(first)}")
            pairs = [self._collate([s[j] for s in items], f"{where}[{j}]") for j in range(len(first))]
            data, layout = [p[0] for p in pairs], [p[1] for p in pairs]
            if is_namedtuple(first):
                return type(first)(*data), type(first)(*layout)
            return (tuple(data), tuple(layout)) if isinstance(first, tuple) else (data, layout)
        return self._collate_leaf(items, where)

    def _collate_leaf(self, items: list[Any], where: str) -> tuple[Any, Leaf]:
        if all(_is_int_label(x) for x in items):
            return self._labels(items, where), Leaf("label")
        first = _as_tensor(items[0])
        if isinstance(first, torch.Tensor) and first.dim() > 0:
            tensors = [_as_tensor(x) for x in items]
            for i, t in enumerate(tensors):
                if not isinstance(t, torch.Tensor) or t.shape != first.shape or t.dtype != first.dtype:
                    got = (tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else type(t).__name__
                    raise ValueError(f"CompactCollate: {where} of sample {i} is {got}, sample 0's is "
                                     f"{(tuple(first.shape), first.dtype)}; batch equal shapes")
                if t.device.type != "cpu":
                    raise ValueError(f"CompactCollate: {where} of sample {i} is on {t.device}; "
                                     f"collate CPU samples and move the batch (DevicePrefetcher)")
            if first.dtype == torch.uint8:
                return self._stack(tensors, torch.uint8), Leaf("image")
            if first.dtype == torch.bool and self.pack_masks:
                return self._pack(tensors), Leaf("mask", width=first.shape[-1])
            if first.dtype.is_floating_point:
                dtype = self.float_dtype or first.dtype
                return self._stack(tensors, dtype), Leaf("float", dtype=first.dtype)
        try:
            return default_collate(items), Leaf("other")
        except (TypeError, RuntimeError) as exc:
            kinds = sorted({type(x).__name__ for x in items})
            raise TypeError(f"CompactCollate: {where} holds {', '.join(kinds)} across the batch "
                            f"and default_collate could not batch it: {exc}") from exc

    def _labels(self, items: list[Any], where: str) -> torch.Tensor:
        values = [int(x) for x in items]
        lo, hi = min(values), max(values)
        dtype = self.label_dtype or smallest_int_dtype(lo, hi)
        info = torch.iinfo(dtype)
        for i, v in enumerate(values):
            if not info.min <= v <= info.max:
                raise ValueError(f"CompactCollate: label {v} ({where} of sample {i}) does not fit "
                                 f"label_dtype={dtype} [{info.min}, {info.max}]")
        out = _alloc([len(values)], dtype, self._batch_pool)
        out.copy_(torch.tensor(values, dtype=torch.int64))
        return out

    def _stack(self, tensors: list[torch.Tensor], dtype: torch.dtype) -> torch.Tensor:
        out = _alloc([len(tensors), *tensors[0].shape], dtype, self._batch_pool)
        if tensors[0].dtype == dtype:
            torch.stack(tensors, out=out)  # one call writes every sample into its slot
        else:
            for i, t in enumerate(tensors):  # straight into the slot, casting on the way
                out[i].copy_(t)
        return out

    def _pack(self, masks: list[torch.Tensor]) -> torch.Tensor:
        packed_shape = [*masks[0].shape[:-1], (masks[0].shape[-1] + 7) // 8]
        out = _alloc([len(masks), *packed_shape], torch.uint8, self._batch_pool)
        for i, m in enumerate(masks):
            out[i].copy_(torch.ops.fastprep.pack_bits(m, -1, "little"))
        return out


compact_collate = CompactCollate()
"""A ready CompactCollate with the defaults, to pass as `collate_fn=fastprep.compact_collate`."""
