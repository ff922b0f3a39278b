"""A chunk of a batch in a Loader worker thread: the chunk's seeds drawn at once, its items loaded,
the transform's plan applied, the samples written into the batch's slot.

Randomness (docs/loader.md): sample k runs under ``item_seed(seed, k, epoch)``, k its dataset index
(an iterable dataset's: its position in the epoch). fastprep's transforms draw from the sample's
SampleStream: the seeds torch's generator seeded with that would give, as SeedByIndex in a
DataLoader, precomputed for the whole chunk by one ``seeded_draws`` call; they run in parallel and
reproduce. Code that is not fastprep's (the dataset's own, a foreign transform) draws from torch's
shared generator: in parallel and unseeded by default; with ``deterministic=True`` one sample at a
time under one lock, torch's generator seeded per sample (SeedByIndex's bits, serialised).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import torch

from fastprep.ops.seeded_draws import MAX_DRAWS, seeded_draws
from fastprep.rng import SampleStream, item_seeds, seeded
from fastprep.slots import BatchJob, SampleError
from fastprep.transforms import FusionPlan

# torch's default generator is one per process: the deterministic samples of every Loader share it.
GLOBAL_RNG = threading.Lock()


class ChunkRunner:
    """Runs chunks of batches: `plan` (None: the items as loaded) over `dataset`'s items."""

    job_type = BatchJob  # what a batch in flight is (loader/device_split.py's holds window cuts)

    def __init__(self, dataset: Any, plan: FusionPlan | None, seed: int, epoch: int, deterministic: bool,
                 iterable: bool):
        self.dataset, self.plan, self.seed, self.epoch = dataset, plan, seed, epoch
        self.deterministic, self.iterable = deterministic, iterable
        self.key = "position in the epoch" if iterable else "dataset index"
        self.load_raw = getattr(dataset, "load_raw", None) if plan is not None else None
        fastprep_plan = plan if plan is not None else _own_plan(dataset)
        # Foreign code drawing from torch's generator runs with it seeded, one sample at a time.
        self.global_rng = deterministic and not (plan is not None and plan.fastprep_only)
        group = plan.fused if plan is not None else None
        self.group = group if group is not None and group.vectorised else None
        self.draws = min(fastprep_plan.draws, MAX_DRAWS) if fastprep_plan is not None else 0

    def __call__(self, job: BatchJob, a: int, b: int, stopping: Any) -> None:
        keys = job.indices[a:b]
        seeds = item_seeds(self.seed, keys, self.epoch)
        draws = seeded_draws(torch.from_numpy(seeds), self.draws).numpy() if self.draws else \
            np.empty((len(keys), 0), dtype=np.int64)
        if self.global_rng:
            for j in range(len(keys)):
                stopping()
                with GLOBAL_RNG, seeded(int(seeds[j])):  # load and transform on one seeded stream
                    sample = self._apply(self._load(job, a + j, keys[j]), keys[j])
                self._write(job, a + j, keys[j], sample)
            return
        seed_list, rows = seeds.tolist(), draws.tolist()
        stream = SampleStream(0)
        if job.items is None and not self.deterministic:
            raws, drawn = self._load_all(keys, stream, seed_list, rows, stopping)
        else:
            raws, drawn = [], []  # drawn: the seeds each item's loading took
            for j in range(len(keys)):
                stopping()
                with stream.reset(seed_list[j], rows[j]):
                    if self.deterministic:
                        with GLOBAL_RNG, seeded(seed_list[j]):
                            raws.append(self._load(job, a + j, keys[j]))
                    else:
                        raws.append(self._load(job, a + j, keys[j]))
                drawn.append(stream.pos)
        done = self._fused(job, a, keys, raws, draws, drawn) if self.group is not None else ()
        if len(done) == len(keys):
            return
        for j in range(len(keys)):
            if j in done:
                continue
            stopping()
            with stream.reset(seed_list[j], rows[j]):
                stream.pos = drawn[j]  # its draws continue where loading left them
                sample = self._apply(raws[j], keys[j])
            self._write(job, a + j, keys[j], sample)

    def _fused(self, job: BatchJob, a: int, keys: list[int], raws: list[Any], draws: np.ndarray,
               drawn: list[int]) -> range | set[int]:
        """The items the group's op takes, straight into the slot's image rows: one call per run
        of them; their positions (every item: a range). An item whose loading drew seeds goes item
        by item (its draws start later)."""
        staged = self._staged(keys, raws, drawn)
        try:
            runs = self.group.batch(staged, draws)
        except Exception as exc:
            raise SampleError(keys[0], "transform", self.key) from exc
        done: list[int] = []
        for run in runs:
            j0, n = run.start, len(run)
            try:
                self._write_run(job, a + j0, keys[j0], run)
            except Exception as exc:
                raise SampleError(keys[j0], "transform", self.key) from exc
            try:
                job.write_rest(a + j0, keys[j0:j0 + n], run.raws)
            except ValueError:
                raise  # the layout's own message names both samples
            except Exception as exc:
                raise SampleError(keys[j0], "batching", self.key) from exc
            done.extend(range(j0, j0 + n))
        return range(len(keys)) if len(done) == len(keys) else set(done)

    def _staged(self, keys: list[int], raws: list[Any], drawn: list[int]) -> list[Any]:
        """The items handed to the group's batch path (an item whose loading drew seeds is left out)."""
        return raws if not any(drawn) else [r if not d else _SKIP for r, d in zip(raws, drawn)]

    def _write_run(self, job: BatchJob, j: int, key: int, run: Any) -> None:
        """The op on a run of samples, straight into rows j, j + 1, ... of the slot's images."""
        image = torch.empty(3, *run.out_size, dtype=self.group.out_dtype)
        rows = job.image_rows(run.output_like(0, image), key, j, j + len(run))
        self.group.fusion.run(self.group, run, rows)

    def _load_all(self, keys: list[int], stream: SampleStream, seeds: list[int], rows: list[list[int]],
                  stopping: Any) -> tuple[list[Any], list[int]]:
        """The items of a map-style dataset's chunk, each loaded under its own seeds, and the seeds
        each loading drew: the per-item loop of __call__ with the stream entered once (each item
        resets it, as entering it per item did) and the dataset's method looked up once."""
        load = self.dataset.__getitem__ if self.load_raw is None else self.load_raw
        raws, drawn = [], []
        j = 0
        with stream:
            try:
                for j, key in enumerate(keys):
                    stopping()
                    stream.reset(seeds[j], rows[j])
                    raws.append(load(key))
                    drawn.append(stream.pos)
            except Exception as exc:
                raise SampleError(keys[j], "dataset", self.key) from exc
        return raws, drawn

    def _load(self, job: BatchJob, j: int, key: int) -> Any:
        if job.items is not None:
            return job.items[j]  # an iterable's item, read in order
        try:
            return self.dataset[key] if self.load_raw is None else self.load_raw(key)
        except Exception as exc:
            raise SampleError(key, "dataset", self.key) from exc

    def _apply(self, raw: Any, key: int) -> Any:
        if self.plan is None:
            return raw
        try:
            return self.plan.apply_item(raw)
        except Exception as exc:
            raise SampleError(key, "transform", self.key) from exc

    def _write(self, job: BatchJob, j: int, key: int, sample: Any) -> None:
        try:
            job.write(j, key, sample)
        except ValueError:
            raise  # the layout's own message names both samples
        except Exception as exc:
            raise SampleError(key, "batching", self.key) from exc


_SKIP = object()  # an item the fused batch path must leave alone


def _own_plan(dataset: Any) -> FusionPlan | None:
    """The plan of a dataset's own fastprep transform (applied in its __getitem__), whose draws can
    be precomputed too; None for anything else."""
    transform = getattr(dataset, "transform", None)
    return FusionPlan.of(transform) if getattr(transform, "fastprep_only", False) else None
