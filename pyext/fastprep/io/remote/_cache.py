"""The local cache of a remote pack's shards: each shard downloaded whole, checked, and committed by
an atomic rename; one download per shard per node however many processes and threads ask (an
fcntl lock file per shard for the download); evicted least recently used past the cache's byte
limit, never while in use.

Layout: ``<cache_dir>/<pack key>/shard-00000.fpk`` (+ ``.lock``, ``.fetch``), the pack key
(``<16 hex>-<16 hex>``) naming the URL and the pack id, so two packs (or a re-packed URL) never share
files. The limit counts the shards of every pack folder under cache_dir; nothing else there (a
folder not named as a pack key: someone's pack) is counted or evicted.

"In use" means: held by :meth:`ShardCache.acquire` and not yet released, which a
:class:`fastprep.io.packed._shard_maps.ShardMaps` does from mapping a shard until it drops the map. The
hold is a shared flock on the shard's ``.lock`` file (one open file per hold, so holds of threads of
one process are as separate as those of two processes), so it is seen by every process on the node;
an eviction takes the exclusive lock without waiting, and skips the shard if it cannot.

No one ever waits on the end of a hold: holds last as long as a dataset keeps a shard mapped, maybe
forever. A process that finds a shard missing waits only for the download (an exclusive flock on the
``.fetch`` file, held by the one downloading, for the download's time, and waited for at most
until the reader's Retry.deadline: the download it waits on ends by then too); the hold's own lock is only
ever taken shared with waiting (blocked by an eviction's removal at most) or exclusive without.
"""

from __future__ import annotations

import fcntl
import glob
import mmap
import os
import threading
import time

import fastprep.io._pack_format as fmt
from fastprep.errors import ShardMismatchError
from fastprep.io._store import Store


class Held:
    """A shard held in the cache (its lock file open with a shared lock): `path` stays readable
    until :meth:`ShardCache.release`."""

    __slots__ = ("_lock", "fd", "k", "path")

    def __init__(self, k: int, path: str, fd: int):
        self.k, self.path, self.fd = k, path, fd
        self._lock = threading.Lock()

    def close(self) -> None:
        """Ends the hold once, however many threads call it (the second finds fd -1)."""
        with self._lock:
            fd, self.fd = self.fd, -1
        if fd >= 0:
            os.close(fd)  # closing the descriptor drops its flock

    def __del__(self):  # a dataset dropped without releasing: the hold ends with it
        self.close()


class ShardCache:
    """The shards of one remote pack in a local folder.

    Args:
        store: where the pack lives.
        folder: this pack's folder in the cache (created).
        shards: (file name, size) per shard, from the index.
        pack_id: the pack id every shard's header must carry.
        digests: each shard's records digest (the index's "digests"), which its table must chain to.
        limit: bytes the shards under the cache root (folder's parent) may take; None: no limit.
            Shards in use are never evicted, so the cache can exceed it while they are.

    Example:
        >>> cache = ShardCache(store, "/tmp/cache/abc", [("shard-00000.fpk", 5339)], pack_id, 1 << 30)
        >>> held = cache.acquire(0); data = open(held.path, "rb").read(); cache.release(held)
    """

    def __init__(self, store: Store, folder: str, shards: list[tuple[str, int]], pack_id: bytes,
                 limit: int | None, *, digests: list[str] | None = None):
        self.store, self.folder, self.shards, self.pack_id, self.limit = store, folder, shards, pack_id, limit
        self.digests = digests  # each shard's records digest, from the index (None: a format 1 pack's)
        self.root = os.path.dirname(folder)
        self.downloads = 0  # shards this process downloaded
        self._count_lock = threading.Lock()
        os.makedirs(folder, exist_ok=True)

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        del state["_count_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._count_lock = threading.Lock()

    def after_fork(self) -> None:
        """In a forked child: a fresh lock (a parent thread may have held this one at the fork)."""
        self._count_lock = threading.Lock()

    def path(self, k: int) -> str:
        return os.path.join(self.folder, self.shards[k][0])

    def cached(self, k: int) -> bool:
        return os.path.exists(self.path(k))

    def acquire(self, k: int) -> Held:
        """Shard k's local file, downloaded and checked first if it is not cached (by this process,
        or by another that holds the download lock: this one waits for that download, then uses its
        file), held in use until :meth:`release`."""
        path, since = self.path(k), time.monotonic()  # the download's deadline counts from here
        fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        try:
            # The hold comes first (an eviction can then never remove the file between its download
            # and its use); a shared lock waits at most for an eviction's removal.
            fcntl.flock(fd, fcntl.LOCK_SH)
            if not os.path.exists(path):
                fetch = os.open(path + ".fetch", os.O_RDWR | os.O_CREAT, 0o644)
                try:
                    # one downloader; the others wait for its download only, within its deadline
                    self.store.wait_for_download(fetch, f"shard {k}", self.shards[k][0], since)
                    if not os.path.exists(path):
                        self._download(k, path, since)
                finally:
                    os.close(fetch)
            _touch(path)
            return Held(k, path, fd)
        except BaseException:
            os.close(fd)
            raise

    def release(self, held: Held) -> None:
        """Ends a hold: the shard may be evicted again. Releasing twice (from two threads too) closes
        its lock file once: never a descriptor number the system has since given to another file."""
        held.close()

    def ensure(self, k: int) -> None:
        """Shard k cached (downloaded if needed), not held: what prefetching does."""
        self.release(self.acquire(k))

    def _download(self, k: int, path: str, since: float | None = None) -> None:
        name, size = self.shards[k]
        remove_killed_parts(path, ".part")
        self.make_room(size, keep=path)
        part = f"{path}.{os.getpid()}.{threading.get_ident()}.part"
        self.store.download(name, part, size, check=lambda p: self.check(p, k), what=f"shard {k} ({name})",
                            since=since)
        os.replace(part, path)  # committed only whole and checked
        fmt.sync_folder(self.folder)
        with self._count_lock:
            self.downloads += 1

    def check(self, local: str, k: int) -> None:
        """A downloaded shard file is shard k of this pack: its header (CRC, number, pack id), its
        footer and table (CRCs), its records (their digest, the index's for shard k) and every
        record's bytes (their CRCs: a byte changed in transit, which a store with no transport
        checksum of its own, gs:// through gcsfs, az://, http(s)://, hands over as it came).
        ShardFormatError otherwise; ShardMismatchError, not retried, for a whole shard of another
        pack: the store's pack changed since its index was read, which the message says."""
        name = self.shards[k][0]
        with open(local, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            try:
                fmt.check_shard_header(bytes(data[:fmt.HEADER_BYTES]), name, k, self.pack_id)
            except ShardMismatchError as exc:
                raise self._changed(str(exc)) from None
            view = memoryview(data)
            try:
                entries, meta = fmt.read_shard_trailer(view, name)
                _check_records(view, entries, name)
            finally:
                view.release()
        want = self.digests[k] if self.digests is not None else None
        if want is not None and (fmt.records_digest(entries) != want or meta.get("digest") != want):
            raise self._changed(f"{name} holds other records than the index says (their digest "
                                f"{fmt.records_digest(entries)}, the index's {want})")

    def _changed(self, what: str) -> ShardMismatchError:
        return ShardMismatchError(f"the pack at {self.store.shown} changed since it was cached in {self.folder}: "
                                  f"{what}; open it again (a new PackedDataset) to read the pack it holds now")

    def make_room(self, size: int, keep: str | None = None) -> None:
        """Evict least recently used shards not in use until `size` more bytes fit the limit."""
        if self.limit is None:
            return
        files = []
        for p in cached_shards(self.root):
            try:
                st = os.stat(p)
            except FileNotFoundError:
                continue
            files.append((st.st_mtime_ns, st.st_size, p))
        total = sum(s for _, s, _ in files)
        for _, s, p in sorted(files):
            if total + size <= self.limit:
                return
            if p != keep and _evict(p):
                total -= s

    def used_bytes(self) -> int:
        """Bytes of shards under the cache root."""
        return sum(os.path.getsize(p) for p in cached_shards(self.root) if os.path.exists(p))


PACK_KEY = "[0-9a-f]" * 16 + "-" + "[0-9a-f]" * 16  # RemotePack.folder's names


def _check_records(shard: memoryview, entries, name: str) -> None:
    """Every record of a shard file against its CRCs (the table's, already checked): ShardFormatError
    naming the first that differs. About 1 ms per MB (CRC-32C in hardware): little beside a download."""
    from fastprep.io.jpeg import native  # noqa: PLC0415 (the native module, with its install hint)

    verify = native("ShardCache.check").verify_record
    for j, e in enumerate(entries):
        at, n = int(e["offset"]), int(e["length"])
        try:
            verify(shard[at:at + n], int(e["checksum"]))
        except ValueError as exc:
            raise fmt.ShardFormatError(f"{name}: record {j} of the shard: {exc}") from None


def cached_shards(root: str) -> list[str]:
    """The shard files of the cache's own pack folders under `root` (never another folder's)."""
    return glob.glob(os.path.join(glob.escape(root), PACK_KEY, "shard-*.fpk"))


def _touch(path: str) -> None:
    """Marks a shard used now (LRU order is by modification time: atime is often not kept)."""
    try:
        os.utime(path)
    except OSError:
        pass


def _evict(path: str) -> bool:
    """Removes a cached shard if nobody holds it (or downloads it); True if removed."""
    try:
        fd = os.open(path + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    except OSError:
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        try:
            os.remove(path)
        except FileNotFoundError:
            return False
        return True
    finally:
        os.close(fd)


def remove_killed_parts(path: str, suffix: str) -> None:
    """Removes the part files a killed download of `path` left (``path.PID.TID<suffix>``). Called by
    the holder of that download's lock: no live process writes them."""
    for stale in glob.glob(glob.escape(path) + ".*" + suffix):
        try:
            os.remove(stale)
        except FileNotFoundError:
            pass
