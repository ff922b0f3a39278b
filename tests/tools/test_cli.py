"""`python -m fastprep {demo,bench,diagnose}` end to end, at toy sizes."""

import json
import os
import re
import subprocess
import sys
import time

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import fastprep
from fastprep.tools.cli._commands import build_parser, main

pytestmark = pytest.mark.one_backend

pytest.importorskip("scipy")
pytest.importorskip("PIL")


def test_demo(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "backend" in out and "equal to numpy: True, round trip: True" in out


@pytest.mark.slow  # a whole bench --quick run (the README's main job runs it too): .ci/slow
def test_bench_quick_writes_table_and_json(tmp_path, capsys):
    path = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--batch-size", "4", "--workers", "0", "--threads", "1", "--seconds", "0",
                 "--json", str(path)]) == 0
    out = capsys.readouterr().out
    result = json.loads(path.read_text())
    rows = {(r["name"], r["source"], r["setting"]): r for r in result["rows"]}
    usual = rows[("usual + default_collate, DataLoader", "pil", "w=0")]
    fused = rows[("fused + compact_collate, DataLoader", "numpy", "w=0")]
    loader = rows[("fastprep.Loader (fused, into slots)", "pil", "t=1")]
    assert usual["bytes_per_sample"] == 3 * 256 * 256 * 4 + 8  # float32 image + int64 label
    assert fused["bytes_per_sample"] == loader["bytes_per_sample"] == 3 * 256 * 256 + 1  # uint8 image + uint8 label
    assert all(r["samples_per_s"] > 0 for r in result["rows"])
    assert all(v["us_per_sample"]["pil"] > 0 and v["us_per_sample"]["numpy"] > 0 for v in result["variants"])
    # The printed table: delivered rates, both source kinds, the legend, synthetic sources said.
    for text in ("DELIVERED", "SYNTHETIC", "of kernel", "per core", "1 core feeds", "fused kernel alone",
                 "w=N", "t=N", "fastprep.Loader (fused, into slots)"):
        assert text in out, text
    assert out.count(" PIL ") >= 3 and out.count(" numpy ") >= 3
    for peer in ("torchdata.nodes", "SPDL, pipe per sample"):
        installed = any(r["loader"] == peer for r in result["rows"])
        assert installed != (peer in result["not_installed"])
        assert installed or f"{peer}" in out and "not installed" in out


def test_bench_rejects_unknown_sources():
    with pytest.raises(SystemExit, match="expected sources among pil, numpy, folder, roi, packed-jpeg, packed-raw, "
                                         "got 'jpeg'"):
        main(["bench", "--quick", "--sources", "jpeg"])


BAD_BENCH_ARGUMENTS = [
    (["--workers", "abc"], "argument --workers: expected comma-separated ints >= 0, got 'abc'"),
    (["--workers", "1,,2"], "argument --workers: expected comma-separated ints >= 0, got '1,,2'"),
    (["--workers", "-3"], "argument --workers: expected comma-separated ints >= 0, got '-3'"),
    (["--threads", "0"], "argument --threads: expected comma-separated ints >= 1, got '0'"),
    (["--threads", "2,x"], "argument --threads: expected comma-separated ints >= 1, got '2,x'"),
    (["--batch-size", "0"], "argument --batch-size: expected a value > 0, got '0'"),
    (["--batch-size", "2.5"], "argument --batch-size: expected an int, got '2.5'"),
    (["--seconds", "-1"], "argument --seconds: expected a value >= 0, got '-1'"),
    (["--gpu-rate", "fast"], "argument --gpu-rate: expected a float, got 'fast'"),
]


@pytest.mark.parametrize("args,message", BAD_BENCH_ARGUMENTS, ids=[" ".join(a) for a, _ in BAD_BENCH_ARGUMENTS])
def test_bench_refuses_bad_arguments_before_anything_runs(args, message, capsys):
    """argparse's usage line and one error line naming the argument and the text, exit 2, before
    anything runs (--threads 0 used to fail after minutes of other rows; the rest with a traceback)."""
    with pytest.raises(SystemExit) as exit_:
        main(["bench", "--quick", *args])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.splitlines()[-1] == f"python -m fastprep bench: error: {message}", err
    assert "Traceback" not in err


class SlowTransforms(Dataset):
    transform = None

    def __init__(self):
        self.transform = lambda x: (time.sleep(0.01), x)[1]

    def __len__(self):
        return 32

    def __getitem__(self, i):  # torchvision's convention: transform may be None
        x = torch.zeros(3)
        return (self.transform(x) if self.transform is not None else x), i


CALLS = []  # factories append here: a check that must come first leaves it empty


def slow_factory():
    CALLS.append("slow_factory")
    return SlowTransforms(), (lambda batch: batch[0].sum()), 2


def loader_factory():
    seen = []
    loader = DataLoader(SlowTransforms(), batch_size=2, collate_fn=fastprep.compact_collate)
    return loader, lambda batch: seen.append(batch) or CALLS.append(type(batch).__name__)


def fastprep_loader_factory():
    dataset = SlowTransforms()
    dataset.transform = None
    loader = fastprep.Loader(dataset, 2, transform=lambda x: (time.sleep(0.01), x)[1], threads=1, seed=0)
    return loader, lambda batch: CALLS.append((type(batch).__name__, len(batch[1])))


def compact_step_factory():
    return SlowTransforms(), lambda batch: CALLS.append(type(batch).__name__), 2


FAST = ["--repeats", "2", "--progress", "off"]


def test_diagnose_factory_json_and_plot(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path, png = tmp_path / "diag.json", tmp_path / "diag.png"
    assert main(["diagnose", f"{__name__}:slow_factory", *FAST, "--json", str(path), "--plot", str(png)]) == 0
    result = json.loads(path.read_text())["bottleneck"]
    assert result["verdict"] == "transforms" and "transforms adds" in result["margin"]
    levels = {lv["name"]: lv for lv in result["levels"]}
    assert len(levels["nothing cached"]["repeats"]) >= 2 and levels["nothing cached"]["ci95"] >= 0  # more when noisy
    assert levels["host-cached batch"]["steps_per_s"] is None  # no copy on the CPU
    out = capsys.readouterr().out
    assert "verdict: transforms (the per-sample transforms): transforms adds" in out
    assert "caching method on cpu: 2 repeats per level, warm-up until the step time is steady" in out
    assert png.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.serial  # asserts diagnose's verdict on sleeps: a second xdist worker on the cores can blur it
def test_diagnose_loader_forms(capsys):
    CALLS.clear()
    assert main(["diagnose", f"{__name__}:loader_factory", *FAST, "--steps", "3", "--warmup", "1"]) == 0
    assert CALLS and set(CALLS) == {"tuple"}  # compact_collate's CompactBatch, expanded before step_fn
    CALLS.clear()
    assert main(["diagnose", f"{__name__}:fastprep_loader_factory", *FAST, "--steps", "3", "--warmup", "1",
                 "--batch-size", "3"]) == 0
    assert CALLS and set(CALLS) == {("tuple", 3)}  # the Loader rebuilt with --batch-size
    assert "verdict: transforms" in capsys.readouterr().out
    CALLS.clear()
    assert main(["diagnose", f"{__name__}:compact_step_factory", *FAST, "--steps", "3", "--loader", "fastprep",
                 "--threads", "1", "--no-expand"]) == 0
    assert CALLS and set(CALLS) == {"CompactBatch"}
    assert "verdict: transforms" in capsys.readouterr().out


def needs_args(x):
    return x


def raises():
    raise RuntimeError("no data here")


def returns_none():
    return None


def returns_five():
    return SlowTransforms(), print, 2, None, "extra"


def bad_batch_size():
    return SlowTransforms(), print, 0


def bool_batch_size():
    return SlowTransforms(), print, True


def step_not_callable():
    return SlowTransforms(), "step", 2


def not_a_dataset():
    return 42, print, 2


def bad_collate():
    return SlowTransforms(), print, 2, "collate"


def loader_alone():
    return DataLoader(SlowTransforms(), batch_size=2)


def pair_without_loader():
    return SlowTransforms(), print


NOT_CALLABLE = 3

BAD_TARGETS = [
    ("", r"give MODULE:FACTORY \(a function returning"),
    (":", r"the module name before ':' is empty in ':'"),
    (":f", r"the module name before ':' is empty in ':f'"),
    ("m:", r"the factory name after ':' is empty in 'm:'"),
    ("nocolon", r"expected MODULE:FACTORY with one ':' .*, got 'nocolon'"),
    ("a:b:c", r"expected MODULE:FACTORY with one ':' .*, got 'a:b:c'"),
    ("a..b:f", r"'a..b' in 'a..b:f' is not a dotted Python module name"),
    (".rel:f", r"'.rel' in '.rel:f' is not a dotted Python module name"),
    ("os:getcwd()", r"'getcwd\(\)' in 'os:getcwd\(\)' is not a Python name"),
    ("no_such_module_xyz:f", r"cannot import 'no_such_module_xyz': no module named 'no_such_module_xyz'"),
    ("os:no_such_factory", r"'os' has no attribute 'no_such_factory'"),
    ("os:sep", r"os:sep is a str \('/'\), not a factory function"),
    ("os:getcwd", r"os:getcwd\(\) returned a str \('.*'\); expected \(dataset, step_fn, batch_size"),
    ("os.path:join", r"os.path:join takes required arguments \(a, \*p\); diagnose calls it with none"),
    (f"{__name__}:NOT_CALLABLE", r"NOT_CALLABLE is an int \(3\), not a factory function"),
    (f"{__name__}:needs_args", r"needs_args takes required arguments \(x\)"),
    (f"{__name__}:raises", r"raises\(\) raised RuntimeError: no data here"),
    (f"{__name__}:returns_none", r"returns_none\(\) returned a NoneType \(None\); expected"),
    (f"{__name__}:returns_five", r"returns_five\(\) returned 5 items"),
    (f"{__name__}:bad_batch_size", r"\[2\] \(batch_size\) must be an int >= 1, got 0"),
    (f"{__name__}:bool_batch_size", r"\[2\] \(batch_size\) must be an int >= 1, got True"),
    (f"{__name__}:step_not_callable", r"step_fn is a str \('step'\), not callable"),
    (f"{__name__}:not_a_dataset", r"\[0\] is an int \(42\), not a dataset"),
    (f"{__name__}:bad_collate", r"\[3\] \(collate_fn\) must be callable or None, got 'collate'"),
    (f"{__name__}:loader_alone", r"returned a DataLoader alone; return \(loader, step_fn\)"),
    (f"{__name__}:pair_without_loader", r"\[0\] is a SlowTransforms .*; with 2 items, expected \(loader, step_fn\)"),
]


@pytest.mark.parametrize("target,message", BAD_TARGETS, ids=[t or "empty" for t, _ in BAD_TARGETS])
def test_a_bad_target_is_one_clear_line(target, message, capsys):
    assert main(["diagnose", target] if target else ["diagnose"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("python -m fastprep diagnose: error: ")
    assert re.search(message, err), err


def test_the_command_line_exits_2_with_one_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "fastprep", "diagnose", ":f"], capture_output=True, text=True,
                         cwd=tmp_path)
    assert run.returncode == 2 and run.stderr.count("\n") == 1 and "Empty module name" not in run.stderr


def _unwritable_dir(tmp_path):
    if os.geteuid() == 0:  # root writes anywhere permissions say no; /proc refuses new files to all
        return "/proc"
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    return str(locked)


@pytest.mark.parametrize("flag", ["--json", "--plot"])
def test_unwritable_outputs_fail_before_the_run(flag, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    name = "out.png" if flag == "--plot" else "out.json"
    (tmp_path / "a_dir").mkdir()
    cases = [(str(tmp_path / "missing" / name), "does not exist"), (str(tmp_path / "a_dir"), "is a directory"),
             (os.path.join(_unwritable_dir(tmp_path), name), "cannot write there")]
    if flag == "--plot":
        cases.append((str(tmp_path / "out.notaformat"), "matplotlib cannot write .notaformat files"))
    CALLS.clear()
    for path, message in cases:
        assert main(["diagnose", f"{__name__}:slow_factory", flag, path]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert CALLS == []  # the factory never ran: nothing was measured
    assert main(["bench", "--quick", flag, cases[0][0]]) == 2
    assert "python -m fastprep bench: error:" in capsys.readouterr().err


def test_every_diagnose_option_has_help():
    parser = build_parser()
    diagnose = next(a for a in parser._subparsers._group_actions[0].choices.items() if a[0] == "diagnose")[1]
    for action in diagnose._actions:
        assert action.help and len(action.help) > 10, action.option_strings
    text = diagnose.format_help()
    for words in ("step_fn(batch) runs one training step", "CompactBatch", "expanded there first", "--device",
                  "--steps", "--json", "--plot", "--batch-size", "--repeats", "--precision", "(loader, step_fn)",
                  "time estimate"):
        assert words in text, words


def test_bad_options_are_refused(capsys):
    for argv, message in [(["--precision", "2"], "expected a share between 0 and 1"),
                          (["--steps", "0"], "expected a value > 0, got '0'"),
                          (["--workers", "-1"], "expected an int >= 0, got '-1'")]:
        with pytest.raises(SystemExit) as exc:
            main(["diagnose", f"{__name__}:slow_factory", *argv])
        assert exc.value.code == 2 and message in capsys.readouterr().err
    assert main(["diagnose", f"{__name__}:slow_factory", "--device", "cuda:99" if torch.cuda.is_available()
                 else "cuda"]) == 2
    assert "--device: device=" in capsys.readouterr().err


def test_diagnose_demo_side_by_side(capsys):
    assert main(["diagnose", "--demo", "--batch-size", "2", "--repeats", "1", "--steps", "2", "--warmup", "1",
                 "--progress", "line"]) == 0
    captured = capsys.readouterr()
    assert "usual steps/s" in captured.out and "fastprep steps/s" in captured.out
    assert "usual: verdict" in captured.out and "fastprep: verdict" in captured.out
    assert "JPEGs" in captured.out and "done in" in captured.err
