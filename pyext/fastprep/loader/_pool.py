"""The Loader's threads: daemon threads running submitted chunks, stopped by shutdown() (an
iteration's close, its garbage collection, or the interpreter's exit), each chunk checking the
stop flag between samples so a stop waits for one sample, not a chunk."""

from __future__ import annotations

import atexit
import queue
import threading
import weakref
from collections.abc import Callable
from typing import Any

# Pools still running: stopped at exit, before the interpreter tears down what their threads use
# (a thread inside a native op at teardown aborted the process).
_LIVE: weakref.WeakSet = weakref.WeakSet()
JOIN_S = 5.0  # how long shutdown waits for a thread inside one sample (a hanging dataset[i])


class Stopped(BaseException):
    """Raised in a thread when its pool stops mid-chunk: nobody waits for that chunk any more."""


class ThreadPool:
    """`threads` daemon threads running submitted (job, fn) chunks; fn gets the pool's `stopping`
    check. A chunk's exception goes to its job (job.chunk_done), never out of the thread."""

    def __init__(self, threads: int):
        self.threads = threads
        self._tasks: queue.SimpleQueue = queue.SimpleQueue()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, name=f"fastprep-loader-{k}", daemon=True)
                         for k in range(threads)]
        for t in self._threads:
            t.start()
        _LIVE.add(self)

    def stopping(self) -> None:
        """Raise Stopped once the pool is shutting down (called by chunks between samples)."""
        if self._stop.is_set():
            raise Stopped

    def submit(self, job: Any, fn: Callable[[], None]) -> None:
        self.submit_all(job, [fn])

    def submit_all(self, job: Any, fns: list[Callable[[], None]]) -> None:
        """A job's chunks, counted before any is queued: a chunk finished before the next was
        counted would mark the job done with the rest of its samples unwritten."""
        chunks = [job.add_chunk() for _ in fns]
        for chunk, fn in zip(chunks, fns):
            self._tasks.put((job, chunk, fn))

    def _run(self) -> None:
        while True:
            task = self._tasks.get()
            if task is None or self._stop.is_set():
                return
            job, chunk, fn = task
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 (handed to the consumer, which re-raises it)
                job.chunk_done(exc, chunk)
            else:
                job.chunk_done(None, chunk)

    def shutdown(self) -> None:
        """Stop the threads: each finishes the sample it is in, then exits."""
        self._stop.set()
        for _ in self._threads:
            self._tasks.put(None)
        current = threading.current_thread()
        for t in self._threads:
            if t is not current:
                t.join(JOIN_S)
        _LIVE.discard(self)


@atexit.register
def _stop_all() -> None:
    for pool in list(_LIVE):
        pool.shutdown()
