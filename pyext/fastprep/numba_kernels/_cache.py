"""Where Numba keeps fastprep's compiled kernels, and only where that is safe.

Numba loads its cache index files with pickle, so a file another local user can plant in the
cache folder runs as code in every process that imports fastprep's Numba kernels. fastprep
therefore picks the folder itself, before any kernel is defined, taking the first of these that
is safe:

1. ``NUMBA_CACHE_DIR`` when set (Numba's own setting; no other is tried when it is unsafe),
2. the package's ``__pycache__`` (Numba's first choice),
3. the user-wide folder, ``$XDG_CACHE_HOME/numba`` or ``~/.cache/numba`` (an XDG_CACHE_HOME that
   is empty or relative is ignored, as the XDG spec says: Numba would cache in ./numba),
4. a private folder ``fastprep-numba-cache-<uid>`` in ``$TMPDIR`` (when absolute) or else /tmp,
   created 0700; never the current directory, and never /tmp when TMPDIR names another place.

A folder is safe when it is a directory owned by this user that no one else may write (no
group or other write bit; a symlink counts only if this user made it), every folder above it, on
the path as given and on the path the links resolve to, belongs to this user or root and is not
writable by others unless it has the sticky bit (so nobody can rename it and put a folder of their
own in its place), and it accepts a file. A folder that is missing is created 0700 and checked
again (someone may have made it first). If none is safe, the kernels compile in each process
instead (no disk cache) and one :class:`fastprep.NumbaCacheWarning` says why.

The folder is chosen at import, but Numba reads a kernel's index when the kernel is first called:
every load and save checks the folder and each file again at that moment, before anything is
unpickled (TrustedFunctionCache, below).
"""

from __future__ import annotations

import os
import stat
import tempfile
import threading
import warnings
from collections.abc import Mapping

import numba
from numba.core import config
from numba.core.caching import FunctionCache, IndexDataCacheFile
from numba.core.dispatcher import Dispatcher

from fastprep.errors import NumbaCacheWarning

IN_TREE = os.path.join(os.path.dirname(__file__), "__pycache__")


def unsafe_reason(path: str, uid: int) -> str | None:
    """Why `path` (an existing folder) must not hold a cache; None when it may."""
    try:
        link = os.lstat(path)
        st = os.stat(path)
    except OSError as exc:
        return f"cannot be inspected ({exc.strerror})"
    if stat.S_ISLNK(link.st_mode) and link.st_uid != uid:
        return f"is a symlink made by user {link.st_uid}"
    if not stat.S_ISDIR(st.st_mode):
        return "is not a folder"
    return _owner_reason(st, uid) or ancestors_reason(path, uid)


def _owner_reason(st: os.stat_result, uid: int) -> str | None:
    """Why a folder or file with this stat is not only this user's to write."""
    if st.st_uid != uid:
        return f"is owned by user {st.st_uid}, not by this user ({uid})"
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return f"can be written by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return None


def ancestors_reason(path: str, uid: int) -> str | None:
    """Why a folder above `path` (as given, and as its links resolve) lets someone else replace
    what is at `path`: a folder of another user (who may rename entries in it), or one others may
    write without the sticky bit. None when every one is safe."""
    given, resolved = os.path.abspath(path), os.path.realpath(path)
    seen = set()
    for chain in (given, resolved):
        parent = os.path.dirname(chain)
        while parent not in seen:
            seen.add(parent)
            try:
                st = os.stat(parent)
            except OSError as exc:
                return f"is in {parent!r}, which cannot be inspected ({exc.strerror})"
            if st.st_uid not in (uid, 0):
                return f"is in {parent!r}, owned by user {st.st_uid}, who could replace it"
            if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not st.st_mode & stat.S_ISVTX:
                return (f"is in a folder others can write without the sticky bit ({parent!r}, mode "
                        f"{stat.S_IMODE(st.st_mode):o}), so it could be replaced")
            if parent == os.path.dirname(parent):
                break
            parent = os.path.dirname(parent)
    return None


def unsafe_file_reason(path: str, uid: int) -> str | None:
    """Why the cache file `path` must not be unpickled (None when it may, or when it is missing:
    Numba then has nothing to load). Its folder is checked by unsafe_reason."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"cannot be inspected ({exc.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    return _owner_reason(st, uid)


def _usable(path: str, uid: int) -> tuple[bool, str | None]:
    """(safe and writable, why not). A missing folder is created 0700 first."""
    if not os.path.isabs(path):
        return False, "is not an absolute path"
    if not os.path.lexists(path):
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
        except OSError as exc:
            return False, f"cannot be created ({exc.strerror})"
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass  # someone made it in between: it is checked like any other
        except OSError as exc:
            return False, f"cannot be created ({exc.strerror})"
    if not os.path.lexists(path):
        return False, "does not exist"
    reason = unsafe_reason(path, uid)
    if reason is not None:
        return False, reason
    try:
        tempfile.TemporaryFile(dir=path).close()  # the probe Numba's cache locators use
    except OSError as exc:
        return False, f"is not writable ({exc.strerror})"
    return True, None


def user_wide_dir(environ: Mapping[str, str]) -> str | None:
    """Numba's user-wide cache folder, the XDG way: an absolute XDG_CACHE_HOME, else ~/.cache."""
    xdg = environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return os.path.join(xdg, "numba")
    home = environ.get("HOME") or os.path.expanduser("~")
    return os.path.join(home, ".cache", "numba") if os.path.isabs(home) else None


def fallback_cache_dir(environ: Mapping[str, str] = os.environ, uid: int | None = None) -> str:
    """The private folder in the temp directory: $TMPDIR when absolute, else /tmp."""
    tmp = environ.get("TMPDIR", "")
    uid = os.getuid() if uid is None else uid
    return os.path.join(tmp if os.path.isabs(tmp) else "/tmp", f"fastprep-numba-cache-{uid}")


def choose_cache_dir(environ: Mapping[str, str] = os.environ, in_tree: str = IN_TREE,
                     numba_cache_dir: str = "", uid: int | None = None) -> tuple[str | None, list[str]]:
    """(the folder to cache in, or None for no disk cache; why each folder before it was passed over)."""
    uid = os.getuid() if uid is None else uid
    skipped = []
    if numba_cache_dir:
        ok, why = _usable(numba_cache_dir, uid)
        return (numba_cache_dir, []) if ok else (None, [f"NUMBA_CACHE_DIR {numba_cache_dir!r} {why}"])
    candidates = [("the package folder", in_tree), ("the user-wide cache", user_wide_dir(environ)),
                  ("the temp folder", fallback_cache_dir(environ, uid))]
    for what, path in candidates:
        if path is None:
            skipped.append(f"{what}: no absolute HOME or XDG_CACHE_HOME")
            continue
        ok, why = _usable(path, uid)
        if ok:
            return path, skipped
        skipped.append(f"{what} {path!r} {why}")
    return None, skipped


def _apply() -> str | None:
    path, skipped = choose_cache_dir(numba_cache_dir=config.CACHE_DIR)
    if path is None:
        warnings.warn("fastprep: Numba's kernels run without a disk cache (each process compiles them, "
                      "seconds at first use) because no cache folder is safe: " + "; ".join(skipped) +
                      ". Set NUMBA_CACHE_DIR to a folder only you can write.", NumbaCacheWarning, stacklevel=3)
    elif path != IN_TREE:
        config.CACHE_DIR = path  # Numba's own fallbacks (in-tree, user-wide) are never reached then
    return path


# -- at use: Numba reads a kernel's index (a pickle) only when the kernel is first called, which
# may be long after import, and a folder that was safe then may not be now. So every load and save
# goes through TrustedIndexDataCacheFile, which checks, right before it opens anything, the folder
# (with every folder above it, on the resolved path) and the file itself: a regular file, this
# user's, that no one else may write. A failed check is one NumbaCacheWarning per folder, and the
# kernel is compiled instead of loaded (and not saved there).

_warned: set[str] = set()
_warned_lock = threading.Lock()


def _refused(path: str, is_file: bool) -> bool:
    """Whether `path` (the cache folder, or a file in it) must not be used now; warns once per folder."""
    uid = os.getuid()
    folder = os.path.dirname(path) if is_file else path
    reason = unsafe_reason(folder, uid) if os.path.lexists(folder) else None
    what = folder
    if reason is None and is_file:
        reason, what = unsafe_file_reason(path, uid), path
    if reason is None:
        return False
    with _warned_lock:
        first = folder not in _warned
        _warned.add(folder)
    if first:
        warnings.warn(f"fastprep: Numba's cache {what!r} {reason}: its kernels are compiled, not loaded from "
                      f"there or saved there. Set NUMBA_CACHE_DIR to a folder only you can write.",
                      NumbaCacheWarning, stacklevel=2)
    return True


class TrustedIndexDataCacheFile(IndexDataCacheFile):
    """Numba's index + data files, each checked right before it is unpickled or written."""

    def _load_index(self):
        if _refused(self._index_path, is_file=True):
            return {}
        return super()._load_index()

    def _load_data(self, name):
        path = self._data_path(name)
        if _refused(path, is_file=True):
            raise OSError(f"refused {path}")  # IndexDataCacheFile.load reads an OSError as a miss
        return super()._load_data(name)

    def save(self, key, data):
        if _refused(self._cache_path, is_file=False):
            return
        super().save(key, data)


class TrustedFunctionCache(FunctionCache):
    """FunctionCache whose files go through TrustedIndexDataCacheFile."""

    def __init__(self, py_func):
        super().__init__(py_func)
        self._cache_file = TrustedIndexDataCacheFile(cache_path=self._cache_path,
                                                     filename_base=self._impl.filename_base,
                                                     source_stamp=self._impl.locator.get_source_stamp())


def trusted(dispatcher: Dispatcher) -> Dispatcher:
    """`dispatcher` (made with cache=True) with its cache replaced by a TrustedFunctionCache."""
    dispatcher._cache = TrustedFunctionCache(dispatcher.py_func)
    return dispatcher


CACHE_DIR = _apply()


def njit(*args, cache: bool = False, **kwargs):
    """numba.njit, caching on disk only in a folder chosen above (never without one), through a
    cache that checks the folder and each file again when it loads or saves (TrustedFunctionCache)."""
    use = cache and CACHE_DIR is not None
    made = numba.njit(*args, cache=use, **kwargs)
    if not use:
        return made
    if isinstance(made, Dispatcher):
        return trusted(made)
    return lambda func: trusted(made(func))
