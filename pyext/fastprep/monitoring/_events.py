"""Step times on a CUDA device, from events on the stream the loop runs on, read steps late.

Per step two events are recorded on the stream: A when the loop asks for the next batch, B when
the batch arrives. On the device's timeline

- A_i -> A_(i+1) is step i as the GPU lived it: its kernels, and any time the stream sat idle;
- A_i -> B_i is the part of the wait for batch i that the GPU spent idle: when the GPU still has
  queued work at A_i, A completes only when that work is done, so a wait hidden behind queued
  kernels counts as ~0, and a wait on an idle GPU counts in full.

Events are reused in a ring of `lag` slots and read `lag` steps after they were recorded, by which
time they are nearly always complete (`query()`, no wait). When one is not (the host ran `lag`
steps ahead of the GPU), the loop waits for it: that caps the run-ahead at `lag` steps, which still
leaves the GPU `lag - 1` steps of queued work, so it does not slow training.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

LAG = 16


class EventRing:
    """Records A/B events per step and hands finished steps to `on_step(wait_s, step_s)`.

    Step 0 (the first batch of a pass: start-up) is read but not handed on. A step counts once
    the request for the following batch is recorded, so a pass that ends by `break` drops its last
    step and one that ends by exhaustion keeps it.

    Args:
        stream: the stream events are recorded on (the loop's current stream).
        on_step: called with (wait, step) in seconds for each finished step but the first.
        lag: events in the ring (>= 2): how many steps late they are read.
        make_event: makes one timing event (default ``torch.cuda.Event(enable_timing=True)``).

    Example:
        >>> ring = EventRing(torch.cuda.current_stream(), stats.add)
        >>> ring.request(); batch = next(it); ring.arrived()   # every step
        >>> ring.drain()                                       # at the end of the pass
    """

    def __init__(self, stream: Any, on_step: Callable[[float, float], None], lag: int = LAG,
                 make_event: Callable[[], Any] | None = None):
        if make_event is None:
            import torch  # noqa: PLC0415 (torch is loaded by then; kept out of the module's import)

            def make_event() -> Any:
                return torch.cuda.Event(enable_timing=True)
        self.stream, self.on_step, self.lag = stream, on_step, lag
        self.a = [make_event() for _ in range(lag)]
        self.b = [make_event() for _ in range(lag)]
        self.requests = 0  # A events recorded
        self.arrivals = 0  # B events recorded
        self.read = 0  # steps read

    def request(self) -> None:
        """Record A: the loop asks for the next batch (reads the step recorded `lag` ago first)."""
        k = self.requests
        if k >= self.lag:
            self._read(k - self.lag)
        self.a[k % self.lag].record(self.stream)
        self.requests = k + 1

    def arrived(self) -> None:
        """Record B: the batch asked for last arrived."""
        self.b[self.arrivals % self.lag].record(self.stream)
        self.arrivals += 1

    def _read(self, j: int) -> None:
        if j < self.read:
            return
        slot, end = self.a[j % self.lag], self.a[(j + 1) % self.lag]
        if not end.query():
            end.synchronize()
        wait, step = slot.elapsed_time(self.b[j % self.lag]), slot.elapsed_time(end)
        self.read = j + 1
        if j:
            self.on_step(wait * 1e-3, step * 1e-3)

    def drain(self) -> None:
        """Read every finished step (waits for the last event: call it when the pass ends)."""
        for j in range(self.read, min(self.arrivals, self.requests - 1)):
            self._read(j)
