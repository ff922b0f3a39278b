import os

import pytest

import fastprep

# Fail loudly if FASTPREP_BACKEND asked for a backend that did not load: CI runs the whole suite
# once per backend and must not silently test Numba twice.
_REQUESTED = os.environ.get("FASTPREP_BACKEND")
if _REQUESTED and fastprep.backend() != _REQUESTED:
    raise RuntimeError(f"FASTPREP_BACKEND={_REQUESTED} but fastprep runs {fastprep.backend()}")


def native_available() -> bool:
    try:
        from fastprep import _C  # noqa: F401
    except ImportError:
        return False
    return True


requires_native = pytest.mark.skipif(
    fastprep.backend() != "native", reason="needs the native backend (FASTPREP_BACKEND=native)")
