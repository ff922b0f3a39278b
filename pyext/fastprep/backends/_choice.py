"""Chooses and loads the backend that runs the fastprep ops on CPU.

FASTPREP_BACKEND=native (default) loads the C++ kernels (libfastprep_ops, LibTorch stable ABI);
FASTPREP_BACKEND=numba registers the Numba kernels. If the native library cannot load, import
still succeeds: one NativeUnavailableWarning gives the reason and the Numba backend runs.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import torch

from fastprep.errors import NativeUnavailableWarning, TorchVersionError

BACKENDS = ("native", "numba")
_state: dict[str, object] = {"backend": None, "native_error": None}


def _version_tuple(v: str) -> tuple[int, ...]:
    base = v.split("+")[0]
    return tuple(int(p) for p in base.split(".")[:2] if p.isdigit())


def check_torch_compat(info: dict, runtime: str | None = None) -> None:
    """A stable-ABI build runs on any torch >= its target; any other build needs the exact torch
    it was compiled against (its C++ ABI changes between releases)."""
    runtime = torch.__version__ if runtime is None else runtime
    built = info["torch_version"]
    if info["abi"] == "stable":
        if _version_tuple(runtime) < _version_tuple(info["abi_target"]):
            raise TorchVersionError(
                f"fastprep's native library targets torch >= {info['abi_target']} (stable ABI, "
                f"built with {built}) but torch {runtime} is running; upgrade torch")
    elif runtime.split("+")[0] != built.split("+")[0]:
        raise TorchVersionError(
            f"fastprep's native library was built against torch {built} but torch {runtime} is "
            f"running; rebuild it: pip install --no-build-isolation --force-reinstall fastprep")


def _load_native() -> None:
    from fastprep import _C  # noqa: PLC0415 (optional native module)

    check_torch_compat(_C.build_info())
    torch.ops.load_library(str(Path(_C.__file__).with_name("libfastprep_ops.so")))


def _register_numba() -> None:
    from fastprep import numba_kernels  # noqa: PLC0415 (numba compiles lazily, on first call)

    numba_kernels.register()


def select_backend() -> str:
    requested = os.environ.get("FASTPREP_BACKEND", "native").strip().lower() or "native"
    if requested not in BACKENDS:
        raise ValueError(f"FASTPREP_BACKEND must be one of {BACKENDS}, got {requested!r}")
    if requested == "native":
        try:
            _load_native()
        except TorchVersionError:
            raise
        except (ImportError, OSError, RuntimeError) as exc:
            _state["native_error"] = f"{type(exc).__name__}: {exc}"
            warnings.warn(
                f"fastprep: native backend unavailable ({_state['native_error']}); using the "
                "Numba backend. Rebuild with `pip install --no-build-isolation .` to get it back.",
                NativeUnavailableWarning, stacklevel=3)
        else:
            _state["backend"] = "native"
            return "native"
    _register_numba()
    _state["backend"] = "numba"
    return "numba"


def backend() -> str:
    """The backend running fastprep's CPU kernels: "native" (C++) or "numba"."""
    return str(_state["backend"])


def build_info() -> dict:
    """How the native library was built: compiler, flags, torch version built against, ABI, the
    ISA variants compiled in and the one this CPU selects; plus the running torch and backend."""
    try:
        from fastprep import _C  # noqa: PLC0415
    except ImportError as exc:
        raise RuntimeError(
            f"fastprep's native module is not available ({exc}); the Numba backend is running. "
            "Build it with `pip install --no-build-isolation .`") from exc
    info = dict(_C.build_info())
    info["runtime_torch_version"] = torch.__version__
    info["backend"] = backend()
    return info
