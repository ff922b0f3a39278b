"""Numba's per-kernel disk cache, checked at the moment it is used.

_cache.py chooses the folder at import; Numba reads a kernel's index (a pickle) only when the
kernel is first called, which may be much later, and a folder that was safe then may not be now.
So every load and save goes through :class:`TrustedIndexDataCacheFile`, which checks, right before
it opens anything, the folder (with every folder above it, on the resolved path) and the file
itself: a regular file, this user's, that no one else may write. A check that fails is one
:class:`fastprep.NumbaCacheWarning` per folder, and the kernel is compiled instead of loaded (and
not saved there).
"""

from __future__ import annotations

import os
import threading
import warnings

from numba.core.caching import FunctionCache, IndexDataCacheFile
from numba.core.dispatcher import Dispatcher

from fastprep._warnings import NumbaCacheWarning
from fastprep.numba_kernels._cache import unsafe_file_reason, unsafe_reason

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
