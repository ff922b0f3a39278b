"""Image files read safely: regular files only, bounded in size, listed without following a
symlink loop.

A folder of training images is not always what it seems: a name ending in ``.jpg`` can be a FIFO
(reading it blocks until a writer comes), a symlink to ``/dev/zero`` (reading never ends), or a
directory link back to its parent (a walk that follows links never ends). The listing keeps
regular files only and visits each real directory once; reading opens without blocking, checks
on the open file that it is regular and not over :data:`MAX_FILE_BYTES`, then reads that many
bytes.
"""

from __future__ import annotations

import os
import stat
import warnings
from collections.abc import Sequence

MAX_FILE_BYTES: int | None = 1 << 30
"""The largest file fastprep.io reads (1 GiB: a JPEG of MAX_IMAGE_PIXELS pixels fits with room to
spare); None lifts the limit."""


def read_file(who: str, path: str | os.PathLike) -> bytes:
    """The bytes of the regular file at `path`; a ValueError naming `who` and the path for
    anything else (a FIFO, a device, a directory, a file over MAX_FILE_BYTES)."""
    name = os.fspath(path)
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        st = os.fstat(fd)  # the file actually opened: a link swapped after the listing is caught here
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{who}: {name!r} is not a regular file ({_kind(st.st_mode)}); "
                             f"only regular files are read")
        if MAX_FILE_BYTES is not None and st.st_size > MAX_FILE_BYTES:
            raise ValueError(f"{who}: {name!r} holds {st.st_size} bytes, over fastprep.io._files.MAX_FILE_BYTES "
                             f"({MAX_FILE_BYTES})")
        with os.fdopen(fd, "rb", closefd=True) as f:
            fd = -1
            return f.read(st.st_size)  # what it held when opened, even if it grows meanwhile
    finally:
        if fd >= 0:
            os.close(fd)


def _kind(mode: int) -> str:
    for test, what in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return what
    return "not a file"


def list_files(top: str, extensions: Sequence[str], who: str) -> list[str]:
    """Every regular file under `top` (following links) whose name ends in one of `extensions`
    (any case), in torchvision's make_dataset order: folders sorted by path, names sorted within
    each. A real folder is visited once (a link back to a folder above is not followed again);
    entries with those endings that are not regular files are skipped with one warning."""
    exts = tuple(e.lower() for e in extensions)
    found: list[tuple[str, list[str]]] = []
    skipped: list[str] = []
    seen: set[tuple[int, int]] = set()
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            st = os.stat(folder)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) in seen:
            continue  # a symlink loop, or a second link to a folder already listed
        seen.add((st.st_dev, st.st_ino))
        names = []
        with os.scandir(folder) as entries:
            for e in entries:
                try:
                    is_dir = e.is_dir()  # follows links
                except OSError:
                    is_dir = False
                if is_dir:
                    stack.append(e.path)
                elif e.name.lower().endswith(exts):
                    try:
                        regular = stat.S_ISREG(e.stat().st_mode)
                    except OSError:  # a broken link
                        regular = False
                    (names if regular else skipped).append(e.name if regular else e.path)
        found.append((folder, sorted(names)))
    if skipped:
        shown = ", ".join(repr(p) for p in sorted(skipped)[:5])
        warnings.warn(f"{who}: skipped {len(skipped)} entries that are not regular files (FIFOs, devices, broken "
                      f"links): {shown}{' ...' if len(skipped) > 5 else ''}", stacklevel=3)
    return [os.path.join(folder, n) for folder, names in sorted(found) for n in names]
