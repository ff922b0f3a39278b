"""Where Numba keeps fastprep's compiled kernels.

Numba looks for a writable cache in the package's ``__pycache__``, then in the user-wide cache
(``$XDG_CACHE_HOME/numba``, usually ``~/.cache/numba``). In a container with a read-only
site-packages and a read-only (or missing) home, neither works, and every ``@njit(cache=True)``
then fails when its module is imported. fastprep checks before its kernels are defined and, only
in that case, points Numba at a per-user folder under the temp directory.
"""

from __future__ import annotations

import os
import tempfile

from numba.core import config
from numba.misc.appdirs import AppDirs

_IN_TREE = os.path.join(os.path.dirname(__file__), "__pycache__")


def _writable(path: str) -> bool:
    try:
        os.makedirs(path, exist_ok=True)
        tempfile.TemporaryFile(dir=path).close()  # the same probe Numba's cache locators use
    except OSError:
        return False
    return True


def fallback_cache_dir() -> str:
    return os.path.join(tempfile.gettempdir(), f"fastprep-numba-cache-{os.getuid()}")


def choose_cache_dir() -> str:
    """Return the folder Numba will cache fastprep's kernels in, after making sure there is one.
    NUMBA_CACHE_DIR, when set, wins as it does in Numba."""
    if config.CACHE_DIR:
        return config.CACHE_DIR
    if _writable(_IN_TREE):
        return _IN_TREE
    user_wide = AppDirs(appname="numba", appauthor=False).user_cache_dir
    if _writable(user_wide):
        return user_wide
    config.CACHE_DIR = fallback_cache_dir()
    return config.CACHE_DIR


CACHE_DIR = choose_cache_dir()
