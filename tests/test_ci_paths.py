"""The test files that CI scripts, docs and the README name exist: a renamed or moved test file
fails here instead of being silently skipped by the script that lists it. The per-ISA and
per-torch-release lists are derived from markers (.ci/kernel-tests.sh): every op family has a
kernel-marked test file."""

import re
import subprocess
from pathlib import Path

import pytest

from fastprep.ops._registry import OPS

pytestmark = pytest.mark.one_backend

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
NAMING = [*(ROOT / ".ci").iterdir(), *(ROOT / "benchmarks").glob("*.sh"), ROOT / "README.md", ROOT / "pyproject.toml",
          *(ROOT / "docs").glob("*.md"), ROOT / "csrc" / "README.md"]
TEST_PATH = re.compile(r"(?<![\w/.-])tests/[\w/]*?test_\w+\.py")
RUN_FROM_TESTS = re.compile(r"(?<![\w/.-])(?:\w+/)*test_\w+\.py")  # test_x.py, ops/test_x.py: from tests/


def test_every_named_test_path_exists():
    missing = [(f.relative_to(ROOT).as_posix(), p) for f in NAMING if f.is_file()
               for p in TEST_PATH.findall(f.read_text()) if not (ROOT / p).is_file()]
    assert not missing, f"files naming test paths that do not exist: {missing}"


def test_every_test_file_a_ci_script_names_exists():
    """The .ci scripts and benchmarks/gpu_check.sh run pytest from tests/: their paths are under it
    (ops/test_x.py) or from the root (tests/ops/test_x.py)."""
    scripts = [f for f in (ROOT / ".ci").iterdir() if f.is_file()] + [ROOT / "benchmarks" / "gpu_check.sh"]
    missing = [(f.name, n) for f in scripts for n in RUN_FROM_TESTS.findall(f.read_text())
               if not (TESTS / n).is_file() and not (ROOT / n).is_file()]
    assert not missing, f".ci scripts naming test files that do not exist: {missing}"


def _marked(marker: str) -> list[str]:
    out = subprocess.run(["bash", "-c", f"source .ci/kernel-tests.sh && printf '%s\\n' \"${{{marker}[@]}}\""],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    assert out and all((ROOT / p).is_file() for p in out), out
    return out


def test_every_op_family_has_kernel_tests_run_per_isa_and_release():
    kernel = {Path(p).name for p in _marked("kernel_tests")}
    assert {f"test_{row.family}.py" for row in OPS} <= kernel
    assert not kernel & {Path(p).name for p in _marked("op_layer_tests")}  # one list each
