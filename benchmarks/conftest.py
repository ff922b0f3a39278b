"""Shared by the benchmark files: the backends to compare and a ratio summary per group.

Every group times fastprep beside the baselines a user would otherwise reach for, on the same
inputs, plus a `memcpy` floor (copying the output's bytes). The summary prints, per group, each
entry's median and its speed relative to the best baseline and to memcpy.
"""

import pytest
import torch

import fastprep

NATIVE = fastprep.backend() == "native"
requires_native = pytest.mark.skipif(not NATIVE, reason="native backend not loaded")


@pytest.fixture(scope="module")
def one_thread():
    """Single-threaded torch (and OpenCV) for a module: compares one core with one core."""
    try:
        import cv2  # noqa: PLC0415 (a benchmark extra)
    except ImportError:
        cv2 = None
    n, n_cv = torch.get_num_threads(), cv2.getNumThreads() if cv2 else 0
    torch.set_num_threads(1)
    if cv2:
        cv2.setNumThreads(1)
    yield
    torch.set_num_threads(n)
    if cv2:
        cv2.setNumThreads(n_cv)


def memcpy_floor(nbytes: int):
    """A callable copying `nbytes` between two preallocated buffers: the floor for an op whose
    output has that many bytes."""
    src = torch.ones(nbytes, dtype=torch.uint8)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def _kind(name: str) -> str:
    if "memcpy" in name:
        return "floor"
    return "fastprep" if any(k in name for k in ("fastprep", "native", "numba")) else "baseline"


def pytest_terminal_summary(terminalreporter, config):
    session = getattr(config, "_benchmarksession", None)
    if session is None or not session.benchmarks:
        return
    groups: dict[str, list] = {}
    for bench in session.benchmarks:
        if bench.stats is not None:
            groups.setdefault(bench.group or "(no group)", []).append(bench)
    tr = terminalreporter
    tr.section("fastprep ratios (median time; x = times faster)")
    for group, benches in sorted(groups.items()):
        medians = {b.name.split("[")[0]: b.stats.median for b in benches}
        baselines = [t for n, t in medians.items() if _kind(n) == "baseline"]
        floors = [t for n, t in medians.items() if _kind(n) == "floor"]
        tr.write_line(f"{group}")
        for name, t in sorted(medians.items(), key=lambda kv: kv[1]):
            line = f"  {name:<44} {t * 1e6:12.2f} us"
            if _kind(name) == "fastprep":
                if baselines:
                    line += f"   {min(baselines) / t:7.2f}x best baseline"
                if floors:
                    line += f"   {min(floors) / t:6.2f}x memcpy"
            tr.write_line(line)
