import os

import pytest
import torch

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


def bad_input_tests(cases):
    """The two tests every op module runs over its table of (call, message regex): the real
    kernel raises RuntimeError naming the argument and value, and so does the fake kernel on the
    meta device (so torch.compile traces report the same error)."""

    @pytest.mark.parametrize("call,match", cases)
    def test_bad_input_raises_naming_argument_and_value(call, match):
        with pytest.raises(RuntimeError, match=match):
            call()

    @pytest.mark.parametrize("call,match", cases)
    def test_bad_input_on_meta_device(call, match):
        with torch.device("meta"), pytest.raises(RuntimeError, match=match):
            call()

    return test_bad_input_raises_naming_argument_and_value, test_bad_input_on_meta_device
