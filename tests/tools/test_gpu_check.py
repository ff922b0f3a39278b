"""benchmarks/gpu_check.sh's dry run on the CPU: the stages the GPU machine runs (the device decoders
against the CPU decode, the Loader with and without decode_on by streams and decoder, a profile of the
split, training fed three ways) run with device "cpu"
and tiny sizes, a failing stage costs one line of the table and the rest go on, and the table, the
JSON of every figure and the log land in $OUT."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.jpeg_photos import needs_decoder

pytest.importorskip("PIL")
# slow: the whole GPU check, dry-run on the CPU in a subprocess; .ci/slow runs it.
pytestmark = [pytest.mark.one_backend, needs_decoder, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

# The interpreter the script runs, except that its pytest stage fails at once (pytest inside the
# suite would take longer than everything else): a stage that fails, for the fail-soft check.
WRAPPER = """#!/usr/bin/env bash
for arg in "$@"; do
  if [ "$arg" = pytest ]; then echo "tests broken on purpose" >&2; exit 3; fi
done
exec PYTHON_PATH "$@"
"""


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpu-check")
    python = tmp / "python"
    python.write_text(WRAPPER.replace("PYTHON_PATH", sys.executable))
    python.chmod(python.stat().st_mode | stat.S_IXUSR)
    out = tmp / "out"
    env = {**os.environ, "PYTHON": str(python), "OUT": str(out), "TMPDIR": str(tmp)}
    env.pop("GPU_CHECK_SKIP", None)
    done = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu_check.sh"), "--cpu-dry-run"], capture_output=True,
                          text=True, env=env, timeout=240)
    return done, out


def test_every_stage_reports_and_the_table_is_printed_and_saved(dry_run):
    done, out = dry_run
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]  # the broken tests stage
    table = (out / "gpu_table.md").read_text()
    assert table.strip() in done.stdout  # printed, and the same table saved
    assert "DRY RUN on the CPU" in table
    lines = table.splitlines()
    assert "| CUDA tests |" in table and any("failed (exit 3)" in x and "tests broken on purpose" in x for x in lines)
    assert "| build |" in table and "dry run: fastprep at" in table
    for title in ("device decoders vs CPU", "Loader", "training"):
        assert any(x.startswith(f"| {title} |") for x in lines), title
    assert (out / "gpu_check.log").read_text().count("== ") >= 4  # each stage's output is in the log


def test_the_json_holds_every_row_with_its_figure_or_why_not(dry_run):
    _, out = dry_run
    result = json.loads((out / "gpu_check.json").read_text())
    assert result["machine"]["dry_run"] is True and result["machine"]["fastprep"]["jpeg_decoder"] is True
    stages = result["stages"]
    assert [s for s in stages] == ["jpeg", "wheels", "build", "tests", "decode", "loader", "train"]
    assert stages["tests"]["rc"] == 3 and stages["decode"]["rc"] == 0
    rows = {(name, r["label"]): r for name in ("decode", "loader", "train") for r in stages[name]["rows"]}
    for (name, label), r in rows.items():
        if r["status"] == "ok":
            assert r["samples_per_s"] > 0, (name, label)
        else:  # torchvision's nvJPEG has no device here (nvImageCodec's rows run where it is installed)
            assert r["status"] == "skipped" and r["note"], (name, label)
    assert rows["decode", "crop windows, jpeg_decoder='torchvision' batch 4"]["status"] == "skipped"
    assert rows["decode", "RandomResizedCrop windows, libjpeg-turbo 1 core"]["status"] == "ok"
    for pipeline in ("seed", "imagenet"):
        for threads in (1, 2):
            assert rows["loader", f"{pipeline} t={threads}, decode in the threads"]["status"] == "ok"
        assert rows["train", f"TinyNet {pipeline}: device-cached"]["status"] == "ok"
    for pipeline in ("seed", "imagenet"):
        for streams in (1, 2):
            split = rows["loader", f"{pipeline} t=2 streams={streams}, decode_on='cpu' jpeg_decoder='host'"]
            assert split["status"] == "ok" and split["ratio_of"].startswith("decode in ") and split["cores_busy"] > 0
            assert split["decoders"].startswith("libjpeg-turbo (host) ") and f"{streams} stream" in split["stage"]
        profile = next(r for r in stages["loader"]["rows"] if r.get("feed") == "profile" and r["pipeline"] == pipeline)
        assert profile["status"] == "ok" and abs(sum(profile["profile_share"].values()) - 1) < 0.01
    feeds = {(r["pipeline"], r["feed"]): r for r in stages["train"]["rows"]}
    assert set(feeds) == {(p, f) for p in ("seed", "imagenet") for f in ("device-cached", "threads", "split")}
    fed = feeds["seed", "split"]
    assert fed["status"] == "ok" and fed["ratio_of"] == "device-cached" and fed["ratio"] > 0
    measured = [r for r in stages["loader"]["rows"] if r["pipeline"] == "seed" and r.get("decode_on") == "cpu"
                and r["status"] == "ok" and r.get("feed") != "profile"]
    best = max(measured, key=lambda r: r["samples_per_s"])  # the loader stage's best settings
    assert (fed["threads"], fed["streams"], fed["jpeg_decoder"]) == (best["threads"], best["streams"],
                                                                     best["jpeg_decoder"])
    assert fed["cores_busy"] > 0


def test_the_stage_profile_dry_run_names_where_the_split_spends_its_time(tmp_path):
    """benchmarks/gpu_stage_profile.py on the CPU stand-in: the decode and the row's device half
    timed alone, and the stage thread's host profile, in $OUT/gpu_stage_profile.json."""
    env = {**os.environ, "GPU_CHECK_DRY_RUN": "1", "GPU_CHECK_DIR": str(tmp_path / "work"), "OUT": str(tmp_path)}
    done = subprocess.run([sys.executable, "gpu_stage_profile.py"], cwd=ROOT / "benchmarks", capture_output=True,
                          text=True, env=env, timeout=180)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    found = json.loads((tmp_path / "gpu_stage_profile.json").read_text())
    (alone,), (stage,) = found["resize"], found["stage"]
    assert alone["windows"] > 0 and alone["decode_ms"] > 0 and alone["finish_ms"] > 0, alone
    assert stage["samples_per_s"] > 0 and "libjpeg-turbo (host)" in stage["decoders"], stage
    names = " ".join(name for name, _ in stage["host_cumulative_ms_per_batch"])
    assert "resized_crop_windows" in names and "decode_window_batch" in names, names
