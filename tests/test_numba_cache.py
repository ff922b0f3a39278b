"""Numba's on-disk cache when the package folder (and the home folder) are read-only, as in a
container image: fastprep still imports, caches somewhere writable, and a second process loads
instead of compiling. Read-only mounts come from a user namespace (`unshare -rm`), which works
for root too; root ignores chmod."""

import os
import shutil
import subprocess
import sys

import pytest

import fastprep
import fastprep.numba_kernels

PROBE = """
import sys, numba, fastprep
from fastprep import numba_kernels
from fastprep.numba_kernels._cache import fallback_cache_dir
latency = fastprep.warmup()
hits = misses = 0
for name, module in list(sys.modules.items()):
    if name.startswith("fastprep.numba_kernels."):
        for obj in vars(module).values():
            if isinstance(obj, numba.core.dispatcher.Dispatcher):
                hits += sum(obj.stats.cache_hits.values())
                misses += sum(obj.stats.cache_misses.values())
print(numba_kernels.CACHE_DIR)
print(fallback_cache_dir())
print(hits, misses, max(latency.values()))
"""

PACKAGE_DIR = os.path.dirname(fastprep.numba_kernels.__file__)


def _namespaces_work(tmp_path) -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = tmp_path / "probe"
    probe.mkdir()
    out = subprocess.run(["unshare", "-rm", "sh", "-c", f"mount --bind -o ro {probe} {probe}"],
                         capture_output=True, timeout=30)
    return out.returncode == 0


def _run_with_read_only(dirs, env):
    mounts = "".join(f'mount --bind -o ro "{d}" "{d}" && ' for d in dirs)
    full_env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    full_env.update(env, FASTPREP_BACKEND="numba")
    out = subprocess.run(["unshare", "-rm", "sh", "-c", mounts + 'exec "$0" -c "$1"',
                          sys.executable, PROBE], capture_output=True, text=True, env=full_env,
                         timeout=600)
    assert out.returncode == 0, out.stderr
    cache_dir, fallback, counts = out.stdout.splitlines()[-3:]
    hits, misses, slowest = counts.split()
    return cache_dir, fallback, int(hits), int(misses), float(slowest)


@pytest.fixture
def dirs(tmp_path):
    if fastprep.backend() != "numba":
        pytest.skip("the probes run Numba whatever the backend; they run once, in the Numba pass")
    if not _namespaces_work(tmp_path):
        pytest.skip("needs user namespaces (unshare -rm) to make folders read-only")
    paths = {name: tmp_path / name for name in ("xdg", "tmp")}
    for p in paths.values():
        p.mkdir()
    return paths


def test_read_only_package_caches_in_the_user_wide_folder(dirs):
    env = {"XDG_CACHE_HOME": str(dirs["xdg"]), "TMPDIR": str(dirs["tmp"])}
    first = _run_with_read_only([PACKAGE_DIR], env)
    second = _run_with_read_only([PACKAGE_DIR], env)
    assert first[0].startswith(str(dirs["xdg"] / "numba"))
    assert first[2] == 0 and first[3] > 0  # compiled; nothing could come from the package folder
    assert second[2] > 0 and second[3] == 0  # every kernel loaded from the user-wide cache
    assert second[4] < first[4]


def test_read_only_package_and_home_fall_back_to_the_temp_folder(dirs):
    env = {"XDG_CACHE_HOME": str(dirs["xdg"]), "TMPDIR": str(dirs["tmp"])}
    first = _run_with_read_only([PACKAGE_DIR, dirs["xdg"]], env)
    second = _run_with_read_only([PACKAGE_DIR, dirs["xdg"]], env)
    assert first[0] == first[1] and first[0].startswith(str(dirs["tmp"]))
    assert first[2] == 0 and first[3] > 0
    assert second[2] > 0 and second[3] == 0
    assert not any(dirs["xdg"].iterdir())  # nothing was written where it could not be
