"""The batches under fastprep.Loader: a ring of reused batch slots, and batch jobs that the Loader's
threads fill (loader/_pool.py runs them, loader/_apply.py fills them)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import torch

from fastprep.batch._collate import CompactCollate, grad_refusal
from fastprep.batch._compact import BatchPool, CompactBatch, Leaf
from fastprep.core._bad_samples import reraise
from fastprep.core._roles import as_tensor, is_int_label
from fastprep.core._tree import is_leaf, leaves, leaves_like, structure_difference, tree_map

_POLL_S = 0.1  # how often a waiting consumer looks for failures (and lets KeyboardInterrupt in)


class _Field:
    """One leaf of the sample structure: how it is stored in a slot (tensors with a role that
    stacks them: image, mask, tensor) or gathered per batch (labels, other values)."""

    def __init__(self, leaf: Leaf, value: Any):
        self.leaf = leaf
        t = as_tensor(value)
        self.shape = tuple(t.shape) if isinstance(t, torch.Tensor) and leaf.role in ("image", "mask", "tensor") \
            else None
        self.dtype = t.dtype if self.shape is not None else None

    def kind(self) -> tuple:
        """What the field's storage is: slots of equal kinds can hold either's batches."""
        return self.shape, self.dtype, self.leaf.packed

    def storage(self, batch_size: int, pin: bool) -> torch.Tensor | None:
        if self.shape is None:
            return None  # labels and other fields are gathered per batch
        shape = [batch_size, *self.shape]
        dtype = self.dtype
        if self.leaf.packed:
            shape[-1], dtype = (self.shape[-1] + 7) // 8, torch.uint8
        return torch.empty(shape, dtype=dtype, pin_memory=pin)


def ring_slots(depth: int, stage: int | None = None) -> int:
    """How many slots a Loader's ring holds (the one rule, for every path): `depth` batches made
    ahead of the consumer plus the one it holds; with a device stage (`stage`: the threads it runs,
    CUDA streams or the decode split's; 1 for the consumer's own thread), also the host batches
    that stage holds while it copies and decodes up to max(depth, stage) at once, plus the one it
    hands over."""
    return depth + 1 if stage is None else 2 * max(depth, stage) + 2


class SlotRing:
    """`count` batch slots, laid out from the first sample written and reused in turn. The spec
    (every field's role) comes from CompactCollate's rules and `fields`, so a Loader batch is the
    batch compact_collate makes of the same samples. `image`: (shape, dtype) of every sample's
    image as the plan declares it (FusedGroup.makes: a fused op's output), whose storage is
    allocated up front and taken by a first field of that kind (another is laid out as it comes).

    A Loader keeps its ring from one pass to the next (:meth:`reset`): fresh slots would cost the
    first write of every epoch a page fault per 4 KiB (a 256 x 3 x 256^2 slot: 12,288 of them).
    Each take of a slot is a lease: a batch of an earlier lease handing its slot back is ignored."""

    def __init__(self, count: int, batch_size: int, pin: bool, fields: dict[Any, str] | None = None,
                 image: tuple[tuple[int, ...], torch.dtype] | None = None):
        self.count, self.batch_size, self.pin, self.image = count, batch_size, pin, image
        self._declared = None if image is None else \
            [torch.empty(batch_size, *image[0], dtype=image[1], pin_memory=pin) for _ in range(count)]
        self.collate = CompactCollate(fields=fields)
        self._free = list(range(count))
        self._leases = [0] * count  # bumped by every take: which batch may hand the slot back
        self._lock = threading.Lock()
        self.structure: Any = None  # the first sample: the structure every batch has
        self.spec: Any = None
        self.fields: list[_Field] = []
        self.first_index = -1
        self.flat = False
        self._storage: list[list[torch.Tensor | None]] = []
        self._kept: tuple[Any, Any, list[_Field], list[list[torch.Tensor | None]]] | None = None  # reset()'s

    def has_free(self) -> bool:
        with self._lock:
            return bool(self._free)

    def free_count(self) -> int:
        with self._lock:
            return len(self._free)

    def take(self) -> int:
        with self._lock:
            slot = self._free.pop(0)
            self._leases[slot] += 1
            return slot

    def lease(self, slot: int) -> int:
        return self._leases[slot]

    def give(self, slot: int, lease: int | None = None) -> None:
        with self._lock:
            if lease is not None and lease != self._leases[slot]:
                return  # a batch of an earlier pass: the slot is another batch's now
            if slot not in self._free:
                self._free.append(slot)

    def reset(self, keep: int | None = None) -> None:
        """Every slot free for a new pass (the batches of the last one are stale), the spec taken
        again from the pass's first sample; the storage is kept for a spec of the same fields.
        `keep`: a slot whose batch (made ahead for this pass) stays, and with it the spec."""
        with self._lock:
            self._free = [k for k in range(self.count) if k != keep]
            self._leases = [n + (k != keep) for k, n in enumerate(self._leases)]
            if keep is not None:
                return
            if self.structure is not None:
                self._kept = (self.structure, self.spec, self.fields, self._storage)
            self.structure, self.spec, self.fields, self.first_index, self._storage = None, None, [], -1, []

    def ensure_spec(self, sample: Any, index: int) -> None:
        if self.structure is not None:  # set once, under the lock below
            return
        with self._lock:
            if self.structure is not None:
                return
            kept, self._kept = self._kept, None
            if kept is not None and _signature(sample) == _signature(kept[0]) \
                    and structure_difference(kept[0], sample, "") is None:
                # The last pass's spec (collating the sample again would copy it, on torch's
                # thread pool, whose threads then spin against the Loader's), slots paged in.
                self.structure, self.spec, self.fields, self._storage = kept
                self.flat, self.first_index = type(sample) in (tuple, list) and all(map(is_leaf, sample)), index
                self.structure = sample
                return
            try:
                spec = self.collate([sample]).spec  # compact_collate's roles, field by field
            except (ValueError, TypeError) as exc:
                raise ValueError(f"Loader: sample {index}: {exc}") from None
            self.fields = [_Field(leaf, x) for leaf, x in zip(leaves(spec), leaves(sample), strict=True)]
            if kept is not None and [f.kind() for f in kept[2]] == [f.kind() for f in self.fields]:
                self._storage = kept[3]  # the last pass's slots: already paged in
            else:
                declared, self._declared = self._declared, None  # taken by the first field of its kind, or dropped
                at = -1 if declared is None else \
                    next((k for k, f in enumerate(self.fields) if f.kind() == (*self.image, False)), -1)
                self._storage = [[declared[s] if k == at else f.storage(self.batch_size, self.pin)
                                  for k, f in enumerate(self.fields)] for s in range(self.count)]
            # A flat tuple or list of leaves: a sample of its type and length whose elements are
            # leaves too has its structure (the usual (image, label)), without the tree walk.
            self.flat = type(sample) in (tuple, list) and all(map(is_leaf, sample))
            self.structure, self.spec, self.first_index = sample, spec, index

    def values(self, sample: Any, index: int) -> list[Any]:
        """The leaves of `sample` in the order of the first sample's fields; a sample of another
        structure (other dict keys, another length) is an error naming both samples."""
        if self.flat and type(sample) is type(self.structure) and len(sample) == len(self.structure) \
                and all(map(is_leaf, sample)):
            return sample
        found = structure_difference(self.structure, sample, f"sample {self.first_index}")
        if found is not None:
            where = f"sample {index}" if found[0] == "sample" else f"{found[0]} of sample {index}"
            raise ValueError(f"Loader: {where} {found[1]}; samples must share one structure")
        return leaves_like(sample, self.structure)

    def storage(self, slot: int) -> list[torch.Tensor | None]:
        return self._storage[slot]


def _signature(sample: Any) -> list[tuple]:
    """What a sample's spec depends on: each leaf's type, and shape and dtype for a tensor or array."""
    out = []
    for x in leaves(sample):
        t = as_tensor(x)
        out.append((type(x), tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else (type(x),))
    return out


class _SlotReturn(BatchPool):
    """A released batch returns its slot to the ring."""

    release_after_copy = False

    def __init__(self, ring: SlotRing, slot: int, lease: int | None = None):
        self.ring, self.slot, self.lease = ring, slot, lease

    def give_batch(self, _tensors: Sequence[torch.Tensor]) -> None:
        self.ring.give(self.slot, self.lease)


class BatchJob:
    """One batch in flight: its indices (dataset indices, or an iterable's positions, then `items`:
    what was read), its slot, the chunks still running, and per-batch columns for labels and
    other fields."""

    def __init__(self, indices: list[int], ring: SlotRing, items: list[Any] | None = None):
        self.indices, self.ring, self.items = indices, ring, items
        self.slot = ring.take()
        self.lease = ring.lease(self.slot)
        self._pending = self._added = 0
        self._running: set[int] = set()  # ordinals of the chunks not ended yet
        self._errors: dict[int, BaseException] = {}  # chunk ordinal -> what it raised
        self._lock = threading.Lock()
        self._done = threading.Event()
        self.error: BaseException | None = None
        self._columns: dict[int, list[Any]] = {}
        self._made: CompactBatch | None = None  # the batch, made by hand_off_early
        # (position, index, stage, error, substitute) of each bad sample replaced (on_error "skip" /
        # "warn"), appended by the chunks' threads; the consumer records them when it gets the batch.
        self.bad: list[tuple[int, int, str, Exception, int]] = []

    def note_bad(self, j: int, index: int, stage: str, exc: Exception, substitute: int) -> None:
        """Position j (sample `index`) failed in `stage` with `exc`; sample `substitute` took its place."""
        self.bad.append((j, index, stage, exc, substitute))

    def add_chunk(self) -> int:
        """One more chunk (chunks are added in batch order); its ordinal, for chunk_done."""
        with self._lock:
            self._pending += 1
            self._running.add(self._added)
            self._added += 1
            return self._added - 1

    def chunk_done(self, error: BaseException | None = None, chunk: int | None = None) -> None:
        """Chunk `chunk` (add_chunk's ordinal; None: the earliest still running) ended, raising
        `error` or not. The batch is done when every chunk is, or once the earliest chunk that
        failed has none running before it: its error is the one raised, the first bad sample's in
        batch order whichever thread failed first (the same error whatever the threads' timing)."""
        with self._lock:
            self._pending -= 1
            chunk = min(self._running, default=0) if chunk is None else chunk
            self._running.discard(chunk)
            if error is not None:
                self._errors.setdefault(chunk, error)
            if self._errors and self.error is None:
                first = min(self._errors)
                if not any(k < first for k in self._running):
                    self.error = self._errors[first]
            if self._pending == 0 or self.error is not None:
                self._done.set()

    def wait(self) -> None:
        """Wait for the chunks; raise the first chunk's error."""
        if not self.settle():
            reraise(self.error)

    def settle(self) -> bool:
        """Wait for the chunks; whether every one succeeded (a batch made ahead that failed is
        dropped, not raised: the pass that needs it makes it again)."""
        while not self._done.wait(_POLL_S):
            pass
        return self.error is None

    def write(self, j: int, index: int, sample: Any, skip_first: bool = False) -> None:
        """Sample `index` into position j of the batch (the first field already written when
        skip_first: the fused path writes images itself)."""
        ring = self.ring
        ring.ensure_spec(sample, index)
        values = ring.values(sample, index)
        storage = ring.storage(self.slot)
        for k, (field, x) in enumerate(zip(ring.fields, values, strict=True)):
            if skip_first and k == 0:
                continue
            if field.shape is None:
                if field.leaf.role == "label" and not is_int_label(x):
                    raise ValueError(f"Loader: field {k} of sample {index} is {type(x).__name__} {x!r:.60}, but "
                                     f"it is a label in sample {ring.first_index}; labels must all be ints")
                column = self._columns.get(k)
                if column is None:
                    with self._lock:  # made once; then each chunk's writes go to positions of its own
                        column = self._columns.setdefault(k, [None] * len(self.indices))
                column[j] = x
                continue
            t = as_tensor(x)
            if not isinstance(t, torch.Tensor) or tuple(t.shape) != field.shape or t.dtype != field.dtype:
                got = (tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else type(t).__name__
                raise ValueError(f"Loader: field {k} of sample {index} is {got}, but the batch is laid out from "
                                 f"sample {ring.first_index}'s {(field.shape, field.dtype)}; batch equal shapes")
            if t.requires_grad:
                raise ValueError(grad_refusal("Loader", f"field {k} of sample {index}"))
            if field.leaf.packed:
                t = torch.ops.fastprep.pack_bits.default(t, -1, "little")
            storage[k][j].copy_(t)

    def write_rest(self, j0: int, indices: list[int], samples: list[Any]) -> None:
        """Samples `indices` into positions j0, j0 + 1, ... but for their first field (the fused path
        wrote their images): a column at a time when they are flat tuples or lists of the first
        sample's field types, else one by one."""
        ring = self.ring
        first = ring.structure
        # Columns (zip: C loops, no per-sample Python) of samples of the first's type and length
        # whose every field has the first's type; fields of other types go one sample at a time.
        columns = list(zip(*samples)) if ring.flat and set(map(type, samples)) == {type(first)} \
            and set(map(len, samples)) == {len(first)} else None
        if columns is None or any(set(map(type, columns[k])) != {type(first[k])} for k in range(1, len(first))) \
                or any(ring.fields[k].shape is not None or (ring.fields[k].leaf.role == "label"
                                                            and not is_int_label(first[k]))
                       for k in range(1, len(first))):
            for j, (index, sample) in enumerate(zip(indices, samples)):  # tensors, and the error's text
                self.write(j0 + j, index, sample, skip_first=True)
            return
        for k in range(1, len(first)):
            column = self._columns.get(k)
            if column is None:
                with self._lock:
                    column = self._columns.setdefault(k, [None] * len(self.indices))
            column[j0:j0 + len(samples)] = columns[k]  # the same type as the first's: ints stay ints

    def image_rows(self, template: Any, index: int, a: int, b: int) -> torch.Tensor:
        """Rows a:b of the slot's first field (the fused path's images), laid out from `template`."""
        self.ring.ensure_spec(template, index)
        return self.ring.storage(self.slot)[0][a:b]

    def batch(self) -> CompactBatch:
        """The batch, for the consumer (made by :meth:`hand_off_early` if it was)."""
        made, self._made = self._made, None
        return made if made is not None else CompactBatch(self.data(), self.ring.spec, pool=self.slot_return())

    def hand_off_early(self) -> None:
        """Make the complete batch's hand-off now, for :meth:`batch` to return later: a batch made
        ahead, while none of the Loader's threads runs. Once its pass has started the next batch, the threads
        hold the GIL in Python stretches, and each torch call of the hand-off (it gives the GIL up)
        waits up to the interpreter's switch interval (5 ms) to take it back."""
        self._made = CompactBatch(self.data(), self.ring.spec, pool=self.slot_return())

    def slot_return(self) -> _SlotReturn:
        """The pool of a batch in this job's slot: releasing the batch gives the slot back to the ring."""
        return _SlotReturn(self.ring, self.slot, self.lease)

    def data(self) -> Any:
        """The batch's fields in the samples' structure: the slot's rows and the collated columns."""
        ring, n = self.ring, len(self.indices)
        storage = ring.storage(self.slot)
        out = []
        for k, field in enumerate(ring.fields):
            if field.shape is not None:
                out.append(storage[k][:n])
                continue
            # The column through compact_collate's own code for the field's role (label dtypes...).
            column, _ = ring.collate.collate_field(self._columns[k], f"field {k}", field.leaf.role)
            out.append(column.pin_memory() if ring.pin and isinstance(column, torch.Tensor) else column)
        it = iter(out)
        return tree_map(lambda _: next(it), ring.structure)
