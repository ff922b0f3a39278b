"""Per-step numbers in constant memory: running sums and log-spaced histograms of the waits and the
step times, so a run of any length costs a few hundred counters and p50 / p95 stay within ~2%.

`StepStats.add(wait, step)` is on the training loop's path: a handful of float operations and two
list increments, no allocation."""

from __future__ import annotations

import math
from dataclasses import dataclass

PER_OCTAVE = 16  # bins per factor of 2: a bin spans 4.4%, its geometric middle is within 2.2%
LOW_EXP = -24  # the first bin starts at 2**-24 s (60 ns); shorter times land in it
OCTAVES = 35  # up to 2**11 s (~34 min); longer times land in the last bin
BINS = PER_OCTAVE * OCTAVES


def bin_of(seconds: float) -> int:
    """The histogram bin of a duration (clamped to the first and last bin)."""
    if seconds <= 0.0:
        return 0
    k = int((math.log2(seconds) - LOW_EXP) * PER_OCTAVE)
    return 0 if k < 0 else BINS - 1 if k >= BINS else k


def bin_middle(k: int) -> float:
    """The geometric middle of bin k, in seconds."""
    return 2.0 ** (LOW_EXP + (k + 0.5) / PER_OCTAVE)


def quantile(counts: list[int], q: float) -> float:
    """The q-quantile (0..1) of the durations counted in `counts`, in seconds (0.0 when empty)."""
    total = sum(counts)
    if not total:
        return 0.0
    rank = q * (total - 1)
    seen = 0
    for k, c in enumerate(counts):
        seen += c
        if seen > rank:
            return bin_middle(k)
    return bin_middle(len(counts) - 1)


class StepStats:
    """Waits against step times, step by step.

    A step is *input-bound* when its wait exceeds `threshold` times the step time (both in
    seconds; the step includes the wait).

    Args:
        threshold: the share of a step that, waited for the batch, makes it input-bound.

    Example:
        >>> s = StepStats(0.1)
        >>> s.add(0.050, 0.051)   # 50 ms of a 51 ms step spent waiting: input-bound
        >>> s.add(0.0001, 0.051)
        >>> s.input_bound, s.steps
        (1, 2)
    """

    def __init__(self, threshold: float):
        self.threshold = threshold
        self.steps = 0
        self.input_bound = 0
        self.wait_sum = 0.0
        self.step_sum = 0.0
        self.wait_bins = [0] * BINS
        self.step_bins = [0] * BINS

    def add(self, wait: float, step: float) -> None:
        self.steps += 1
        self.wait_sum += wait
        self.step_sum += step
        if wait > self.threshold * step:
            self.input_bound += 1
        self.wait_bins[bin_of(wait)] += 1
        self.step_bins[bin_of(step)] += 1

    def snapshot(self) -> Window:
        """The cumulative counters now (subtract two for the numbers of the steps between them)."""
        return Window(self.steps, self.input_bound, self.wait_sum, self.step_sum)


@dataclass(frozen=True)
class Window:
    """Counters at one moment; `later - earlier` gives the steps in between."""
    steps: int = 0
    input_bound: int = 0
    wait_sum: float = 0.0
    step_sum: float = 0.0

    def __sub__(self, other: Window) -> Window:
        return Window(self.steps - other.steps, self.input_bound - other.input_bound,
                      self.wait_sum - other.wait_sum, self.step_sum - other.step_sum)

    def line(self) -> str:
        """'input-bound 63% | wait 41.0 ms | step 65.0 ms' (means over the window)."""
        if not self.steps:
            return "no step yet"
        return (f"input-bound {self.input_bound / self.steps:.0%} | wait {ms(self.wait_sum / self.steps)} | "
                f"step {ms(self.step_sum / self.steps)}")


def ms(seconds: float) -> str:
    """A duration with 3 significant digits, in ms from 0.1 ms up: '41.3 ms', '1250 ms', '52 us'."""
    v = seconds * 1e3
    return f"{v:.0f} ms" if v >= 1000 else f"{v:.3g} ms" if v >= 0.1 else f"{v * 1e3:.3g} us"
