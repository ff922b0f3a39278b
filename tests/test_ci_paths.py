"""The test files that CI scripts, docs and the README name exist: a renamed or moved test file
fails here instead of being silently skipped by the script that lists it. The per-ISA and
per-torch-release lists are derived from markers (.ci/kernel-tests.sh): every op family has a
kernel-marked test file."""

import re
import subprocess
from pathlib import Path

import pytest

from fastprep.ops.registry import OPS

pytestmark = pytest.mark.one_backend

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"
NAMING = [*(ROOT / ".ci").iterdir(), *(ROOT / "benchmarks").glob("*.sh"), ROOT / "README.md", ROOT / "pyproject.toml",
          *(ROOT / "docs").glob("*.md"), ROOT / "csrc" / "README.md"]
TEST_PATH = re.compile(r"(?<![\w/.-])tests/[\w/]*?test_\w+\.py")
BARE_NAME = re.compile(r"(?<![\w/.-])test_\w+\.py")


def test_every_named_test_path_exists():
    missing = [(f.relative_to(ROOT).as_posix(), p) for f in NAMING if f.is_file()
               for p in TEST_PATH.findall(f.read_text()) if not (ROOT / p).is_file()]
    assert not missing, f"files naming test paths that do not exist: {missing}"


def test_every_test_file_a_ci_script_names_exists():
    """The .ci scripts run from tests/ name files bare (test_x.py) or by a path under tests/."""
    files = {p.name for p in TESTS.rglob("test_*.py")}
    missing = [(f.name, n) for f in (ROOT / ".ci").iterdir() if f.is_file()
               for n in BARE_NAME.findall(f.read_text()) if n not in files]
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
