"""The shard files of a :class:`fastprep.io.PackedDataset`, each opened, checked and memory-mapped
on the first read of a record in it: a shard that is missing, truncated or replaced fails the
reads of its own records (a :class:`ShardFormatError` saying which shard and why), and the other
shards' records read as before. Each shard's file comes from the pack's source
(fastprep.io.packed._local_pack): a local pack's in its folder, a remote pack's from its local cache
(fastprep/io/remote: downloaded whole and checked first), held in use while mapped.
"""

from __future__ import annotations

import mmap
import os
import threading
from typing import Any

import torch

import fastprep.io._pack_format as fmt
from fastprep.io.remote._store import forked


class ShardMaps:
    """Shard k's bytes as a memoryview over a copy-on-write memory map (``views[k]``, None until
    :meth:`open` maps it) and as a uint8 tensor over the same memory (:meth:`tensor`).

    Opening checks the file against the index (its size) and its header (this pack's shard k);
    a failure is not remembered, so a shard put back in place reads on the next try. Thread-safe;
    pickles without its maps (each process maps the shards it reads).

    Args:
        shards: (file name, size in bytes) per shard, from the index.
        pack_id: the pack id the index holds; each shard's header must carry it.
        source: the pack's source (:class:`fastprep.io.packed._local_pack.LocalPack` or
            :class:`fastprep.io.remote._pack_source.RemotePack`): ``acquire(k)`` holds shard k's
            file (a remote pack's: in its cache, downloaded on first use) while it is mapped,
            ``release`` ends the hold; past its ``keep_bytes`` (a remote pack's: half its cache
            limit), the least recently mapped shards are dropped (their maps live on in the views
            handed out, and the cache may evict their files: unlinking never unmaps).

    Example:
        >>> source = open_pack_source("train.packed", ...)  # fastprep.io.packed._local_pack
        >>> maps = ShardMaps([("shard-00000.fpk", 5339)], pack_id, source)
        >>> maps.open(0)[:8].tobytes()
        b'FPSHARD\\x00'
    """

    def __init__(self, shards: list[tuple[str, int]], pack_id: bytes, source: Any):
        self.shards, self.pack_id, self.source = shards, pack_id, source
        self.views: list[memoryview | None] = [None] * len(shards)
        self._tensors: list[torch.Tensor | None] = [None] * len(shards)
        self._held: dict[int, Any] = {}  # shard -> its source's hold, in the order mapped
        self._lock, self._pid = threading.Lock(), os.getpid()

    def open(self, k: int) -> memoryview:
        """Shard k's bytes, mapped on first use; ShardFormatError '<name> is missing' (or why else it
        cannot be read), raised from the OSError where there is one."""
        if forked(self):  # a forked child: the parent's lock may have been held by another thread
            self._lock = threading.Lock()
        held = None
        if self.views[k] is None:
            with self._lock:  # room first (its maps' holds released), then the download
                if self.views[k] is None:
                    self._drop_old(k)
            # found or downloaded outside the lock: the other threads read other shards meanwhile
            held = self._acquire(k)
        try:
            with self._lock:
                view = self.views[k]
                if view is None:
                    if held is None:  # dropped by another thread since we looked
                        held = self._acquire(k)
                    view = self._map(k, held.path)
                    self._held[k], held = held, None  # held while mapped
                    self._tensors[k] = torch.frombuffer(view, dtype=torch.uint8)
                    self.views[k] = view  # published last: a reader that sees it sees its tensor too
        finally:
            if held is not None:  # another thread mapped it meanwhile, or mapping failed
                self.source.release(held)
        self.source.opened(k)
        return view

    def check(self, k: int, view: memoryview) -> None:
        """Before a read of `view` (shard k's map, or a record sliced from it): the file under the map
        is still as long as the index says. A file truncated while mapped kills the process with
        SIGBUS on a read past its new end; this turns that into a ShardFormatError naming the shard
        (one fstat of the map's own descriptor: mmap.size()). The map is dropped, so the next read
        opens the file again and names what it finds. (A view handed out before the truncation and
        read after it, such as a raw window, is not covered: clone views you keep.)"""
        name, size = self.shards[k]
        try:
            got = view.obj.size()
        except (OSError, ValueError) as exc:  # a closed map
            raise fmt.ShardFormatError(f"{name} cannot be read: its map is closed ({exc})") from None
        if got != size:
            with self._lock:
                if self.views[k] is not None and self.views[k].obj is view.obj:
                    self.views[k] = self._tensors[k] = None
                    held = self._held.pop(k, None)
                    if held is not None:
                        self.source.release(held)
            how = "truncated" if got < size else "extended"
            raise fmt.ShardFormatError(f"{name} is {got} bytes where the index says {size}: {how} or replaced "
                                       f"while in use")

    def _acquire(self, k: int) -> Any:
        """Shard k's file held by the source (a remote pack's downloaded first if needed); a shard
        missing at the URL is a ShardFormatError as a missing local shard is (when mapped)."""
        try:
            return self.source.acquire(k)
        except FileNotFoundError as exc:
            name = self.shards[k][0]
            raise fmt.ShardFormatError(f"{name} is missing at {self.source.store.where(name)}") from exc

    def _drop_old(self, k: int) -> None:
        """Before shard k is mapped: drops the least recently mapped shards' maps and holds until k
        fits the bytes the source's process keeps mapped (under the lock; None: all)."""
        keep = self.source.keep_bytes
        while keep is not None and self._held and sum(self.shards[j][1] for j in (*self._held, k)) > keep:
            old = next(iter(self._held))
            self.views[old] = self._tensors[old] = None
            self.source.release(self._held.pop(old))

    def tensor(self, k: int) -> torch.Tensor:
        """Shard k's bytes as a 1-D uint8 tensor over its memory map (raw windows are views of it)."""
        while True:  # a remote pack's map may be dropped by another thread between the two lines
            tensor = self._tensors[k]
            if tensor is not None:
                return tensor
            self.open(k)

    def _map(self, k: int, path: str) -> memoryview:
        name, size = self.shards[k]
        try:
            f = open(path, "rb")  # noqa: SIM115 (closed below, the map outlives it)
        except FileNotFoundError as exc:
            raise fmt.ShardFormatError(f"{name} is missing") from exc
        except IsADirectoryError as exc:
            raise fmt.ShardFormatError(f"{name} is a directory, not a shard file") from exc
        except OSError as exc:
            raise fmt.ShardFormatError(f"{name} cannot be opened: {exc.strerror or exc}") from exc
        with f:
            got = os.fstat(f.fileno()).st_size
            if got != size:
                how = "truncated" if got < size else "extended"
                raise fmt.ShardFormatError(f"{name} is {got} bytes where the index says {size}: {how} or replaced")
            try:
                # Copy-on-write: raw windows are handed out as views (PackedRaw), and a write into
                # one must never reach the file.
                view = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY))
            except (OSError, ValueError) as exc:
                raise fmt.ShardFormatError(f"{name} cannot be memory-mapped: {exc}") from exc
        fmt.check_shard_header(bytes(view[:fmt.HEADER_BYTES]), name, k, self.pack_id)
        return view

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()  # memory maps are mapped again where unpickled, on first use
        state["views"], state["_tensors"] = [None] * len(self.shards), [None] * len(self.shards)
        state["_held"] = {}  # holds are this process's
        del state["_lock"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._lock, self._pid = threading.Lock(), os.getpid()
