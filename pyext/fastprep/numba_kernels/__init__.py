"""The Numba backend: one module per op family, mirroring csrc/kernels + csrc/ops one to one, each
exporting its ops' kernels under the ops' names (ops/_registry.py). Importing this package compiles
nothing: kernels compile (or load from Numba's disk cache) on first call, or in warmup()."""

import importlib

import torch

# Must run before any kernel module is imported: @njit(cache=True) picks its cache folder then.
from fastprep.numba_kernels._cache import CACHE_DIR  # noqa: F401
from fastprep.ops._registry import OPS

_LIB = None


def kernel(name: str):
    """The Numba kernel of op `name`."""
    row = next(r for r in OPS if r.name == name)
    return getattr(importlib.import_module(f"fastprep.numba_kernels._{row.family}"), name)


def register() -> None:
    """Register every op's Numba kernel (held in a Library for the life of the process): under CPU,
    or CompositeExplicitAutograd for the ops that take no tensor."""
    global _LIB
    if _LIB is None:
        _LIB = torch.library.Library("fastprep", "IMPL")
        for row in OPS:
            _LIB.impl(row.name, kernel(row.name), "CPU" if row.takes_tensor else "CompositeExplicitAutograd")
