"""fastprep.monitor's bytes fetched per sample: a pack read by range from a file:// URL (no server)
moves the dataset's bytes_fetched; the live line and the summary report it, and say nothing of it
for a local pack or a loader without such a dataset."""

import io

import pytest
import torch

import fastprep
import fastprep.io as fio
from fastprep import transforms as T
from fastprep.monitoring._fetched import batch_len, fetching_dataset

from helpers.jpeg_photos import needs_decoder, photo_jpeg, write_tree

pytestmark = [pytest.mark.one_backend]

FILES = {f"{c}/{i}.jpg": (lambda name=name: photo_jpeg(name, "4:2:0", False, (200, 240)))
         for i, (c, name) in enumerate([("a", "coffee"), ("a", "chelsea"), ("b", "astronaut"), ("b", "rocket")] * 2)}


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    pytest.importorskip("fsspec")
    root = tmp_path_factory.mktemp("monitor-remote")
    (root / "src").mkdir()
    write_tree(root / "src", FILES)
    fio.pack(root / "src", root / "p", progress=False)
    return root / "p"


def monitored(ds, out):
    loader = fastprep.Loader(ds, 2, transform=T.RandomCrop(64, layout="HWC"), threads=1, seed=0)
    mon = fastprep.monitor(loader, live="log", refresh=1e-6, log_every=1e-6, stream=out, device="cpu")
    for _batch in mon:
        pass
    return mon.summary()


@needs_decoder
def test_a_pack_read_by_range_reports_bytes_per_sample(packed, tmp_path):
    ds = fio.PackedDataset(f"file://{packed}", cache_dir=tmp_path / "cache", fetch="ranges", layout="HWC")
    before = ds.bytes_fetched  # the index, fetched when the dataset opened: before the monitor
    out = io.StringIO()
    s = monitored(ds, out)
    assert s.fetched == ds.bytes_fetched - before > 0
    assert s.fetched_samples == len(ds) == len(FILES) and s.fetch_seconds > 0
    assert s.bytes_per_sample == s.fetched / len(FILES) and s.fetch_rate == s.fetched / s.fetch_seconds
    text = out.getvalue()
    assert "/sample, " in text and "/s fetched" in text  # the live line
    assert f"fetched from remote storage: {s.bytes_per_sample / 1e3:.3g} kB per sample, " in str(s)
    assert s.as_dict()["bytes_per_sample"] == s.bytes_per_sample
    assert s.facts.source == "remote-pack" and "a pack at a URL" in str(s)  # described as what it is
    assert "cache_dir" in str(s) and "roi=True" not in str(s) and "python -m fastprep pack" not in str(s)


@needs_decoder
def test_nothing_fetched_nothing_reported(packed):
    out = io.StringIO()
    s = monitored(fio.PackedDataset(packed, layout="HWC"), out)  # a local pack: bytes_fetched stays 0
    assert s.fetched is None and s.bytes_per_sample is None and s.fetch_rate is None
    assert "fetched" not in out.getvalue()
    out = io.StringIO()
    for _batch in fastprep.monitor([torch.zeros(2, 3)] * 4, live="log", refresh=1e-6, log_every=1e-6, stream=out,
                                   device="cpu"):
        pass
    assert "fetched" not in out.getvalue()


def test_the_counter_is_found_behind_loaders_and_wrappers():
    ds = type("Remote", (), {"bytes_fetched": 5})()
    loader = torch.utils.data.DataLoader([0] * 4)  # its dataset, a list, has no counter
    assert fetching_dataset(loader) is None and fetching_dataset([1, 2]) is None
    wrapped = type("Prefetcher", (), {"source": type("L", (), {"dataset": ds})()})()
    assert fetching_dataset(wrapped) is ds
    assert fetching_dataset(type("L", (), {"dataset": type("D", (), {"bytes_fetched": "5"})()})()) is None


@pytest.mark.parametrize("batch, n", [
    (torch.zeros(5, 3), 5), ((torch.zeros(4, 3), torch.arange(4)), 4), ([torch.zeros(3), torch.zeros(3)], 3),
    ({"image": torch.zeros(6, 2), "label": torch.arange(6)}, 6), ([[1, 2], [3, 4]], 2), ([7, 8, 9], 3),
    ([[torch.zeros(3, 8, 8), torch.zeros(3, 9, 9)], torch.arange(2)], 2),  # images of different sizes, labels
    ([torch.tensor(1.0), torch.arange(2)], 2), (torch.tensor(1.0), 1), ({}, 0), ("a sample", 1),
])
def test_samples_in_a_batch(batch, n):
    assert batch_len(batch) == n
