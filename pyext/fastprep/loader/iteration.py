"""One pass of a fastprep.Loader over an epoch: what ``iter(loader)`` returns.

It owns everything the pass uses: the worker threads start with the first batch asked for and
stop when the pass ends, fails, is closed, or is garbage collected (an iterator never advanced
starts none); batches are handed out in order, and the loader's resume position counts the
samples the consumer received (with a device, not those the prefetcher took ahead), and so do its
bad samples (on_error "skip" / "warn": recorded, and warned about, in the consumer's thread, in
order, as the consumer receives the batches that hold their substitutes)."""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Iterator
from typing import Any

from fastprep.batch import slots
from fastprep.batch.compact import CompactBatch
from fastprep.batch.device_prefetcher import DevicePrefetcher
from fastprep.loader import ahead
from fastprep.loader.apply import ChunkRunner
from fastprep.loader.device_split import split_parts
from fastprep.loader.pool import WorkerPool


class Iteration:
    """An iterator over the batches of epoch `epoch` from sample `start` on (see the module): its
    keys, epoch and seed are fixed when it is made (a set_epoch before its first batch is the next
    pass's)."""

    def __init__(self, loader: Any, keys: list[int] | None, start: int, epoch: int, seed: int,
                 next_epoch: int | None = None):
        self.loader, self.keys, self.start, self.next_epoch = loader, keys, start, next_epoch
        self.epoch, self.seed = epoch, seed
        self._out: Iterator[Any] | None = None
        self._pool: WorkerPool | None = None
        # (samples, bad samples replaced) of the batches made, not yet received
        self._sizes: deque[tuple[int, list]] = deque()
        self._closed = False

    def __iter__(self) -> Iteration:
        return self

    @property
    def closed(self) -> bool:
        """The pass ran to its end, failed or was closed: it delivers no more batches."""
        return self._closed

    def __next__(self) -> Any:
        if self._closed:
            raise StopIteration
        try:
            if self._out is None:
                self._out = self._start()
            batch = next(self._out)
        except StopIteration:
            self.close()
            self.loader.pass_ended(self.epoch)
            raise
        except BaseException:
            self.close()
            raise
        size, bad = self._sizes.popleft()
        self.loader.delivered(self, size, bad)
        return batch

    def _start(self) -> Iterator[Any]:
        loader = self.loader
        cuda = loader.device is not None and loader.device.type == "cuda"
        first, keep, make = None, None, None
        if loader.decode_on is not None:  # the threads cut windows, the device stage decodes them
            ring, runner = split_parts(loader, self.epoch, self.seed)
        else:
            count = slots.ring_slots(loader.depth, (loader.streams or 1) if cuda else None)
            ring, first = ahead.take(loader, count, cuda, self.keys, self.start, self.epoch, self.seed)
            runner = ChunkRunner(loader.dataset, loader.plan, self.seed, self.epoch, loader.deterministic,
                                 loader.order.iterable, loader.on_error)
            keep = functools.partial(ahead.keep, loader, ring, loader.device is None)
            make = ahead.maker(loader, runner, self.next_epoch)
        self._pool = WorkerPool(loader.threads)
        # Generators that do not hold this object: dropping it closes them (no reference cycle).
        start = self.start + (len(first.indices) if first is not None else 0)
        batches = loader.order.batches_from(self.keys, start, raw=runner.plan is not None)
        host = _host(ring, runner, self._pool, batches, self._sizes, keep, first, make)
        if loader.device is None:
            return _cpu(host, loader.decode)
        stage = DevicePrefetcher(host, loader.device, loader.depth, decode=loader.decode, release=True,
                                 streams=loader.streams)
        loader.device_stage = getattr(stage, "stats", None)  # this pass's, with streams
        return iter(stage)

    def close(self) -> None:
        """Stop the threads and drop the batches in flight (break, an error, garbage collection)."""
        if self._closed:
            return
        self._closed = True
        out, self._out = self._out, None
        if out is not None and hasattr(out, "close"):
            out.close()
        if self._pool is not None:
            self._pool.shutdown()

    def __del__(self) -> None:
        self.close()


def _host(ring: slots.SlotRing, runner: ChunkRunner, pool: WorkerPool, batches: Iterator[tuple[list[int], Any]],
          sizes: deque[tuple[int, list]], keep: Any = None, first: slots.BatchJob | None = None,
          make_ahead: Any = None) -> Iterator[CompactBatch]:
    """Batches in order (`first`: one made ahead, already complete), as many in flight as the ring
    has free slots; once every batch of the epoch is in flight, the next epoch's first into a free
    slot (`make_ahead`); at the end, `keep(last, ahead)`."""
    inflight: deque[slots.BatchJob] = deque([first] if first is not None else [])
    pending, last, made = True, None, None
    while True:
        while pending and ring.has_free():
            nxt = next(batches, None)  # an iterable dataset is read here, in order
            if nxt is None:
                pending = False
                break
            keys, items = nxt
            job = runner.new_job(keys, ring, items)
            ahead.submit(pool, runner, job)
            inflight.append(job)
        if not pending and make_ahead is not None and ring.has_free():
            made, make_ahead = make_ahead(ring, pool), None  # the threads go on while the consumer takes the rest
        if not inflight:
            if keep is not None:
                keep(last, made)
            return
        job = inflight.popleft()
        job.wait()
        sizes.append((len(job.indices), sorted(job.bad, key=lambda b: b[0])))
        last = job.batch()
        yield last


def _cpu(host: Iterator[CompactBatch], decode: Any) -> Iterator[Any]:
    previous = None
    for batch in host:
        if previous is not None:
            previous.release()  # the consumer asked for the next one: its slot may be reused
        previous = batch
        yield batch.decode() if decode is True else decode(batch) if decode is not False else batch
