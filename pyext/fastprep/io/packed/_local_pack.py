"""The pack source a :class:`fastprep.io.PackedDataset` reads: :class:`LocalPack` for a pack in a
folder, :class:`fastprep.io.remote._pack_source.RemotePack` for one at a URL, both with the same
methods (the index, the shards held while mapped, prefetching, how JPEG records are fetched), so
that the dataset and its ShardMaps never ask which they read. :func:`open_pack_source` makes the
one the path's store calls for: a store whose files are local (``local_path``) is read in place.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, NamedTuple

import fastprep.io._pack_format as fmt
from fastprep.io._store import Store, open_store
from fastprep.io.remote._pack_source import RemotePack
from fastprep.io.remote._window_batch import Ahead


class LocalHold(NamedTuple):
    """A local shard's file: nothing evicts it, so holding it is only naming it."""
    k: int
    path: str


class LocalPack:
    """A pack in a local folder, read in place: its index read from the folder, its shards mapped
    from it (no cache, no download, nothing prefetched, no record read by range).

    Args:
        store: the folder's store (its files' ``local_path`` s are mapped).

    Example:
        >>> source = LocalPack(open_store("train.packed"))
        >>> index_path, (entries, pack_id, meta, names_at) = source.fetch_index()
    """

    remote = False
    fetch = "shards"  # whole shards, mapped: no record is read by range
    limit = keep_bytes = None  # no cache, nothing dropped for room

    def __init__(self, store: Store):
        self.store = store
        self.ahead = Ahead()  # never probing: no record of a local pack is read ahead by range
        self._names: list[str] = []

    def fetch_index(self) -> tuple[str, tuple]:
        """The index's path and :func:`fastprep.io._pack_format.read_index`'s reading of it."""
        path = self.store.local_path(fmt.INDEX_NAME)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"PackedDataset: no {fmt.INDEX_NAME} in {self.store.shown!r}: not a pack, or "
                                    f"its packing was interrupted (run fastprep.io.pack again to finish it)")
        return path, fmt.read_index(path)

    def attach(self, pack_id: bytes, shards: list[tuple[str, int]], digests: list[str] | None = None) -> None:
        """Takes the shards' names from the index (their sizes and ids are checked when mapped)."""
        self._names = [name for name, _ in shards]

    def acquire(self, k: int) -> LocalHold:
        return LocalHold(k, self.store.local_path(self._names[k]))

    def release(self, held: LocalHold) -> None:
        """Nothing to end: a local shard is never evicted."""

    def opened(self, k: int) -> None:
        """Nothing prefetches a local pack, so nothing waits to hear which shard is read."""

    def uses_ranges(self, k: int, total: int, mean_record: float) -> bool:
        return False  # every record is read from its mapped shard

    def fetch_mode(self, total: int, mean_record: float) -> None:
        return None  # nothing is fetched

    def prefetch(self, shard_of_record: Any, order: Any) -> list[int]:
        return []  # the shards are here already

    def wait(self, timeout: float | None = None) -> bool:
        return True  # no download to wait for

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        del state["ahead"]  # a thread-local: each process has its own
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.ahead = Ahead()


def open_pack_source(path: str | os.PathLike | Mapping[str, str], *, cache_dir: Any, cache_limit: int | None,
                     fetch: str, storage_options: dict | None, retry: Any, workers: int,
                     rate_limit: Any) -> LocalPack | RemotePack:
    """The pack source of `path` (a folder, a URL, or a mapping of file names to presigned URLs):
    its store from :func:`fastprep.io._store.open_store` (by scheme), read in place where the store's
    files are local, else through a shard cache in `cache_dir`."""
    store = open_store(path, storage_options=storage_options, retry=retry, rate_limit=rate_limit)
    if store.local_path(fmt.INDEX_NAME) is not None:
        return LocalPack(store)
    return RemotePack(store, cache_dir, cache_limit, fetch, workers)
