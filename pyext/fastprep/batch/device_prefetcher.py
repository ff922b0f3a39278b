"""DevicePrefetcher: keeps host->device copies of upcoming batches in flight behind compute.

On an accelerator with streams (CUDA) each batch is copied on a side stream with non_blocking
copies (fast from pinned memory); the consumer's stream waits on an event recorded after the copy,
and every copied tensor is marked with record_stream so the caching allocator does not hand its
memory to another tensor while the consumer's stream may still use it. On CPU it is an exact
passthrough. `decode` (a callable, or True for CompactBatch.decode()) runs on the device.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import torch

from fastprep.batch.compact import CompactBatch
from fastprep.core.args import check_bool, check_int
from fastprep.core.devices import check_device
from fastprep.core.iterators import stop_workers
from fastprep.core.tree import leaves, tree_map


def move_to(batch: Any, device: torch.device, non_blocking: bool) -> Any:
    """`batch` on `device`: a CompactBatch as a whole, any other batch tensor by tensor."""
    if isinstance(batch, CompactBatch):
        return batch.to(device, non_blocking=non_blocking)
    return tree_map(lambda x: x.to(device, non_blocking=non_blocking)
                    if isinstance(x, torch.Tensor) else x, batch)


def _tensors(batch: Any) -> list[torch.Tensor]:
    if isinstance(batch, CompactBatch):
        return batch.tensors()
    return [x for x in leaves(batch) if isinstance(x, torch.Tensor)]


def _decoder(decode: Any) -> Callable[[Any], Any] | None:
    """None for no decoding (None or False), CompactBatch.decode for True, else the callable."""
    if decode is None or decode is False or decode is np.False_:
        return None
    if decode is True or decode is np.True_:
        return _decode_compact
    return decode


def _decode_compact(batch: Any) -> Any:
    if not isinstance(batch, CompactBatch):
        raise TypeError(f"decode=True decodes CompactBatches (CompactCollate's, the Loader's), got a "
                        f"{type(batch).__name__}; pass decode=None, or a callable for other batches")
    return batch.decode()


class DevicePrefetcher:
    """Iterate `source` (a DataLoader or any iterable of batches) with batches already on `device`.

    Args:
        source: yields tensors, tuples, lists, dicts, namedtuples or CompactBatch es.
        device: target device ("cuda", torch.device("cuda:1"), "cpu", ...).
        depth: batches in flight ahead of the consumer (>= 1).
        decode: None or False to yield each batch as it arrives on the device (a CompactBatch stays
            a CompactBatch, moved but not decoded); True to call CompactBatch.decode() with its
            defaults; or a callable applied to each batch once it is on the device (e.g.
            ``lambda b: b.decode(num_classes=10)``).
        release: hand each host CompactBatch back to its CompactCollate(reuse=True) once the
            consumer asks for the next batch (its copy is then complete, and on CPU the consumer
            is done with the tensors it shared). Do not keep batches past their iteration.
    """

    def __init__(self, source: Iterable[Any], device: Any, depth: int = 2,
                 decode: bool | Callable[[Any], Any] | None = None, release: bool = False):
        self.depth = check_int("DevicePrefetcher", "depth", depth, 1)
        if not (decode is None or isinstance(decode, (bool, np.bool_)) or callable(decode)):
            raise ValueError(f"DevicePrefetcher: expected decode to be None, a bool or a callable, "
                             f"got {decode!r}")
        self.release = check_bool("DevicePrefetcher", "release", release)
        self.source = source
        self.device = check_device("DevicePrefetcher", device)
        self.decode = _decoder(decode)
        self._streams = self.device.type == "cuda"  # check_device refused a CUDA device without CUDA

    def __len__(self) -> int:
        return len(self.source)  # type: ignore[arg-type]  (TypeError when the source has none)

    def __iter__(self) -> Iterator[Any]:
        it = iter(self.source)
        pending: deque = deque()
        side = torch.cuda.Stream(self.device) if self._streams else None
        done: tuple[Any, Any, Any] | None = None  # the host batch the consumer last got, its copy's event, what it got
        try:
            exhausted = False
            while True:
                while not exhausted and len(pending) < self.depth:
                    try:
                        batch = next(it)
                    except StopIteration:
                        exhausted = True
                        break
                    pending.append(self._start_copy(batch, side))
                if not pending:
                    return  # the last batch is released below, as after an early stop
                if done is not None:
                    self._release(*done[:2])  # the consumer asked for the next batch: done with it
                    done = None
                moved, event, host = pending.popleft()
                out = self._finish(moved, event)
                if self.release:
                    done = (host, event, out)
                yield out
        finally:
            # The end, or an early stop (break, an exception, garbage collection): the batches
            # copied ahead go back to their pool now; the one the consumer holds, once it lets go
            # of it if it shares the host's memory (a CPU "copy"), else now (its copy is complete).
            if self.release:
                for _, event, host in pending:
                    self._release(host, event)
                if done is not None:
                    host, event, out = done
                    if isinstance(out, CompactBatch) and out._base is host:
                        weakref.finalize(out, host.release)
                    else:
                        self._release(host, event)
            pending.clear()
            stop_workers(it)  # a DataLoader's, early (unless it keeps them across epochs)

    def _start_copy(self, batch: Any, side: Any) -> tuple[Any, Any, Any]:
        if side is None:
            return move_to(batch, self.device, non_blocking=False), None, batch
        with torch.cuda.stream(side):
            moved = move_to(batch, self.device, non_blocking=True)
            event = torch.cuda.Event()
            event.record(side)
        return moved, event, batch

    @staticmethod
    def _release(host: Any, event: Any) -> None:
        if isinstance(host, CompactBatch):
            if event is not None:
                event.synchronize()  # the non_blocking copy must have read the buffer
            host.release()

    def _finish(self, batch: Any, event: Any) -> Any:
        if event is not None:
            consumer = torch.cuda.current_stream(self.device)
            consumer.wait_event(event)
            for t in _tensors(batch):
                t.record_stream(consumer)
        return self.decode(batch) if self.decode is not None else batch
