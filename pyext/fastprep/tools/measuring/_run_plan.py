"""Progress of the tools' measurements: :class:`Plan` estimates the fraction of a run done, in
time, for :class:`fastprep.core._progress.Progress` (the bar, shared with the library's long runs)."""

from __future__ import annotations

import time
from typing import Any

from fastprep.core._progress import Progress, eta

__all__ = ["Plan", "Progress", "eta"]


class Plan:
    """Estimates the fraction of a run of measurements done, in time: each item's cost is its
    expected steps times the step time last seen for its key (or the slowest seen so far)."""

    def __init__(self, keys: list[Any], steps_guess: int, report: Any = None):
        self.keys, self.steps_guess, self.report = keys, steps_guess, report
        self.step_time: dict[Any, float] = {}
        self.steps: dict[Any, int] = {}
        self.start = time.perf_counter()
        self.item = 0
        self.item_start = self.start

    def begin(self, item: int) -> None:
        self.item, self.item_start = item, time.perf_counter()

    def _cost(self, key: Any) -> float:
        guess = max(self.step_time.values(), default=0.01)
        return self.step_time.get(key, guess) * self.steps.get(key, self.steps_guess)

    def tick(self, what: str, done: int, planned: int) -> None:
        if self.report is None:
            return
        now = time.perf_counter()
        key = self.keys[self.item]
        per_step = (now - self.item_start) / max(done, 1)
        self.step_time[key] = per_step
        # At least one more step while the item runs: a timed window may run past its plan.
        left = per_step * max(planned - done, 1) + sum(self._cost(k) for k in self.keys[self.item + 1:])
        elapsed = now - self.start
        self.report(what, elapsed / (elapsed + left) if elapsed + left > 0 else 1.0)

    def end(self, done: int) -> None:
        self.steps[self.keys[self.item]] = done
