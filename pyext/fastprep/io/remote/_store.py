"""A pack's folder behind a URL (s3://, gs://, az://, http(s)://, file://, ...): whole objects,
byte ranges and uploads through fsspec, every call retried (:class:`Retry`) and every byte counted.

fsspec is the client: one interface for every store its implementations serve (s3fs, gcsfs,
adlfs, HTTP, local files), the credentials each store's own client finds (environment, config
files, instance roles), concurrent range reads (``cat_ranges``), and a ``file://`` URL that works
with no network at all (the docs' examples).
"""

from __future__ import annotations

import gc
import hashlib
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from fastprep.errors import RemoteAccessError, RemoteReadError
from fastprep.io._store import Store, register_store
from fastprep.io.remote._clients import HTTP, client_options, put_file, single_try
from fastprep.io.remote._deadline import lock_until, run_until
from fastprep.io.remote._limits import RateLimit
from fastprep.io.remote._redaction import redact, secrets_of
from fastprep.io.remote._retry import Retry, denied
from fastprep.io.remote._shared import SharedCells
from fastprep.io.remote._throttle import SharedPause, throttled
from fastprep.io.remote._urls import INDEX_NAME, is_url, signed_files

T = TypeVar("T")
INSTALL_HINT = "pip install 'fastprep[remote]' (fsspec and s3fs; gcsfs or adlfs for gs:// or az://)"
# The client library each protocol's fsspec filesystem needs beyond fsspec, and how to install it.
CLIENTS = {"s3": "pip install 'fastprep[remote]' (s3fs)", "s3a": "pip install 'fastprep[remote]' (s3fs)",
           "gs": "pip install gcsfs", "gcs": "pip install gcsfs", "az": "pip install adlfs",
           "abfs": "pip install adlfs", "abfss": "pip install adlfs", "adl": "pip install adlfs",
           "http": "pip install 'fastprep[remote]' (aiohttp)", "https": "pip install 'fastprep[remote]' (aiohttp)"}
SIGNATURE_KEYS = ("Signature=", "X-Amz-Signature", "X-Goog-Signature")  # S3 (v2, v4) and GCS presigned queries
QUERY_PROTOCOLS = HTTP  # where "?..." is a query string (a token, a signature), not part of a name
# Object stores, which always serve byte ranges: a large download goes as parts in parallel there
# (an http(s) server may ignore ranges; a local file gains nothing).
PART_PROTOCOLS = ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss")


def _finalizers(client: Any) -> list:
    """The weakref.finalize callbacks a client (s3fs) registered to close its session."""
    registry = getattr(weakref.finalize, "_registry", {})
    return [fin for fin, info in list(registry.items()) if getattr(info, "weakref", lambda: None)() is client]


_clients: weakref.WeakSet = weakref.WeakSet()  # the clients this process made
_kept: list = []  # a forked child's copies of its parent's clients: never closed, never collected here


def _after_fork_in_child() -> None:
    """A forked child (a DataLoader worker) must not close its parent's connections: collecting or
    finalizing an async client here would run its parent's event loop's close in this process
    ("attached to a different loop", "Unclosed client session"). Kept alive, finalizers detached."""
    _kept.extend(_clients)
    for client in _kept:
        for fin in _finalizers(client):
            fin.detach()
    _clients.clear()


def _before_fork() -> None:
    """Clients (and the session objects they leave behind) that are garbage are collected in the
    parent, where their loop runs, not in a child that would finalize them on a loop it lacks."""
    if _made[0]:
        gc.collect()


def forked(obj: Any) -> bool:
    """True the first time `obj` is used in a process other than the one that last saw it (a forked
    DataLoader worker, or first use: ``obj._pid`` starts at -1), then records this one. The caller
    then replaces what a fork leaves unusable: locks another thread may have held at the fork,
    thread pools whose threads the child lacks, clients bound to the parent's event loop."""
    if obj._pid == os.getpid():
        return False
    obj._pid = os.getpid()
    return True


_made = [False]
if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


class RemoteStore(Store):
    """The objects under one URL prefix.

    Thread-safe; pickles without its client (each process makes its own on first use: an async
    client's event loop does not survive a fork). ``bytes_fetched`` and ``requests`` count what
    this store read in this process and in every process it reached by fork or pickle (its
    DataLoader workers): their counters are shared cells (fastprep.io.remote._shared). A throttled
    request (503 SlowDown, 429) pauses every request to the URL on the node: those processes',
    and every other process's store of the same URL (torchrun's ranks) (fastprep.io.remote._throttle).
    Credentials come from the client's usual sources (or `storage_options`)
    and are never put in a message or repr.

    Args:
        url: the pack's URL, e.g. "s3://bucket/train.packed".
        storage_options: keyword arguments for the fsspec filesystem (e.g. ``{"endpoint_url": ...}``
            for an S3-compatible server). The client's own retries are turned off (s3fs, gcsfs,
            adlfs: fastprep.io.remote._clients) so that `retry` is the one bounded retry loop.
        retry: how failed requests are retried.
        rate_limit: a cap on requests and bytes per second (:class:`fastprep.io.remote.RateLimit`),
            for a store that throttles or bills per request; None: none.

    Example:
        >>> store = RemoteStore("file:///data/train.packed")
        >>> store.read("index.fpi", 0, 8)
        b'FPINDEX\\x00'
    """

    # A download larger than part_bytes goes as byte ranges of part_bytes, `parts` at a time, each
    # written where it belongs in the file: one object's bytes stream over several connections (a
    # store serves each connection at a capped rate; a proxy buffers each body whole) and a large
    # shard's download overlaps the latency of its parts. Set on an instance to change them.
    part_bytes = 8 << 20
    parts = 4  # a cold epoch of large shards through a capped link: 8% to 17% faster (docs/remote.md)

    def __init__(self, url: str | Mapping[str, str], storage_options: dict | None = None, retry: Retry | None = None,
                 rate_limit: RateLimit | None = None):
        self.signed: dict[str, str] | None = None  # file name -> its own presigned URL
        if isinstance(url, Mapping):
            url, self.signed = signed_files(url)
        if not is_url(url):
            raise ValueError(f"RemoteStore: expected a URL such as 's3://bucket/pack', got {url!r}")
        if storage_options is not None and not isinstance(storage_options, dict):
            raise ValueError(f"RemoteStore: expected storage_options to be a dict, got {type(storage_options)}")
        self.url = url.rstrip("/")  # for connecting only: it may hold credentials
        self.protocol = self.url.split("://", 1)[0].lower()
        if self.protocol in ("s3", "s3a") and "@" in self.url.split("://", 1)[1].split("/", 1)[0]:
            raise ValueError(f"RemoteStore: an s3:// URL holds no credentials ({redact(self.url)} was given with "
                             f"some before its bucket): pass them as storage_options={{'key': ..., 'secret': ...}} "
                             f"or through the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY)")
        # An http(s) URL's query string (a token, a SAS, a signature) goes on every object's URL,
        # after the object's name: "https://host/pack/index.fpi?token=..."
        base, _, self._query = self.url.partition("?") if self.protocol in QUERY_PROTOCOLS else (self.url, "", "")
        self._base = base.rstrip("/")
        if self.protocol in QUERY_PROTOCOLS and self._base.endswith("/" + INDEX_NAME):
            # the index's own URL ("https://host/pack/index.fpi?token=..."): the pack is its folder
            self._base = self._base[:-len(INDEX_NAME) - 1]
            self.url = self._base + (f"?{self._query}" if self._query else "")
        self.shown = redact(self.url)  # what messages and reprs show
        self.storage_options = dict(storage_options or {})
        self.retry = retry or Retry()
        if rate_limit is not None and not isinstance(rate_limit, RateLimit):
            raise ValueError(f"RemoteStore: expected rate_limit to be a fastprep.io.remote.RateLimit or None, "
                             f"got {rate_limit!r}")
        self.rate_limit = rate_limit
        self._shared = SharedCells(2)  # bytes fetched, requests
        # paused until (a throttle): the node's for this URL, so ranks that open the pack apart share it too
        self.pause = SharedPause(SharedCells(1, name=f"pause-{hashlib.sha256(self._base.encode()).hexdigest()[:16]}"),
                                 0)
        self._fs = self._root = None
        self._pid = -1
        self._lock = threading.Lock()

    @property
    def key_url(self) -> str:
        """The URL that names the pack in local folder names: without an http(s) query string (a
        signed URL's signature changes with every signing; the objects are the same)."""
        return self._base

    def secrets(self) -> list[str]:
        """What no message may show: the URL's credentials, storage_options' and the environment's
        (fastprep.io.remote._redaction.secrets_of); looked up when an error is raised."""
        return secrets_of(self.url, {**self.storage_options, "_files": list((self.signed or {}).values())})

    @property
    def fs(self) -> Any:
        if self._pid != os.getpid():  # first use, or first in a forked child (the parent's client: _kept)
            self._fs, self._root = self._connect()
            _clients.add(self._fs)
            _made[0] = True
            forked(self)
            self._lock = threading.Lock()
        return self._fs

    def _connect(self) -> tuple[Any, str]:
        hint = CLIENTS.get(self.protocol, INSTALL_HINT)
        try:
            import fsspec  # noqa: PLC0415 (an optional dependency)
        except ImportError:
            raise ImportError(f"reading a pack from {self.shown} needs fsspec: {INSTALL_HINT}") from None
        options = client_options(self.protocol, self.storage_options, self.retry.timeout,
                                 signed=bool(self._query) or self.signed is not None)
        try:
            fs, root = fsspec.core.url_to_fs(self._base, skip_instance_cache=True, **options)
        except ImportError as exc:  # the store's own client library: named, with what to install
            raise ImportError(f"reading a pack from {self.shown} needs a library that is not installed "
                              f"({type(exc).__name__}: {exc}): {hint}") from None
        single_try(fs, self.protocol, self.storage_options)  # fastprep's Retry decides
        return fs, root.rstrip("/")

    def call(self, what: str, name: str, fn: Callable[[], T], until: float | None = None) -> T:
        """fn() under the store's Retry, its errors naming the object `name` and no credential."""
        try:
            return self.retry.call(what, self.where(name), fn, secrets=self.secrets, until=until, pause=self.pause)
        except RemoteAccessError as exc:
            if not any(k in self._query for k in SIGNATURE_KEYS):
                raise
            cause = exc.__cause__
            error = RemoteAccessError(f"{exc}. The URL's query is a signature: a presigned URL signs one object, "
                                      f"and each file of a pack needs its own: pass {{file name: URL}} for every "
                                      f"file (fastprep.io.remote.sign_pack makes it)")
        raise error from cause  # outside the handler: no context holds the first error

    def where(self, name: str) -> str:
        """The object's URL as messages show it (redacted)."""
        return f"{self.shown}/{name}"

    def local_path(self, name: str) -> None:
        """None: an object here has no local file to map (it is downloaded first: the shard cache)."""
        return None

    def list(self) -> list[str]:
        """The names of the objects under the URL (a mapping of presigned URLs: its file names), sorted."""
        if self.signed is not None:
            return sorted(self.signed)

        def call() -> list[str]:
            self._limit(None)
            self._count(0)
            return sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in self.fs.ls(self._root, detail=False))
        return self.call("listing the objects", "", call)

    def _path(self, name: str) -> str:
        self.fs  # noqa: B018 (connects in this process)
        if self.signed is not None:
            if name not in self.signed:
                raise FileNotFoundError(f"{name} is not among the pack's presigned URLs")
            return self.signed[name]
        return f"{self._root}/{name}?{self._query}" if self._query else f"{self._root}/{name}"

    @property
    def bytes_fetched(self) -> int:
        """Bytes this store read, in this process and those it reached (its DataLoader workers)."""
        return int(self._shared.read()[0])

    @property
    def requests(self) -> int:
        """Requests this store made to read (each range one; each look-up of an object's metadata
        one), in this process and those it reached."""
        return int(self._shared.read()[1])

    def _count(self, nbytes: int, requests: int = 1) -> None:
        self._shared.add(nbytes, requests)

    def _limit(self, until: float | None, requests: int = 1, nbytes: int = 0) -> None:
        """Waits for the rate limit's bucket to hold this request's share (not past `until`)."""
        if self.rate_limit is not None:
            self.rate_limit.take(requests, nbytes, time.monotonic() + self.retry.deadline if until is None else until)

    def info(self, name: str) -> dict | None:
        """The object's metadata (fsspec's info: "size", and an "ETag" or "mtime" where the store
        has one), or None if there is none."""
        def call() -> dict | None:
            self._limit(None)
            self._count(0)  # a request (billed as one), whatever it finds
            try:
                return dict(self.fs.info(self._path(name)))
            except FileNotFoundError as exc:
                if denied(exc.__cause__):  # fsspec's HTTP client reports a 401 or 403 so
                    raise exc.__cause__ from None
                return None
        return self.call(f"looking up {name}", name, call)

    def read_ranges(self, name: str, ranges: list[tuple[int, int]], what: str | None = None) -> list[bytes]:
        """Bytes [start, end) of the object for each range, requested concurrently where the client can."""
        until = time.monotonic() + self.retry.deadline

        def call() -> list[bytes]:
            path = self._path(name)
            self._limit(until, len(ranges), sum(b - a for a, b in ranges))
            if len(ranges) == 1:
                parts = [self._run(until, "cat_file", path, start=ranges[0][0], end=ranges[0][1])]
            else:
                parts = self._run(until, "cat_ranges", [path] * len(ranges), [a for a, _ in ranges],
                                  [b for _, b in ranges], on_error="raise")
            self._count(sum(len(p) for p in parts), len(ranges))
            for (a, b), p in zip(ranges, parts):
                if len(p) > b - a:  # the whole object, or more: no retry mends that
                    raise RemoteReadError(f"reading bytes [{a}, {b}) of {self.where(name)}: {len(p)} bytes came back: "
                                          f"the server ignores byte ranges; read by shard (fetch='shards')")
                if len(p) != b - a:
                    raise ConnectionError(f"bytes [{a}, {b}): {len(p)} arrived, the body was cut short")
            return parts
        return self.call(what or f"reading {name}", name, call, until)

    def download(self, name: str, local: str, size: int, check: Any = None, what: str | None = None,
                 since: float | None = None) -> None:
        """The whole object into the local file `local` (overwritten), which must come out `size`
        bytes long and pass check(local) (else it is removed and the download tried again), all
        within the Retry's deadline from `since` (a time.monotonic(); default now)."""
        until = (time.monotonic() if since is None else since) + self.retry.deadline

        def call() -> None:
            try:
                if self.parts > 1 and size > self.part_bytes and self.protocol in PART_PROTOCOLS:
                    self._download_parts(self._path(name), local, size, until)
                else:
                    self._limit(until, 1, size)
                    self._run(until, "get_file", self._path(name), local)
                    self._count(os.path.getsize(local))
                got = os.path.getsize(local)
                if got != size:
                    raise ConnectionError(f"{got} bytes arrived where {size} were expected: the body was cut short")
                if check is not None:
                    check(local)
            except BaseException:
                if os.path.exists(local):
                    os.remove(local)  # nothing half-downloaded or corrupt is kept
                raise
        self.call(what or f"downloading {name}", name, call, until)

    def _download_parts(self, path: str, local: str, size: int, until: float) -> None:
        """The object at `path` into `local` as byte ranges of part_bytes, `parts` at a time (each
        counted and rate-limited as a request of its own); the first part's error is raised once
        every part has ended (the whole download is then tried again: Retry)."""
        from concurrent.futures import ThreadPoolExecutor  # noqa: PLC0415 (only large downloads use it)

        def part(a: int) -> None:
            b = min(size, a + self.part_bytes)
            self._limit(until, 1, b - a)
            data = self._run(until, "cat_file", path, start=a, end=b)
            self._count(len(data))
            if len(data) != b - a:
                raise ConnectionError(f"bytes [{a}, {b}): {len(data)} arrived, the part was cut short")
            os.pwrite(fd, data, a)

        fd = os.open(local, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, size)
            with ThreadPoolExecutor(min(self.parts, -(-size // self.part_bytes)),
                                    thread_name_prefix="fastprep-part") as pool:
                futures = [pool.submit(part, a) for a in range(0, size, self.part_bytes)]
            for f in futures:
                f.result()
        finally:
            os.close(fd)

    def _run(self, until: float, method: str, *args: Any, **kw: Any) -> Any:
        """fs.<method>(*args, **kw), given up (TimeoutError) at time.monotonic() `until`."""
        return run_until(self.fs, until, method, *args, **kw)

    def wait_for_download(self, fd: int, what: str, name: str, since: float) -> None:
        """Takes the exclusive lock on `fd` (another process's or thread's download of the same
        object holds it), waiting at most until the Retry's deadline from `since`: then a
        RemoteReadError naming the URL and the deadline (the download it waited for has the same)."""
        if not lock_until(fd, since + self.retry.deadline):
            raise RemoteReadError(f"{what} at {self.where(name)}: another download of it was not done within the "
                                  f"deadline of {self.retry.deadline:g} s (Retry.deadline): gave up waiting")

    def upload(self, local: str, name: str) -> None:
        """The local file `local` to the object `name` (replaced)."""
        def call() -> None:
            self._limit(None)
            put_file(self.fs, self.protocol, local, self._path(name))
        self.call(f"uploading {name}", name, call)

    def remove(self, name: str) -> None:
        """Deletes the object `name`."""
        def call() -> None:
            self._limit(None)
            self.fs.rm_file(self._path(name))
        self.call(f"removing {name}", name, call)

    def make_folder(self) -> None:
        """Creates the URL's folder where the store has folders (file://); object stores have none."""
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        if "file" in protocols or "local" in protocols:
            self.fs.makedirs(self._root, exist_ok=True)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_fs"], state["_root"], state["_pid"] = None, None, -1
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:  # storage_options may hold keys: not shown
        return f"RemoteStore({self.shown!r})"

    def read_spans(self, spans: list[tuple[str, int, int]]) -> list[bytes | None]:
        """Bytes [start, end) of object `name` for each (name, start, end), all requested at once
        (the client's concurrent cat_ranges), each tried once: a span that fails or comes back
        short is None, for the caller to read again its own way (``read_ranges``, under the Retry).
        For reads ahead of use, where one bad span must not fail the others; every byte that
        arrives is counted. As every other request, they wait out a throttle's pause and the
        rate limit, and a throttled span begins a pause for all."""
        if not spans:
            return []
        until = time.monotonic() + self.retry.deadline
        self.pause.hold(until, spread=self.retry.backoff)
        self._limit(until, len(spans), sum(b - a for _, a, b in spans))
        try:
            parts = self._run(until, "cat_ranges", [self._path(n) for n, _, _ in spans], [a for _, a, _ in spans],
                              [b for _, _, b in spans], on_error="return")
        except Exception:  # noqa: BLE001 (the whole call failed: each span is read again by its reader)
            return [None] * len(spans)
        self._count(sum(len(p) for p in parts if isinstance(p, bytes)), len(spans))
        if any(isinstance(p, BaseException) and throttled(p) for p in parts):
            self.pause.pause(max(0.0, min(self.retry.throttle_wait(0), until - time.monotonic())))
        return [p if isinstance(p, bytes) and len(p) == b - a else None for (_, a, b), p in zip(spans, parts)]


# The schemes fsspec serves that open_store opens with a RemoteStore: those with a client named in
# CLIENTS, and file:// and memory://, which need none (file:// reads a local folder as a remote pack,
# through the cache: the docs' examples of remote reads with no network). Another fsspec scheme:
# register_store(scheme, RemoteStore).
FSSPEC_SCHEMES = (*CLIENTS, "file", "memory")
for _scheme in FSSPEC_SCHEMES:
    register_store(_scheme, RemoteStore)
