"""Backend selection, fallback, build facts and Numba's on-disk cache."""


import pytest

import fastprep
from fastprep.backends._choice import check_torch_compat
from fastprep.errors import TorchVersionError

from helpers.op_calls import native_available, requires_native
from helpers.processes import run_python

pytestmark = pytest.mark.op_layer


FALLBACK_PROBE = """
import warnings, torch
{break_native}
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import fastprep
hits = [w for w in caught if issubclass(w.category, fastprep.NativeUnavailableWarning)]
x = torch.tensor([True, False, True])
print(fastprep.backend(), len(hits), fastprep.pack_bits(x).tolist())
print(hits[0].message if hits else "")
"""


@pytest.mark.parametrize("break_native,reason", [
    ("import sys; sys.modules['fastprep._C'] = None", "import of fastprep._C halted"),
    ("import torch.ops as o\ndef fail(path): raise OSError('cannot open ' + path)\n"
     "torch.ops.load_library = fail", "OSError: cannot open"),
])
def test_broken_native_library_falls_back_to_numba_with_one_warning(break_native, reason):
    out = run_python(FALLBACK_PROBE.format(break_native=break_native), FASTPREP_BACKEND="native")
    assert out.returncode == 0, out.stderr
    first, message = out.stdout.splitlines()[:2]
    assert first == "numba 1 [5]"
    assert reason in message and "Numba backend" in message


def test_numba_backend_by_environment():
    out = run_python("import fastprep; print(fastprep.backend())", FASTPREP_BACKEND="numba")
    assert out.stdout.strip() == "numba", out.stderr


def test_unknown_backend_name_is_an_error():
    out = run_python("import fastprep", FASTPREP_BACKEND="cuda")
    assert out.returncode != 0
    assert "FASTPREP_BACKEND must be one of ('native', 'numba'), got 'cuda'" in out.stderr


def test_backend_reports_the_active_one():
    assert fastprep.backend() in ("native", "numba")


@pytest.mark.parametrize("info,runtime,ok", [
    ({"abi": "stable", "abi_target": "2.10", "torch_version": "2.13.0+cpu"}, "2.13.0", True),
    ({"abi": "stable", "abi_target": "2.10", "torch_version": "2.13.0+cpu"}, "2.14.1+cu128", True),
    ({"abi": "stable", "abi_target": "2.10", "torch_version": "2.13.0+cpu"}, "2.9.1", False),
    ({"abi": "unstable", "abi_target": "", "torch_version": "2.13.0+cpu"}, "2.13.0+cu126", True),
    ({"abi": "unstable", "abi_target": "", "torch_version": "2.13.0+cpu"}, "2.14.1", False),
])
def test_torch_version_compatibility(info, runtime, ok):
    if ok:
        check_torch_compat(info, runtime)
    else:
        with pytest.raises(TorchVersionError, match=f"torch {runtime} is running"):
            check_torch_compat(info, runtime)


@pytest.mark.skipif(not native_available(), reason="needs the native module")
def test_build_info():
    info = fastprep.build_info()
    import torch
    # The stable-ABI library may have been built against another torch (.ci/compat loads the
    # 2.13-built wheel under 2.10 and the newest release): any claimed one, at least its target.
    assert info["runtime_torch_version"] == torch.__version__
    built = tuple(int(p) for p in info["torch_version"].split("+")[0].split(".")[:2])
    assert built >= (2, 10), info["torch_version"]
    assert info["abi"] == "stable" and info["abi_target"] == "2.10"
    assert "-ffp-contract=off" in info["cxx_flags"] and "-ffast-math" not in info["cxx_flags"]
    assert "-march=native" not in info["cxx_flags"]
    assert info["isa_selected"] in info["isa_variants"].split(",")
    assert info["backend"] == fastprep.backend()


@requires_native
def test_native_ops_are_the_registered_cpu_kernels():
    import torch
    assert torch._C._dispatch_has_kernel_for_dispatch_key("fastprep::pack_bits", "CPU")


CACHE_PROBE = """
import torch, fastprep.numba_kernels._pack_bits as k
k.pack_bits(torch.ones(3, 9, dtype=torch.bool))
print(sum(k.pack_bits_at.stats.cache_hits.values()), sum(k.pack_bits_at.stats.cache_misses.values()))
"""


@pytest.mark.slow  # two fresh processes (.ci/slow; the in-process cache rules are in test_numba_cache.py)
def test_numba_cache_spares_a_second_process_the_compile(tmp_path):
    first = run_python(CACHE_PROBE, NUMBA_CACHE_DIR=str(tmp_path), FASTPREP_BACKEND="numba")
    second = run_python(CACHE_PROBE, NUMBA_CACHE_DIR=str(tmp_path), FASTPREP_BACKEND="numba")
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    assert first.stdout.split() == ["0", "1"]  # compiled, then written to the cache
    assert second.stdout.split() == ["1", "0"]  # loaded from the cache


def test_fastprep_ray_without_ray_says_how_to_install_it():
    out = run_python("import sys; sys.modules['ray'] = None\nimport fastprep\nimport fastprep.ray")
    assert out.returncode != 0
    assert "fastprep.ray needs Ray Data" in out.stderr and "pip install 'fastprep[ray]'" in out.stderr
    assert 'line 3' in out.stderr  # `import fastprep` (line 2) worked; fastprep.ray failed
