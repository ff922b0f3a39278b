"""Where does a pipeline starve? The caching method, and loader settings sweeps.

find_bottleneck() measures training steps/s with progressively less cached:
  1. one batch cached on the device: the step alone (a CompactBatch's expand included), the ceiling;
  2. one batch cached on the host, copied to the device every step (not on the CPU: no copy);
  3. the dataset returns one fully processed sample every time (real workers, collate, copy);
  4. the dataset caches the raw sample and runs the transforms every time;
  5. nothing cached: the real pipeline.
The stage that adds the most time per step, beyond noise, is the verdict (fastprep.tools.diagnose._verdict);
measurement is in fastprep.tools.measuring._measure, the stand-in datasets in fastprep.tools.measuring._stand_ins.

What step_fn receives: the batch the loader yields, moved to `device` (tensors in tuples, lists,
dicts and namedtuples one by one; a CompactBatch whole), then expanded there when it is a
CompactBatch (``CompactBatch.expand()``: float32 images / 255, int64 labels, bool masks; a
fastprep.Loader's own `expand` when it has one). ``expand=False`` passes the CompactBatch itself;
a callable `expand` is applied to every batch on the device instead (fastprep.tools.measuring._step_input).
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from torch.utils.data import DataLoader, IterableDataset

import fastprep.tools.diagnose._raw_loading as rm
import fastprep.tools.measuring._stand_ins as si
from fastprep.batch._compact import CompactBatch
from fastprep.batch._device_prefetcher import check_device, move_to
from fastprep.core._iterators import stop_iterator
from fastprep.monitoring._advice import STEADY
from fastprep.monitoring._pipeline import facts_of
from fastprep.tools.bench._sweep import SweepReport, sweep, sweep_loader, sweep_threads
from fastprep.tools.diagnose._failures import PHASE_NOTE
from fastprep.tools.diagnose._verdict import ADVICE, LEVELS, STAGES, BottleneckReport, Level, judge, more_data
from fastprep.tools.measuring._measure import Settings, Source, Stats, measure, round_adjusted, synchronize
from fastprep.tools.measuring._run_plan import Plan
from fastprep.tools.measuring._step_input import Epochs, expander, own

__all__ = ["find_bottleneck", "sweep", "sweep_loader", "sweep_threads", "BottleneckReport", "SweepReport",
           "Level", "LEVELS", "STAGES", "ADVICE", "split_dataset", "is_fastprep_loader"]

split_dataset = si.split_dataset


def is_fastprep_loader(obj: Any) -> bool:
    from fastprep.loader import Loader  # noqa: PLC0415 (imported only when asked)

    return isinstance(obj, Loader)


@dataclass
class _Pipe:
    """How to make each caching level's batches for one kind of loader."""
    host: Any  # the first batch, on the host, owned
    make: dict[int, Callable[[], Any] | str] = field(default_factory=dict)  # level 3..5 -> loader or why not
    drain: int = 1
    block: int = 2
    expand: Any = None  # a fastprep.Loader's own expand, for the batches it yields unexpanded here
    device: Any = None
    batch_size: int | None = None
    raw: tuple | None = None  # (raw sample as loaded, the dataset that loaded it, the transform), for the advice
    loader: str = "dataloader"  # or "fastprep"
    workers: int = 0  # a Loader's threads, a DataLoader's num_workers
    decode_on: Any = None  # a fastprep.Loader's decode_on
    original: Any = None  # the loader as given, for its description when no raw sample splits off


def _first(loader: Any) -> Any:
    it = iter(loader)
    try:
        return own(next(it))
    except StopIteration:
        raise ValueError("find_bottleneck: the loader yields no batch") from None
    finally:
        stop_iterator(it)


def _map_pipe(pipe: _Pipe, dataset: Any, build: Callable[[Any], Any], length: int,
              loader_transform: Any = None, transform_kw: bool = False) -> None:
    """Levels 3-5 over a map-style `dataset`; `build(ds, **kw)` makes the loader over a stand-in.
    Level 4's cached raw sample is decoded (stand_ins.decoded): decoding is raw loading."""
    kw = (lambda t: {"transform": t}) if transform_kw else (lambda t: {})
    if loader_transform is not None:  # a fastprep.Loader with its own transform
        raw = dataset.load_raw(0) if callable(getattr(dataset, "load_raw", None)) else dataset[0]
        raw0 = si.decoded(raw)
        sample0 = si.apply_to_image(loader_transform, raw0)
        pipe.make[3] = lambda: build(si.Repeat(si.Constant(sample0), length, dataset), **kw(None))
        pipe.make[4] = lambda: build(si.Repeat(si.Constant(raw0), length, dataset), **kw(loader_transform))
        try:
            inner = si.split_dataset(dataset).inner
        except TypeError:
            inner = dataset
        pipe.raw = (raw, inner, loader_transform)
    else:
        sample0 = dataset[0]
        pipe.make[3] = lambda: build(si.Repeat(si.Constant(sample0), length, dataset), **kw(None))
        try:
            split = si.split_dataset(dataset)
            raw = split.load(0)
            raw0 = si.decoded(raw)
            pipe.make[4] = lambda: build(si.Repeat(si.TransformOf(split, raw0), length, dataset), **kw(None))
            pipe.raw = (raw, split.inner, getattr(split.inner, "transform", None))
        except TypeError as exc:
            pipe.make[4] = f"cannot split raw loading from the transforms: {exc}"
    pipe.make[5] = lambda: build(si.Cycle(dataset, length), **kw(si.SAME))


def _pipe(loader: Any, settings: Settings) -> _Pipe:
    if is_fastprep_loader(loader):
        host_loader = si.rebuild_fastprep_loader(loader, loader.dataset, device=None, expand=False)
        pipe = _Pipe(_first(host_loader), drain=loader.depth, expand=loader.expand or None,
                     device=loader.device, batch_size=loader.batch_size, loader="fastprep", workers=loader.threads,
                     decode_on=loader.decode_on, original=loader)
        length = (settings.most_steps(pipe.drain, pipe.block) + loader.depth) * loader.batch_size
        _map_pipe(pipe, loader.dataset, lambda ds, **kw: si.rebuild_fastprep_loader(loader, ds, **kw), length,
                  loader.transform, transform_kw=True)
        return pipe
    factory = None
    if callable(loader) and not isinstance(loader, DataLoader) and not hasattr(loader, "__iter__"):
        factory, loader = loader, loader()  # legacy: loader_factory(dataset=...) -> DataLoader
        if is_fastprep_loader(loader) or (isinstance(loader, DataLoader) and not _takes_dataset(factory)):
            return _pipe(loader, settings)
    workers = getattr(loader, "num_workers", 0)
    pipe = _Pipe(_first(loader), drain=max(1, workers), block=max(2, 2 * workers),
                 batch_size=getattr(loader, "batch_size", None), workers=workers, original=loader)
    dataset = getattr(loader, "dataset", None)
    if factory is not None and not _takes_dataset(factory):
        why = "loader_factory takes no `dataset=` keyword"
    elif dataset is None or isinstance(dataset, IterableDataset) or not hasattr(dataset, "__getitem__"):
        why = "the loader has no map-style .dataset"
    elif factory is None and not isinstance(loader, DataLoader):
        why = f"cannot rebuild a {type(loader).__name__} over a stand-in dataset"
    else:
        why = ""
    if why:
        pipe.make = {3: why, 4: why, 5: factory or (lambda: loader)}
        return pipe
    prefetch = (loader.prefetch_factor or 0) * workers if isinstance(loader, DataLoader) else 0
    length = (settings.most_steps(pipe.drain, pipe.block) + prefetch) * (pipe.batch_size or 1)
    build = (lambda ds: factory(dataset=ds)) if factory else (lambda ds: si.rebuild_dataloader(loader, ds))
    _map_pipe(pipe, dataset, build, length)
    return pipe


def _takes_dataset(factory: Callable[..., Any]) -> bool:
    try:
        return "dataset" in inspect.signature(factory).parameters
    except (TypeError, ValueError):
        return False


def find_bottleneck(loader: Any, step_fn: Callable[[Any], Any], device: Any = None, *, expand: Any = True,
                    move: Callable[[Any], Any] | None = None, threshold: float = 0.8, dominance: float = 1.5,
                    steps: int | None = None, repeats: int = 3, warmup: int | None = None,
                    precision: float = 0.10, max_steps: int = 200, max_seconds: float = 5.0,
                    time_limit: float = 120.0,
                    progress: Callable[[str, float], None] | None = None) -> BottleneckReport:
    """Run the caching method and name the stage that starves the step, with its margin.

    Args:
        loader: a DataLoader or a fastprep.Loader, rebuilt with the same settings over stand-in
            datasets (levels 3-5: one cached sample; one cached raw sample; the dataset itself,
            viewed long enough that no epoch restarts inside a measurement); or, as before, a
            ``loader_factory(dataset=None)`` returning one over the dataset it is given.
            Raw loading and transforms are found as fastprep.tools.measuring._stand_ins documents
            (``load_raw``/``apply_transform``, a ``transform`` attribute, wrappers' ``.dataset``).
        step_fn: one training step on a batch on `device` (see the module doc for what it gets).
        device: where steps run; default the fastprep.Loader's device, else "cpu". On the CPU
            (without `move`) there is no copy and level 2 is skipped.
        expand: True (default), False or a callable: see the module doc.
        move: how a host batch gets to the device (default: tensors ``.to(device)``); give one
            to time a transfer of your own, on any device.
        threshold: nothing cached at this share of the ceiling or more is "model-bound".
        dominance: the verdict's stage must add this many times the time of the next one.
        steps, repeats, warmup, precision, max_steps, max_seconds: see
            fastprep.tools.measuring._measure.Settings. `repeats` is the number of rounds (every level
            measured once, back to back) always run.
        time_limit: seconds the whole measurement may take: after `repeats` rounds, more rounds
            run while the verdict is within noise and the 95% intervals' narrowing says it can
            settle in the time left; if it cannot, the margin says about how long it would need.
            0, or a fixed `steps` (a length the caller chose), runs `repeats` rounds only.
        progress: called as ``progress(what, fraction_done)`` (fastprep.tools.measuring._run_plan.Progress).

    Example:
        >>> report = find_bottleneck(DataLoader(ds, 64, num_workers=4), train_step, "cuda")
        >>> print(report.table())   # levels, spread, verdict with its margin, what to do
    """
    settings = Settings(steps=steps, repeats=repeats, warmup=warmup, precision=precision, max_steps=max_steps,
                        max_seconds=max_seconds)
    if isinstance(time_limit, bool) or not isinstance(time_limit, (int, float)) or not time_limit >= 0:
        raise ValueError(f"find_bottleneck: expected time_limit to be a number of seconds >= 0, got {time_limit!r}")
    began = time.perf_counter()  # round 1 counts from here: reading the first batch is part of it
    with _phase("reading the first batch and item 0 for the cached levels"):
        pipe = _pipe(loader, settings)
    dev = check_device("find_bottleneck", device if device is not None else pipe.device or "cpu")
    on_device = expander("find_bottleneck", pipe.expand if pipe.expand is not None else expand)
    to_dev = move or (lambda b: move_to(b, dev, non_blocking=True))
    with _phase("moving the first batch to the device"):
        dev_batch = to_dev(pipe.host)
    full_step = lambda b: step_fn(on_device(to_dev(b)))  # noqa: E731
    levels: list[Level] = [Level(name, None) for name in LEVELS]
    sources: dict[int, Source] = {1: Source(lambda: itertools.repeat(dev_batch), lambda b: step_fn(on_device(b)))}
    if dev.type == "cpu" and move is None:
        levels[1] = Level(LEVELS[1], None, "no host->device copy on the CPU", absent=True)
    else:
        sources[2] = Source(lambda: itertools.repeat(pipe.host), full_step)
    for k in (3, 4, 5):
        make = pipe.make[k]
        if isinstance(make, str):
            levels[k - 1].note = make
        else:
            sources[k] = Source(lambda make=make: Epochs(make), full_step, pipe.drain, pipe.block)
    sync = synchronize(dev)
    plan = Plan([], 16, progress)
    timings: dict[int, list] = {k: [] for k in sources}
    if time_limit and settings.steps is None:  # plan `repeats` rounds within the limit (see _fit)
        settings.max_seconds = _fit(settings, time_limit, len(sources))
    rounds, more, lengths, start = 0, 1.0, [], began
    while True:  # rounds: every level once, back to back; the first `repeats`, then while noise decides
        first, order = len(plan.keys), list(sources)
        order = order[rounds % len(order):] + order[:rounds % len(order)]  # no level always follows the same one
        plan.keys.extend(order)
        for n, k in enumerate(order):
            plan.begin(first + n)
            what = f"level {k}/5 {LEVELS[k - 1]}, round {rounds + 1}/{max(settings.repeats, rounds + 1)}"
            with _phase(f"measuring level {k}/5 ({LEVELS[k - 1]})"):
                timing = measure(sources[k], settings, sync,
                                 lambda done, planned, what=what: plan.tick(what, done, planned))
            plan.end(len(timing.step_times) + timing.warmup_steps + sources[k].drain)
            timings[k].append(timing)
        rounds += 1
        now = time.perf_counter()
        lengths.append(now - start)
        start, spent = now, now - began
        # A round starts only when the longest so far fits in what is left: the limit is passed by
        # at most one round (by what that round took beyond the longest before it).
        fits = not time_limit or max(lengths) <= time_limit - spent
        if rounds < settings.repeats and fits:
            continue
        _fill(levels, timings)
        more = more_data(levels, threshold, dominance)
        if more <= 1 or settings.steps is not None or not time_limit or not fits or \
                _rounds_to_settle(more, rounds) * spent / rounds > 2 * (time_limit - spent):
            break
    facts = dict(loader=pipe.loader, workers=pipe.workers, device=dev.type, compact=isinstance(pipe.host, CompactBatch),
                 decode_on=pipe.decode_on)
    source = rm.source_of(*pipe.raw, **facts) if pipe.raw else \
        rm.RawSource(replace(facts_of(pipe.original, dev.type), compact=facts["compact"]))
    verdict, margin, advice = judge(levels, threshold, dominance, rm.advice_table(source))
    return BottleneckReport(levels, verdict, margin + _how_long(more, rounds, spent, settings, time_limit), advice,
                            str(dev), {
        "steps": settings.steps, "repeats": settings.repeats, "warmup": settings.warmup,
        "precision": settings.precision, "max_steps": max_steps, "threshold": threshold, "dominance": dominance,
        "batch_size": pipe.batch_size, "time_limit": time_limit, "rounds": rounds, "seconds": spent,
        "round_seconds": lengths, "max_seconds": settings.max_seconds},
        source.describe(), source.facts.describe())


@contextlib.contextmanager
def _phase(what: str) -> Any:
    """Notes on an error raised inside what was being done (fastprep.tools.diagnose._failures reads it)."""
    try:
        yield
    except Exception as exc:
        if hasattr(exc, "add_note") and not any(n.startswith(PHASE_NOTE) for n in getattr(exc, "__notes__", ())):
            exc.add_note(PHASE_NOTE + what)
        raise


def _fill(levels: list[Level], timings: dict[int, list]) -> None:
    """Each measured level's Stats over its rounds, each round's common slow-down taken out."""
    adjusted, _ = round_adjusted(timings)
    for k, ts in adjusted.items():
        levels[k - 1].stats = Stats.of(ts)
        if any(t.restarts for t in ts):
            levels[k - 1].note = "epoch restarts inside the timed steps (a longer dataset avoids them)"


def _rounds_to_settle(more: float, rounds: int) -> int:
    """More rounds for `more` times the data (inf: no number of rounds)."""
    return math.ceil(rounds * (more - 1)) if math.isfinite(more) else 1 << 30


def _fit(settings: Settings, time_limit: float, levels: int) -> float:
    """The longest warm-up and timed window (Settings.max_seconds) with which `repeats` rounds of
    `levels` measurements fit in `time_limit`: each measurement is at most a warm-up and a timed
    window of that length, plus a step or two and the loader's start-up (a quarter more, here)."""
    return min(settings.max_seconds, time_limit / (settings.repeats * levels * 2.5))


def _how_long(more: float, rounds: int, spent: float, settings: Settings, time_limit: float = 0.0) -> str:
    """What the margin says about the length of the measurement."""
    short = f" ({rounds} of {settings.repeats} rounds fitted in the time limit, {_s(spent)})" \
        if rounds < settings.repeats else ""
    if more <= 1:
        return f" (settled after {rounds} rounds, {_s(spent)})" if rounds > settings.repeats else short
    if not math.isfinite(more):
        return f"; after {rounds} rounds ({_s(spent)}) the two estimates are equal: measuring longer would not " \
               f"tell them apart"
    need = _rounds_to_settle(more, rounds)
    seconds = need * spent / rounds
    how = "repeats / --repeats" if settings.steps else "time_limit / --time-limit"
    if seconds > 10 * max(time_limit, spent):
        return f"; within noise after {rounds} rounds ({_s(spent)}): settling it would take about {need} more " \
               f"rounds (~{_s(seconds)}), more than ten times this run: steady the step instead ({STEADY}) or " \
               f"measure on a quieter machine"
    return f"; run longer: about {_s(seconds)} more ({need} more round{'s' * (need > 1)}, {how}) would settle it " \
           f"(within noise after {rounds} rounds, {_s(spent)})"


def _s(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds >= 10 else f"{seconds:.1f} s"
