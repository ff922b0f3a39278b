"""From one pass of a fastprep.Loader to the next: the slot ring a whole pass leaves (its slots paged
in, its layout known), and the next epoch's first batch, made while the consumer takes this epoch's
last (``prestart``), so that epochs run back to back.

What is made ahead is the first batch of the epoch the loop is expected to run next, in a loop
that calls ``set_epoch`` before each pass (the README's): ``epoch + 1``. A pass not preceded by
set_epoch makes nothing ahead (a loader iterated once, or a loop repeating one epoch). The next pass
takes it only when it is exactly what that pass would make first: the same dataset, transform (and
its plan, and its parameters' values), seed, epoch and indices, from the epoch's start; anything else
drops it and the pass starts from nothing, as a fresh Loader. Made ahead only when that comparison
is provably enough: the transform is None or made only of fastprep.transforms classes (whose
parameters are their public attributes: a foreign transform may hold state no fingerprint sees),
and the dataset has no ``set_epoch`` (one that changes per epoch would change only after the batch
was made). An order that is not known ahead (a sampler, an iterable dataset) and batches made for a
device are never made ahead.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

import fastprep.batch._slots as slots
from fastprep.batch._compact import CompactBatch
from fastprep.loader._apply import ChunkRunner
from fastprep.loader._order import Order
from fastprep.loader._pool import ThreadPool
from fastprep.loader._settings import LoaderSettings
from fastprep.transforms import FusionPlan


@dataclass
class Spare:
    """What a whole pass hands the next: its ring, the batch the consumer still holds (on the CPU),
    and the next epoch's first batch (complete) with what it was made for."""

    ring: slots.SlotRing
    last: CompactBatch | None = None
    ahead: slots.BatchJob | None = None
    made_for: tuple = ()


def fingerprint(transform: Any) -> str | None:
    """The values of every parameter of a transform made only of fastprep.transforms classes (their
    public attributes, nested ones included: a RandomCrop's padding changed in place between epochs
    is another transform); None for any other transform (nothing proves it unchanged)."""
    if transform is None:
        return ""
    if not isinstance(transform, nn.Module):
        return None
    parts = []
    for module in transform.modules():
        kind = type(module)
        if not kind.__module__.startswith("fastprep.transforms.") or module._parameters or module._buffers:
            return None
        parts.append(f"{kind.__qualname__}{sorted((k, v) for k, v in vars(module).items() if not k.startswith('_'))!r}")
    return ";".join(parts)


def made_for(dataset: Any, transform: Any, settings: LoaderSettings, epoch: int, seed: int) -> tuple:
    """What a batch made ahead depends on (objects compared by identity: a new transform, or a
    Compose whose plan changed, is another; the transform's parameters by value)."""
    return (dataset, transform, getattr(transform, "plan", None), fingerprint(transform), seed, epoch,
            settings.deterministic, settings.batch_size, settings.on_error)


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y or (type(x) in (int, str) and x == y) for x, y in zip(a, b))


def take(spare: Spare | None, settings: LoaderSettings, plan: FusionPlan | None, count: int, pin: bool,
         indices: list[int] | None, start: int, now: tuple) -> tuple[slots.SlotRing, Any]:
    """(the ring for a pass, the batch made ahead it starts with or None): the last whole pass's
    ring (`spare`) when it fits (all its slots free but the batch made ahead, that batch made for
    `now`: made_for of this pass), else a new one."""
    group = plan.fused if plan is not None else None
    image = group.makes if group is not None else None  # the images a fused op makes, declared
    if spare is not None:
        if spare.last is not None:
            spare.last.release()  # the last pass's last batch: the next batch is being asked for
        ring, ahead = spare.ring, spare.ahead
        if ring.count == count and ring.pin == pin and ring.batch_size == settings.batch_size and ring.image == image:
            if ahead is not None and start == 0 and indices is not None and _same(spare.made_for, now) \
                    and indices[:len(ahead.indices)] == ahead.indices and ring.free_count() == count - 1:
                ring.reset(keep=ahead.slot)
                ahead.hand_off_early()  # before the pass's threads start: its torch calls wait for no GIL
                return ring, ahead
            if ring.free_count() >= count - (ahead is not None):
                ring.reset()
                return ring, None
    return slots.SlotRing(count, settings.batch_size, pin=pin, fields=settings.fields, image=image), None


def keep(store: Callable[[Spare], None], ring: slots.SlotRing, cpu: bool, last: CompactBatch | None,
         ahead: Any) -> None:
    """A whole pass ended: `store` (the loader's) keeps its ring for the next, with the batch the
    consumer still holds (on the CPU; a device's batches are handed back by the prefetcher) and the
    batch made ahead, once complete (one that failed is dropped: the next pass makes it again, and
    raises then)."""
    job, what = ahead if ahead is not None else (None, ())
    if job is not None and not job.settle():
        job = None
    store(Spare(ring, last if cpu else None, job, what))


def submit(pool: ThreadPool, runner: ChunkRunner, job: slots.BatchJob) -> None:
    """A batch's chunks, one per thread, to the pool."""
    n = len(job.indices)
    chunk = max(1, -(-n // pool.threads))
    pool.submit_all(job, [functools.partial(runner, job, a, min(a + chunk, n), pool.stopping)
                          for a in range(0, n, chunk)])


def maker(settings: LoaderSettings, dataset: Any, transform: Any, order: Order, runner: ChunkRunner,
          epoch: int | None) -> Any:
    """A function (ring, pool) -> (job, made_for) submitting epoch `epoch`'s first batch into the
    ring, or None when nothing is made ahead (prestart=False, an order not known ahead, a device, a
    transform or dataset that may change between epochs unseen: see the module)."""
    if epoch is None or not settings.prestart or order.sampler is not None or order.iterable \
            or settings.device is not None or settings.decode_on is not None:
        return None
    if fingerprint(transform) is None or callable(getattr(dataset, "set_epoch", None)):
        return None

    def make(ring: slots.SlotRing, pool: ThreadPool) -> tuple[slots.BatchJob, tuple] | None:
        indices = order.indices(settings.seed, epoch)[:settings.batch_size]
        if not indices or (len(indices) < settings.batch_size and settings.drop_last):
            return None
        ahead = ChunkRunner(dataset, runner.plan, settings.seed, epoch, settings.deterministic, False,
                            settings.on_error, runner.hooks)
        job = ahead.job_type(indices, ring, None)
        submit(pool, ahead, job)
        return job, made_for(dataset, transform, settings, epoch, settings.seed)

    return make
