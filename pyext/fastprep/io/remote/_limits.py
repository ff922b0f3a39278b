"""A user's cap on a store's requests and bytes per second, for a store that throttles (and answers
503s past some rate) or bills per request: each request takes its share from a token bucket before
it is sent, and waits for the bucket when it is empty.
"""

from __future__ import annotations

import math
import time

from fastprep.io.remote._shared import SharedCells

# The clock and the sleep the bucket is kept with (a test records them).
clock = time.monotonic
sleep = time.sleep


def _rate(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (value > 0 and math.isfinite(value)):
        raise ValueError(f"RateLimit: expected {name} to be a number > 0 or None, got {value!r}")
    return float(value)


# Below this the bucket's computed wait is rounding: ten costs of 0.1 s summed onto a clock near
# 6e4 s leave ~6e-11 s past the burst.
TINY_WAIT = 1e-6


class RateLimit:
    """At most `requests_per_s` requests and `bytes_per_s` bytes a second to a store, bursts of up
    to `burst` seconds' worth allowed (a token bucket: a "generic cell rate" schedule).

    One RateLimit is one budget, wherever it goes: the threads of a process, and the processes
    that get it by fork or by pickle (a DataLoader's workers, forked or spawned) share it (its
    bucket is a file of shared cells: fastprep.io.remote._shared), as do two datasets given the
    same RateLimit. Ranks that each make their own have one budget each: divide the node's or the
    account's cap by the ranks. A request's bytes are counted when it is sent (a range's or a
    shard's size, known beforehand); a wait never runs past the request's deadline (Retry.deadline).

    Args:
        requests_per_s: requests a second at most (each range of a multi-range read is one);
            None: no cap on requests.
        bytes_per_s: bytes read a second at most; None: no cap on bytes.
        burst: seconds of the rates that may go at once after a quiet spell (> 0).

    Example:
        >>> ds = PackedDataset("s3://bucket/train.packed", rate_limit=RateLimit(requests_per_s=100, bytes_per_s=200e6))
    """

    def __init__(self, requests_per_s: float | None = None, bytes_per_s: float | None = None, burst: float = 1.0):
        self.requests_per_s = _rate("requests_per_s", requests_per_s)
        self.bytes_per_s = _rate("bytes_per_s", bytes_per_s)
        if self.requests_per_s is None and self.bytes_per_s is None:
            raise ValueError("RateLimit: expected requests_per_s or bytes_per_s (or both) to be set, got neither")
        if isinstance(burst, bool) or not isinstance(burst, (int, float)) or not (burst > 0 and math.isfinite(burst)):
            raise ValueError(f"RateLimit: expected burst to be a number of seconds > 0, got {burst!r}")
        self.burst = float(burst)
        self.waited = 0.0  # seconds this process's requests waited for the bucket
        self._cells = SharedCells(2)  # when each bucket is next empty (its theoretical arrival time)

    def take(self, requests: int, nbytes: int, until: float) -> float:
        """Reserves `requests` requests and `nbytes` bytes, waiting (not past time.monotonic()
        `until`) until the bucket holds them; returns the seconds waited."""
        now = clock()
        costs = [requests / self.requests_per_s if self.requests_per_s else 0.0,
                 nbytes / self.bytes_per_s if self.bytes_per_s else 0.0]

        def reserve(cells: list[float]) -> float:
            wait = 0.0
            for i, cost in enumerate(costs):
                if cost:
                    cells[i] = max(cells[i], now) + cost
                    wait = max(wait, cells[i] - self.burst - now)
            return wait
        wait = min(self._cells.update(reserve), max(0.0, until - now))
        if wait < TINY_WAIT:  # the float sums' rounding at time.monotonic()'s magnitude, not a wait
            return 0.0
        sleep(wait)
        self.waited += wait
        return wait

    def __getstate__(self) -> dict:
        return {**self.__dict__, "waited": 0.0}

    def __repr__(self) -> str:
        return f"RateLimit(requests_per_s={self.requests_per_s}, bytes_per_s={self.bytes_per_s}, burst={self.burst})"
