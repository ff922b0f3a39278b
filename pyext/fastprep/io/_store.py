"""Where a pack's files live, behind one interface: a :class:`Store` reads byte ranges, sizes,
downloads, uploads, lists and removes the objects under one folder or URL prefix, and counts the
bytes and requests it reads. :func:`open_store` picks the implementation by the URL's scheme from
a small registry: a plain path is a :class:`LocalStore` (a folder on this machine, its files
memory-mappable in place); ``s3://``, ``gs://``, ``az://``, ``http(s)://``, ``file://`` ... are
:class:`fastprep.io.remote.RemoteStore` (fsspec), which registers itself for them. A scheme of
your own: ``register_store("myfs", factory)``, factory(url, **options) returning a Store.

The readers above (PackedDataset, the shard cache, pack-to-URL) call these methods only, so that
no module of theirs asks whether a pack is local or remote.
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol, runtime_checkable

__all__ = ["LocalStore", "Store", "known_schemes", "open_store", "register_store", "scheme_of"]


@runtime_checkable
class Store(Protocol):
    """The objects under one folder or URL prefix, named by their file names ("index.fpi",
    "shard-00000.fpk"). ``shown`` and :meth:`where` are what messages print (no credentials)."""

    shown: str

    def where(self, name: str) -> str: ...
    def local_path(self, name: str) -> str | None: ...  # the object's own local file (mappable), or None
    def info(self, name: str) -> dict | None: ...  # {"size": ...}, None where there is no such object
    def read_ranges(self, name: str, ranges: list[tuple[int, int]], what: str | None = None) -> list[bytes]: ...
    def download(self, name: str, local: str, size: int, check: Any = None, what: str | None = None,
                 since: float | None = None) -> None: ...
    def upload(self, local: str, name: str) -> None: ...
    def list(self) -> list[str]: ...
    def remove(self, name: str) -> None: ...
    def make_folder(self) -> None: ...

    @property
    def bytes_fetched(self) -> int: ...
    @property
    def requests(self) -> int: ...

    # What every store derives from the methods above (a store that subclasses Store inherits them).
    def size(self, name: str) -> int | None:
        """The object's size in bytes, or None if there is none."""
        info = self.info(name)
        return None if info is None else int(info["size"])

    def read(self, name: str, start: int, end: int, what: str | None = None) -> bytes:
        """Bytes [start, end) of the object (read_ranges' rules: retried, checked, counted)."""
        return self.read_ranges(name, [(start, end)], what)[0]


_FACTORIES: dict[str, Callable[..., Any]] = {}


def scheme_of(url_or_path: Any) -> str:
    """The scheme that picks a store: "" for a local path (a str without "://" or an os.PathLike),
    the URL's scheme lowercased ("s3", "https", ...), and for a mapping of a pack's file names to
    presigned URLs, its index's URL's (else its first URL's)."""
    if isinstance(url_or_path, Mapping):
        first = url_or_path.get("index.fpi", next(iter(url_or_path.values()), ""))
        return scheme_of(first) if isinstance(first, str) and "://" in first else ""
    if isinstance(url_or_path, os.PathLike):
        return ""
    if not isinstance(url_or_path, str):
        raise ValueError(f"open_store: expected a path, a URL or a mapping of file names to URLs, "
                         f"got {type(url_or_path).__name__}: {url_or_path!r}")
    return url_or_path.split("://", 1)[0].lower() if "://" in url_or_path else ""


def register_store(scheme: str, factory: Callable[..., Any]) -> None:
    """Makes open_store open URLs of `scheme` ("" is a local path) with factory(url, **options)."""
    if not isinstance(scheme, str) or "://" in scheme or scheme != scheme.lower():
        raise ValueError(f"register_store: expected scheme to be a lowercase scheme such as 's3' (no '://'), "
                         f"got {scheme!r}")
    if not callable(factory):
        raise ValueError(f"register_store: expected factory to be callable (url, **options) -> Store, "
                         f"got {factory!r}")
    _FACTORIES[scheme] = factory


def known_schemes() -> list[str]:
    """The schemes open_store opens, sorted ("" is a local path)."""
    return sorted(_FACTORIES)


def open_store(url_or_path: Any, **options: Any) -> Store:
    """The store of `url_or_path` (a folder, a URL, or a mapping of file names to presigned URLs),
    made by the factory registered for its scheme with `options` (storage_options, retry,
    rate_limit, ...). ValueError for a scheme no factory is registered for, naming the URL (its
    user and password left out) and the schemes known."""
    scheme = scheme_of(url_or_path)
    factory = _FACTORIES.get(scheme)
    if factory is None:
        raise ValueError(f"open_store: no store is registered for the scheme {scheme!r} of "
                         f"{_without_userinfo(url_or_path)!r}; known schemes: "
                         f"{', '.join(repr(s) for s in known_schemes())} (fastprep.io._store.register_store "
                         f"adds one)")
    return factory(url_or_path, **options)


def _without_userinfo(url: Any) -> str:
    """The URL without "user:password@" and without a query (a token, a signature): for messages."""
    text = str(url).split("?", 1)[0]
    scheme, sep, rest = text.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme}{sep}{host.rsplit('@', 1)[-1]}{slash}{path}" if sep else text


class LocalStore(Store):
    """The files of a folder on this machine, as a :class:`Store`: read in place (``local_path``
    hands each file's own path out to be memory-mapped; :meth:`read_ranges` reads with
    ``os.pread``, which shares no file position between threads), counting the bytes and requests
    it reads as a remote store does, and waiting for a `rate_limit` (an object with
    ``take(requests, nbytes, until)``, such as :class:`fastprep.io.remote.RateLimit`) before each,
    so a local pack can be counted and throttled like a remote one. Bytes read through a memory
    map are not requests, and are not counted.

    Args:
        path: the folder (kept as given: messages name it so).
        storage_options, retry: accepted for a common call with the remote stores; a local folder
            uses neither (storage_options must still be a dict or None).
        rate_limit: a cap on requests and bytes per second, or None.

    Example:
        >>> store = open_store("train.packed")
        >>> store.read("index.fpi", 0, 8)
        b'FPINDEX\\x00'
    """

    def __init__(self, path: str | os.PathLike, storage_options: dict | None = None, retry: Any = None,
                 rate_limit: Any = None):
        if not isinstance(path, (str, os.PathLike)):
            raise ValueError(f"LocalStore: expected path to be a folder's path, got {path!r}")
        if storage_options is not None and not isinstance(storage_options, dict):
            raise ValueError(f"LocalStore: expected storage_options to be a dict or None, got {storage_options!r}")
        if rate_limit is not None and not callable(getattr(rate_limit, "take", None)):
            raise ValueError(f"LocalStore: expected rate_limit to be a fastprep.io.remote.RateLimit or None, "
                             f"got {rate_limit!r}")
        self.folder = self.shown = os.fspath(path)
        self.retry, self.rate_limit = retry, rate_limit
        self._counts = [0, 0]  # bytes read, requests
        self._lock = threading.Lock()

    def where(self, name: str) -> str:
        return os.path.join(self.folder, name)

    def local_path(self, name: str) -> str:
        return self.where(name)

    @property
    def bytes_fetched(self) -> int:
        """Bytes this store read (its reads, downloads and look-ups; not a memory map's pages)."""
        return self._counts[0]

    @property
    def requests(self) -> int:
        """Reads this store made (each range one, each look-up one)."""
        return self._counts[1]

    def _take(self, requests: int, nbytes: int) -> None:
        """Waits for the rate limit, then counts the request(s)."""
        if self.rate_limit is not None:
            deadline = getattr(self.retry, "deadline", 600.0)
            self.rate_limit.take(requests, nbytes, time.monotonic() + deadline)
        with self._lock:
            self._counts[0] += nbytes
            self._counts[1] += requests

    def info(self, name: str) -> dict | None:
        self._take(1, 0)
        try:
            st = os.stat(self.where(name))
        except FileNotFoundError:
            return None
        return {"size": st.st_size, "mtime": st.st_mtime}

    def read_ranges(self, name: str, ranges: list[tuple[int, int]], what: str | None = None) -> list[bytes]:
        """Bytes [start, end) of the file for each range; a range past the file's end is an OSError
        naming the file, as a short body is elsewhere."""
        self._take(len(ranges), sum(b - a for a, b in ranges))
        fd = os.open(self.where(name), os.O_RDONLY)
        try:
            parts = [os.pread(fd, b - a, a) for a, b in ranges]
        finally:
            os.close(fd)
        for (a, b), p in zip(ranges, parts):
            if len(p) != b - a:
                raise OSError(f"{what or 'reading'}: bytes [{a}, {b}) of {self.where(name)}: the file holds "
                              f"{a + len(p)} bytes")
        return parts

    def download(self, name: str, local: str, size: int, check: Any = None, what: str | None = None,
                 since: float | None = None) -> None:
        """A copy of the file at `local`, which must be `size` bytes and pass check(local) (else removed)."""
        self._take(1, size)
        try:
            shutil.copyfile(self.where(name), local)
            if os.path.getsize(local) != size:
                raise OSError(f"{what or 'copying'} {self.where(name)}: {os.path.getsize(local)} bytes where "
                              f"{size} were expected")
            if check is not None:
                check(local)
        except BaseException:
            if os.path.exists(local):
                os.remove(local)
            raise

    def upload(self, local: str, name: str) -> None:
        """The file `local` copied to `name` (replaced atomically); nothing to do where it is that file."""
        dest = self.where(name)
        if os.path.exists(dest) and os.path.samefile(local, dest):
            return
        part = f"{dest}.{os.getpid()}.part"
        shutil.copyfile(local, part)
        os.replace(part, dest)

    def list(self) -> list[str]:
        """The names of the folder's files, sorted."""
        return sorted(n for n in os.listdir(self.folder) if os.path.isfile(self.where(n)))

    def remove(self, name: str) -> None:
        os.remove(self.where(name))

    def make_folder(self) -> None:
        os.makedirs(self.folder, exist_ok=True)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalStore({self.folder!r})"


register_store("", LocalStore)
