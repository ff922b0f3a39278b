"""warmup(): compile (or load from Numba's cache) every Numba kernel before DataLoader workers
fork, so each worker does not pay the first-call compile itself."""

from __future__ import annotations

import time

from fastprep.ops._registry import OPS


def warmup() -> dict[str, float]:
    """Run every op's Numba kernel once, on the sample arguments of its registry row; returns the
    seconds each first call took (compile or cache load). Safe to call whatever backend is
    active; cheap once the kernels are cached."""
    from fastprep import numba_kernels  # noqa: PLC0415 (the Numba backend loads only when asked)

    latency = {}
    for row in OPS:
        fn, args = numba_kernels.kernel(row.name), row.sample()
        t0 = time.perf_counter()
        fn(*args)
        latency[row.name] = time.perf_counter() - t0
    return latency
