"""Outages of a store, waited out: when a read has used its tries and the store cannot be reached
at all (connection refused, host or network unreachable, a connect timeout), the read waits for it
to come back, trying again with backoff and jitter, for the outage budget (``Retry.outage``) rather
than raise out of an epoch. One outage at a time per process: every thread that meets it joins the
same one, so the budget is counted from the first failure, not once per thread, and one WARNING
says when the wait starts and one when the store answers again (or when the budget ran out).
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time

# What "cannot be reached" looks like: no server answered (errnos of a connect), or a client's
# error named so (botocore's EndpointConnectionError and ConnectTimeoutError, aiohttp's
# ClientConnectorError, which carries the connect's errno too).
UNREACHABLE_ERRNOS = (errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.EHOSTDOWN, errno.ENETDOWN,
                      errno.ECONNABORTED)
UNREACHABLE_NAMES = ("EndpointConnection", "ConnectTimeout", "ClientConnector", "ConnectionRefused")

log = logging.getLogger("fastprep")


def unreachable(exc: BaseException | None) -> bool:
    """Whether `exc` (or an error in its chain) says the store could not be reached at all."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, ConnectionRefusedError) or (isinstance(exc, OSError) and exc.errno in UNREACHABLE_ERRNOS):
            return True
        if any(w in type(exc).__name__ for w in UNREACHABLE_NAMES):
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


class Outage:
    """This process's current outage: when it began and when its budget ends (None: none now)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.began: float | None = None
        self.ends = 0.0

    def join(self, budget: float, url: str, error: str) -> float:
        """The time.monotonic() the current outage's budget ends, the outage begun now (and said
        at WARNING) if none is under way (or the last one's budget ran out: its readers gave up)."""
        with self._lock:
            if self.began is None or time.monotonic() >= self.ends:
                self.began, self.ends = time.monotonic(), time.monotonic() + budget
                log.warning("fastprep: cannot reach %s (%s); waiting up to %g s (Retry.outage) for the store to "
                            "come back: reads pause where they are and carry on then", url, error, budget)
            return self.ends

    def recovered(self, url: str) -> None:
        """A read succeeded: an outage under way is over (said at WARNING, once)."""
        if self.began is None:  # the usual case: no lock taken
            return
        with self._lock:
            if self.began is not None:
                log.warning("fastprep: %s answers again after %.1f s; reads carry on", url,
                            time.monotonic() - self.began)
                self.began = None

    def gave_up(self, ends: float, url: str) -> None:
        """A read gave up at the end of the outage that ends at `ends`: it is over (said once); a
        later failure begins another, with a budget of its own."""
        with self._lock:
            if self.began is not None and self.ends == ends:
                log.warning("fastprep: %s was still unreachable after %.1f s, the outage budget: giving up",
                            url, time.monotonic() - self.began)
                self.began = None

    def after_fork(self) -> None:
        self._lock = threading.Lock()


OUTAGE = Outage()
if hasattr(os, "register_at_fork"):  # a thread may have held the lock at the fork
    os.register_at_fork(after_in_child=OUTAGE.after_fork)
