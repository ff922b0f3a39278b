"""`python -m fastprep bench`'s first screen (the headline), the --details view behind it, and
the aims saying whether a miss matters, at toy sizes (speed itself is never asserted)."""

import json
import re

import pytest

import fastprep.tools.bench._headline as bench_headline
import fastprep.tools.bench._headline_text as bench_headline_text
import fastprep.tools.bench._usual as bench_usual
from fastprep.tools.bench._table import aim_met, matters
from fastprep.tools.cli._commands import main

pytestmark = pytest.mark.one_backend

pytest.importorskip("scipy")
pytest.importorskip("PIL")
pytest.importorskip("skimage")
pytest.importorskip("fastprep._jpeg", reason="the photo files need fastprep's JPEG decoder")

LINE = re.compile(r"^  (ImageNet training|ImageNet validation|seed workload), (JPEG files|packed|in memory): +"
                  r"fastprep delivers +(\d+\.\d)x the usual pipeline  \(([\d,]+) -> ([\d,]+) samples/s, "
                  r"(fastprep\.Loader|fastprep in a DataLoader)(, usual from the files)?\)$")


@pytest.fixture(scope="module")
def headline():
    return bench_headline.run(quick=True, cores=1, batch_size=2, seconds=0.0, sizes=(300,), pool=1)


def test_headline_has_a_ratio_line_per_workload_first(headline):
    text = bench_headline_text.text(headline)
    lines = text.splitlines()
    assert lines[0].startswith("fastprep bench: how many times the usual pipeline fastprep delivers")
    assert lines[1].startswith("  data: 12 JPEG photos, ") and "scikit-image" in lines[1]
    assert "1 core: 1 DataLoader worker vs 1 fastprep thread; batch 2" in lines[2]
    assert lines[3].startswith("  usual: ") and ("torchvision" in lines[3])
    found = [LINE.match(line) for line in lines]
    workloads = [(m[1], m[2]) for m in found if m]
    assert workloads == [("ImageNet training", "JPEG files"), ("ImageNet training", "packed"),
                         ("ImageNet validation", "JPEG files"), ("ImageNet validation", "packed"),
                         ("seed workload", "in memory")]
    assert next(k for k, m in enumerate(found) if m) < 10  # on the first screen
    for workload, (ratio, usual, mine, way) in bench_headline_text.ratios(headline).items():
        rates = headline["rates"][workload]
        assert mine == max(v for k, v in rates.items() if k != "usual") and rates[way] == mine
        base = headline["rates"][workload.replace("packed", "files")]["usual"]
        assert usual == base and ratio == pytest.approx(mine / usual)
    assert "where the time goes (ms per sample, one core):" in text
    costs = headline["costs"]
    assert set(costs) == {"train", "val"} and all(v > 0 for c in costs.values() for v in c.values())
    assert "--details" in text and "--data DIR --transform MODULE:ATTR" in text
    table = bench_headline_text.markdown(headline).splitlines()
    assert table[2] == "| workload | source | usual pipeline | fastprep (its best way) | ratio |" and len(table) == 9


def test_the_usual_pipeline_is_torchvision_or_says_it_is_a_stand_in(headline):
    v2, _ = bench_usual.torchvision_v2()
    if v2 is None:
        assert headline["usual"].startswith("a stand-in for torchvision v2's steps (Pillow + torch; torchvision ")
    else:
        assert headline["usual"].startswith("torchvision ")


def test_the_stand_in_gives_torchvisions_shapes_and_statistics():
    from PIL import Image

    image = Image.new("RGB", (500, 375), (124, 116, 104))  # the ImageNet mean, in uint8
    for pipeline in ("train", "val"):
        out = bench_usual.PillowStandIn(pipeline)(image)
        assert out.shape == (3, 224, 224) and out.dtype.is_floating_point
        assert out.abs().max() < 0.02  # normalised by the same mean and std
    with pytest.raises(ValueError, match="PillowStandIn: expected pipeline to be one of \\('train', 'val'\\), got 'x'"):
        bench_usual.PillowStandIn("x")


def test_details_shows_the_table_and_aims_that_say_whether_they_matter(monkeypatch, capsys):
    monkeypatch.setattr(bench_headline, "QUICK_SIZES", (300,))
    monkeypatch.setattr(bench_headline, "WORKLOADS", {"seed": bench_headline.WORKLOADS["seed"]})
    assert main(["bench", "--quick", "--details", "--cores", "1", "--batch-size", "2", "--seconds", "0",
                 "--workers", "0", "--threads", "1", "--sources", "numpy", "--no-peers"]) == 0
    out = capsys.readouterr().out
    assert out.index("fastprep delivers") < out.index("DETAILS: the seed workload, every loader and setting")
    assert "fastprep.Loader (fused, into slots)" in out and "SYNTHETIC" in out
    aims = [line for line in out.splitlines() if "   aim " in line]
    assert aims and all(line.endswith(" aim -") or "   met" in line or "   missed: matters only" in line
                        for line in aims), aims


def test_without_details_the_table_is_not_run(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(bench_headline, "QUICK_SIZES", (300,))
    monkeypatch.setattr(bench_headline, "WORKLOADS", {"seed": bench_headline.WORKLOADS["seed"]})
    monkeypatch.setattr("fastprep.tools.bench._compare.run", lambda **kw: pytest.fail("the table ran"))
    path = tmp_path / "out.json"
    assert main(["bench", "--quick", "--cores", "1", "--batch-size", "2", "--seconds", "0", "--json", str(path)]) == 0
    out = capsys.readouterr().out
    assert "seed workload, in memory:" in out and "DETAILS" not in out
    saved = json.loads(path.read_text())
    assert list(saved) == ["headline"] and set(saved["headline"]["rates"]["seed"]) == {
        "usual", "fastprep.Loader", "fastprep in a DataLoader"}


@pytest.mark.parametrize("value,aim,met", [(0.9, ">= 85%", True), (0.8, ">= 85%", False), (1.9, ">= 1.8x", True),
                                          (1.0, ">= 1.8x", False), (4.0, "<= 5 us", True), (12.0, "<= 5 us", False),
                                          (0.9, "not below 1x", False), (1.0, "not below 1x", True), (3.0, "", None)])
def test_aim_met(value, aim, met):
    assert aim_met(value, aim) is met


def test_every_aim_says_whom_a_miss_concerns():
    names = ["Loader(fused Compose) t=1, share of the op alone", "Loader(fused Compose) t=2 / t=1",
             "one-batch epochs: share of 8-batch epochs' rate, t=2", "fused Compose: us of Python around the op",
             "fastprep.Loader, foreign transform: t=2 / t=1", "Compose in dataset[i], counting consumer: t=2 / t=1"]
    notes = [matters(n) for n in names]
    assert all(n.startswith("matters only") for n in notes) and len(set(notes)) >= 5


def test_without_fastpreps_decoder_the_photo_lines_are_skipped_and_said(monkeypatch):
    import fastprep.io as fio

    monkeypatch.setattr(fio, "available", lambda: False)
    result = bench_headline.run(quick=True, cores=1, batch_size=2, seconds=0.0, pool=1)
    assert list(result["rates"]) == ["seed"] and not result["photos"] and not result["costs"]
    text = bench_headline_text.text(result)
    assert "skipped the ImageNet lines: fastprep's JPEG decoder is not built here" in text.splitlines()[1]
    assert sum(bool(LINE.match(line)) for line in text.splitlines()) == 1
