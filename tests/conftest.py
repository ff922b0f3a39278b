import os
import subprocess
import sys
from typing import NamedTuple

import pytest
import torch
from filelock import FileLock
from torch.utils._pytree import tree_map_only

import fastprep

# Fail loudly if FASTPREP_BACKEND asked for a backend that did not load: CI runs the whole suite
# once per backend and must not silently test Numba twice.
_REQUESTED = os.environ.get("FASTPREP_BACKEND")
if _REQUESTED and fastprep.backend() != _REQUESTED:
    raise RuntimeError(f"FASTPREP_BACKEND={_REQUESTED} but fastprep runs {fastprep.backend()}")


# Probe code (run in a fresh process): numba_cache_counts() is how many first calls of fastprep's
# Numba kernels loaded from Numba's disk cache and how many compiled (the dispatchers' statistics);
# numba_kernel_counts() puts the number of compiled signatures the dispatchers hold before them.
NUMBA_CACHE_COUNTS = """
import sys, numba


def numba_kernel_counts():
    compiled = hits = misses = 0
    for name, module in list(sys.modules.items()):
        if name.startswith("fastprep.numba_kernels."):
            for obj in vars(module).values():
                if isinstance(obj, numba.core.dispatcher.Dispatcher):
                    compiled += len(obj.overloads)
                    hits += sum(obj.stats.cache_hits.values())
                    misses += sum(obj.stats.cache_misses.values())
    return compiled, hits, misses


def numba_cache_counts():
    return numba_kernel_counts()[1:]
"""

# Prints how many kernels warmup() ran, then its cache hits and misses (a count, not a timing).
WARMUP_PROBE = NUMBA_CACHE_COUNTS + """
import fastprep
latency = fastprep.warmup()
print(len(latency), *numba_cache_counts())
"""


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


def run_python(code: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """`code` run in a fresh interpreter with `env` added to this process's environment."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env},
                          timeout=timeout)


def native_available() -> bool:
    try:
        from fastprep import _C  # noqa: F401
    except ImportError:
        return False
    return True


requires_native = pytest.mark.skipif(
    fastprep.backend() != "native", reason="needs the native backend (FASTPREP_BACKEND=native)")


class OpCall(NamedTuple):
    """A call of op `op` with fixed arguments, run through the public wrapper fastprep.<op>."""
    op: str
    args: tuple
    kwargs: dict

    def __call__(self):
        return getattr(fastprep, self.op)(*self.args, **self.kwargs)

    def numba(self):
        """The same call on the op's Numba kernel, whatever backend is active."""
        from fastprep import numba_kernels
        return numba_kernels.kernel(self.op)(*self.args, **self.kwargs)

    def fake(self):
        """The same call on fake tensors (the fake kernel: what torch.compile traces run)."""
        from torch._subclasses.fake_tensor import FakeTensorMode
        mode = FakeTensorMode()
        args, kwargs = tree_map_only(torch.Tensor, mode.from_tensor, (self.args, self.kwargs))
        with mode:
            return getattr(fastprep, self.op)(*args, **kwargs)

    def __repr__(self):  # the test id
        return f"{self.op}(...)"


def call(op: str, *args, **kwargs) -> OpCall:
    return OpCall(op, args, kwargs)


def bad_input_tests(cases):
    """The tests every op module runs over its table of (call(op, *args), message regex): the op
    raises RuntimeError naming the argument and value on the active backend, the Numba kernel
    raises the same text (so both backends agree whichever runs the suite), and so does the fake
    kernel (so torch.compile traces report the same error). Use as
    ``test_bad_input_op, test_bad_input_numba, test_bad_input_fake = bad_input_tests(BAD_INPUTS)``."""
    ids = [f"{c.op}-{i}" for i, (c, _) in enumerate(cases)]

    @pytest.mark.parametrize("case,match", cases, ids=ids)
    def test_bad_input_raises_naming_argument_and_value(case, match):
        with pytest.raises(RuntimeError, match=match):
            case()

    @pytest.mark.one_backend  # calls the Numba kernel whatever the backend
    @pytest.mark.parametrize("case,match", cases, ids=ids)
    def test_bad_input_numba_kernel_gives_the_same_text(case, match):
        with pytest.raises(RuntimeError, match=match):
            case.numba()

    @pytest.mark.one_backend  # the fake kernel is the same whatever the backend
    @pytest.mark.parametrize("case,match", cases, ids=ids)
    def test_bad_input_in_fake_mode(case, match):
        with pytest.raises(RuntimeError, match=match):
            case.fake()

    return (test_bad_input_raises_naming_argument_and_value, test_bad_input_numba_kernel_gives_the_same_text,
            test_bad_input_in_fake_mode)
