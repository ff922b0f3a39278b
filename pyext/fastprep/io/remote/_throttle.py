"""A store's throttle, met once and honoured by all: when a request gets a 503 (S3's SlowDown) or a
429 (Too Many Requests), every request of that store holds off until the backoff has passed: the
other threads of the process (the prefetcher's downloads, a Loader's range reads), the other
processes that share the store (DataLoader workers, forked or spawned) and the other processes of
the node reading the same URL (torchrun's ranks), instead of each finding the throttle with a
failed request of its own. The pause is a "paused until" time in the node's named cells for the
URL (fastprep.io.remote._shared; time.monotonic() is the system's clock on Linux, the same in every
process); each request waits for it, never past its own deadline (Retry.deadline): no
lock is held while waiting, so no wait can deadlock.
"""

from __future__ import annotations

import errno
import random
import time

from fastprep.io.remote._shared import SharedCells

# What a throttle looks like: an HTTP status, an error code or a client's error name (s3fs turns
# SlowDown into an OSError(EBUSY) whose cause is botocore's ClientError).
STATUSES = (429, 503)
CODES = ("SlowDown", "Throttling", "ThrottlingException", "TooManyRequests", "RequestLimitExceeded",
         "RequestThrottled", "ServerBusy", "503", "429")
WORDS = ("SlowDown", "Throttl", "TooManyRequests", "RequestLimitExceeded", "ServerBusy")

# The clock and the sleep the pause is kept with (a test records them).
clock = time.monotonic
sleep = time.sleep


def throttled(exc: BaseException | None) -> bool:
    """Whether `exc` (or an error in its chain) is the store asking for fewer requests: a 503 or a
    429 status (aiohttp's .status, azure-core's .status_code, gcsfs's .code, botocore's response),
    a SlowDown / Throttling / TooManyRequests code, or s3fs's OSError(EBUSY) for those."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno == errno.EBUSY:
            return True
        if any(w in type(exc).__name__ or w in str(exc) for w in WORDS):
            return True
        for attr in ("status", "status_code", "code"):
            if getattr(exc, attr, None) in STATUSES:
                return True
        response = getattr(exc, "response", None)
        if isinstance(response, dict):
            code = str(response.get("Error", {}).get("Code", ""))
            if code in CODES or response.get("ResponseMetadata", {}).get("HTTPStatusCode") in STATUSES:
                return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


class SharedPause:
    """The time a store's requests hold off until, kept in cell `slot` of shared `cells`.

    Args:
        cells: the store's shared cells (one per store; its processes share them).
        slot: which cell holds "paused until" (a time.monotonic()).

    Example:
        >>> pause = SharedPause(SharedCells(1), 0)
        >>> pause.pause(0.5)           # a 503: every holder of the cells waits half a second
        >>> pause.hold(until=time.monotonic() + 600)
    """

    def __init__(self, cells: SharedCells, slot: int):
        self.cells, self.slot = cells, slot
        self.pauses = 0  # pauses this process began or lengthened
        self.began = 0.0  # when this process last began or lengthened one

    def pause(self, seconds: float) -> None:
        """Every request of the store holds off for `seconds` from now (a pause under way that ends
        later is kept)."""
        ends = clock() + seconds

        def change(cells: list[float]) -> bool:
            if ends <= cells[self.slot]:
                return False
            cells[self.slot] = ends
            return True
        if self.cells.update(change):
            self.pauses, self.began = self.pauses + 1, clock()

    def paused_until(self) -> float:
        """The time.monotonic() the pause under way ends (0.0 before any: the node's cells for the
        URL are made by the first pause, so a store never throttled leaves no file)."""
        if self.cells.name is not None and not self.cells.exists():
            return 0.0
        return self.cells.read()[self.slot]

    def hold(self, until: float, spread: float = 0.0) -> None:
        """Waits while the store is paused (a pause begun or lengthened meanwhile included), not
        past time.monotonic() `until` (the request's deadline); then up to `spread` seconds more,
        drawn at random, so the threads and processes that waited do not all send at once."""
        waited = False
        while True:
            now, ends = clock(), self.paused_until()
            if ends <= now or now >= until:
                break
            sleep(min(ends, until) - now)
            waited = True
        if waited and spread > 0 and clock() < until:
            sleep(min(random.uniform(0, spread), max(0.0, until - clock())))
