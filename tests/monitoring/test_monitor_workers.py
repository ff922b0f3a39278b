"""fastprep.monitor over a DataLoader whose worker processes fetch a remote pack (file://, no
server): the bytes and requests they fetch reach the monitor in the parent (the store's counters
are cells its forked workers share), in the live line and in the summary."""

import io

import numpy as np
import pytest
import torch

import fastprep
import fastprep.io as fio


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    pytest.importorskip("fsspec")
    root = tmp_path_factory.mktemp("monitor-workers")
    rng = np.random.default_rng(0)
    items = [(rng.integers(0, 255, (24, 32, 3), dtype=np.uint8), i % 3) for i in range(24)]
    fio.pack(items, root / "p", mode="raw", shard_bytes=1 << 12, progress=False)
    return root / "p"


def test_dataloader_workers_fetches_reach_the_monitor(packed, tmp_path):
    ds = fio.PackedDataset(f"file://{packed}", cache_dir=tmp_path / "cache", fetch="shards", layout="HWC")
    shards = fio.PackedDataset(packed)._shards
    assert len(shards) >= 4
    before, requests_before = ds.bytes_fetched, ds._source.store.requests  # the index: the parent's
    loader = torch.utils.data.DataLoader(ds, batch_size=4, num_workers=2, timeout=60)
    out = io.StringIO()
    mon = fastprep.monitor(loader, live="log", refresh=1e-6, log_every=1e-6, stream=out, device="cpu")
    for _batch in mon:
        pass
    s = mon.summary()
    assert s.fetched == ds.bytes_fetched - before == sum(size for _, size in shards)  # each shard once, by a worker
    assert s.fetch_requests == ds._source.store.requests - requests_before == len(shards)
    assert s.request_rate == s.fetch_requests / s.fetch_seconds and s.as_dict()["request_rate"] == s.request_rate
    assert "requests/s" in str(s) and "DataLoader workers' reads included" in str(s)
    assert "req/s fetched" in out.getvalue()  # the live line
