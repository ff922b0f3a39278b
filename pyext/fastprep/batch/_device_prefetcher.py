"""DevicePrefetcher: keeps host->device copies of upcoming batches in flight behind compute.

On an accelerator with streams (CUDA) each batch is copied on a side stream with non_blocking
copies (fast from pinned memory); the consumer's stream waits on an event recorded after the copy,
and every copied tensor is marked with record_stream so the caching allocator does not hand its
memory to another tensor while the consumer's stream may still use it. On CPU it is an exact
passthrough. `expand` (a callable, or True for CompactBatch.expand()) runs on the device: in the
consumer's thread on its stream, or with ``streams=k`` on k threads of a StreamPool
(batch/_stream_pool.py), each copying and expanding its batches on its own stream.
"""

from __future__ import annotations

import functools
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np
import torch

from fastprep.batch._compact import CompactBatch
from fastprep.batch._stream_pool import StageStats, StreamPool, timeline_for
from fastprep.core._args import check_bool, check_int
from fastprep.core._devices import check_device
from fastprep.core._iterators import stop_workers
from fastprep.core._tree import leaves, tree_map


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


def _expander(expand: Any) -> Callable[[Any], Any] | None:
    """None for no expanding (None or False), CompactBatch.expand for True, else the callable."""
    if expand is None or expand is False or expand is np.False_:
        return None
    if expand is True or expand is np.True_:
        return _expand_compact
    return expand


def _expand_compact(batch: Any) -> Any:
    if not isinstance(batch, CompactBatch):
        raise TypeError(f"expand=True expands CompactBatches (CompactCollate's, the Loader's), got a "
                        f"{type(batch).__name__}; pass expand=None, or a callable for other batches")
    return batch.expand()


class DevicePrefetcher:
    """Iterate `loader` (a DataLoader, a fastprep.Loader or any iterable of batches) with batches already on `device`.

    Args:
        loader: yields tensors, tuples, lists, dicts, namedtuples or CompactBatch es.
        device: target device ("cuda", torch.device("cuda:1"), "cpu", ...).
        depth: batches in flight ahead of the consumer (>= 1).
        expand: None or False to yield each batch as it arrives on the device (a CompactBatch stays
            a CompactBatch, moved but not expanded); True to call CompactBatch.expand() with its
            defaults; or a callable applied to each batch once it is on the device (e.g.
            ``lambda b: b.expand(num_classes=10)``).
        release: hand each host CompactBatch back to its CompactCollate(reuse=True) once the
            consumer asks for the next batch (its copy is then complete, and on CPU the consumer
            is done with the tensors it shared). Do not keep batches past their iteration.
        streams: None (default) copies in the consumer's thread on one side stream and expands
            on the consumer's; k >= 1 copies and expands up to max(depth, k) batches at once on k
            threads, each on its own stream (for an `expand` that is real device work: the GPU
            decode split's JPEG decoding and resize). :attr:`stats` says where the time went.
    """

    def __init__(self, loader: Iterable[Any], device: Any, depth: int = 2,
                 expand: bool | Callable[[Any], Any] | None = None, release: bool = False,
                 streams: int | None = None):
        self.depth = check_int("DevicePrefetcher", "depth", depth, 1)
        self.streams = None if streams is None else check_int("DevicePrefetcher", "streams", streams, 1)
        self.stats = None if self.streams is None else StageStats(self.streams)  # since it was made
        if not (expand is None or isinstance(expand, (bool, np.bool_)) or callable(expand)):
            raise ValueError(f"DevicePrefetcher: expected expand to be None, a bool or a callable, "
                             f"got {expand!r}")
        self.release = check_bool("DevicePrefetcher", "release", release)
        self.loader = loader
        self.device = check_device("DevicePrefetcher", device)
        self.expand = _expander(expand)
        self._streams = self.device.type == "cuda"  # check_device refused a CUDA device without CUDA

    def __len__(self) -> int:
        return len(self.loader)  # type: ignore[arg-type]  (TypeError when the loader has none)

    def __iter__(self) -> Iterator[Any]:
        it = iter(self.loader)
        pending: deque = deque()
        pool = None
        if self.streams is not None:
            pool = StreamPool(self.streams, timeline_for(self.device), self._copy_and_expand, self.release,
                              self.stats)
            start, ahead = pool.submit, max(self.depth, self.streams)
        else:
            side = torch.cuda.Stream(self.device) if self._streams else None
            start, ahead = functools.partial(self._start_copy, side=side), self.depth
        done: tuple[Any, Any, Any] | None = None  # the host batch the consumer last got, its copy's event, what it got
        try:
            exhausted = False
            while True:
                while not exhausted and len(pending) < ahead:
                    try:
                        batch = next(it)
                    except StopIteration:
                        exhausted = True
                        break
                    pending.append((start(batch), batch))
                if not pending:
                    return  # the last batch is released below, as after an early stop
                if done is not None:
                    self._release(*done[:2])  # the consumer asked for the next batch: done with it
                    done = None
                entry, _ = pending.popleft()
                if pool is not None:
                    out, event, host = pool.result(entry)
                    pool.timeline.join(event, _tensors(out))
                else:
                    moved, event, host = entry
                    out = self._finish(moved, event)
                if self.release:
                    done = (host, event, out)
                yield out
        finally:
            # The end, or an early stop (break, an exception, garbage collection): the batches
            # copied ahead go back to their pool now; the one the consumer holds, once it lets go
            # of it if it shares the host's memory (a CPU "copy"), else now (its copy is complete).
            if pool is not None:
                pool.shutdown()  # batches not started are dropped, those started are finished
            if self.release:
                for entry, batch in pending:
                    if pool is None:
                        self._release(entry[2], entry[1])
                    elif entry.cancelled():
                        self._release(batch, None)  # never copied
                    elif entry.exception() is None:
                        _, event, host = entry.result()
                        self._release(host, event)
                if done is not None:
                    host, event, out = done
                    if host is None:
                        pass  # a stream's thread handed it back already
                    elif isinstance(out, CompactBatch) and out._base is host:
                        weakref.finalize(out, host.release)
                    else:
                        self._release(host, event)
            pending.clear()
            stop_workers(it)  # a DataLoader's, early (unless it keeps them across epochs)

    def _copy_and_expand(self, batch: Any) -> Any:
        """A StreamPool thread's work, on its own stream: the copy, then the expand."""
        moved = move_to(batch, self.device, non_blocking=self._streams)
        return self.expand(moved) if self.expand is not None else moved

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
        if isinstance(host, CompactBatch):  # (None: a stream's thread handed it back)
            if event is not None:
                event.synchronize()  # the non_blocking copy must have read the buffer
            host.release()

    def _finish(self, batch: Any, event: Any) -> Any:
        if event is not None:
            consumer = torch.cuda.current_stream(self.device)
            consumer.wait_event(event)
            for t in _tensors(batch):
                t.record_stream(consumer)
        return self.expand(batch) if self.expand is not None else batch
