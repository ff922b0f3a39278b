"""Numbers that the processes of one store share: its traffic counters (a DataLoader worker's reads
reach the parent's monitor), the time its requests are paused until after a throttle (503
SlowDown, 429), a user cap's token bucket (fastprep.io.remote._limits).

A small file of float64 cells (in /dev/shm where there is one: memory, not disk), mapped by each
process that uses it and changed under an flock (between processes) and a threading lock (between
a process's threads). It is found by its path: a forked child (a DataLoader worker) and a pickled
copy (a spawned worker) map the same file. The process that made it removes the file when the
object is collected or at exit; one that finds it gone (a copy unpickled after that) starts a file
of its own. float64 counts bytes exactly up to 2**53 (9 PB).

Named cells (``SharedCells(n, name=...)``) are the node's: every process of this user that names
them maps the same file, made on their first use (not before: :meth:`SharedCells.exists`), which
stays (a few bytes in /dev/shm, gone at the next boot, when time.monotonic() starts again too).
"""

from __future__ import annotations

import fcntl
import mmap
import os
import struct
import tempfile
import threading
import weakref
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")
SHM = "/dev/shm"


def _remove(path: str, owner: int) -> None:
    if os.getpid() == owner:  # a forked child's copy of the finalizer: not its file to remove
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def _close(fd: int, mapped: mmap.mmap) -> None:
    mapped.close()
    os.close(fd)


class SharedCells:
    """`n` float64 cells shared by every process that has this object (by fork or by pickle).

    Args:
        n: how many cells (>= 1), all 0.0 at first.
        name: a name (letters, digits, "-", "_") every process of this user on this node that
            gives it shares; None: cells of this object's own (and its forks' and copies').

    Example:
        >>> cells = SharedCells(2)
        >>> cells.update(lambda v: v.__setitem__(0, v[0] + 5))
        >>> cells.read()[0]
        5.0
    """

    def __init__(self, n: int, name: str | None = None):
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ValueError(f"SharedCells: expected n to be an int >= 1, got {n!r}")
        if name is not None and (not isinstance(name, str) or not name
                                 or not all(c.isalnum() or c in "-_" for c in name)):
            raise ValueError(f"SharedCells: expected name to be letters, digits, '-' and '_', got {name!r}")
        self.n, self.name = n, name
        self._make()

    def _make(self) -> None:
        folder = SHM if os.path.isdir(SHM) and os.access(SHM, os.W_OK) else tempfile.gettempdir()
        if self.name is not None:  # the node's: made on first use by whoever comes first (_attach), never removed
            self.path = os.path.join(folder, f"fastprep-{os.getuid()}-{self.name}.cells")
            self._pid = -1
            return
        fd, self.path = tempfile.mkstemp(prefix="fastprep-", suffix=".cells", dir=folder)
        try:
            os.ftruncate(fd, 8 * self.n)
        finally:
            os.close(fd)
        weakref.finalize(self, _remove, self.path, os.getpid())
        self._pid = -1

    def _attach(self) -> None:
        """This process's descriptor (an flock of its own: an inherited one is the parent's), map
        and thread lock, made on first use in each process."""
        if self._pid == os.getpid():
            return
        try:
            fd = os.open(self.path, os.O_RDWR | (os.O_CREAT if self.name is not None else 0), 0o600)
        except FileNotFoundError:  # its maker is gone: counting goes on in a file of this process's own
            self._make()
            fd = os.open(self.path, os.O_RDWR)
        if os.fstat(fd).st_size < 8 * self.n:  # named cells made just now (zeros; a concurrent maker's are the same)
            os.ftruncate(fd, 8 * self.n)
        self._fd, self._map = fd, mmap.mmap(fd, 8 * self.n)
        weakref.finalize(self, _close, fd, self._map)  # a process's map and descriptor end with the object
        self._lock = threading.Lock()
        self._pid = os.getpid()

    def update(self, change: Callable[[list[float]], T]) -> T:
        """Calls change(cells) on a list of the cells' values, writes back what it left in the
        list, and returns what it returned; no other thread or process changes them meanwhile."""
        self._attach()
        with self._lock:
            fcntl.flock(self._fd, fcntl.LOCK_EX)
            try:
                values = list(struct.unpack_from(f"{self.n}d", self._map))
                result = change(values)
                struct.pack_into(f"{self.n}d", self._map, 0, *values)
                return result
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def add(self, *amounts: float) -> None:
        """Adds amounts[i] to cell i."""
        def change(values: list[float]) -> None:
            for i, a in enumerate(amounts):
                values[i] += a
        self.update(change)

    def exists(self) -> bool:
        """Whether the cells' file is there (named cells: whether any process used them yet)."""
        return os.path.exists(self.path)

    def read(self) -> list[float]:
        """The cells' values (consistent: read under the lock)."""
        return self.update(list)

    def __getstate__(self) -> dict:
        return {"n": self.n, "path": self.path, "name": self.name}

    def __setstate__(self, state: dict) -> None:
        self.n, self.path, self.name, self._pid = state["n"], state["path"], state.get("name"), -1
