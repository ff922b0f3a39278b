"""Does a cold epoch fill the link (issue 42)? A pack's shards downloaded whole and ahead of the
reader (PackedDataset.prefetch, `workers` at a time) through moto's S3 server on loopback behind
tests/helpers/fault_proxy.py's proxy capping the link at CAP bytes/s for all connections together, with
LATENCY added to every request (each server in a process of its own); the same through an uncapped
proxy shows this machine's floor (moto and the proxy are Python: their CPU bounds what they serve).

Pack: RECORDS raw 512x512x3 uint8 records (786 kB each) in shards of SMALL bytes, of LARGE bytes,
and in one shard. A cold epoch: the dataset opened on a fresh cache (its index fetched), its
shards prefetched in order, and every record read in order (the reader waits for its shard);
bytes fetched over the epoch's seconds, best of ROUNDS, rows alternated round by round (the box is
shared). Shards downloaded whole (one GET each: as before) or as byte ranges of
RemoteStore.part_bytes, PARTS at a time (RemoteStore.parts: the default for a shard larger than a
part); the baseline row is the default, 4 shards at a time, shards of one part each (whole).

Run: python benchmarks/bench_downloads.py   (needs the test extra: s3fs, moto[s3], flask)
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

import numpy as np

import fastprep.io as fio
from fastprep.io.remote import RemoteStore

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

RECORDS, SMALL, LARGE, CAP, LATENCY, ROUNDS, PARTS = 192, 8 << 20, 32 << 20, 50e6, 0.020, 3, 4
BUCKET = "fastprep-bench"


def servers() -> tuple[dict, dict, list]:
    """moto, a proxy capped at CAP and an uncapped one (both + LATENCY): their storage_options."""
    from helpers.s3_server import moto_process, proxy_process  # noqa: PLC0415 (tests/: the loopback servers)

    port, moto = moto_process(BUCKET)
    capped, open_ = proxy_process(port, LATENCY, CAP), proxy_process(port, LATENCY)
    return ({"endpoint_url": f"http://127.0.0.1:{capped.line}"}, {"endpoint_url": f"http://127.0.0.1:{open_.line}"},
            [capped, open_, moto])


def cold_epoch(url: str, opts: dict, cache: str, workers: int, parts: int) -> float:
    """Bytes/s of a cold epoch: open, prefetch every shard (`parts` ranges of a shard at a time:
    1 downloads it whole), read every record in order."""
    shutil.rmtree(cache, ignore_errors=True)
    start = time.perf_counter()
    ds = fio.PackedDataset(url, cache_dir=cache, storage_options=opts, fetch="shards", workers=workers)
    ds._source.store.parts = parts
    ds.prefetch()
    for i in range(len(ds)):
        ds[i]
    seconds = time.perf_counter() - start
    fetched = ds.bytes_fetched
    del ds
    shutil.rmtree(cache, ignore_errors=True)
    return fetched / seconds


def main() -> None:
    capped, uncapped, children = servers()
    tmp = tempfile.mkdtemp(prefix="fastprep-bench-downloads-")
    try:
        rng = np.random.default_rng(0)
        items = [(rng.integers(0, 255, (512, 512, 3), dtype=np.uint8), 0) for _ in range(RECORDS)]
        for name, shard in (("small", SMALL), ("large", LARGE), ("one", 1 << 30)):
            fio.pack(items, f"s3://{BUCKET}/{name}", storage_options=capped, mode="raw", shard_bytes=shard,
                     progress=False, staging=os.path.join(tmp, f"staging-{name}"))
        small, large = (len(fio.PackedDataset(os.path.join(tmp, f"staging-{n}"))._shards) for n in ("small", "large"))
        rows = [(f"{small} shards, 4 at a time, whole (default)", "small", capped, 4, 1),
                (f"{small} shards, 8 at a time, whole", "small", capped, 8, 1),
                (f"{large} shards, 4 at a time, whole", "large", capped, 4, 1),
                (f"{large} shards, 4 at a time, {PARTS} parts each", "large", capped, 4, PARTS),
                ("1 shard (the whole pack), whole", "one", capped, 4, 1),
                (f"1 shard (the whole pack), {PARTS} parts at a time", "one", capped, 4, PARTS),
                (f"{small} shards, 8 at a time, whole, no cap (floor)", "small", uncapped, 8, 1)]
        best = [0.0] * len(rows)
        for _ in range(ROUNDS):
            for j, (_, name, opts, workers, n) in enumerate(rows):
                best[j] = max(best[j], cold_epoch(f"s3://{BUCKET}/{name}", opts, os.path.join(tmp, "cache"), workers, n))
        print(f"cold epoch: {RECORDS} raw records ({RECORDS * 786432 / 1e6:.0f} MB), shards of {SMALL >> 20} or "
              f"{LARGE >> 20} MiB, "
              f"parts of {RemoteStore.part_bytes >> 20} MiB; "
              f"link capped at {CAP / 1e6:.0f} MB/s, +{LATENCY * 1e3:.0f} ms per request; best of {ROUNDS}")
        for (label, *_), rate in zip(rows, best):
            print(f"  {label:44s} {rate / 1e6:7.1f} MB/s  {rate / CAP:6.1%} of the cap  {rate / best[0]:5.2f}x")
    finally:
        for child in children:
            child.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
