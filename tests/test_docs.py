"""Every example in README.md and docs/ runs as written (issue 27).

A page's ```python blocks run in order in one fresh interpreter, in an empty folder, as a reader
pastes them: a block may use what the blocks above it made (data, transforms). Where no CUDA device
is here, "cuda" in a block is swapped for "cpu". A block whose first line is
``# torchrun --nproc_per_node=N ...`` runs under torchrun with N processes, in the same folder.
Other languages (bash) are not run here: the README's two commands run in CI and newcomer-check.
A block that imports torchvision is skipped where torchvision does not import (the CPU torch of
.venv); .ci/torchvision runs this module in a venv where it does.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.one_backend

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
SLOW_PAGES = {"docs/ray.md"}  # starts a Ray cluster (~40 s idle on 2 cores): .ci/slow runs it
FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```", re.S | re.M)

RUNNER = r'''
import json, re, subprocess, sys, traceback
page, blocks = sys.argv[1], json.load(open(sys.argv[2]))
namespace = {"__name__": "__main__"}
try:
    import torchvision.transforms.v2  # noqa: F401
    have_torchvision = True
except Exception:  # not installed, or built for another torch (the CPU torch of .venv)
    have_torchvision = False
for line, code in blocks:
    if re.search(r"^\s*(import|from)\s+torchvision", code, re.M) and not have_torchvision:
        print(f"skipped {page}:{line} (needs torchvision: .ci/torchvision runs it)")
        continue
    try:
        m = re.match(r"#\s*torchrun\s+--nproc_per_node=(\d+)", code)
        if m:
            path = f"example_line_{line}.py"
            with open(path, "w") as f:
                f.write(code)
            out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                                  f"--nproc_per_node={m.group(1)}", path], capture_output=True, text=True, timeout=240)
            if out.returncode != 0:
                raise RuntimeError(f"torchrun exited {out.returncode}:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
        else:
            exec(compile(code, f"{page}:{line}", "exec"), namespace)
    except BaseException:
        print(f"the example at {page} line {line} failed:", file=sys.stderr)
        traceback.print_exc()
        sys.exit(1)
    print(f"ran {page}:{line}")
'''


def python_blocks(page: Path) -> list[tuple[int, str]]:
    """(line, code) of each ```python block, CUDA swapped for the CPU where there is none."""
    text = page.read_text()
    blocks = []
    for m in FENCE.finditer(text):
        if m.group(1) != "python":
            continue
        code = m.group(2)
        if not torch.cuda.is_available():
            code = re.sub(r"""(["'])cuda(:\d+)?\1""", r"\1cpu\1", code)
        blocks.append((text.count("\n", 0, m.start()) + 1, code))
    return blocks


@pytest.mark.parametrize("page", [pytest.param(p, marks=pytest.mark.slow) if str(p.relative_to(ROOT)) in SLOW_PAGES else p
                                  for p in PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_example_runs_as_written(page, tmp_path):
    blocks = python_blocks(page)
    if not blocks:
        pytest.skip("no python example on this page")
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    (tmp_path / "runner.py").write_text(RUNNER)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    out = subprocess.run([sys.executable, "runner.py", str(page.relative_to(ROOT)), "blocks.json"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-6000:]
    assert out.stdout.count("ran ") + out.stdout.count("skipped ") == len(blocks), out.stdout


def test_the_readme_starts_with_the_two_commands():
    """The first fenced block holds exactly two commands: set up + the main job, set up + the tests."""
    first = FENCE.search((ROOT / "README.md").read_text())
    lines = [ln for ln in first.group(2).splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    assert len(lines) == 2, lines
    assert "bench" in lines[0] and ".ci/test" in lines[1]


def test_the_readme_stays_a_front_page():
    """Under 200 lines: the README answers what fastprep is, how to run it and what it measured; the
    details live in docs/ (a README that grows past a screenful of screens stops being read)."""
    lines = (ROOT / "README.md").read_text().count("\n")
    assert lines < 200, f"README.md has {lines} lines: move details to docs/"
