"""StreamPool: a device stage that scales, ``DevicePrefetcher(streams=k)`` (and so ``Loader(decode_on=...)``).

k threads each own a CUDA stream; a batch is copied and finished (decoded, resized, normalized:
the prefetcher's `expand`) on one of them while the others work on the batches before and after it.
The consumer takes the batches in order and never waits on the host for the device: its stream
waits on each batch's event, and each of the batch's tensors is marked as used by it
(record_stream), so the caching allocator does not give their memory to the stage's next batch
while the consumer's queued kernels still read it. A stage thread waits for its own batch's event
before handing the host batch back to its pool (the device must have read its pinned buffers), so
a slot is never reused while a copy from it is in flight; the consumer's thread never does.

On the CPU (``decode_on="cpu"``, the stand-in) there are no streams: a batch is done when its call
returns, and the host batch goes back when the consumer asks for the next one, as without streams.
The stage's own clock (:class:`StageStats`) says where its time went.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import torch


class CudaTimeline:
    """Streams and events of a CUDA device: work queued on a stream completes later."""

    asynchronous = True

    def __init__(self, device: torch.device):
        self.device = device

    def stream(self) -> Any:
        return torch.cuda.Stream(self.device)

    def use(self, stream: Any) -> Any:
        return torch.cuda.stream(stream)

    def record(self, stream: Any) -> Any:
        event = torch.cuda.Event()
        event.record(stream)
        return event

    def wait_done(self, event: Any) -> None:
        event.synchronize()

    def join(self, event: Any, tensors: list[torch.Tensor]) -> None:
        consumer = torch.cuda.current_stream(self.device)
        consumer.wait_event(event)
        for t in tensors:
            t.record_stream(consumer)


class HostTimeline:
    """The CPU: no streams; work is done when its call returns."""

    asynchronous = False

    def stream(self) -> None:
        return None

    def use(self, stream: Any) -> Any:
        return contextlib.nullcontext()

    def record(self, stream: Any) -> None:
        return None

    def wait_done(self, event: Any) -> None:
        pass

    def join(self, event: Any, tensors: list[torch.Tensor]) -> None:
        pass


def timeline_for(device: torch.device) -> CudaTimeline | HostTimeline:
    """The timeline of `device`: streams on CUDA, none on the CPU."""
    return CudaTimeline(device) if device.type == "cuda" else HostTimeline()


@dataclass
class StageStats:
    """Where a device stage's time went: `batches` made; `busy_s`, seconds its threads spent making
    them (issuing the work and, on a device, waiting for it to finish); `waited_s`, seconds the
    consumer waited for a batch not made yet (the stage was behind); `streams`, its threads."""

    streams: int
    batches: int = 0
    busy_s: float = 0.0
    waited_s: float = 0.0

    def describe(self) -> str:
        return (f"{self.streams} stream{'s' * (self.streams != 1)}, {self.batches} batches, busy {self.busy_s:.2f} s, "
                f"consumer waited {self.waited_s:.2f} s")


class StreamPool:
    """`streams` threads, each with its own stream of `timeline`, running ``work(batch)`` on it
    (see the module). `release`: hand the host batch back once the device has read it (on a
    device, from the stage's thread; on the CPU the caller does, when the consumer is done);
    `stats`: the StageStats to add to."""

    def __init__(self, streams: int, timeline: Any, work: Callable[[Any], Any], release: bool,
                 stats: StageStats | None = None):
        self.timeline, self.work, self.release = timeline, work, release
        self.stats = stats if stats is not None else StageStats(streams)
        self._pool = ThreadPoolExecutor(streams, thread_name_prefix="fastprep-device")
        self._local = threading.local()
        self._lock = threading.Lock()

    def submit(self, batch: Any) -> Future:
        """A future of (the batch made, its event, the host batch still to hand back or None)."""
        return self._pool.submit(self._run, batch)

    def _run(self, batch: Any) -> tuple[Any, Any, Any]:
        t0 = time.perf_counter()
        timeline = self.timeline
        stream = getattr(self._local, "stream", None)
        if stream is None:
            stream = self._local.stream = timeline.stream()
        with timeline.use(stream):
            out = self.work(batch)
            event = timeline.record(stream)
        host = batch
        if timeline.asynchronous and self.release:
            timeline.wait_done(event)  # the copies from the host batch's buffers are complete
            if hasattr(batch, "release"):
                batch.release()
            host = None
        with self._lock:
            self.stats.batches += 1
            self.stats.busy_s += time.perf_counter() - t0
        return out, event, host

    def result(self, future: Future) -> tuple[Any, Any, Any]:
        """The future's result, the consumer's wait for it counted."""
        t0 = time.perf_counter()
        got = future.result()
        with self._lock:
            self.stats.waited_s += time.perf_counter() - t0
        return got

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
