"""Per-step numbers in constant memory: running sums and log-spaced histograms of the waits and the
step times, so a run of any length costs a few hundred counters and p50 / p95 stay within ~2%.

The training loop only appends each step's wait and step time to `pending` (two list appends, no
arithmetic on a cache gone cold during the step); `flush()` counts them in bulk with numpy, once a
refresh period and before any number is read.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PER_OCTAVE = 16  # bins per factor of 2: a bin spans 4.4%, its geometric middle is within 2.2%
LOW_EXP = -24  # the first bin starts at 2**-24 s (60 ns); shorter times land in it
OCTAVES = 35  # up to 2**11 s (~34 min); longer times land in the last bin
BINS = PER_OCTAVE * OCTAVES


def bins_of(seconds: np.ndarray) -> np.ndarray:
    """The histogram bin of each duration (clamped to the first and last bin)."""
    with np.errstate(divide="ignore"):  # log2(0) = -inf lands in bin 0
        k = np.floor((np.log2(seconds) - LOW_EXP) * PER_OCTAVE)
    return np.clip(k, 0, BINS - 1).astype(np.intp)


def bin_middle(k: int) -> float:
    """The geometric middle of bin k, in seconds."""
    return 2.0 ** (LOW_EXP + (k + 0.5) / PER_OCTAVE)


def quantile(counts: np.ndarray, q: float) -> float:
    """The q-quantile (0..1) of the durations counted in `counts`, in seconds (0.0 when empty)."""
    cumulative = np.cumsum(counts)
    if not cumulative[-1]:
        return 0.0
    return bin_middle(int(np.searchsorted(cumulative, q * (cumulative[-1] - 1), side="right")))


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
        >>> s.flush(); s.input_bound, s.steps
        (1, 2)
    """

    def __init__(self, threshold: float):
        self.threshold = threshold
        self.pending: list[float] = []  # wait, step, wait, step, ...: appended to, never rebound
        self.steps = 0
        self.input_bound = 0
        self.wait_sum = 0.0
        self.step_sum = 0.0
        self.wait_bins = np.zeros(BINS, np.int64)
        self.step_bins = np.zeros(BINS, np.int64)

    def add(self, wait: float, step: float) -> None:
        self.pending += (wait, step)

    def flush(self) -> None:
        """Count the pending steps."""
        n = len(self.pending) & ~1  # whole pairs; the loop may append while another thread reads
        if not n:
            return
        pairs = np.array(self.pending[:n], np.float64).reshape(-1, 2)
        del self.pending[:n]
        waits, steps = pairs[:, 0], pairs[:, 1]
        self.steps += len(pairs)
        self.input_bound += int(np.count_nonzero(waits > self.threshold * steps))
        self.wait_sum += float(waits.sum())
        self.step_sum += float(steps.sum())
        self.wait_bins += np.bincount(bins_of(waits), minlength=BINS)
        self.step_bins += np.bincount(bins_of(steps), minlength=BINS)

    def snapshot(self) -> Window:
        """The cumulative counters now (subtract two for the numbers of the steps between them)."""
        self.flush()
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
