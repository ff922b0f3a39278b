"""A chunk of a batch in a Loader thread: the chunk's seeds drawn at once, its items loaded,
the transform's plan applied, the samples written into the batch's slot.

Randomness (docs/loader.md): sample k runs under ``item_seed(seed, k, epoch)``, k its dataset index
(an iterable dataset's: its position in the epoch). fastprep's transforms draw from the sample's
SampleStream: the seeds torch's generator seeded with that would give, as SeedByIndex in a
DataLoader, precomputed for the whole chunk by one ``seeded_draws`` call; they run in parallel and
reproduce. Code that is not fastprep's (the dataset's own, a foreign transform) draws from torch's
shared generator: in parallel and unseeded by default; with ``deterministic=True`` one sample at a
time under one lock, torch's generator seeded per sample (SeedByIndex's bits, serialised).

Bad samples (``on_error="skip" | "warn"``, fastprep/core/_bad_samples.py): an item whose loading or
transform raises is marked, the rest of the chunk goes on (a fused op that raises leaves its run to
the per-sample path, which finds the culprit), and each marked slot is filled by
:meth:`ChunkRunner._substitute` under the bad sample's own seeds; the job notes it for the consumer.
An iterable dataset's substitutes are items at hand: its batch's others, then those read before the
batch in the pass (:meth:`ChunkRunner.new_job` hands each batch the latest MAX_SUBSTITUTES).
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import numpy as np
import torch

from fastprep.batch._slots import BatchJob
from fastprep.core._bad_samples import NEVER_SKIPPED, SampleError, check_on_error, stream_substitutes, substitutes
from fastprep.core._rng import SampleStream, item_seeds, seeded
from fastprep.errors import MAX_SUBSTITUTES, SubstitutesExhausted
from fastprep.loader._fused_chunks import SKIP, ChunkRuns
from fastprep.loader._hooks import LoaderHooks, hooked
from fastprep.ops._seeded_draws import MAX_DRAWS, seeded_draws
from fastprep.transforms import FusionPlan

# torch's default generator is one per process: the deterministic samples of every Loader share it.
GLOBAL_RNG = threading.Lock()
# Never a bad sample: the process is short of memory, or a Loader part refused (already a SampleError).
NOT_SKIPPED = (*NEVER_SKIPPED, SampleError)


class _Failed:
    """A chunk's item whose loading raised (on_error "skip" / "warn"): replaced by _substitute."""

    __slots__ = ("exc", "stage")

    def __init__(self, exc: Exception, stage: str):
        self.exc, self.stage = exc, stage


class ChunkRunner:
    """Runs chunks of batches: `plan` (None: the items as loaded) over `dataset`'s items; a bad
    sample raises (`on_error` "raise") or is replaced (see the module)."""

    job_type = BatchJob  # what a batch in flight is (loader/_device_split.py's holds window cuts)

    def __init__(self, dataset: Any, plan: FusionPlan | None, seed: int, epoch: int, deterministic: bool,
                 iterable: bool, on_error: str = "raise", hooks: LoaderHooks | None = None):
        self.dataset, self.plan, self.seed, self.epoch = dataset, plan, seed, epoch
        self.hooks = hooks  # a profiler's (loader/_hooks.py); None: every stage called as is
        self.deterministic, self.iterable = deterministic, iterable
        self.skip = check_on_error("Loader", on_error) != "raise"
        self.index_kind = "position in the epoch" if iterable else "dataset index"
        self.load_raw = getattr(dataset, "load_raw", None) if plan is not None else None
        fastprep_plan = plan if plan is not None else _own_plan(dataset)
        # Foreign code drawing from torch's generator runs with it seeded, one sample at a time.
        self.global_rng = deterministic and not (plan is not None and plan.fastprep_only)
        group = plan.fused if plan is not None else None
        self.group = group if group is not None and group.vectorised else None
        self.chunk_runs = ChunkRuns(self.group) if self.group is not None else None  # its batch path
        self.draws = min(fastprep_plan.draws, MAX_DRAWS) if fastprep_plan is not None else 0
        # A dataset that reads a chunk's samples together (a remote pack's windows by range) is
        # handed trial runs of them: only where all the code is fastprep's, drawing from the stream
        fetch_ahead = getattr(dataset, "fetch_ahead", None) if not iterable else None
        self.fetch_ahead = fetch_ahead if fastprep_plan is not None and fastprep_plan.fastprep_only else None
        self._read: deque[Any] = deque(maxlen=MAX_SUBSTITUTES)  # an iterable's latest items of the pass

    def new_job(self, indices: list[int], ring: Any, items: list[Any] | None) -> BatchJob:
        """The job of the pass's next batch (`indices`; `items`: an iterable's, read in order), made in
        the pass's order: under skip / warn an iterable's job holds the latest MAX_SUBSTITUTES items read before it
        (``job.earlier``, the latest first), the substitutes its own items may lack."""
        job = self.job_type(indices, ring, items)
        if items is not None and self.skip:  # only a skipping Loader reads them (under "raise": no items kept)
            job.earlier = tuple(reversed(self._read))
            self._read.extend(items)
        return job

    def __call__(self, job: BatchJob, a: int, b: int, stopping: Any) -> None:
        """Samples a to b of `job`'s batch into its slot (`stopping()` raises once the pass is stopped)."""
        if self.hooks is None:
            self._chunk(job, a, b, stopping)
        else:
            self.hooks.run("chunk", self._chunk, job, a, b, stopping)

    def _chunk(self, job: BatchJob, a: int, b: int, stopping: Any) -> None:
        indices, hooks = job.indices[a:b], self.hooks
        seeds = hooked(hooks, "seeds", item_seeds, self.seed, indices, self.epoch)
        draws = hooked(hooks, "draws", seeded_draws, torch.from_numpy(seeds), self.draws).numpy() if self.draws \
            else np.empty((len(indices), 0), dtype=np.int64)
        seed_list, rows = seeds.tolist(), draws.tolist()
        if self.global_rng:
            for j in range(len(indices)):
                stopping()
                stage, failure = "dataset", None
                with GLOBAL_RNG, seeded(seed_list[j]):  # load and transform on one seeded stream
                    try:
                        raw = self._fetch(job, a + j, seed_list[j])
                        stage = "transform"
                        made = self._produce(raw, indices[j], 0, rows[j])
                    except Exception as exc:  # noqa: BLE001 (_substitute re-raises all but a sample's own error)
                        failure = exc
                if failure is not None:  # out of the lock: the substitutes take it one by one
                    made = self._substitute(job, a + j, seed_list[j], rows[j], failure, stage)
                self._put(job, a + j, indices[j], made)
            return
        stream = SampleStream(0)
        if job.items is None and not self.deterministic:
            raws, drawn = hooked(hooks, "load", self._load_all, indices, stream, seed_list, rows, stopping)
        else:
            raws, drawn = [], []  # drawn: the seeds each item's loading took
            for j in range(len(indices)):
                stopping()
                with stream.reset(seed_list[j], rows[j]):
                    raws.append(self._load_guarded(job, a + j, indices[j], seed_list[j]))
                drawn.append(stream.pos)
        done = self._fused(job, a, indices, raws, draws, drawn) if self.group is not None else ()
        if len(done) == len(indices):
            return
        for j in range(len(indices)):
            if j in done:
                continue
            stopping()
            raw = raws[j]
            if type(raw) is _Failed:
                made = self._substitute(job, a + j, seed_list[j], rows[j], raw.exc, raw.stage)
            else:
                try:
                    with stream.reset(seed_list[j], rows[j]):
                        stream.pos = drawn[j]  # its draws continue where loading left them
                        made = self._produce(raw, indices[j], drawn[j], rows[j])
                except Exception as exc:  # noqa: BLE001 (_substitute re-raises all but a sample's own error)
                    made = self._substitute(job, a + j, seed_list[j], rows[j], exc, "transform")
            self._put(job, a + j, indices[j], made)

    def _fused(self, job: BatchJob, a: int, indices: list[int], raws: list[Any], draws: np.ndarray,
               drawn: list[int]) -> range | set[int]:
        """The items the group's op takes, straight into the slot's image rows: one call per run
        of them; their positions (every item: a range). An item whose loading drew seeds goes item
        by item (its draws start later); so does every item of a run whose op raised, when bad
        samples are skipped (the per-sample path finds which one)."""
        staged = self._staged(indices, raws, drawn)
        try:
            runs = hooked(self.hooks, "fold", self.chunk_runs, staged, draws)
        except Exception as exc:  # noqa: BLE001
            self._failed(indices[0], "transform", exc)
            return set()
        done: list[int] = []
        for run in runs:
            j0, n = run.start, len(run)
            try:
                hooked(self.hooks, "write", self._write_run, job, a + j0, indices[j0], run)
            except Exception as exc:  # noqa: BLE001
                self._failed(indices[j0], "transform", exc)
                continue
            try:
                hooked(self.hooks, "labels", job.write_rest, a + j0, indices[j0:j0 + n], run.raws)
            except ValueError:
                raise  # the layout's own message names both samples
            except Exception as exc:
                raise SampleError(indices[j0], "batching", self.index_kind) from exc
            done.extend(range(j0, j0 + n))
        return range(len(indices)) if len(done) == len(indices) else set(done)

    def _staged(self, indices: list[int], raws: list[Any], drawn: list[int]) -> list[Any]:
        """The items handed to the group's batch path (an item whose loading drew seeds, or failed, is left out)."""
        if not any(drawn) and not (self.skip and any(type(r) is _Failed for r in raws)):
            return raws
        return [r if not d and type(r) is not _Failed else SKIP for r, d in zip(raws, drawn)]

    def _write_run(self, job: BatchJob, j: int, index: int, run: Any) -> None:
        """The op on a run of samples, straight into rows j, j + 1, ... of the slot's images."""
        image = torch.empty(3, *run.out_size, dtype=self.group.out_dtype)
        rows = job.image_rows(run.output_like(0, image), index, j, j + len(run))
        hooked(self.hooks, "op", self.group.fusion.run, self.group, run, rows)

    def _load_all(self, indices: list[int], stream: SampleStream, seeds: list[int], rows: list[list[int]],
                  stopping: Any) -> tuple[list[Any], list[int]]:
        """The items of a map-style dataset's chunk, each loaded under its own seeds, and the seeds
        each loading drew: the per-item loop of __call__ with the stream entered once (each item
        resets it, as entering it per item did) and the dataset's method looked up once."""
        load = self.dataset.__getitem__ if self.load_raw is None else self.load_raw
        raws, drawn = [], []
        with stream:
            if self.fetch_ahead is not None:
                self.fetch_ahead(indices, lambda j: self._trial(load, stream, indices[j], seeds[j], rows[j]))
            for j, index in enumerate(indices):
                stopping()
                stream.reset(seeds[j], rows[j])
                try:
                    raws.append(load(index))
                except Exception as exc:  # noqa: BLE001 (_failed re-raises all but a sample's own error)
                    self._failed(index, "dataset", exc)
                    raws.append(_Failed(exc, "dataset"))
                drawn.append(stream.pos)
        return raws, drawn

    def _trial(self, load: Any, stream: SampleStream, index: int, seed: int, row: list[int]) -> Any:
        """Sample `index` loaded and transformed under its seeds (the dataset's fetch_ahead stops it
        where it would read; the real run resets the stream and draws the same)."""
        stream.reset(seed, row)
        raw = load(index)
        return self._produce(raw, index, stream.pos, row)

    def _load_guarded(self, job: BatchJob, j: int, index: int, seed: int) -> Any:
        """Item j loaded (under torch's generator seeded when deterministic), or a _Failed."""
        try:
            return self._fetch(job, j, seed)
        except Exception as exc:  # noqa: BLE001 (_failed re-raises all but a sample's own error)
            self._failed(index, "dataset", exc)
            return _Failed(exc, "dataset")

    def _fetch(self, job: BatchJob, j: int, seed: int, substitute: int | None = None) -> Any:
        """The item at position j of the batch: its index's item, or `substitute`'s in its place (an
        iterable's `substitute`: an offset in the batch, or -k: the k-th latest item read before it)."""
        if job.items is not None:  # an iterable's item, read in order
            j = j if substitute is None else substitute
            return job.items[j] if j >= 0 else job.earlier[-j - 1]
        index = job.indices[j] if substitute is None else substitute
        load = self.dataset.__getitem__ if self.load_raw is None else self.load_raw
        if self.deterministic and not self.global_rng:
            with GLOBAL_RNG, seeded(seed):
                return load(index)
        return load(index)

    def _make(self, job: BatchJob, j: int, seed: int, row: list[int], substitute: int | None = None) -> Any:
        """Position j's sample (`substitute`: another item in its place) loaded and transformed
        under position j's seeds, one sample on its own: what _put writes."""
        if self.global_rng:
            with GLOBAL_RNG, seeded(seed):  # load and transform on one seeded stream
                return self._produce(self._fetch(job, j, seed, substitute), job.indices[j], 0, row)
        with SampleStream(seed, row) as stream:
            raw = self._fetch(job, j, seed, substitute)
            return self._produce(raw, job.indices[j], stream.pos, row)

    def _produce(self, raw: Any, index: int, drawn: int, row: list[int]) -> Any:
        """The plan on one loaded item of sample `index`, inside its stream (`drawn`: the seeds its
        loading drew; `row`: its precomputed draws): what _put writes."""
        return raw if self.plan is None else self.plan.apply_item(raw)

    def _put(self, job: BatchJob, j: int, index: int, sample: Any) -> None:
        try:
            job.write(j, index, sample)
        except ValueError:
            raise  # the layout's own message names both samples
        except Exception as exc:
            raise SampleError(index, "batching", self.index_kind) from exc

    def _failed(self, index: int, stage: str, exc: Exception) -> None:
        """Raise `exc` as the sample's failure unless it is a bad sample to skip."""
        if isinstance(exc, SampleError):
            raise exc
        if not self.skip or isinstance(exc, NOT_SKIPPED):
            raise SampleError(index, stage, self.index_kind) from exc

    def _substitute(self, job: BatchJob, j: int, seed: int, row: list[int], exc: Exception, stage: str) -> Any:
        """Position j's item failed (`exc`, in `stage`): the first of the items after it
        (bad_samples.substitutes: the dataset's next indices mod its length; an iterable's,
        bad_samples.stream_substitutes: the batch's next items, then those read before it) that
        loads and transforms under position j's seeds, noted in the job."""
        index = job.indices[j]
        self._failed(index, stage, exc)
        if job.items is not None:
            candidates = stream_substitutes(j, len(job.items), len(getattr(job, "earlier", ())))
            alone = ("an iterable dataset's bad item is replaced by another item of its batch or one read before it "
                     "in the pass")
        elif hasattr(self.dataset, "__len__"):
            n = len(self.dataset)
            candidates, alone = [c % n for c in substitutes(index, n)], f"a dataset of {n} sample{'s' * (n != 1)}"
        else:  # nothing to count the next indices mod
            raise SampleError(index, stage, self.index_kind) from exc
        tried = []
        for substitute in candidates:
            tried.append(substitute if job.items is None else index - j + substitute)  # an iterable's: its position
            try:
                made = self._make(job, j, seed, row, substitute)
            except Exception as again:  # noqa: BLE001
                if isinstance(again, NOT_SKIPPED):
                    raise
                continue
            job.note_bad(j, index, stage, exc, tried[-1])
            return made
        exhausted = SubstitutesExhausted(index, tried, exc, self.index_kind, alone)
        raise SampleError(index, stage, self.index_kind) from exhausted


def _own_plan(dataset: Any) -> FusionPlan | None:
    """The plan of a dataset's own fastprep transform (applied in its __getitem__), whose draws can
    be precomputed too; None for anything else."""
    transform = getattr(dataset, "transform", None)
    return FusionPlan.of(transform) if getattr(transform, "fastprep_only", False) else None
