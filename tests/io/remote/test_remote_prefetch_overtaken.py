"""The Prefetcher when the reader is faster than the store (issue 43): shards the reader opened
before their download was started are never fetched by it afterwards (each would be a second
download of a shard maybe evicted since: egress for nothing)."""

import threading

import pytest

from fastprep.io.remote import Prefetcher

pytestmark = [pytest.mark.one_backend]


class SlowCache:
    """A ShardCache stand-in: `ensure` records the shard, the first download held until `go` is set."""

    def __init__(self, n: int):
        self.shards = [(f"shard-{k}", 100) for k in range(n)]
        self.fetched: list[int] = []
        self.go = threading.Event()

    def cached(self, k: int) -> bool:
        return k in self.fetched

    def ensure(self, k: int) -> None:
        if not self.fetched:
            assert self.go.wait(10)
        self.fetched.append(k)


@pytest.mark.parametrize("overtaken_to, then", [(3, [4]), (1, [2]), (5, [])])
def test_shards_the_reader_passed_are_not_fetched(overtaken_to, then):
    cache = SlowCache(6)
    prefetcher = Prefetcher(cache, workers=1, budget=200)
    try:
        prefetcher.start([0, 1, 2, 3, 4, 5])  # shard 0's download starts, and waits
        prefetcher.reached(overtaken_to)  # the reader fetched shards itself up to this one meanwhile
        cache.go.set()
        assert prefetcher.wait(10)
        assert cache.fetched == [0, *then]  # then only what lies ahead of the reader, within the budget
    finally:
        prefetcher.close()
