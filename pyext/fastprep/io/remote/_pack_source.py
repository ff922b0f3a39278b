"""What a :class:`fastprep.io.PackedDataset` over a URL adds to a local one: the index fetched into
the cache, the shards resolved through the :class:`ShardCache` (downloaded whole, ahead of use by
the :class:`Prefetcher`), and JPEG windows of shards that are not cached read by byte range.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import threading
import time
import warnings
from collections import OrderedDict

import fastprep.io._pack_format as fmt
import fastprep.io.remote._ranges as rr
import fastprep.io.remote._window_batch as wb
from fastprep.io.remote._cache import Held, ShardCache, remove_killed_parts
from fastprep.io.remote._fetch_choice import LinkCost, announce, choose
from fastprep.io.remote._prefetch import Prefetcher, first_use
from fastprep.io.remote._store import RemoteStore, forked

FETCH = ("auto", "shards", "ranges")
HEAD_CACHE_BYTES = 32 << 20  # records' heads kept per process: a later read of the record needs one request


def default_cache_dir() -> str:
    """$FASTPREP_CACHE, else ~/.cache/fastprep/packs."""
    return os.environ.get("FASTPREP_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "fastprep", "packs")


def default_staging_dir() -> str:
    """$FASTPREP_STAGING, else ~/.cache/fastprep/staging: where pack(src, url) packs before the
    upload; apart from the shard cache (its eviction deletes shards under the cache root)."""
    return os.environ.get("FASTPREP_STAGING") or os.path.join(os.path.expanduser("~"), ".cache", "fastprep",
                                                               "staging")


def url_key(url: str) -> str:
    """16 hex digits naming a URL in local folder names (its cache folder, its staging folder)."""
    return hashlib.sha256(url.encode()).hexdigest()[:16]


def index_content(header: bytes) -> str:
    """16 hex digits naming an index by its content: its header's (the pack id, the record count,
    the CRC of its table and JSON). Format 3's pack id alone would do; format 1 and 2 ids covered
    only a pack's first item."""
    return hashlib.sha256(header).hexdigest()[:16]


def _read_json(path: str) -> dict:
    try:
        with open(path) as f:
            data = json.load(f)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


class RemotePack:
    """A remote pack's store, cache and fetch policy (one per PackedDataset; pickles to workers): the
    pack source of a pack at a URL, with the methods of a local one
    (:class:`fastprep.io.packed._local_pack.LocalPack`).

    Args:
        store: the pack's :class:`RemoteStore`.
        cache_dir: the cache's root folder (default :func:`default_cache_dir`).
        cache_limit: bytes of shards the cache may hold (None: no limit).
        fetch: "shards", "ranges" or "auto" (see PackedDataset).
        workers: parallel shard downloads when prefetching.
    """

    remote = True  # read from a URL, through the local shard cache

    def __init__(self, store: RemoteStore, cache_dir: str | os.PathLike | None, cache_limit: int | None, fetch: str,
                 workers: int):
        if fetch not in FETCH:
            raise ValueError(f"PackedDataset: expected fetch to be one of {FETCH}, got {fetch!r}")
        if cache_limit is not None and (isinstance(cache_limit, bool) or not isinstance(cache_limit, int)
                                        or cache_limit < 1):
            raise ValueError(f"PackedDataset: expected cache_limit to be a positive int (bytes) or None, "
                             f"got {cache_limit!r}")
        if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
            raise ValueError(f"PackedDataset: expected workers to be an int >= 1, got {workers!r}")
        self.store = store
        self.fetch, self.limit, self.workers = fetch, cache_limit, workers
        self.root = os.fspath(cache_dir) if cache_dir is not None else default_cache_dir()
        self.key = url_key(self.store.key_url)  # a signed URL's signature is not part of the pack's name
        self.cache: ShardCache | None = None
        self.content = ""  # index_content of the index fetched
        self._prefetcher: Prefetcher | None = None
        self._ordered = False
        self.link = LinkCost()  # what the store's requests cost here: fetch="auto" chooses from it
        self._choice: tuple[tuple, tuple[str, str]] | None = None
        self._said: list = []
        self._pid = os.getpid()
        self._reset_heads()

    def _this_process(self) -> None:
        """In a forked child (a DataLoader worker), first use: the parent's prefetcher (its pool has
        no threads here: work submitted to it would never run) and locks (held, maybe, by a parent
        thread at the fork) are replaced."""
        if forked(self):
            self._prefetcher = None
            self._reset_heads()
            if self.cache is not None:
                self.cache.after_fork()

    def _reset_heads(self) -> None:
        self._heads: OrderedDict[tuple[str, int], bytes] = OrderedDict()
        self._heads_bytes = 0
        self._heads_lock = threading.Lock()
        self.ahead = wb.Ahead()  # each thread's parts read ahead for its batch (read_ahead)

    def cached_head(self, name: str, offset: int) -> bytes | None:
        """The record's head if it is in memory (then most recently used)."""
        key = (name, offset)
        with self._heads_lock:
            head = self._heads.get(key)
            if head is not None:
                self._heads.move_to_end(key)
            return head

    def keep_head(self, name: str, offset: int, head: bytes) -> None:
        """Keeps a record's head in memory, least recently used out first past HEAD_CACHE_BYTES."""
        key = (name, offset)
        with self._heads_lock:
            if key not in self._heads:
                self._heads[key] = head
                self._heads_bytes += len(head)
                while self._heads_bytes > HEAD_CACHE_BYTES:
                    self._heads_bytes -= len(self._heads.popitem(last=False)[1])

    def _head(self, name: str, offset: int, length: int, where: str, what: str) -> bytes:
        """The record's meta block, restart index and JPEG header: from memory, or fetched (one
        request; more for a large restart index or header) and kept, least recently used out first."""
        self._this_process()
        head = self.cached_head(name, offset)
        if head is not None:
            return head
        start = time.monotonic()
        head = self.store.read(name, offset, offset + min(length, rr.FIRST_READ), what)
        self.link.request(len(head), time.monotonic() - start)
        # the meta block tells where the JPEG starts (past a restart index of any size), the JPEG's
        # start where its header ends: each read may show that more is needed
        while (need := rr.needed_head(head, length, where)) > len(head):
            head += self.store.read(name, offset + len(head), offset + need, what)
        self.keep_head(name, offset, head)
        return head

    def _forget_head(self, name: str, offset: int) -> None:
        with self._heads_lock:
            head = self._heads.pop((name, offset), None)
            if head is not None:
                self._heads_bytes -= len(head)

    def fetch_index(self) -> tuple[str, tuple]:
        """The index in the cache: its local path and :func:`fastprep.io._pack_format.read_index`'s
        reading of it (parsed and checked once). A copy there is used only while it is the store's
        by content: the same size and the same 64-byte header, read from the store (the header holds
        the pack id, which covers every record, and the CRC of the index's table and JSON), never by
        ETag or modification time, which a sync tool may carry over to another pack. A copy of
        another pack is said so (a warning) and replaced; a damaged copy is fetched anew. One
        download per node: a lock file per URL; several ranks opening the pack share the copy."""
        os.makedirs(self.root, exist_ok=True)
        start = time.monotonic()
        info = self.store.info(fmt.INDEX_NAME)
        self.link.request(0, time.monotonic() - start)
        if info is None:
            raise FileNotFoundError(f"PackedDataset: no {fmt.INDEX_NAME} at {self.store.shown}: not a pack, or its "
                                    f"packing or upload was interrupted (run fastprep.io.pack again to finish it)")
        size = int(info["size"])
        pointer = os.path.join(self.root, f"{self.key}.index.json")
        fd = os.open(os.path.join(self.root, f"{self.key}.index.lock"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            cached = self._cached_index(_read_json(pointer), size)
            if cached is not None:
                return cached
            remove_killed_parts(os.path.join(self.root, self.key), ".index.part")
            part = os.path.join(self.root, f"{self.key}.{os.getpid()}.{threading.get_ident()}.index.part")
            read: list[tuple] = []  # the check's reading: the index is parsed once
            start = time.monotonic()
            self.store.download(fmt.INDEX_NAME, part, size, check=lambda p: read.append(fmt.read_index(p)),
                                what="the index")
            self.link.request(size, time.monotonic() - start)
            with open(part, "rb") as f:
                self.content = index_content(f.read(fmt.HEADER_BYTES))
            folder = self.folder()
            os.makedirs(folder, exist_ok=True)
            index = os.path.join(folder, fmt.INDEX_NAME)
            os.replace(part, index)
            fmt.write_durably(pointer, [json.dumps({"size": size, "index": index, "content": self.content,
                                                    "pack_id": read[-1][1].hex()}).encode()])
            return index, read[-1]
        finally:
            os.close(fd)

    def _cached_index(self, known: dict, size: int) -> tuple[str, tuple] | None:
        """The cached index's (path, reading) while it is the store's index (size and header), else None."""
        path = known.get("index")
        if not isinstance(path, str) or known.get("size") != size:
            return None
        try:  # checked again (CRCs): a damaged copy is fetched anew
            reading = fmt.read_index(path)
            with open(path, "rb") as f:
                mine = f.read(fmt.HEADER_BYTES)
        except (OSError, ValueError):
            return None
        theirs = self.store.read(fmt.INDEX_NAME, 0, fmt.HEADER_BYTES, "reading the index's header")
        if theirs != mine:
            try:
                other = fmt.read_index_header(theirs, f"{self.store.shown}/{fmt.INDEX_NAME}")[1].hex()
            except ValueError as exc:
                other = f"unreadable ({exc})"
            warnings.warn(f"PackedDataset: the pack at {self.store.shown} changed since it was cached in "
                          f"{os.path.dirname(path)}: its index is another (pack id {reading[1].hex()} cached, "
                          f"{other} now); fetching it again", stacklevel=4)
            return None
        self.content = index_content(mine)
        return path, reading

    def folder(self) -> str:
        """The pack's folder in the cache: its URL's and its index's content (a re-packed URL gets another)."""
        return os.path.join(self.root, f"{self.key}-{self.content}")

    def attach(self, pack_id: bytes, shards: list[tuple[str, int]], digests: list[str] | None = None) -> None:
        """Makes the shard cache, once the index is read."""
        self.cache = ShardCache(self.store, self.folder(), shards, pack_id, self.limit, digests=digests)

    @property
    def keep_bytes(self) -> int | None:
        """Bytes of mapped shards a process keeps (half the limit: the other half is the prefetcher's)."""
        return None if self.limit is None else self.limit // 2

    def uses_ranges(self, k: int, total: int, mean_record: float) -> bool:
        """Whether a JPEG record of shard k is read by range rather than from the cached shard."""
        if self.fetch == "shards" or self.cache.cached(k):
            return False
        return self.fetch == "ranges" or self.fetch_mode(total, mean_record)[0] == "ranges"

    def fetch_mode(self, total: int, mean_record: float) -> tuple[str, str]:
        """("shards" or "ranges", why): what fetch reads JPEG records of shards not cached with now
        (fetch="auto": fastprep.io.remote._fetch_choice, said at INFO when it changes)."""
        link = self.link
        key = (self._ordered, link.latency, link.bandwidth, round(link.share, 2))
        if self._choice is None or self._choice[0] != key:
            self._choice = (key, choose(self.fetch, total, self.limit, self._ordered, link, mean_record))
            if self.fetch == "auto":
                announce(self.store.shown, self._choice[1], self._said)
        return self._choice[1]

    def prefetch(self, shard_of_record, order) -> list[int]:
        """Starts downloading the shards of `order` (record indices) in first-use order; returns it."""
        self._this_process()
        shards = first_use(shard_of_record, order)
        if self._prefetcher is None:
            self._prefetcher = Prefetcher(self.cache, self.workers, self.keep_bytes)
        self._ordered = True
        self._prefetcher.start(shards)
        return shards

    def acquire(self, k: int) -> Held:
        """Shard k's local file, held in the cache (downloaded first if need be) until :meth:`release`."""
        return self.cache.acquire(k)

    def release(self, held: Held) -> None:
        self.cache.release(held)

    def opened(self, k: int) -> None:
        self._this_process()
        if self._prefetcher is not None:
            self._prefetcher.reached(k)

    def wait(self, timeout: float | None = None) -> bool:
        self._this_process()
        return True if self._prefetcher is None else self._prefetcher.wait(timeout)

    def window_record(self, name: str, offset: int, length: int, checksum: int, window: tuple[int, int, int, int],
                      where: str) -> bytearray:
        """The record at [offset, offset + length) of shard `name` with only the bytes a decode of
        `window` reads filled in, checked (the record's CRCs over those bytes): from the parts this
        thread read ahead for its batch (:meth:`read_ahead`), with what they lack fetched (two rounds
        of range requests for a record read alone: the head, then the rows). Bytes changed in
        transit are fetched again: read ahead, at once; else on the Retry's next try."""
        from fastprep.io.jpeg import native  # noqa: PLC0415 (the native module, with its install hint)

        what = f"reading {where} by range"
        top, left, h, w = window
        ahead = self.ahead.take(name, offset)

        def fetch() -> bytearray:
            nonlocal ahead
            head = self._head(name, offset, length, where, what)
            have = [(0, head), *ahead]
            todo = wb.missing(rr.window_ranges(head, length, window, where), have)
            parts = self.store.read_ranges(name, [(offset + a, offset + b) for a, b in todo], what) if todo else []
            record = rr.sparse_record(length, [*have, *((a, p) for (a, _), p in zip(todo, parts))])
            try:
                native("PackedJpeg.decode").cut_record(record, checksum, top, left, h, w, True)
            except ValueError as exc:
                self._forget_head(name, offset)  # fetched again, with the rest
                if ahead:  # read ahead: fetched again now, as a record read alone
                    ahead = []
                    return fetch()
                raise fmt.ShardFormatError(f"{where}: {exc}") from None
            return record

        return self.store.call(what, name, fetch)

    def read_ahead(self, reads: list[wb.WindowRead], keep: bool = False) -> int:
        """Reads `reads` (records' windows, or heads) together, for this thread's next decodes of
        them (window_record); the parts read ahead before are dropped (`keep`: kept, a second call
        for the same batch). Returns the round trips taken (see fastprep.io.remote._window_batch)."""
        self._this_process()
        if not keep:
            self.ahead.parts = {}
        return wb.read_windows(self, reads)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state["_prefetcher"] = None  # each process prefetches for itself
        for key in ("_heads", "_heads_bytes", "_heads_lock", "ahead"):
            del state[key]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._pid = os.getpid()
        self._reset_heads()
