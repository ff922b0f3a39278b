"""`python -m fastprep {demo,bench,diagnose}` end to end, at toy sizes."""

import json
import time

import pytest
import torch
from torch.utils.data import Dataset

from fastprep.tools.cli import main

pytest.importorskip("scipy")
pytest.importorskip("PIL")


def test_demo(capsys):
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "backend" in out and "equal to numpy: True, round trip: True" in out


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
    with pytest.raises(SystemExit, match="expected sources among pil, numpy, got 'jpeg'"):
        main(["bench", "--quick", "--sources", "jpeg"])


class SlowTransforms(Dataset):
    transform = None

    def __init__(self):
        self.transform = lambda x: (time.sleep(0.02), x)[1]

    def __len__(self):
        return 32

    def __getitem__(self, i):  # torchvision's convention: transform may be None
        x = torch.zeros(3)
        return (self.transform(x) if self.transform is not None else x), i


def slow_factory():
    return SlowTransforms(), (lambda batch: batch[0].sum()), 4


def test_diagnose_factory(tmp_path, capsys):
    path = tmp_path / "diag.json"
    assert main(["diagnose", f"{__name__}:slow_factory", "--steps", "4", "--json", str(path)]) == 0
    assert json.loads(path.read_text())["bottleneck"]["verdict"] == "transforms"
    assert "verdict: transforms" in capsys.readouterr().out


def test_diagnose_needs_a_target():
    with pytest.raises(SystemExit, match="MODULE:FACTORY or --demo"):
        main(["diagnose"])
    with pytest.raises(SystemExit, match="expected MODULE:FACTORY, got 'nocolon'"):
        main(["diagnose", "nocolon"])
