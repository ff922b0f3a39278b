"""Shards downloaded ahead of the reader, in the order an epoch first uses them: a few downloads at
a time, never more bytes ahead of the reader than the cache's budget allows.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from fastprep.io.remote._cache import ShardCache


def first_use(shard_of_record: list[int] | object, order: list[int] | object) -> list[int]:
    """The shards of the records in `order`, each once, in the order they are first needed."""
    seen: dict[int, None] = {}
    for i in order:
        seen.setdefault(int(shard_of_record[int(i)]), None)
    return list(seen)


class Prefetcher:
    """Downloads shards into a :class:`ShardCache` ahead of use.

    :meth:`start` gives the shards' order (a new call replaces the old order); :meth:`reached` tells
    it the reader opened a shard, which moves the window of shards it may fetch: from the reader's
    shard on, as many as fit `budget` bytes. A failed download is left for the reader, which
    fetches the shard itself and names the failure (``errors`` keeps the prefetcher's).

    Args:
        cache: the pack's shard cache.
        workers: downloads at a time.
        budget: bytes of shards ahead of (and including) the reader's; None: no bound.

    Example:
        >>> p = Prefetcher(cache, workers=4, budget=1 << 30)
        >>> p.start([3, 0, 2, 1]); p.wait()
    """

    def __init__(self, cache: ShardCache, workers: int = 4, budget: int | None = None):
        if not isinstance(workers, int) or isinstance(workers, bool) or workers < 1:
            raise ValueError(f"Prefetcher: expected workers to be an int >= 1, got {workers!r}")
        self.cache, self.workers, self.budget = cache, workers, budget
        self.errors: list[BaseException] = []
        self._order: list[int] = []
        self._at: dict[int, int] = {}
        self._pos = self._next = 0
        self._generation = 0
        self._cond = threading.Condition()
        self._pool: ThreadPoolExecutor | None = None
        self._inflight = 0

    def start(self, order: list[int]) -> None:
        """Fetch these shards in this order (from the first), replacing any order given before."""
        with self._cond:
            self._generation += 1
            self._order = [int(k) for k in order]
            self._at = {}
            for j, k in enumerate(self._order):
                self._at.setdefault(k, j)
            self._pos = self._next = 0
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="fastprep-prefetch")
            self._fill()

    def reached(self, k: int) -> None:
        """The reader opened shard k: shards before it in the order need no room any more, and
        none of them (nor k) is fetched from here on: a reader that overtook the downloads (faster
        than the store) used them already, and a download of one now, evicted since, would fetch
        it a second time for nothing."""
        with self._cond:
            j = self._at.get(k)
            if j is not None and j > self._pos:
                self._pos = j
                self._next = max(self._next, j + 1)
                self._fill()

    def _fill(self) -> None:  # under the condition's lock
        while self._next < len(self._order) and self._inflight < self.workers:
            if self.budget is not None:
                ahead = sum(self.cache.shards[k][1] for k in self._order[self._pos:self._next + 1])
                if ahead > self.budget and self._next > self._pos:
                    return
            k = self._order[self._next]
            self._next += 1
            if self.cache.cached(k):
                continue
            self._inflight += 1
            self._pool.submit(self._fetch, k, self._generation)

    def _fetch(self, k: int, generation: int) -> None:
        try:
            if generation == self._generation:
                self.cache.ensure(k)
        except Exception as exc:  # noqa: BLE001 (the reader fetches it again and raises a named error)
            with self._cond:
                self.errors.append(exc)
        finally:
            with self._cond:
                self._inflight -= 1
                self._fill()
                self._cond.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """Blocks until nothing is in flight and nothing more may be fetched now; False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: self._inflight == 0, timeout)

    def close(self) -> None:
        with self._cond:
            self._generation += 1
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
