"""Retries for remote reads: throttling (503 SlowDown), timeouts and dropped connections are tried
again after an exponential backoff with full jitter, a bounded number of times and within an
overall deadline; the last failure becomes a :class:`fastprep.io.RemoteReadError` naming the URL
and what was being read. No client exception leaves as it is: each error raised here is fastprep's,
its text and its chain's redacted (fastprep.io.remote._redaction).
"""

from __future__ import annotations

import errno
import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from fastprep.errors import RemoteAccessError, RemoteReadError, ShardFormatError, ShardMismatchError
from fastprep.io.remote._outage import OUTAGE, unreachable
from fastprep.io.remote._redaction import describe, redact, stand_in
from fastprep.io.remote._throttle import SharedPause, throttled

__all__ = ["Retry", "describe", "redact"]

T = TypeVar("T")

# Errors no retry can mend: the object is not there, or this client may not read it.
FATAL = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, ImportError, TypeError)
PASS = (KeyboardInterrupt, SystemExit, GeneratorExit, MemoryError)  # not the store's: raised as they are
LOCAL_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)  # writing the download here failed: not the remote's fault
# ... and the clients' errors of that kind (botocore's missing credentials, bad parameters).
FATAL_NAMES = ("Credentials", "ParamValidation", "NoSuchBucket", "AccessDenied", "InvalidAccessKeyId",
               "SignatureDoesNotMatch", "EndpointResolution", "InvalidURL")
OUTAGE_PAUSE = 0.05  # the shortest wait between two tries while a store is unreachable
DENIED_NAMES = ("AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "Forbidden", "Unauthorized")


@dataclass(frozen=True)
class Retry:
    """How remote reads are retried.

    Args:
        tries: attempts in all (>= 1); the last failure raises.
        backoff: seconds before the second attempt; doubled each time (full jitter: a uniform wait
            in [0, that]), at most `max_backoff`.
        max_backoff: the longest wait between two attempts, in seconds.
        timeout: seconds a request may wait to connect or for more data before it counts as failed
            (botocore's connect and read timeouts for s3://, aiohttp's for http(s)://, unless
            storage_options sets the client's own); other stores take their client's timeout
            through storage_options.
        deadline: seconds one read or download may take in all, its tries and the waits between
            them included, however steadily its bytes trickle in (a server sending a byte now and
            then never trips `timeout`); a reader waiting for another's download of the same shard
            counts its wait in it. Past it: a RemoteReadError naming the URL and the deadline.
        outage: seconds a read waits for a store that cannot be reached at all (connection refused,
            host unreachable, a connect timeout) once its `tries` are used, trying again with backoff
            and jitter (at most `max_backoff` apart) rather than raise out of the epoch: the read
            then carries on where it was. One budget per outage for the whole process (its threads
            join the outage the first one met; fastprep.io.remote._outage), within each read's
            `deadline`; said at WARNING on the "fastprep" logger when the wait starts and when the
            store answers again. 0: no waiting, the last try raises.

    Example:
        >>> ds = PackedDataset("s3://bucket/train.packed", retry=Retry(tries=8, backoff=0.2))
    """

    tries: int = 5
    backoff: float = 0.1
    max_backoff: float = 5.0
    timeout: float = 30.0
    deadline: float = 600.0
    outage: float = 300.0

    def __post_init__(self):
        if not isinstance(self.tries, int) or isinstance(self.tries, bool) or self.tries < 1:
            raise ValueError(f"Retry: expected tries to be an int >= 1, got {self.tries!r}")
        for name in ("backoff", "max_backoff", "timeout", "deadline", "outage"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"Retry: expected {name} to be a number >= 0, got {value!r}")
        if not self.deadline > 0:
            raise ValueError(f"Retry: expected deadline to be a number of seconds > 0, got {self.deadline!r}")

    def wait(self, attempt: int) -> float:
        """Seconds to sleep after failed attempt `attempt` (0-based): full jitter."""
        return random.uniform(0, min(self.max_backoff, self.backoff * 2 ** min(attempt, 64)))  # 2**1100: no float

    def outage_wait(self, attempt: int) -> float:
        """Seconds to sleep between two tries of an unreachable store: the backoff, half of it
        jittered, and at least OUTAGE_PAUSE (a backoff of 0 would spin on the refused connects)."""
        return random.uniform(0.5, 1.0) * max(OUTAGE_PAUSE, min(self.max_backoff, self.backoff * 2 ** min(attempt, 64)))

    def throttle_wait(self, attempt: int) -> float:
        """Seconds every request of a throttled store holds off after failed attempt `attempt`
        (0-based) got a 503 or 429: the backoff, half of it jittered (one draw for all of them)."""
        return random.uniform(0.5, 1.0) * min(self.max_backoff, self.backoff * 2 ** min(attempt, 64))

    def call(self, what: str, url: str, fn: Callable[[], T], *,
             secrets: Iterable[str] | Callable[[], Iterable[str]] = (), until: float | None = None,
             pause: SharedPause | None = None) -> T:
        """fn() until it succeeds, `tries` attempts failed, or time.monotonic() passed `until`
        (default: now + deadline); then RemoteReadError('<what> at <url> ...') (a ShardFormatError
        that persists, e.g. a corrupt object, is raised as itself, naming the URL). Not retried:
        FATAL errors (a missing object: FileNotFoundError; access refused: RemoteAccessError, a
        PermissionError; a missing client library: ImportError), a ShardMismatchError (an intact
        object of another pack or shard) and a full local disk (ENOSPC, EDQUOT: named as such).
        Every error raised is a new one, raised outside any handler, its text and its chain's
        (:func:`stand_in`) cleared of `secrets` (or what calling it gives: looked up only on a
        failure) and of URLs' credentials. With a `pause` (the store's), each try first waits out a
        pause under way, and a throttled try (503 SlowDown, 429) begins one: the store's other
        requests, in every thread and process sharing it, hold off with this one."""
        until = time.monotonic() + self.deadline if until is None else until
        tries, outage_ends = 0, None  # outage_ends: the end of the outage this read waits out
        while True:
            tries += 1
            if pause is not None:
                pause.hold(until, spread=self.backoff)
            try:
                result = fn()
                OUTAGE.recovered(url)
                return result
            except PASS:
                raise
            except Exception as exc:  # noqa: BLE001 (each kind is sorted out below, outside the handler)
                last = exc
            if isinstance(last, RemoteReadError):  # an inner call used up its own tries: fastprep's already
                break
            secrets = list(secrets() if callable(secrets) else secrets)
            error = self._fatal(what, url, last, secrets)
            late = time.monotonic() >= until
            if error is None and not late and tries >= self.tries and self.outage > 0 and unreachable(last):
                if outage_ends is None:  # the tries are used: wait for the store within the outage budget
                    outage_ends = OUTAGE.join(self.outage, url, f"{type(last).__name__}: "
                                              f"{describe(last, secrets)}")
                if time.monotonic() < outage_ends:
                    time.sleep(max(0.0, min(self.outage_wait(tries - 1), outage_ends - time.monotonic(),
                                            until - time.monotonic())))
                    continue
                OUTAGE.gave_up(outage_ends, url)
            if error is None and (tries >= self.tries or late):
                error = self._final(what, url, last, tries, secrets, late, outage_ends is not None)
            if error is not None:
                break
            if pause is not None and throttled(last):  # the next try waits with every other (hold, above)
                pause.pause(max(0.0, min(self.throttle_wait(tries - 1), until - time.monotonic())))
                continue
            time.sleep(max(0.0, min(self.wait(tries - 1), until - time.monotonic())))
        if isinstance(last, RemoteReadError):
            raise last
        error.__cause__ = stand_in(last, secrets)  # raised outside the handler: no __context__ holds the original
        del last
        raise error

    def _fatal(self, what: str, url: str, exc: Exception, secrets: list[str]) -> BaseException | None:
        """The error to raise at once for `exc`, or None if it is worth another try."""
        text = f"{type(exc).__name__}: {describe(exc, secrets)}"
        if isinstance(exc, ShardMismatchError):  # the same object comes back on every try
            return ShardMismatchError(f"{what} at {url}: {describe(exc, secrets)}")
        if isinstance(exc, OSError) and exc.errno in LOCAL_DISK_FULL:
            return OSError(exc.errno, f"{what} from {url}: the local disk is full or over quota "
                                      f"({describe(OSError(exc.strerror or exc), secrets)})")
        if denied(exc):
            return RemoteAccessError(f"{what} at {url}: access denied: check credentials ({text})")
        if isinstance(exc, ImportError):  # the store's client library is missing: the text says which
            return ImportError(f"{what} at {url}: {describe(exc, secrets)}")
        if isinstance(exc, FileNotFoundError):
            return FileNotFoundError(f"{what}: nothing at {url} ({text})")
        if isinstance(exc, FATAL):
            return type(exc)(f"{what} at {url}: {text}") if type(exc).__module__ == "builtins" else \
                RemoteReadError(f"{what} at {url}: {text}")
        if any(w in type(exc).__name__ for w in FATAL_NAMES):
            return RemoteReadError(f"{what} at {url}: {text} (not retried: no retry mends it)")
        return None

    def _final(self, what: str, url: str, last: Exception, tries: int, secrets: list[str],
               late: bool, waited: bool = False) -> BaseException:
        """The error after the last try (or past the deadline, or the outage budget)."""
        n = f"{tries} {'try' if tries == 1 else 'tries'}"
        if waited and not late:
            n += f", the store unreachable for the outage budget of {self.outage:g} s (Retry.outage)"
        late = f"not done within the deadline of {self.deadline:g} s (Retry.deadline) after {n}" if late else ""
        if isinstance(last, ShardFormatError):
            return ShardFormatError(f"{what} at {url}: {describe(last, secrets)} ({late or 'after ' + n})")
        cause = f"{type(last).__name__}: {describe(last, secrets)}"
        if late:
            return RemoteReadError(f"{what} at {url} failed: {late}; the last error: {cause}")
        return RemoteReadError(f"{what} at {url} failed after {n}: {cause}")


def denied(exc: BaseException | None) -> bool:
    """Whether the store refused access: a PermissionError (s3fs's for 403), an HTTP 401 or 403
    (aiohttp's ClientResponseError .status, azure-core's HttpResponseError .status_code (adlfs),
    botocore's ClientError response), or a client error named so (AccessDenied,
    InvalidAccessKeyId, SignatureDoesNotMatch)."""
    if exc is None:
        return False
    if isinstance(exc, PermissionError):
        return exc.filename is None  # a local file's has its path: this machine's permissions, not the store's
    if any(w in type(exc).__name__ for w in DENIED_NAMES):
        return True
    status = getattr(exc, "status", None) or getattr(exc, "status_code", None) or getattr(exc, "code", None)
    response = getattr(exc, "response", None)
    if isinstance(response, dict):
        status = status or response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        code = str(response.get("Error", {}).get("Code", ""))
        if code in ("401", "403") or any(w in code for w in DENIED_NAMES):
            return True
    return status in (401, 403)
