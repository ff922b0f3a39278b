"""Timing steps the way a user can act on: warm-up until the step time is steady, then enough timed
steps for a stated confidence, repeated, with the spread between repeats.

A measurement opens a fresh batch source (a new loader iterator: worker start-up happens here, in
the warm-up, never in the timed window), runs untimed warm-up steps until the mean of the last
`block` step times is within `STEADY` of the block before, then times a window of consecutive
steps. The rate is steps / window seconds, so bursty arrivals (a DataLoader's workers finish their
batches together) average out instead of skewing a median.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

from fastprep.core._iterators import stop_iterator

Z95 = 1.96  # the normal quantile of a two-sided 95% interval
STEADY = 0.2  # two warm-up blocks whose means differ by less than this (relative) are steady


@dataclass
class Settings:
    """How long to measure.

    Args:
        steps: timed steps per repeat; None times whole blocks of steps until the mean step time
            is within +-`precision` at 95% confidence, by the block means (see block_means).
        repeats: measurements per level (interleaved across levels, so a burst of machine load
            hits all of them alike); the spread between them is reported.
        warmup: untimed steps before each timed window; None warms up until the step time is
            steady (at most `max_warmup` steps or `max_seconds`).
        precision: with steps=None, the target half-width of the 95% confidence interval of the
            mean step time, relative (0.10: +-10%).
        min_steps, max_steps: bounds on the timed steps per repeat when steps is None (at least
            two blocks are always timed).
        max_warmup: most warm-up steps before measuring anyway (noted as "not steady").
        max_seconds: a timed window (and a warm-up) stops growing once this long.
    """
    steps: int | None = None
    repeats: int = 3
    warmup: int | None = None
    precision: float = 0.10
    min_steps: int = 5
    max_steps: int = 200
    max_warmup: int = 50
    max_seconds: float = 5.0

    def __post_init__(self) -> None:
        for name, low in (("repeats", 1), ("min_steps", 1), ("max_steps", 1), ("max_warmup", 1)):
            _check_int(name, getattr(self, name), low)
        if self.steps is not None:
            _check_int("steps", self.steps, 1)
        if self.warmup is not None:
            _check_int("warmup", self.warmup, 0)
        if not (isinstance(self.precision, (int, float)) and 0 < self.precision < 1):
            raise ValueError(f"diagnose: expected precision in (0, 1), got {self.precision!r}")
        if not (isinstance(self.max_seconds, (int, float)) and self.max_seconds > 0):
            raise ValueError(f"diagnose: expected max_seconds > 0, got {self.max_seconds!r}")

    def most_steps(self, drain: int, block: int) -> int:
        """An upper bound on the batches one measurement takes (a dataset view this long never
        restarts an epoch inside it)."""
        warm = self.warmup if self.warmup is not None else max(self.max_warmup, 2 * block)
        return drain + warm + (self.steps or self.max_steps) + 2


def _check_int(name: str, value: Any, low: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"diagnose: expected {name} to be an int >= {low}, got {value!r}")


@dataclass
class Timing:
    """One measurement: `step_times` of the timed window (consecutive), and its warm-up."""
    step_times: list[float]
    warmup_steps: int
    steady: bool
    restarts: int = 0  # epochs the source started inside the timed window
    block: int = 1  # steps per block for the batch means

    @property
    def rate(self) -> float:
        return len(self.step_times) / sum(self.step_times)


@dataclass
class Source:
    """Where a level's batches come from and what a step does with one.

    `open()` returns a fresh iterator (a new loader iterator, so its start-up lands in the warm-up);
    `drain` batches are taken untimed first (batches a loader may have prefetched while starting);
    `block` steps make a warm-up window and a block of the batch means (bursty sources, as N
    workers finishing their batches together, need a block of >= 2N steps).
    """
    open: Callable[[], Iterator[Any]]
    step: Callable[[Any], Any]
    drain: int = 1
    block: int = 2


def synchronize(device: torch.device) -> Callable[[], None]:
    """A function that waits for the device's queued work (none on CPU)."""
    backend = getattr(torch, device.type, None) if device.type != "cpu" else None
    sync = getattr(backend, "synchronize", None)
    if sync is None:
        return lambda: None
    return lambda: sync(device) if device.type == "cuda" else sync()


def measure(source: Source, settings: Settings, sync: Callable[[], None],
            tick: Callable[[int, int], None] = lambda done, planned: None) -> Timing:
    """Warm up `source` until steady, then time enough steps (see Settings). `tick(done, planned)`
    is called after every step, for progress."""
    it = source.open()
    try:
        def one() -> float:
            t0 = time.perf_counter()
            source.step(next(it))
            sync()
            return time.perf_counter() - t0

        least = settings.steps or max(settings.min_steps, 2 * source.block)
        planned = source.drain + (settings.warmup if settings.warmup is not None else 2 * source.block) + least
        done = 0
        for _ in range(source.drain):
            one()
            done += 1
            tick(done, planned)
        warm: list[float] = []
        steady = True
        while True:
            if settings.warmup is not None:
                if len(warm) >= settings.warmup:
                    break
            elif len(warm) >= 2 * source.block and _steady(warm[-2 * source.block:], source.block):
                break
            elif len(warm) >= settings.max_warmup or sum(warm) > settings.max_seconds:
                steady = False
                break
            warm.append(one())
            done += 1
            planned = max(planned, done + 1 + least)
            tick(done, planned)
        epochs = getattr(it, "epochs", 0)
        times: list[float] = []
        planned = done + least
        while not _enough(times, source.block, settings):
            times.append(one())
            done += 1
            planned = max(planned, done + (source.block - len(times) % source.block) % source.block)
            tick(done, planned)
        return Timing(times, len(warm), steady, getattr(it, "epochs", 0) - epochs, source.block)
    finally:
        stop_iterator(it)


def _steady(times: list[float], block: int) -> bool:
    a, b = statistics.fmean(times[:block]), statistics.fmean(times[block:])
    return abs(a - b) <= STEADY * max(a, b)


def block_means(times: list[float], block: int) -> list[float]:
    """Means of consecutive blocks of `block` steps (the method of batch means: a block as long
    as a burst of arrivals makes the means nearly independent); a short tail joins the last."""
    k = len(times) // block
    if k < 2:
        return times
    means = [statistics.fmean(times[j * block:(j + 1) * block]) for j in range(k - 1)]
    return means + [statistics.fmean(times[(k - 1) * block:])]


def half_width(means: list[float]) -> float:
    """The 95% interval's half-width of the mean of `means`, relative to it."""
    if len(means) < 2:
        return float("inf")
    mean = statistics.fmean(means)
    return Z95 * statistics.stdev(means) / mean / math.sqrt(len(means)) if mean > 0 else 0.0


def _enough(times: list[float], block: int, settings: Settings) -> bool:
    """Fixed `steps`; or whole blocks, at least min_steps, whose mean is within +-precision at
    95% (or max_steps, or max_seconds)."""
    n = len(times)
    if settings.steps is not None:
        return n >= settings.steps
    if n < max(settings.min_steps, 2 * block) or n % block:
        return False
    return half_width(block_means(times, block)) <= settings.precision or n >= settings.max_steps \
        or sum(times) > settings.max_seconds


def round_adjusted(timings: dict[Any, list[Timing]]) -> tuple[dict[Any, list[Timing]], list[float]]:
    """The timings with each round's common slow-down taken out, and those slow-downs.

    Round r measures every level once, back to back (timings[k][r]), so a burst of load on a
    shared machine slows the levels of one round together. Taking log rate = level + round +
    noise, a round's slow-down is the mean over levels of their log rate's distance from their
    own mean over rounds (the factors multiply to 1: the levels' overall rates stay); each
    timing's step times are divided by its round's factor. Rounds measured by fewer than two
    levels, or a single round, are left as they are.
    """
    keys = [k for k, ts in timings.items() if ts]
    rounds = min((len(timings[k]) for k in keys), default=0)
    if len(keys) < 2 or rounds < 2:
        return timings, [1.0] * rounds
    logs = {k: [math.log(t.rate) for t in timings[k][:rounds]] for k in keys}
    means = {k: statistics.fmean(v) for k, v in logs.items()}
    factors = [math.exp(-statistics.fmean(logs[k][r] - means[k] for k in keys)) for r in range(rounds)]
    adjusted = {k: [Timing([x / factors[r] for x in t.step_times], t.warmup_steps, t.steady, t.restarts, t.block)
                    if r < rounds else t for r, t in enumerate(ts)] for k, ts in timings.items()}
    return adjusted, factors


@dataclass
class Stats:
    """A level over its repeats: the median rate (robust to one repeat hit by a burst of load),
    the spread between repeats, and `ci`, the 95% interval's half-width of the mean step time from
    the block means of all repeats, relative; `lo`/`hi` bound the rate by it."""
    rates: list[float]
    steps: int
    ci: float  # half-width of the 95% interval of the mean step time, relative to it
    steady: bool
    warmup_steps: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, timings: list[Timing]) -> Stats:
        means = [m for tm in timings for m in block_means(tm.step_times, tm.block)]
        ci = half_width(means)
        return cls([tm.rate for tm in timings], sum(len(tm.step_times) for tm in timings),
                   ci if math.isfinite(ci) else 0.0, all(tm.steady for tm in timings),
                   [tm.warmup_steps for tm in timings])

    @property
    def rate(self) -> float:
        return statistics.median(self.rates)

    @property
    def lo(self) -> float:
        """The median rate with the step time at the top of its 95% interval (from the block means
        of every repeat: a repeat hit by a burst of load widens it, without deciding it)."""
        return self.rate / (1 + self.ci)

    @property
    def hi(self) -> float:
        return self.rate / max(1 - self.ci, 1e-9)

    @property
    def spread(self) -> float:
        """(max - min) / median of the repeats' rates."""
        return (max(self.rates) - min(self.rates)) / self.rate

    def as_dict(self) -> dict[str, Any]:
        return {"steps_per_s": self.rate, "repeats": self.rates, "timed_steps": self.steps,
                "ci95": self.ci, "lo": self.lo, "hi": self.hi, "spread": self.spread,
                "steady": self.steady, "warmup_steps": self.warmup_steps}
