"""Retries for remote reads: throttling (503 SlowDown), timeouts and dropped connections are tried
again after an exponential backoff with full jitter, a bounded number of times; the last failure
becomes a :class:`fastprep.io.RemoteReadError` naming the URL and what was being read.
"""

from __future__ import annotations

import errno
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from fastprep.io.errors import RemoteReadError, ShardFormatError, ShardMismatchError

T = TypeVar("T")

# Errors no retry can mend: the object is not there, or this client may not read it.
FATAL = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError, KeyboardInterrupt,
         MemoryError, TypeError)
LOCAL_DISK_FULL = (errno.ENOSPC, errno.EDQUOT)  # writing the download here failed: not the remote's fault
# ... and the clients' errors of that kind (botocore's missing credentials, bad parameters).
FATAL_NAMES = ("Credentials", "ParamValidation", "NoSuchBucket", "AccessDenied")


@dataclass(frozen=True)
class Retry:
    """How remote reads are retried.

    Args:
        tries: attempts in all (>= 1); the last failure raises.
        backoff: seconds before the second attempt; doubled each time (full jitter: a uniform wait
            in [0, that]), at most `max_backoff`.
        max_backoff: the longest wait between two attempts, in seconds.
        timeout: seconds an s3:// request may wait to connect or for data before it counts as failed
            (botocore's connect and read timeouts, unless storage_options sets config_kwargs); other
            stores take their client's timeout through storage_options.

    Example:
        >>> ds = PackedDataset("s3://bucket/train.packed", retry=Retry(tries=8, backoff=0.2))
    """

    tries: int = 5
    backoff: float = 0.1
    max_backoff: float = 5.0
    timeout: float = 30.0

    def __post_init__(self):
        if not isinstance(self.tries, int) or isinstance(self.tries, bool) or self.tries < 1:
            raise ValueError(f"Retry: expected tries to be an int >= 1, got {self.tries!r}")
        for name in ("backoff", "max_backoff", "timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
                raise ValueError(f"Retry: expected {name} to be a number >= 0, got {value!r}")

    def wait(self, attempt: int) -> float:
        """Seconds to sleep after failed attempt `attempt` (0-based): full jitter."""
        return random.uniform(0, min(self.max_backoff, self.backoff * 2 ** attempt))

    def call(self, what: str, url: str, fn: Callable[[], T]) -> T:
        """fn() until it succeeds or `tries` attempts failed; then RemoteReadError('<what> at <url>
        ...'), from the last error (a ShardFormatError that persists, e.g. a corrupt object, is
        raised as itself, naming the URL). Not retried: FATAL errors, a ShardMismatchError (an intact
        object of another pack or shard) and a full local disk (ENOSPC, EDQUOT: named as such)."""
        for attempt in range(self.tries):
            try:
                return fn()
            except (*FATAL, RemoteReadError):  # a RemoteReadError: an inner call used up its own tries
                raise
            except ShardMismatchError as exc:  # the same object comes back on every try
                raise ShardMismatchError(f"{what} at {url}: {exc}") from exc
            except Exception as exc:
                if isinstance(exc, OSError) and exc.errno in LOCAL_DISK_FULL:
                    raise OSError(exc.errno, f"{what} from {url}: the local disk is full or over quota "
                                             f"({exc.strerror or exc})") from exc
                if any(w in type(exc).__name__ for w in FATAL_NAMES):
                    raise
                last = exc
                if attempt + 1 < self.tries:
                    time.sleep(self.wait(attempt))
        if isinstance(last, ShardFormatError):
            raise ShardFormatError(f"{what} at {url}: {last} (after {self.tries} tries)") from last
        raise RemoteReadError(f"{what} at {url} failed after {self.tries} tries: {type(last).__name__}: "
                              f"{describe(last)}") from last


def redact(url: str) -> str:
    """A URL as messages and reprs show it: without its user info ("user:token@") and its query
    string (signed URLs' signatures); the raw URL is only for connecting.

    Example:
        >>> redact("https://user:token@host/train.packed?sig=abc")
        'https://host/train.packed'
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url.split("?", 1)[0]
    host, slash, path = rest.split("?", 1)[0].split("#", 1)[0].partition("/")
    return f"{scheme}{sep}{host.rpartition('@')[2]}{slash}{path}"


def describe(exc: BaseException) -> str:
    """An error's text without anything that looks like a credential: the URLs in it redacted, and
    any word's query string naming a signature or token."""
    text = str(exc) or type(exc).__name__
    out = []
    for word in text.split():
        if "://" in word or ("?" in word and any(k in word for k in ("Signature", "X-Amz-", "sig=", "token",
                                                                      "Credential"))):
            word = redact(word)
        out.append(word)
    return " ".join(out)
