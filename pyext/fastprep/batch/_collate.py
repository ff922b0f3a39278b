"""Compact collate: batches in the dtypes that are cheap to ship, written straight into place.

Replaces `default_collate` in a DataLoader. Each field of the samples (tuples, lists, dicts,
namedtuples) gets a role (fastprep/core/_roles.py: image, mask, label, tensor, or a `fields=` spec):
uint8 images are stacked as uint8; bool masks are packed into bits along the last dim; integer
labels take the smallest integer dtype holding them (or the one you give); other tensors are
stacked as they are (floats optionally narrowed to `float_dtype`); anything else goes to
`default_collate`. In a worker process the batch is allocated in shared memory, as
default_collate does, so it crosses to the main process without another copy.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch.utils.data import default_collate, get_worker_info

from fastprep.batch._compact import BatchPool, CompactBatch, Leaf
from fastprep.batch._labels import check_label_dtype, narrow_labels, smallest_int_dtype
from fastprep.batch._shared_slots import SharedSlots
from fastprep.core._args import check_bool
from fastprep.core._roles import (
    RESTORED_TV,
    as_tensor,
    check_fields,
    check_fields_present,
    field_name,
    field_role,
    is_int_label,
    tv_name,
)
from fastprep.core._tree import is_namedtuple, structure_difference


class BufferPool(BatchPool):
    """Batch buffers handed back by consumers (CompactBatch.release), reused by the next collate:
    a fresh 50 MB buffer costs more in page faults than the copy into it. Bounded: it keeps at most
    twice the bytes of the largest of the last few batches released, dropping the buffers handed
    back longest ago first, so batches whose shapes vary (a last short batch, images of several
    sizes) never pile up buffers that no batch will take again."""

    release_after_copy = False

    RECENT = 4  # batches whose size sets the bound

    def __init__(self) -> None:
        self._free: dict[tuple, list[torch.Tensor]] = {}  # insertion order: oldest first
        self._bytes = 0
        self._recent: list[int] = []

    def take(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        free = self._free.get((tuple(shape), dtype))
        if not free:
            return torch.empty(shape, dtype=dtype)
        t = free.pop()
        self._bytes -= t.nbytes
        return t

    def give_batch(self, tensors: Sequence[torch.Tensor]) -> None:
        """Keep a released batch's tensors for the next collate (CompactBatch's release protocol)."""
        for t in tensors:
            key = (tuple(t.shape), t.dtype)
            self._free[key] = [*self._free.pop(key, []), t]  # now the most recently given
            self._bytes += t.nbytes
        self._recent = [*self._recent[-(self.RECENT - 1):], sum(t.nbytes for t in tensors)]
        limit = 2 * max(self._recent)
        while self._bytes > limit:
            key = next(iter(self._free))
            oldest = self._free[key]
            self._bytes -= oldest.pop(0).nbytes
            if not oldest:
                del self._free[key]

    @property
    def nbytes(self) -> int:
        """Bytes held for reuse."""
        return self._bytes


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


def grad_refusal(who: str, what: str) -> str:
    """The refusal of a sample tensor that requires grad: a batch is data in reusable memory, so
    no gradient could flow back to the sample (copying it silently would drop the graph)."""
    return (f"{who}: {what} requires grad; a batch is data (copied into reusable buffers, no gradient "
            f"flows back to the sample): detach() it in the dataset or transform")


def at(where: str, i: int) -> str:
    """'sample 3' for a whole sample, "sample['image'] of sample 3" for a field of it."""
    return f"sample {i}" if where == "sample" else f"{where} of sample {i}"


class CompactCollate:
    """`collate_fn` for a DataLoader that returns :class:`CompactBatch` es.

    Each field of the samples gets a role (see :mod:`fastprep.core._roles`), decided from sample 0 or
    given in `fields`, recorded in the batch, and stored by it: "image" (uint8 ``[C, H, W]`` with C
    in {1, 3, 4}, or a ``tv_tensors.Image``) stays uint8; "mask" (bool ``[H, W]`` / ``[1, H, W]``, or
    a ``tv_tensors.Mask``) is packed into bits; "label" (ints, 0-d integer tensors) takes the
    smallest integer dtype; "tensor" (any other tensor or array) is stacked as it is; anything
    else goes to default_collate. :meth:`CompactBatch.expand` restores each field by its role.

    Args:
        label_dtype: integer dtype for labels; None picks the smallest that holds the batch's
            labels (a value outside the given dtype's range is an error naming it).
        float_dtype: narrow floating "tensor" fields to this (torch.bfloat16 / torch.float16);
            None keeps them bit for bit.
        pack_masks: pack "mask" fields into bits along the last dim (expand() unpacks them).
        reuse: collate into buffers used before instead of fresh ones. In-process
            (num_workers=0), buffers of released batches (CompactBatch.release(), or
            DevicePrefetcher(release=True)) are kept and refilled. In DataLoader workers, each
            worker keeps a few slots of shared memory and refills one once the training process
            is done with its batch: pinned by the DataLoader (pin_memory=True), released by
            DevicePrefetcher(release=True) or by hand; until then a worker falls back to fresh
            shared memory. Either way, do not keep a batch's tensors past its release.
        fields: ``{name: role}`` for top-level fields (dict keys, namedtuple field names or tuple
            positions), role one of "image", "mask", "label", "tensor": overrides the rules, e.g.
            ``{"tokens": "tensor"}`` for a uint8 [3, H, W] that is not an image. A name the
            samples lack, an unknown role or a value that does not suit its role is an error.

    Example:
        >>> collate = CompactCollate(fields={"image": "image", "tokens": "tensor"})
        >>> batch = collate([{"image": img, "tokens": tok, "label": 3} for img, tok in pairs])
        >>> batch.roles
        {'image': 'image', 'tokens': 'tensor', 'label': 'label'}
    """

    def __init__(self, label_dtype: torch.dtype | None = None, float_dtype: torch.dtype | None = None,
                 pack_masks: bool = True, reuse: bool = False, fields: Mapping[Any, str] | None = None):
        check_label_dtype("CompactCollate", label_dtype)
        if float_dtype is not None and not (isinstance(float_dtype, torch.dtype) and float_dtype.is_floating_point):
            raise ValueError(f"CompactCollate: expected float_dtype to be a floating dtype or None, "
                             f"got {float_dtype}")
        self.label_dtype = label_dtype
        self.float_dtype = float_dtype
        self.pack_masks = check_bool("CompactCollate", "pack_masks", pack_masks)
        self.fields = check_fields("CompactCollate", fields)
        reuse = check_bool("CompactCollate", "reuse", reuse)
        self.pool = BufferPool() if reuse else None
        self.shared = SharedSlots() if reuse else None
        self._batch_pool: Any = None  # where the batch being collated takes its buffers

    def __call__(self, samples: Sequence[Any]) -> CompactBatch:
        if len(samples) == 0:
            raise ValueError("CompactCollate: got an empty list of samples")
        samples = list(samples)
        for i, s in enumerate(samples[1:], 1):
            found = structure_difference(samples[0], s, "sample 0")
            if found is not None:
                raise ValueError(f"CompactCollate: {at(found[0], i)} {found[1]}")
        check_fields_present("CompactCollate", self.fields, samples[0])
        worker = get_worker_info()
        if worker is None:
            self._batch_pool = self.pool
        else:
            self._batch_pool = self.shared.claim(worker.id) if self.shared is not None else None
        try:
            data, spec = self._collate(samples, "sample", top=True)
        except BaseException:
            if worker is not None and self._batch_pool is not None:
                self._batch_pool.give_batch([])  # the slot was never handed out
            raise
        if worker is not None and self._batch_pool is not None:
            self._batch_pool.keep_only_taken()  # the slot's buffers are this batch's, no more
        return CompactBatch(data, spec, pool=self._batch_pool)

    def _collate(self, items: list[Any], where: str, top: bool = False) -> tuple[Any, Any]:
        first = items[0]
        if isinstance(first, Mapping):
            pairs = {k: self._field(items, k, f"{where}[{k!r}]", top) for k in first}
            return ({k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()})
        if isinstance(first, (tuple, list)):
            pairs = [self._field(items, j, f"{where}[{j}]", top) for j in range(len(first))]
            data, spec = [p[0] for p in pairs], [p[1] for p in pairs]
            if is_namedtuple(first):
                return type(first)(*data), type(first)(*spec)
            return (tuple(data), tuple(spec)) if isinstance(first, tuple) else (data, spec)
        return self.collate_field(items, where)

    def _field(self, items: list[Any], key: Any, where: str, top: bool) -> tuple[Any, Any]:
        column = [s[key] for s in items]
        role = self.fields.get(field_name(items[0], key)) if top else None
        if role is None and top and is_namedtuple(items[0]):
            role = self.fields.get(key)  # a namedtuple field may be named by position too
        if role is not None and isinstance(column[0], (Mapping, tuple, list)):
            raise ValueError(f"CompactCollate: fields gives {where} the role {role!r}, but it is a "
                             f"{type(column[0]).__name__} of fields; give roles to tensors and ints")
        if isinstance(column[0], (Mapping, tuple, list)):
            return self._collate(column, where)
        return self.collate_field(column, where, role)

    def collate_field(self, items: list[Any], where: str, role: str | None = None) -> tuple[Any, Leaf]:
        """One field of every sample as a batch, and its Leaf: the role is `role` (checked against
        sample 0's value) or the rules' for sample 0's value; every sample must suit it. The Loader
        batches its per-batch columns through this too."""
        if role != "other":  # "other" (not a tensor) has nothing to check: default_collate batches it
            role = field_role("CompactCollate", items[0], role, at(where, 0))
        if role == "label":
            return self._labels(items, where), Leaf("label")
        if role == "boxes":
            return self._boxes(items, where), Leaf("boxes")
        if role == "other" or (role == "tensor" and not isinstance(as_tensor(items[0]), torch.Tensor)):
            return self._default(items, where, role)
        first = as_tensor(items[0])
        tensors = [as_tensor(x) for x in items]
        for i, t in enumerate(tensors):
            if not isinstance(t, torch.Tensor) or t.shape != first.shape or t.dtype != first.dtype:
                got = (tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"CompactCollate: {at(where, i)} is {got}, sample 0's is "
                                 f"{(tuple(first.shape), first.dtype)}; batch equal shapes")
            if t.device.type != "cpu":
                raise ValueError(f"CompactCollate: {at(where, i)} is on {t.device}; "
                                 f"collate CPU samples and move the batch (DevicePrefetcher)")
            if t.requires_grad:
                raise ValueError(grad_refusal("CompactCollate", at(where, i)))
        tv = tv_name(items[0]) if tv_name(items[0]) in RESTORED_TV else None
        if role == "image":
            return self._stack(tensors, torch.uint8), Leaf("image", tv=tv)
        if role == "mask":
            if self.pack_masks:
                return self._pack(tensors), Leaf("mask", width=first.shape[-1], packed=True, tv=tv)
            return self._stack(tensors, torch.bool), Leaf("mask", tv=tv)
        if first.dtype.is_floating_point and self.float_dtype not in (None, first.dtype):
            return self._stack(tensors, self.float_dtype), Leaf("tensor", dtype=first.dtype, tv=tv)
        return self._stack(tensors, first.dtype), Leaf("tensor", tv=tv)

    def _boxes(self, items: list[Any], where: str) -> list[Any]:
        """Boxes or points of every sample, as they are (their counts differ): a list."""
        for i, x in enumerate(items):
            if not isinstance(x, torch.Tensor):
                raise ValueError(f"CompactCollate: {at(where, i)} is {type(x).__name__}, but the field holds "
                                 f"boxes (sample 0's is {type(items[0]).__name__}); every sample needs a tensor")
        return list(items)

    def _default(self, items: list[Any], where: str, role: str) -> tuple[Any, Leaf]:
        try:
            out = default_collate(items)
        except (TypeError, RuntimeError) as exc:
            kinds = sorted({type(x).__name__ for x in items})
            raise TypeError(f"CompactCollate: {where} holds {', '.join(kinds)} across the batch "
                            f"and default_collate could not batch it: {exc}") from exc
        if role == "tensor" and not isinstance(out, torch.Tensor):
            raise ValueError(f"CompactCollate: fields gives {where} the role 'tensor', but its values "
                             f"batch into a {type(out).__name__}")
        return out, Leaf(role)

    def _labels(self, items: list[Any], where: str) -> torch.Tensor:
        values = items
        if set(map(type, items)) != {int}:  # Python ints (not bools) need no check one by one
            for i, x in enumerate(items):
                if not is_int_label(x):
                    raise ValueError(f"CompactCollate: {at(where, i)} is {type(x).__name__} {x!r:.60}, but the "
                                     f"field is a label (sample 0's is an int); labels must all be ints")
            values = [int(x) for x in items]
        lo, hi = min(values), max(values)
        try:
            dtype = self.label_dtype or smallest_int_dtype(lo, hi)
        except ValueError as exc:
            raise ValueError(f"CompactCollate: {where}: {exc}") from None
        narrowed = narrow_labels("CompactCollate", values, dtype, lambda i: f"({at(where, i)})")
        if self._batch_pool is None and get_worker_info() is None:
            # The new array's own memory, as _alloc's: one torch call that keeps the GIL, where
            # torch.empty + copy_ give it up twice (each a wait behind a Loader's busy threads).
            return torch.from_numpy(narrowed)
        out = _alloc([len(values)], dtype, self._batch_pool)
        out.copy_(torch.from_numpy(narrowed))
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
            out[i].copy_(torch.ops.fastprep.pack_bits.default(m, -1, "little"))
        return out


compact_collate = CompactCollate()
"""A ready CompactCollate with the defaults, to pass as `collate_fn=fastprep.compact_collate`."""
