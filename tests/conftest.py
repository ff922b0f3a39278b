"""Session fixtures and the run-wide backend check; shared helpers are the tests/helpers package."""

import os
import subprocess
import sys

import pytest
from filelock import FileLock

import fastprep

from helpers.processes import WARMUP_PROBE

# Fail loudly if FASTPREP_BACKEND asked for a backend that did not load: CI runs the whole suite
# once per backend and must not silently test Numba twice.
_REQUESTED = os.environ.get("FASTPREP_BACKEND")
if _REQUESTED and fastprep.backend() != _REQUESTED:
    raise RuntimeError(f"FASTPREP_BACKEND={_REQUESTED} but fastprep runs {fastprep.backend()}")


@pytest.fixture(scope="session")
def warmed_numba_cache(tmp_path_factory):
    """(folder, what the probe printed): a Numba cache that ``fastprep.warmup()`` filled in a fresh
    process, compiling every kernel once. The tests of warmup and of cached workers share this one
    cold compile (a minute on 2 cores) instead of each paying it; copy the folder before writing to
    it. xdist workers (each with its own session) share it through a lock in the run's folder."""
    run_dir = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        run_dir = run_dir.parent  # pytest-N/popen-gwK: the run's folder, shared by its workers
    folder, printed = run_dir / "warmed-numba-cache", run_dir / "warmed-numba-cache.out"
    with FileLock(str(run_dir / "warmed-numba-cache.lock")):
        if not printed.exists():
            out = subprocess.run([sys.executable, "-c", WARMUP_PROBE], capture_output=True, text=True,
                                 env={**os.environ, "NUMBA_CACHE_DIR": str(folder)}, timeout=600)
            assert out.returncode == 0, out.stderr[-3000:]
            printed.write_text(out.stdout)
    return folder, printed.read_text()
