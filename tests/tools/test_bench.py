"""`python -m fastprep bench`'s measurement pieces and result, and benchmarks/gpu_feed.py's CPU smoke run,
at toy sizes (speed itself is never asserted)."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import fastprep
import fastprep.tools.bench._compare as bench
import fastprep.tools.bench._feeds as feeds
import fastprep.tools.bench._pipelines as pipelines

pytestmark = pytest.mark.one_backend

pytest.importorskip("scipy")
pytest.importorskip("PIL")

ROOT = Path(__file__).resolve().parents[2]


def test_consumer_copies_every_tensor_once_into_reused_buffers():
    consume = feeds.Consumer()
    compact = fastprep.compact_collate([(torch.full((3, 4, 4), i, dtype=torch.uint8), i) for i in range(5)])
    assert consume(compact) == 5
    first = [b.data_ptr() for b in consume._buffers]
    assert consume(compact) == 5 and [b.data_ptr() for b in consume._buffers] == first  # preallocated, reused
    assert [b.nbytes for b in consume._buffers] == [t.nbytes for t in compact.tensors()]
    assert all(torch.equal(b, t) for b, t in zip(consume._buffers, compact.tensors()))
    floats = (torch.rand(2, 3, 4, 4), torch.tensor([1, 2]))
    assert consume(floats) == 2 and torch.equal(consume._buffers[0], floats[0])


def test_releasing_consumer_hands_batches_back_to_a_reusing_collate():
    collate = fastprep.CompactCollate(reuse=True)
    samples = [(torch.full((3, 4, 4), i, dtype=torch.uint8), i) for i in range(5)]
    consume = feeds.Consumer(release=True)
    first = collate(samples)
    ptrs = [t.data_ptr() for t in first.tensors()]
    assert consume(first) == 5 and first.released  # copied, then handed back
    assert torch.equal(consume._buffers[0], torch.stack([s[0] for s in samples]))
    second = collate(samples)
    assert [t.data_ptr() for t in second.tensors()] == ptrs  # the released buffers, refilled
    assert feeds.Consumer(release=True)((torch.zeros(2, 3), torch.zeros(2))) == 2  # plain tuples: nothing to release


def test_delivered_rate_skips_warm_up_and_times_whole_rounds():
    seen = []

    def batches():
        for k in range(100):
            seen.append(k)
            yield torch.zeros(4, 1)

    rate = feeds.delivered_rate(batches(), feeds.Consumer(), skip=3, budget=feeds.Budget(2, 0.0, 50), multiple=3)
    assert rate > 0 and len(seen) == 3 + 3  # 3 skipped, then one round of 3 (>= min_batches 2)
    seen.clear()
    feeds.delivered_rate(batches(), feeds.Consumer(), skip=0, budget=feeds.Budget(1, 60.0, 7))
    assert len(seen) == 7  # max_batches stops it before min_seconds


@pytest.fixture(scope="module")
def result():
    return bench.run(quick=True, batch_size=4, workers=[0, 1], threads=[1, 2], seconds=0.0, pool=2)


def test_bench_result_has_rows_per_source_kind_and_shares(result):
    rows = result["rows"]
    kernel = result["kernel"]["samples_per_s"]
    assert kernel == pytest.approx(1e6 / result["kernel"]["us_per_sample"])
    names = list(dict.fromkeys(r["name"] for r in rows))
    assert names[:4] == ["usual + default_collate, DataLoader", "fused + compact_collate, DataLoader",
                         "fused + CompactCollate(reuse=True), DataLoader", "fastprep.Loader (fused, into slots)"]
    for name in names:  # every row on both source kinds, every setting
        mine = [r for r in rows if r["name"] == name]
        settings = ["w=0", "w=1"] if "DataLoader" in name else ["t=1", "t=2"]
        assert [(r["source"], r["setting"]) for r in mine] == [(s, x) for s in ("pil", "numpy") for x in settings]
    for r in rows:
        n = r.get("w", r.get("t"))
        assert r["cores"] == max(n, 1)
        assert r["share_of_kernel"] == pytest.approx(r["samples_per_s"] / kernel)
        assert r["delivered_per_core"] == pytest.approx(r["samples_per_s"] / max(n, 1))  # w=0 counts as 1 core
        assert r["one_core_feeds"] == pytest.approx(r["delivered_per_core"] / result["gpu_rate"])
    assert result["workload"]["sources_are"] == "synthetic"
    text = bench.table(result)
    assert "SYNTHETIC" in text and "w=N" in text and "t=N" in text
    k = result["kernel"]  # the memcpy floor beside the kernel: the crop window's bytes in and out
    assert k["floor_bytes"] == 3 * 256 * 256 and k["memcpy_floor_us"] > 0 and k["us_per_sample"] > 0  # no speed asserted
    assert f"memcpy floor: copying its {k['floor_bytes']:,} B" in text
    assert {"fastprep.Loader, Compose in dataset[i]", "fastprep.Loader, foreign transform",
            "fastprep.Loader, foreign, deterministic=True"} <= set(names)
    assert "fused Compose: us of Python around the op" in result["aims"] and "the Loader's figures" in text
    assert "the same, into a counting consumer: t=2 / t=1" in result["aims"]
    assert "  floor: the same work written out by hand: us over the op" in result["aims"]
    assert min(result["floors"].values()) > 0 and "floors: the fused batch op alone in 1 thread" in text
    for name in names:  # the name column fits every name: a space before the source column
        line = next(line for line in text.splitlines() if line.startswith(name))
        assert line[len(name)] == " ", line


def test_markdown_table_has_the_best_setting_per_row_and_source(result):
    from fastprep.tools.bench._table import markdown

    lines = markdown(result).splitlines()
    body = [line for line in lines if line.startswith("| ") and "---" not in line][1:]
    assert len(body) == len({(r["name"], r["source"]) for r in result["rows"]}) + len(result["not_installed"])
    best = max((r for r in result["rows"] if r["name"] == "fastprep.Loader (fused, into slots)" and r["source"] == "numpy"),
               key=lambda r: r["samples_per_s"])
    assert any(line.startswith("| fastprep.Loader (fused, into slots) | numpy | ") and f"({best['setting']})" in line
               for line in body)


def test_missing_peer_is_reported_not_installed(monkeypatch):
    monkeypatch.setitem(feeds.PEERS, "nopeer", ("fastprep_no_such_module", None))
    assert feeds.peer_missing("nopeer").startswith("ModuleNotFoundError")
    result = bench.run(quick=True, batch_size=2, workers=[0], threads=[1], sources=["numpy"], seconds=0.0, pool=1,
                       peers=True)
    assert "nopeer" in result["not_installed"] and not any(r["loader"] == "nopeer" for r in result["rows"])
    assert "nopeer" in bench.table(result) and "not installed (ModuleNotFoundError" in bench.table(result)


def test_file_sources_add_rows_read_from_files_and_packs():
    pytest.importorskip("fastprep._jpeg", reason="the file sources need fastprep's JPEG decoder")
    result = bench.run(quick=True, batch_size=2, workers=[0], threads=[1], sources=["folder", "packed-raw"],
                       seconds=0.0, pool=1, peers=False)
    rows = {(r["pipeline"], r["loader"], r["source"]) for r in result["rows"]}
    assert ("usual", "DataLoader", "folder") in rows and ("usual", "DataLoader", "packed-raw") not in rows
    assert ("fastprep", "fastprep.Loader", "packed-raw") in rows
    files = result["workload"]["files"]
    assert files["count"] == 8 and files["bytes"]["packed-raw"] > 10 * files["bytes"]["folder"]
    assert "IMAGE FILES: 8 JPEGs" in bench.table(result) and "pk-raw" in bench.table(result)
    with pytest.raises(SystemExit, match=r"expected sources among pil, numpy, folder, roi, packed-jpeg, packed-raw"):
        bench.run(quick=True, sources=["tar"])


def test_plot_bench(result, tmp_path):
    pytest.importorskip("matplotlib")
    from fastprep.tools._plotting import plot_bench

    plot_bench(result, str(tmp_path / "bench.png"))
    assert (tmp_path / "bench.png").stat().st_size > 0


def _gpu_feed(*args):
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_feed.py"), *args], capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow  # the GPU feed benchmark end to end on the CPU, in a subprocess
def test_gpu_feed_smoke_on_cpu(tmp_path):
    out = tmp_path / "feed.json"
    done = _gpu_feed("--device", "cpu", "--model", "tiny", "--steps", "1", "--warmup", "1", "--batch-size", "4",
                     "--workers", "0", "--threads", "1", "--sources", "numpy", "--json", str(out))
    assert done.returncode == 0, done.stderr
    levels = [(r["level"], r["source"]) for r in json.loads(out.read_text())["models"]["tiny"]]
    assert levels == [("device-cached (ceiling)", "-"), ("host-cached float32, pinned", "-"),
                      ("host-cached compact, pinned", "-"), ("usual DataLoader w=0", "numpy"),
                      ("fastprep DataLoader w=0", "numpy"), ("fastprep.Loader t=1", "numpy")]
    assert "of device-cached" in done.stdout


@pytest.mark.slow  # the same benchmark again without torchvision
def test_gpu_feed_without_torchvision_says_so_in_one_line():
    try:
        import torchvision  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("torchvision is installed")
    done = _gpu_feed("--device", "cpu", "--model", "resnet18", "--steps", "1")
    assert done.returncode == 1
    assert done.stderr.strip().splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith("gpu_feed: --model resnet18 needs torchvision")


def test_synthetic_pools_are_the_same_sources():
    pools = {k: pipelines.SyntheticImages(1, None, pool=2, as_pil=k == "pil").pool for k in ("pil", "numpy")}
    assert all(np.array_equal(np.asarray(a), b) for a, b in zip(pools["pil"], pools["numpy"]))


def test_fastprep_transforms_give_the_same_bits_from_pil_windows_as_from_whole_arrays():
    """A PIL source is read only at its crop window; the result is the whole array's bit for bit."""
    pools = {k: pipelines.SyntheticImages(1, None, pool=1, as_pil=k == "pil").pool for k in ("pil", "numpy")}
    for fn in (pipelines.fastprep_transform, pipelines.fastprep_numba_transform,
               pipelines.fastprep_unfused_transform):
        got = [fn(pools[k][0], torch.Generator().manual_seed(5)) for k in ("pil", "numpy")]
        assert torch.equal(got[0], got[1]), fn.__name__


def test_the_by_hand_batch_op_row_is_the_fused_composes_work():
    """The per-sample floor row does what the fused Compose does for a numpy image: the same bits."""
    image = pipelines.SyntheticImages(1, None, pool=1).pool[0]
    torch.manual_seed(3)
    by_hand = pipelines.fastprep_batch_op_one(image)
    torch.manual_seed(3)
    assert torch.equal(by_hand, fastprep.transforms.seed_workload(layout="HWC")(image))
