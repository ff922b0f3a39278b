"""One writer per pack: :func:`fastprep.io.pack` holds an advisory ``fcntl.flock`` on ``DEST/.pack.lock``
while it writes, so a second pack into the same folder (another process, another thread, another
DDP rank) is refused at once by name instead of interleaving shards with it.

flock, not a pid file: the kernel drops the lock when its holder dies however it dies (SIGKILL,
power off), so a lock file a dead process left is simply taken over. The pid and host written in
it are only for the refusal's message. The file is removed on release, under the lock; a writer
that locked a file which was removed meanwhile (the holder finished) sees its inode is no longer
the path's and locks the new one, so two writers never both hold "the" lock.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
import time
from collections.abc import Iterator

from fastprep.errors import PackLockedError

LOCK_NAME = ".pack.lock"

try:
    import fcntl
except ImportError:  # Windows: no flock; packs there are not guarded (documented in docs/real-files.md)
    fcntl = None  # type: ignore[assignment]


def _holder(fd: int) -> str:
    """The holder's "pid N on HOST" (it writes it just after locking: waited for briefly)."""
    for _ in range(50):
        try:
            text = os.pread(fd, 200, 0).decode(errors="replace").strip()
        except OSError:
            break
        if text:
            return text
        time.sleep(0.005)
    return "a process that has not written its pid"


def _open(path: str) -> int | None:
    """The lock file, created if need be; read-only where we may not write it (flock needs no write
    access); None where it does not exist and cannot be created. Never through a symbolic link
    (O_NOFOLLOW: the pid written into the lock would overwrite the link's target): PackLockedError
    names it."""
    flags = getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)
    if os.path.islink(path):  # also where O_NOFOLLOW is missing
        raise _symlink(path)
    try:
        return os.open(path, os.O_RDWR | os.O_CREAT | flags, 0o644)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _symlink(path) from None
        if exc.errno not in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise
    try:
        return os.open(path, os.O_RDONLY | flags)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _symlink(path) from None
        raise


def _symlink(path: str) -> PackLockedError:
    try:
        target = f" (to {os.readlink(path)!r})"
    except OSError:
        target = ""
    return PackLockedError(f"pack: the lock file {path} is a symbolic link{target}; pack never writes through one: "
                           f"remove the link and run pack again")


@contextlib.contextmanager
def pack_lock(dest: str) -> Iterator[None]:
    """Hold DEST's writer lock for the block; PackLockedError names the holder when another has it.

    Example:
        >>> with pack_lock("train.packed"):
        ...     pass  # write shards
    """
    if fcntl is None:
        yield
        return
    path = os.path.join(dest, LOCK_NAME)
    while True:
        fd = _open(path)
        if fd is None:  # DEST cannot be written by us at all: the first write says so (a finished pack reads)
            yield
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _holder(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise PackLockedError(f"pack: {dest} is being written by another pack ({holder}); wait for it to "
                                  f"finish, or stop it and run pack again to resume") from None
        try:
            same = os.fstat(fd).st_ino == os.lstat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the holder finished and removed the file after we opened it: lock the new one
    try:
        with contextlib.suppress(OSError):  # a lock file we may only read still locks
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode(), 0)
        yield
    finally:
        with contextlib.suppress(OSError):
            os.remove(path)  # under the lock: a writer waiting on this inode re-checks and takes a new file
        os.close(fd)  # releases the flock
