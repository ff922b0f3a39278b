"""Numba's on-disk cache: only in a folder this user owns and no one else can write, since Numba
loads its index files with pickle (a planted file would run as code). The folder rules are
checked on planted folders (bad mode, another owner, symlinks, a parent others can write,
relative or empty XDG_CACHE_HOME, an unusable TMPDIR), and end to end with a real pickle payload
that must never run. Then the read-only package (and home) of a container image: fastprep still
imports, caches somewhere safe, and a second process loads instead of compiling. Read-only mounts
come from a user namespace (`unshare -rm`), which works for root too; root ignores chmod."""

import glob
import os
import pickle
import shutil
import stat
import subprocess
import sys
import warnings

import pytest

import fastprep
import fastprep.numba_kernels
from fastprep.numba_kernels._cache import choose_cache_dir, fallback_cache_dir, unsafe_reason, user_wide_dir

from helpers.processes import NUMBA_CACHE_COUNTS

# One kernel (pack_bits) stands for all: every kernel caches in the one folder numba_kernels
# chose (CACHE_DIR), and warmup() compiling them all costs a minute (test_backend runs that once).
PROBE = NUMBA_CACHE_COUNTS + """
import time, torch, fastprep
from fastprep import numba_kernels
from fastprep.numba_kernels._cache import fallback_cache_dir
t0 = time.perf_counter()
numba_kernels.kernel("pack_bits")(torch.ones(3, 9, dtype=torch.bool))
latency = time.perf_counter() - t0
hits, misses = numba_cache_counts()
print(numba_kernels.CACHE_DIR)
print(fallback_cache_dir())
print(hits, misses, latency)
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
    assert second[2] > 0 and second[3] == 0  # the kernel loaded from the user-wide cache
    assert second[4] < first[4]


def test_read_only_package_and_home_fall_back_to_the_temp_folder(dirs):
    env = {"XDG_CACHE_HOME": str(dirs["xdg"]), "TMPDIR": str(dirs["tmp"])}
    first = _run_with_read_only([PACKAGE_DIR, dirs["xdg"]], env)
    second = _run_with_read_only([PACKAGE_DIR, dirs["xdg"]], env)
    assert first[0] == first[1] and first[0].startswith(str(dirs["tmp"]))
    assert first[2] == 0 and first[3] > 0
    assert second[2] > 0 and second[3] == 0
    assert not any(dirs["xdg"].iterdir())  # nothing was written where it could not be


# The folder rules, on planted folders. `uid` stands for the user fastprep runs as: a uid other
# than the real one makes every real folder "another user's", which tests ownership without root.

def _unusable(tmp_path, name):
    """A path no folder can be made at (under a regular file): a read-only place, even for root."""
    blocker = tmp_path / f"{name}-file"
    blocker.write_text("")
    return str(blocker / name)


def _env(tmp_path, **extra):
    """In-tree and user-wide caches unusable, TMPDIR a fresh folder: the temp fallback decides."""
    tmp = tmp_path / "tmp"
    tmp.mkdir(exist_ok=True)
    os.chmod(tmp, 0o1777)
    env = {"HOME": _unusable(tmp_path, "home"), "TMPDIR": str(tmp)}
    env.update(extra)
    return env, _unusable(tmp_path, "pkg")


def test_a_fresh_temp_folder_is_created_private(tmp_path):
    env, in_tree = _env(tmp_path)
    path, skipped = choose_cache_dir(env, in_tree)
    assert path == fallback_cache_dir(env) == str(tmp_path / "tmp" / f"fastprep-numba-cache-{os.getuid()}")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o700 and os.stat(path).st_uid == os.getuid()
    assert len(skipped) == 2 and "cannot be created" in skipped[0]


@pytest.mark.parametrize("mode", [0o777, 0o775, 0o757, 0o722])
def test_a_folder_group_or_others_can_write_is_never_used(tmp_path, mode):
    env, in_tree = _env(tmp_path)
    planted = fallback_cache_dir(env)
    os.mkdir(planted)
    os.chmod(planted, mode)
    path, skipped = choose_cache_dir(env, in_tree)
    assert path is None
    assert f"can be written by group or others (mode {mode:o})" in skipped[-1]


def test_a_folder_of_another_user_is_never_used(tmp_path):
    env, in_tree = _env(tmp_path)
    other = os.getuid() + 4242  # the folders below are the real uid's: "another user" for this one
    planted = fallback_cache_dir(env, other)
    os.mkdir(planted, 0o700)
    path, skipped = choose_cache_dir(env, in_tree, uid=other)
    assert path is None and f"is owned by user {os.getuid()}, not by this user ({other})" in skipped[-1]
    assert unsafe_reason(planted, os.getuid()) is None  # the same folder is fine for its owner


def test_symlinks_count_only_when_this_user_made_them(tmp_path):
    env, in_tree = _env(tmp_path)
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    os.symlink(target, fallback_cache_dir(env))
    assert choose_cache_dir(env, in_tree)[0] == fallback_cache_dir(env)  # this user's own link
    other = os.getuid() + 4242
    os.symlink(target, fallback_cache_dir(env, other))
    assert "is a symlink made by user" in choose_cache_dir(env, in_tree, uid=other)[1][-1]
    os.chmod(target, 0o777)
    assert "can be written by group or others" in choose_cache_dir(env, in_tree)[1][-1]


@pytest.mark.parametrize("parent_mode,ok", [(0o777, False), (0o1777, True), (0o755, True)])
def test_the_parent_must_not_let_others_swap_the_folder(tmp_path, parent_mode, ok):
    env, in_tree = _env(tmp_path)
    os.mkdir(fallback_cache_dir(env), 0o700)
    os.chmod(env["TMPDIR"], parent_mode)
    path, skipped = choose_cache_dir(env, in_tree)
    assert (path is not None) == ok, skipped
    if not ok:
        assert "in a folder others can write without the sticky bit" in skipped[-1]


@pytest.mark.parametrize("xdg", ["", "relative/cache", "."])
def test_an_empty_or_relative_xdg_cache_home_is_ignored(tmp_path, xdg, monkeypatch):
    monkeypatch.chdir(tmp_path)
    home = tmp_path / "home"
    home.mkdir()
    env = {"XDG_CACHE_HOME": xdg, "HOME": str(home), "TMPDIR": str(tmp_path)}
    assert user_wide_dir(env) == str(home / ".cache" / "numba")
    path, _ = choose_cache_dir(env, _unusable(tmp_path, "pkg"))
    assert path == str(home / ".cache" / "numba") and stat.S_IMODE(os.stat(path).st_mode) == 0o700
    assert not (tmp_path / "numba").exists()  # never ./numba, where Numba's own lookup put it


def test_an_unusable_tmpdir_never_falls_back_to_a_shared_folder(tmp_path):
    env, in_tree = _env(tmp_path, TMPDIR=_unusable(tmp_path, "tmpdir"))
    path, skipped = choose_cache_dir(env, in_tree)
    assert path is None and "cannot be created" in skipped[-1]  # not /tmp, not the current folder
    assert fallback_cache_dir({"TMPDIR": "relative"}, 5) == "/tmp/fastprep-numba-cache-5"


def test_an_unsafe_numba_cache_dir_means_no_disk_cache(tmp_path):
    bad = tmp_path / "shared"
    bad.mkdir()
    os.chmod(bad, 0o777)
    path, skipped = choose_cache_dir({}, str(tmp_path), numba_cache_dir=str(bad))
    assert path is None and "NUMBA_CACHE_DIR" in skipped[0] and "mode 777" in skipped[0]
    good = tmp_path / "mine"
    assert choose_cache_dir({}, str(tmp_path), numba_cache_dir=str(good)) == (str(good), [])


# End to end: a pickle payload in the cache folder runs if Numba loads that folder's index.

KERNEL_PROBE = """
import warnings, numpy as np
warnings.simplefilter("always")
from fastprep.numba_kernels import CACHE_DIR
import fastprep.numba_kernels._counter_rng as counter_rng
print(CACHE_DIR)
print(int(counter_rng.mix64(np.uint64(12345))))
"""


class _Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):  # unpickling creates the marker file
        return open, (self.marker, "w")


def _run_probe(env):
    full = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    full.update(env, FASTPREP_BACKEND="numba")
    out = subprocess.run([sys.executable, "-c", KERNEL_PROBE], capture_output=True, text=True, env=full, timeout=300)
    assert out.returncode == 0, out.stderr
    return out


def _plant(cache, marker):
    index_files = glob.glob(os.path.join(cache, "**", "*.nbi"), recursive=True)
    assert index_files, "the first run cached nothing"
    for f in index_files:
        with open(f, "wb") as fh:
            pickle.dump(_Payload(str(marker)), fh)


@pytest.mark.one_backend  # the probes run Numba whatever the backend
@pytest.mark.slow  # end to end in fresh processes (the folder rules above are checked in-process)
def test_a_planted_pickle_in_an_unsafe_folder_never_runs(tmp_path):
    good = tmp_path / "good"
    first = _run_probe({"NUMBA_CACHE_DIR": str(good)})  # a real cache, made by this user
    expected = first.stdout.split()[-1]
    bad = tmp_path / "bad"
    shutil.copytree(good, bad)
    marker = tmp_path / "pwned"
    _plant(str(bad), marker)
    for root, dirs, files in os.walk(bad):
        for name in dirs + files + [""]:
            os.chmod(os.path.join(root, name), 0o777)
    out = _run_probe({"NUMBA_CACHE_DIR": str(bad)})
    assert not marker.exists(), "the planted cache was loaded"
    assert out.stdout.split()[0] == "None" and out.stdout.split()[-1] == expected
    assert "NumbaCacheWarning" in out.stderr and "mode 777" in out.stderr
    # The control: the same payload in a safe folder is loaded, so the test above can fail.
    _plant(str(good), marker)
    _run_probe({"NUMBA_CACHE_DIR": str(good)})
    assert marker.exists()


def test_read_only_package_and_home_never_use_a_planted_temp_folder(dirs):
    env = {"XDG_CACHE_HOME": str(dirs["xdg"]), "TMPDIR": str(dirs["tmp"])}
    planted = dirs["tmp"] / f"fastprep-numba-cache-{os.getuid()}"
    planted.mkdir()
    os.chmod(planted, 0o777)
    marker = dirs["tmp"] / "pwned"
    (planted / "x.nbi").write_bytes(pickle.dumps(_Payload(str(marker))))
    mounts = f'mount --bind -o ro "{PACKAGE_DIR}" "{PACKAGE_DIR}" && mount --bind -o ro "{dirs["xdg"]}" ' \
             f'"{dirs["xdg"]}" && '
    full_env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    full_env.update(env, FASTPREP_BACKEND="numba")
    out = subprocess.run(["unshare", "-rm", "sh", "-c", mounts + 'exec "$0" -c "$1"', sys.executable, KERNEL_PROBE],
                         capture_output=True, text=True, env=full_env, timeout=600)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "None" and not marker.exists()
    assert "can be written by group or others (mode 777)" in out.stderr


def test_the_warning_is_fastprep_numba_cache_warning():
    assert issubclass(fastprep.NumbaCacheWarning, RuntimeWarning)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fastprep.NumbaCacheWarning.__module__ == "fastprep.errors"


# At load time: Numba reads a kernel's index at its first call, not at import. A cache that was
# safe at import is made unsafe in between (each way below), with a payload in its index: the
# call must compile instead of loading, and warn. The control (the same payload, the cache left
# safe) runs, so each row can fail.
AFTER_IMPORT = """
import glob, os, sys, warnings
warnings.simplefilter("always")
import numpy as np
from fastprep.numba_kernels import CACHE_DIR
how, elsewhere = sys.argv[1], sys.argv[2]
index = glob.glob(os.path.join(CACHE_DIR, "**", "*counter_rng*mix64*.nbi"), recursive=True)
assert index, "no cached index to tamper with"
if how == "folder writable by others":
    os.chmod(CACHE_DIR, 0o777)
elif how == "index writable by others":
    os.chmod(index[0], 0o666)
elif how == "index is a symlink":
    os.replace(index[0], elsewhere)
    os.symlink(elsewhere, index[0])
elif how == "folder moved under a folder others can write":
    os.chmod(os.path.dirname(CACHE_DIR), 0o777)
import fastprep.numba_kernels._counter_rng as counter_rng
print(int(counter_rng.mix64(np.uint64(12345))))
"""

TAMPERINGS = ["folder writable by others", "index writable by others", "index is a symlink",
              "folder moved under a folder others can write"]


@pytest.mark.one_backend  # the probe runs Numba whatever the backend
@pytest.mark.slow  # a fresh process per tampering
@pytest.mark.parametrize("how", TAMPERINGS + ["left safe (control)"])
def test_the_cache_is_checked_again_when_a_kernel_loads(tmp_path, how):
    parent = tmp_path / "parent"
    parent.mkdir(mode=0o755)
    cache = parent / "cache"
    expected = _run_probe({"NUMBA_CACHE_DIR": str(cache)}).stdout.split()[-1]  # fills the cache
    marker = tmp_path / "pwned"
    _plant(str(cache), marker)
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env.update(NUMBA_CACHE_DIR=str(cache), FASTPREP_BACKEND="numba")
    out = subprocess.run([sys.executable, "-c", AFTER_IMPORT, how, str(tmp_path / "elsewhere.nbi")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == expected  # compiled (or, in the control, loaded): same value
    if how.endswith("(control)"):
        assert marker.exists()
        return
    assert not marker.exists(), "the tampered cache was loaded"
    assert "NumbaCacheWarning" in out.stderr and "compiled, not loaded" in out.stderr


@pytest.mark.skipif(os.getuid() != 0, reason="giving a folder to another user needs root")
def test_a_folder_inside_another_users_folder_is_never_used(tmp_path):
    other = tmp_path / "theirs"
    other.mkdir(mode=0o755)
    mine = other / "cache"
    mine.mkdir(mode=0o700)
    os.chown(other, 4242, 4242)  # they may rename `mine` and put their own folder in its place
    assert "owned by user 4242, who could replace it" in unsafe_reason(str(mine), os.getuid())
    link = tmp_path / "link"
    os.symlink(mine, link)  # a link of this user's to it: the resolved path decides
    assert "owned by user 4242" in unsafe_reason(str(link), os.getuid())
