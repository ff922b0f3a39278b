"""Shared-memory batch buffers that DataLoader workers recycle (CompactCollate(reuse=True)).

A worker's batch crosses to the training process through shared memory. Allocated fresh for
every batch, 50 MB of it is page-faulted (zeroed) each time; here each worker keeps a few slots of
buffers and refills a slot once the training process says it is done with the batch: when the
DataLoader's pin thread has copied it (CompactBatch.pin_memory), when DevicePrefetcher(release=True)
has moved it, or on batch.release(). The flags that say so live in one small shared tensor that
the collate function carries into every worker.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from fastprep.batch._compact import BatchPool

MAX_WORKERS = 64
SLOTS_PER_WORKER = 8


class SharedSlots:
    """Busy flags for SLOTS_PER_WORKER slots of each of MAX_WORKERS workers (shared memory), and
    this process's buffers (never pickled: each worker makes its own)."""

    def __init__(self) -> None:
        self.busy = torch.zeros(MAX_WORKERS, SLOTS_PER_WORKER, dtype=torch.uint8).share_memory_()
        self._buffers: dict[tuple[int, int], dict[tuple, torch.Tensor]] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"busy": self.busy}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.busy, self._buffers = state["busy"], {}

    def claim(self, worker: int) -> SlotBuffers | None:
        """A free slot of `worker`, marked busy; None when all are in use (the batch then gets fresh
        shared memory, as without reuse)."""
        if worker >= MAX_WORKERS:
            return None
        row = self.busy[worker]
        for slot in range(SLOTS_PER_WORKER):
            if row[slot] == 0:
                row[slot] = 1
                return SlotBuffers(self, worker, slot)
        return None


def _shared_empty(shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(list(shape), dtype=dtype).share_memory_()


class SlotBuffers(BatchPool):
    """One slot of one worker: take() hands out its persistent buffers (CompactCollate's allocation
    protocol); in the training process give_batch() marks the slot free (CompactBatch's release protocol)."""

    release_after_copy = True  # the pinned or device copy no longer needs the slot

    def __init__(self, owner: SharedSlots, worker: int, slot: int):
        self.busy, self.worker, self.slot = owner.busy, worker, slot
        self._owner: SharedSlots | None = owner
        self._counts: dict[tuple, int] = {}
        self.fresh = False  # whether this batch needed new buffers (for tests and stats)

    def __getstate__(self) -> dict[str, Any]:
        return {"busy": self.busy, "worker": self.worker, "slot": self.slot, "fresh": self.fresh}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._owner, self._counts = None, {}

    def take(self, shape: Sequence[int], dtype: torch.dtype) -> torch.Tensor:
        if self._owner is None:
            raise RuntimeError("SlotBuffers.take: this slot's buffers live in its worker process")
        key = (tuple(shape), dtype)
        n = self._counts.get(key, 0)
        self._counts[key] = n + 1
        buffers = self._owner._buffers.setdefault((self.worker, self.slot), {})
        t = buffers.get((*key, n))
        if t is None:
            t = buffers[(*key, n)] = _shared_empty(shape, dtype)
            self.fresh = True
        return t

    def keep_only_taken(self) -> None:
        """Drop the slot's buffers this batch did not take (the worker's references: the shared
        memory goes once the training process lets go of them too). A slot holds one batch's
        buffers, whatever shapes the batches before it had."""
        buffers = self._owner._buffers.get((self.worker, self.slot), {})
        for key in [k for k in buffers if k[2] >= self._counts.get(k[:2], 0)]:
            del buffers[key]

    def give_batch(self, _tensors: Sequence[torch.Tensor]) -> None:
        """The training process is done with this slot's batch: the worker may refill it. Called once
        per batch (CompactBatch.release); the worker may claim the slot the moment this returns."""
        self.busy[self.worker, self.slot] = 0
