"""Deadlines for remote transfers: a per-request timeout trips only when a server goes quiet, so a
server trickling a few bytes now and then would keep a download (and every reader waiting on it)
alive for as long as the object is large. Each transfer and each wait for another's download ends
at a deadline instead (:attr:`fastprep.io.remote.Retry.deadline`).
"""

from __future__ import annotations

import fcntl
import time
from typing import Any

WAIT_STEP = 0.05  # seconds between two looks at another download's lock


def run_until(fs: Any, until: float, method: str, *args: Any, **kw: Any) -> Any:
    """fs.<method>(*args, **kw), given up with a TimeoutError at time.monotonic() `until`: an async
    client's (s3fs, http) coroutine is cancelled there, however its bytes trickle in; a blocking
    client's get_file is stopped at its next chunk past it (an fsspec callback)."""
    left = until - time.monotonic()
    if left <= 0:
        raise TimeoutError("no time left before the deadline")
    if getattr(fs, "async_impl", False) and not getattr(fs, "asynchronous", False) and \
            getattr(fs, "loop", None) is not None:
        from fsspec.asyn import sync  # noqa: PLC0415 (an optional dependency: the caller's fs imported it)

        try:
            return sync(fs.loop, getattr(fs, "_" + method), *args, timeout=left, **kw)
        except Exception as exc:
            if type(exc).__name__ == "FSTimeoutError":  # fsspec's name for the timeout it cut at
                raise TimeoutError(f"{method} was cut off at the deadline ({left:.1f} s were left of it)") from None
            raise
    if method == "get_file":
        kw["callback"] = _deadline_callback(until)
    return getattr(fs, method)(*args, **kw)


def lock_until(fd: int, until: float) -> bool:
    """The exclusive flock on `fd`, waited for until time.monotonic() `until`; False if not had by then."""
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            left = until - time.monotonic()
            if left <= 0:
                return False
            time.sleep(min(WAIT_STEP, left))


def http_timeout(seconds: float) -> Any:
    """aiohttp's per-request timeouts for an http(s) store: connecting, and each wait for more data
    (no total: a large download may take long; the deadline bounds it)."""
    import aiohttp  # noqa: PLC0415 (fsspec's http client's dependency)

    return aiohttp.ClientTimeout(total=None, sock_connect=seconds, sock_read=seconds)


def _deadline_callback(until: float) -> Any:
    """An fsspec callback that stops a blocking client's transfer at its next chunk past `until`."""
    from fsspec.callbacks import Callback  # noqa: PLC0415 (an optional dependency: the caller's fs imported it)

    class Deadline(Callback):
        def call(self, *args: Any, **kw: Any) -> None:
            if time.monotonic() > until:
                raise TimeoutError("the deadline passed during the transfer")

    return Deadline()
