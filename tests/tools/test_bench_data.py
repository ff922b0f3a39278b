"""`python -m fastprep bench --data DIR --transform MODULE:ATTR`: the user's folder and transform,
both ways, through fastprep's port of it (or as it is, where a step has no port); clear errors for
what was given wrong. torchvision is stood in by a minimal fake where it is not installed (the
same class names, in modules named torchvision.*), and used for real where it is."""

import re

import numpy as np
import pytest
import torch

import fastprep.tools.bench._usual as bench_usual
from fastprep.tools.bench._port import port
from fastprep.tools.cli._commands import main

from helpers.user_transform import QUICK_BENCH as FAST
from helpers.user_transform import fake_v2

pytestmark = pytest.mark.one_backend

PIL = pytest.importorskip("PIL.Image")
pytest.importorskip("fastprep._jpeg", reason="fastprep's ImageFolder needs its JPEG decoder")

RATIO = re.compile(r"^  fastprep delivers (\d+\.\d)x your pipeline: ([\d,]+) -> ([\d,]+) samples/s \((.+)\)$", re.M)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """Two classes of small photos-like images: four JPEGs and a PNG."""
    root = tmp_path_factory.mktemp("user_data")
    rng = np.random.default_rng(0)
    for k, (cls, size, ext) in enumerate([("cat", (96, 80), "jpg"), ("cat", (120, 90), "jpg"), ("cat", (64, 64), "png"),
                                          ("dog", (100, 140), "jpg"), ("dog", (88, 72), "jpg")]):
        (root / cls).mkdir(exist_ok=True)
        array = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
        PIL.fromarray(array).save(root / cls / f"{k}.{ext}")
    return root


def test_data_runs_both_ways_through_the_port(folder, user, capsys):
    assert main(["bench", "--data", str(folder), "--transform", f"{user}:ported", *FAST]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"fastprep bench --data {folder}: 5 images in 2 classes; 1 DataLoader workers vs 1 fastprep")
    assert f"your transform {user}:ported: an object: a v2 Compose of 3 steps" in out
    assert "fastprep's port: RandomResizedCrop, [ToImage: dropped (fastprep's steps" in out
    ratio, usual, mine, way = RATIO.search(out).groups()
    assert float(ratio) > 0 and way in ("fastprep.Loader + the port", "the port in a DataLoader")
    assert "your pipeline (torchvision's ImageFolder + your transform, DataLoader)" in out
    assert "fio.ImageFolder(" in out and "T.Compose([T.RandomResizedCrop(size=(32, 32)" in out


def test_a_pack_and_a_factory(folder, user, tmp_path, capsys):
    import fastprep.io as fio

    fio.pack(str(folder), str(tmp_path / "packed"), progress=False)
    assert main(["bench", "--data", str(tmp_path / "packed"), "--transform", f"{user}:make", *FAST]) == 0
    out = capsys.readouterr().out
    assert ": a fastprep pack;" in out and f"your transform {user}:make: a factory: make() returned a v2 Compose" in out
    assert RATIO.search(out) and "fastprep's PackedDataset decoding whole + your transform" in out
    assert "fio.PackedDataset(" in out


def test_a_step_without_a_port_runs_the_transform_as_it_is(folder, user, capsys):
    assert main(["bench", "--data", str(folder), "--transform", f"{user}:blurred", *FAST]) == 0
    out = capsys.readouterr().out
    assert "[GaussianBlur: no port in fastprep.transforms]" in out
    assert "no port for GaussianBlur: fastprep.Loader runs your transform as it is" in out
    assert RATIO.search(out).group(4) == "fastprep.Loader, your transform as is"
    assert "transform=your_transform" in out


def test_a_v1_transform_without_a_port_gets_pil_images_from_fastprep(folder, user, tmp_path, capsys):
    """A v1 transform taking PIL images only: fastprep's dataset applying it hands it PIL images (a
    folder's and a pack's alike), and the code printed is the dataset measured."""
    import fastprep.io as fio

    fio.pack(str(folder), str(tmp_path / "packed"), progress=False)
    for data, dataset in [(folder, "ImageFolder"), (tmp_path / "packed", "PackedDataset")]:
        assert main(["bench", "--data", str(data), "--transform", f"{user}:jittered", *FAST]) == 0
        out = capsys.readouterr().out
        assert "no port for ColorJitter: fastprep.Loader runs your transform as it is" in out
        assert f"as PIL images (your transform takes them), in fio.{dataset})" in out
        assert RATIO.search(out).group(4) == "fastprep.Loader, your transform as is"
        assert (f"    loader = fastprep.Loader(fio.{dataset}({str(data)!r}, transform=your_transform), 2, "
                f"shuffle=True)") in out


def test_the_code_printed_is_the_dataset_measured():
    """Where the Loader measured torchvision's ImageFolder (Pillow's images), the line to use says so."""
    import fastprep.tools.bench._data as bench_data
    from fastprep.tools.bench._port import Port

    result = {"port": Port(None, steps=[("ColorJitter", "no port in fastprep.transforms")], unported=["ColorJitter"]),
              "rates": {"usual": 10.0, "fastprep.Loader, your transform as is": 20.0}, "cores": 2, "data": "d",
              "kind": "folder", "count": 5, "classes": 2, "batch_size": 4, "repeats": 1, "spec": "m:tf", "how": "x",
              "foreign": "Pillow (your transform needs PIL images)",
              "foreign_code": "torchvision.datasets.ImageFolder('d')"}
    out = bench_data.text(result)
    assert "    loader = fastprep.Loader(torchvision.datasets.ImageFolder('d'), 4, transform=your_transform, " \
           "shuffle=True)" in out and "fio.ImageFolder" not in out


def test_data_refuses_the_details_tables_options(folder, user, capsys):
    tf = ["--data", str(folder), "--transform", f"{user}:ported"]
    for extra, named in [(["--details"], "--details"), (["--markdown"], "--markdown"),
                         (["--workers", "0,1"], "--workers"), (["--plot", "x.png"], "--plot"),
                         (["--threads", "1", "--no-peers"], "--threads, --no-peers")]:
        line = _error([*tf, *extra], capsys)
        assert f"error: {named}: only for the --details table, not with --data" in line, (extra, line)


def _error(args, capsys):
    assert main(["bench", *args]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err.strip().splitlines()[-1]


def test_bad_data_and_transform_are_named(folder, user, tmp_path, capsys):
    tf = ["--transform", f"{user}:ported"]
    (tmp_path / "empty").mkdir()
    (tmp_path / "file.txt").write_text("x")
    cases = [
        (["--data", str(tmp_path / "missing"), *tf], f"--data {str(tmp_path / 'missing')!r}: no such directory"),
        (["--data", str(tmp_path / "file.txt"), *tf], f"--data {str(tmp_path / 'file.txt')!r}: not a directory"),
        (["--data", str(tmp_path / "empty"), *tf], f"--data {str(tmp_path / 'empty')!r}: "),
        (["--data", str(folder), "--transform", "nocolon"], "--transform: expected MODULE:ATTR with one ':'"),
        (["--data", str(folder), "--transform", "no_such_module_xyz:tf"],
         "--transform 'no_such_module_xyz:tf': cannot import module 'no_such_module_xyz'"),
        (["--data", str(folder), "--transform", f"{user}:missing"], f"--transform '{user}:missing': '{user}' has no attribute 'missing'"),
        (["--data", str(folder), "--transform", f"{user}:NUMBER"],
         f"--transform '{user}:NUMBER' is not callable (int: 5)"),
        (["--data", str(folder), "--transform", f"{user}:broken"],
         f"--transform '{user}:broken' failed on the first sample ({folder / 'cat' / '0.jpg'}) in the usual "
         f"pipeline: RuntimeError: boom"),
        (["--data", str(folder)], "--data DIR and --transform MODULE:ATTR go together"),
    ]
    for args, message in cases:
        line = _error(args, capsys)
        assert line.startswith("python -m fastprep bench: error: ") and message in line, (args, line)


def test_without_torchvision_data_says_what_to_install(folder, user, monkeypatch, capsys):
    monkeypatch.setattr(bench_usual, "torchvision_v2", lambda: (None, "ModuleNotFoundError: No module named 'x'"))
    line = _error(["--data", str(folder), "--transform", f"{user}:ported"], capsys)
    assert "--data needs torchvision for the baseline (torchvision's ImageFolder + your transform" in line
    minor = int(torch.__version__.split(".")[1])
    assert f"pip install 'torchvision==0.{minor + 15}.*'" in line


def test_port_reads_torchvisions_arguments():
    v2 = fake_v2()
    got = port(v2.Compose([v2.RandomResizedCrop(48), v2.ToImage(), v2.ToDtype(torch.float16, scale=True)]))
    assert [s for s, _ in got.steps] == ["RandomResizedCrop", "ToImage", "ToDtype"] and not got.unported
    rrc, to_dtype = got.compose.transforms
    assert rrc.size == (48, 48) and rrc.scale == (0.08, 1.0) and to_dtype.dtype == torch.float16 and to_dtype.scale
    blurred = port(v2.Compose([v2.GaussianBlur(3)]))
    assert blurred.compose is None and blurred.unported == ["GaussianBlur"] and blurred.code() == ""
    mine = port(lambda img: img)
    assert mine.unported == ["function"] and "not torchvision's" in mine.steps[0][1]
