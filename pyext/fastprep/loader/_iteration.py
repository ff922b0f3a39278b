"""One pass of a fastprep.Loader over an epoch: what ``iter(loader)`` returns.

It owns everything the pass uses: the Loader's threads start with the first batch asked for and
stop when the pass ends, fails, is closed, or is garbage collected (an iterator never advanced
starts none); batches are handed out in order, and the loader's resume position counts the
samples the consumer received (with a device, not those the prefetcher took ahead), and so do its
bad samples (on_error "skip" / "warn": recorded, and warned about, in the consumer's thread, in
order, as the consumer receives the batches that hold their substitutes)."""

from __future__ import annotations

import functools
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import fastprep.batch._slots as slots
import fastprep.loader._ahead as ahead
from fastprep.batch._compact import CompactBatch
from fastprep.batch._device_prefetcher import DevicePrefetcher
from fastprep.loader._apply import ChunkRunner
from fastprep.loader._device_split import split_parts
from fastprep.loader._hooks import LoaderHooks, hooked
from fastprep.loader._order import Order
from fastprep.loader._pool import ThreadPool
from fastprep.loader._settings import LoaderSettings, plan_of


@dataclass(frozen=True)
class PassInputs:
    """The live objects a pass reads beside its Loader's settings: the dataset, the transform (its
    plan taken when the first batch is asked for), the epoch's order, the decode split's JPEG
    decoders, the hooks (None: none added)."""

    dataset: Any
    transform: Any
    order: Order
    jpeg_decoders: Any = None
    hooks: LoaderHooks | None = None


@dataclass(frozen=True)
class PassReports:
    """What a pass tells its Loader, whose mutable state it is: the consumer received samples
    (``delivered(iteration, samples, bad)``), the pass ran to its end (``ended(epoch)``); the
    ring a whole pass leaves (``swap_spare(new) -> old``: taken with None, kept with a Spare);
    the device stage's stats of this pass (``device_stage(stats)``)."""

    delivered: Callable[[Iteration, int, list], None]
    ended: Callable[[int], None]
    swap_spare: Callable[[ahead.Spare | None], ahead.Spare | None]
    device_stage: Callable[[Any], None]


class Iteration:
    """An iterator over the batches of epoch `epoch` from sample `start` on (see the module), made
    with `settings` (a LoaderSettings) from `inputs`, telling its Loader through `reports`: its
    indices, epoch, seed and settings are fixed when it is made (a set_epoch before its first batch is
    the next pass's)."""

    def __init__(self, settings: LoaderSettings, inputs: PassInputs, reports: PassReports,
                 indices: list[int] | None, start: int, epoch: int, seed: int, next_epoch: int | None = None):
        self.settings, self.inputs, self.reports = settings, inputs, reports
        self.indices, self.start, self.next_epoch = indices, start, next_epoch
        self.epoch, self.seed = epoch, seed
        self._out: Iterator[Any] | None = None
        self._pool: ThreadPool | None = None
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
            self.reports.ended(self.epoch)
            raise
        except BaseException:
            self.close()
            raise
        size, bad = self._sizes.popleft()
        self.reports.delivered(self, size, bad)
        return batch

    def _start(self) -> Iterator[Any]:
        settings, inputs, hooks = self.settings, self.inputs, self.inputs.hooks
        order, plan, device = inputs.order, plan_of(inputs.transform), settings.device
        cuda = device is not None and device.type == "cuda"
        first, keep, make = None, None, None
        if settings.decode_on is not None:  # the threads cut windows, the device decodes them
            ring, runner = split_parts(settings, inputs.dataset, plan, order.iterable, inputs.jpeg_decoders,
                                       self.epoch, self.seed, hooks)
        else:
            count = slots.ring_slots(settings.depth, (settings.streams or 1) if cuda else None)
            now = ahead.made_for(inputs.dataset, inputs.transform, settings, self.epoch, self.seed)
            ring, first = hooked(hooks, "take_ring", ahead.take, self.reports.swap_spare(None), settings, plan,
                                 count, cuda, self.indices, self.start, now)
            runner = ChunkRunner(inputs.dataset, plan, self.seed, self.epoch, settings.deterministic,
                                 order.iterable, settings.on_error, hooks)
            keep = functools.partial(hooked, hooks, "keep_ring", ahead.keep, self.reports.swap_spare, ring,
                                     device is None)
            make = ahead.maker(settings, inputs.dataset, inputs.transform, order, runner, self.next_epoch)
        self._pool = hooked(hooks, "pool_start", ThreadPool, settings.threads)
        # Generators that do not hold this object: dropping it closes them (no reference cycle).
        start = self.start + (len(first.indices) if first is not None else 0)
        batches = order.batches_from(self.indices, start, raw=runner.plan is not None)
        host = _host(ring, runner, self._pool, batches, self._sizes, keep, first, make, hooks)
        if device is None:
            return _cpu(host, settings.expand)
        stage = DevicePrefetcher(host, device, settings.depth, expand=settings.expand, release=True,
                                 streams=settings.streams)
        self.reports.device_stage(getattr(stage, "stats", None))  # this pass's, with streams
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
            hooked(self.inputs.hooks, "pool_stop", self._pool.shutdown)

    def __del__(self) -> None:
        self.close()


def _host(ring: slots.SlotRing, runner: ChunkRunner, pool: ThreadPool, batches: Iterator[tuple[list[int], Any]],
          sizes: deque[tuple[int, list]], keep: Any = None, first: slots.BatchJob | None = None,
          make_ahead: Any = None, hooks: LoaderHooks | None = None) -> Iterator[CompactBatch]:
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
            indices, items = nxt
            job = runner.new_job(indices, ring, items)
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
        last = job.batch() if hooks is None else hooks.run("hand_off", job.batch)
        yield last


def _cpu(host: Iterator[CompactBatch], expand: Any) -> Iterator[Any]:
    previous = None
    for batch in host:
        if previous is not None:
            previous.release()  # the consumer asked for the next one: its slot may be reused
        previous = batch
        yield batch.expand() if expand is True else expand(batch) if expand is not False else batch
