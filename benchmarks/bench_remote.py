"""A pack read from object storage (issue 33): samples/s and bytes fetched per sample through moto's
S3 server on loopback behind tests/helpers/fault_proxy.py's proxy adding LATENCY per request (each in a
process of its own), cold cache
(shards downloaded ahead by prefetch) and warm cache, and by range (no cache), against the same
pack on local disk; and the bytes a 256^2 window of a 1024^2 photo moves by range.

Files: FILES 1024x1024 quality-90 4:2:0 JPEG photo mosaics (fastprep.tools.photos), packed in
shards of SHARD bytes. Workload: RandomCrop(256) windows through fastprep.Loader (THREADS threads,
batch BATCH; RANGE_THREADS for a second range-read row), the best of ROUNDS epochs: a cold epoch
reads each photo once from a fresh cache, local and warm epochs read PASSES shuffled passes,
alternated round by round (the machine's load shifts).

Where litdata imports, a row for its StreamingDataset over the same photos from the same server
(cold, in-process); where MosaicML streaming imports, a row for its StreamingDataset over the same
photos written as MDS shards of SHARD bytes to the same server (cold, through a DataLoader with
THREADS worker processes). Both decode each window with fastprep's ROI decoder, as bench_sources
does, so the rows differ by how the bytes arrive. Neither is in any extra (their pins would replace
this torch): in a separate venv that sees this one (a .pth naming this venv's site-packages and
pyext/), ``pip install --no-deps litdata lightning-utilities obstore`` and ``pip install --no-deps
mosaicml-streaming transformers torchvision`` with what they import (huggingface-hub, tokenizers,
safetensors, regex, xxhash, zstd, Brotli, python-snappy, cramjam, catalogue, httpx2, httpcore2,
truststore, h11). A peer that does not import is named, and its row left out.

By range, two ways side by side: each sample read alone as its decode asks (a request for the
head, then one for the rows, on the Loader thread: the Loader's batch hook turned off), and a
chunk's windows read together (PackedDataset.fetch_ahead: every head and window of the chunk in
flight at once, one or two round trips per chunk); at 2 and RANGE_THREADS Loader threads, as
ratios to the first. And the floor this box sets: the requests/s moto and the proxy serve (window-
sized bodies, many in flight, at 0 and LATENCY added) and the windows/s one core decodes.

Run: python benchmarks/bench_remote.py   (needs the test extra: s3fs, moto[s3], flask)
     python benchmarks/bench_remote.py --ranges   (the range rows and the floor only)
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import tempfile
import time

import numpy as np

import fastprep
import fastprep.io as fio
from fastprep import transforms as T
from fastprep.tools.bench._file_sources import FileSet

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

FILES, SHARD, CROP, BATCH, THREADS, ROUNDS, LATENCY = 64, 4 << 20, 256, 16, 2, 5, 0.020
RANGE_THREADS = 16  # range reads wait on the network: more Loader threads than cores hide the latency
RANGE_BATCH = 128  # a training batch's size: the chunk each thread reads together is batch / threads
PASSES = 8  # local and warm-cache epochs repeat the photos (a longer timed epoch); cold ones read each once


def epoch_rate(ds, order: list[int], threads: int = THREADS, batch: int = BATCH) -> float:
    """Samples/s of one pass over `order` through the Loader."""
    loader = fastprep.Loader(ds, batch, transform=T.RandomCrop(CROP, layout="HWC"), sampler=order,
                             threads=threads, seed=0)
    start, n = time.perf_counter(), 0
    for batch in loader:
        n += len(batch[1])
    return n / (time.perf_counter() - start)


def crop_window(data: bytes, rng: random.Random) -> None:
    """Decodes a random CROP^2 window of a JPEG with fastprep's ROI decoder (the peers' rows)."""
    h = fio.read_jpeg_header(data)
    top, left = rng.randrange(h.height - CROP + 1), rng.randrange(h.width - CROP + 1)
    fio.decode_jpeg(data, crop=(top, left, CROP, CROP))


def litdata_cold(where, folder: str, tmp: str) -> float | None:
    """litdata's StreamingDataset over the same photos from the same server, cold (a fresh cache,
    one pass, shuffled, in this process: its chunk-download thread plus one reading loop), each
    window decoded by fastprep's ROI decoder (as bench_sources does); None where litdata is absent."""
    try:
        import litdata  # noqa: PLC0415 (a peer: not in any extra)
        import litdata.streaming.downloader as dl  # noqa: PLC0415
    except ImportError as exc:
        print(f"  (litdata not importable here, its row left out: {exc})")
        return None
    import s3fs  # noqa: PLC0415

    os.environ["AWS_ENDPOINT_URL"] = where.endpoint
    dl._OBSTORE_CLIENT_OPTIONS["allow_http"] = "true"  # noqa: SLF001 (the loopback server is http://)
    out = os.path.join(tmp, "litdata")
    paths = jpeg_paths(folder)
    litdata.optimize(fn=_lit_item, inputs=paths, output_dir=out, chunk_bytes=SHARD, num_workers=1)
    s3fs.S3FileSystem(endpoint_url=where.endpoint).put(out + "/", f"{where.bucket}/{where.prefix}/litdata/",
                                                       recursive=True)
    rng, rates = random.Random(0), []
    for r in range(ROUNDS):
        ds = litdata.StreamingDataset(f"s3://{where.bucket}/{where.prefix}/litdata", shuffle=True, seed=r,
                                      cache_dir=os.path.join(tmp, f"litdata-cache-{r}"),
                                      storage_options={"endpoint_url": where.endpoint})
        start, n = time.perf_counter(), 0
        for item in ds:
            crop_window(item["image"], rng)
            n += 1
        rates.append(n / (time.perf_counter() - start))
    return max(rates)


def _lit_item(path: str) -> dict:
    with open(path, "rb") as f:
        return {"image": f.read(), "label": 0}


def jpeg_paths(folder: str) -> list[str]:
    return sorted(os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs if f.endswith(".jpg"))


def mosaic_cold(where, folder: str, tmp: str) -> float | None:
    """MosaicML streaming's StreamingDataset over the same photos as MDS shards on the same server,
    cold (a fresh local cache each round, one pass, shuffled), read through a DataLoader with THREADS
    worker processes (batch BATCH), each window decoded in the workers by fastprep's ROI decoder;
    None where streaming is absent."""
    try:
        import streaming  # noqa: PLC0415 (a peer: not in any extra)
        from streaming.base.util import clean_stale_shared_memory  # noqa: PLC0415
    except ImportError as exc:
        print(f"  (MosaicML streaming not importable here, its row left out: {exc})")
        return None
    import s3fs  # noqa: PLC0415
    import torch  # noqa: PLC0415

    os.environ["S3_ENDPOINT_URL"] = where.endpoint  # streaming's boto3 client reads it
    out = os.path.join(tmp, "mds")
    with streaming.MDSWriter(out=out, columns={"image": "bytes", "label": "int"}, size_limit=SHARD,
                             progress_bar=False) as writer:
        for path in jpeg_paths(folder):
            with open(path, "rb") as f:
                writer.write({"image": f.read(), "label": 0})
    s3fs.S3FileSystem(endpoint_url=where.endpoint).put(out + "/", f"{where.bucket}/{where.prefix}/mds/",
                                                       recursive=True)

    class MosaicCrops(streaming.StreamingDataset):
        """Yields each sample's label after decoding a random window of its image (in the worker)."""

        def get_item(self, idx: int) -> int:
            item = super().get_item(idx)
            crop_window(item["image"], random.Random(int(idx)))
            return item["label"]

    rates, failures = [], []
    for r in range(ROUNDS):
        clean_stale_shared_memory()
        ds = MosaicCrops(remote=f"s3://{where.bucket}/{where.prefix}/mds", local=os.path.join(tmp, f"mds-cache-{r}"),
                         shuffle=True, shuffle_seed=r, batch_size=BATCH)
        # fork, Linux's default (litdata's optimize set the default to spawn, and a spawned worker
        # would import torch and transformers inside the timed epoch)
        loader = torch.utils.data.DataLoader(ds, batch_size=BATCH, num_workers=THREADS, multiprocessing_context="fork")
        start, n, first = time.perf_counter(), 0, None
        try:
            for labels in loader:
                n += len(labels)
                first = first or (time.perf_counter(), n)  # workers started, index read, first shard in
            end = time.perf_counter()
            rates.append((n / (end - start), first[0] - start, (n - first[1]) / max(end - first[0], 1e-9)))
        except Exception as exc:  # seen here now and then: a worker reads a sample past its shard's end
            failures.append(f"{type(exc).__name__}: {str(exc).splitlines()[-1][:160]}")
        finally:
            del loader, ds
    if failures:
        print(f"  (MosaicML streaming: {len(failures)} of {ROUNDS} cold rounds failed and are left out: {failures[0]})")
    if not rates:
        return None
    best = max(rates)
    print(f"  (MosaicML streaming's best cold round: first batch after {best[1]:.2f} s (worker processes started, "
          f"index read, first shard in), {best[2]:.0f} samples/s after it)")
    return best[0]


def range_rows(url: str, opts: dict, once: list[int], tmp: str, mean_record: float,
               configs: tuple = ((False, THREADS, BATCH), (False, RANGE_THREADS, BATCH), (True, THREADS, BATCH),
                                 (True, THREADS, RANGE_BATCH), (True, RANGE_THREADS, RANGE_BATCH))) -> None:
    """The range rows side by side, each the best of ROUNDS cold epochs (a fresh dataset: no head
    in memory), then the same with the heads in memory (a second epoch of the same dataset)."""
    def rate(together: bool, threads: int, batch: int) -> tuple[float, float, float]:
        cold, warm, per = [], [], []
        for r in range(ROUNDS):
            ds = fio.PackedDataset(url, cache_dir=os.path.join(tmp, f"cache-r-{threads}-{batch}-{r}-{together}"),
                                   storage_options=opts, fetch="ranges", layout="HWC")
            if not together:
                ds.fetch_ahead = None  # the Loader's batch hook off: each sample read alone, as its decode asks
            b0 = ds.bytes_fetched
            cold.append(epoch_rate(ds, once, threads, batch))
            per.append((ds.bytes_fetched - b0) / len(once))
            warm.append(epoch_rate(ds, once, threads, batch))
        return max(cold), max(warm), float(np.mean(per))

    rows = []
    for together, threads, batch in configs:
        how = "batch reads (fetch_ahead)" if together else "one sample at a time"
        rows.append((f"by range, {how}, {threads} threads, batch {batch}", *rate(together, threads, batch)))
    base = rows[0][1]
    print(f"  {'':58s} {'cold heads':>10s} {'ratio':>6s} {'heads kept':>10s} {'ratio':>6s}  fetched/sample")
    for name, cold, warm, per in rows:
        print(f"  {name:58s} {cold:10.1f} {cold / base:5.1f}x {warm:10.1f} {warm / base:5.1f}x  {per / 1e3:6.1f} kB, "
              f"{per / mean_record:.1%} of a record")


NGINX = """daemon off; worker_processes 1; pid {tmp}/nginx.pid; error_log {tmp}/error.log;
events {{ worker_connections 1024; }}
http {{ access_log off; client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fastcgi; uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
  server {{ listen 127.0.0.1:{port}; root {root}; }} }}
"""


def nginx_rows(local_path: str, once: list[int], tmp: str, mean_record: float) -> None:
    """The range rows again with nginx (C, one worker) serving the pack's folder in place of moto,
    behind the same proxy adding LATENCY: the server's share of the floor; left out without nginx."""
    import shutil as sh  # noqa: PLC0415

    from fastprep.io.remote import RemoteStore  # noqa: PLC0415

    from helpers import s3_server  # noqa: PLC0415

    binary = sh.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if binary is None:
        print("  (nginx not found: its rows left out)")
        return
    www = os.path.join(tmp, "nginx")
    os.makedirs(www)
    port = s3_server.free_port()
    with open(os.path.join(www, "nginx.conf"), "w") as f:
        f.write(NGINX.format(tmp=www, port=port, root=os.path.dirname(local_path)))
    user = ["-g", "user root;"] if os.geteuid() == 0 else []
    server = s3_server.Child([binary, "-p", www, "-c", os.path.join(www, "nginx.conf"), *user], ready="")
    s3_server.wait_for(port)
    proxies = [s3_server.proxy_process(port, latency) for latency in (LATENCY, 0.0)]
    try:
        urls = [f"http://127.0.0.1:{p.line}/{os.path.basename(local_path)}" for p in proxies]
        print(f"  nginx in place of moto, behind the same proxy (+{LATENCY * 1e3:.0f} ms):")
        range_rows(urls[0], {}, once, tmp, mean_record, ((False, THREADS, BATCH), (True, THREADS, BATCH),
                                                         (True, THREADS, RANGE_BATCH)))
        for url, latency in zip(urls, (LATENCY, 0.0)):
            print(f"  floor: nginx + proxy serve {served(RemoteStore(url), 'shard-00000.fpk'):.0f} requests/s of "
                  f"72 kB, 256 in flight, +{latency * 1e3:.0f} ms")
    finally:
        for p in (*proxies, server):
            p.stop()


def served(store, name: str) -> float:
    """Requests/s `store` serves for 72 kB ranges of `name`, 256 in flight (best of ROUNDS)."""
    spans = [(name, 0, 72_000)] * 256
    best = 0.0
    for _ in range(ROUNDS):
        start = time.perf_counter()
        store.read_spans(spans)
        best = max(best, len(spans) / (time.perf_counter() - start))
    return best


def floor(tmp: str, local, where, opts: dict) -> None:
    """What this box allows: the requests/s moto and the proxy serve for window-sized bodies with
    many in flight (through the bench's proxy, and a second one adding nothing), and the 256^2
    windows/s one core decodes from local disk."""
    from fastprep.io import upload_pack  # noqa: PLC0415
    from fastprep.io.remote import RemoteStore  # noqa: PLC0415

    from helpers import s3_server  # noqa: PLC0415

    shard = local._shards[0][0]
    print(f"  floor: moto + proxy serve {served(RemoteStore(where.url('photos'), opts), shard):.0f} requests/s of "
          f"72 kB, 256 in flight, +{LATENCY * 1e3:.0f} ms", end="")
    zero, handle = s3_server.start_processes(0.0)
    try:
        upload_pack(os.path.join(tmp, "local"), zero.url("photos"), storage_options=zero.options())
        print(f"; {served(RemoteStore(zero.url('photos'), zero.options()), shard):.0f} at +0 ms")
    finally:
        s3_server.stop(handle)
    rng, best = random.Random(0), 0.0
    images = [local.load_raw(i)[0] for i in range(len(local))]
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for img in images:
            img.decode((rng.randrange(img.height - CROP + 1), rng.randrange(img.width - CROP + 1), CROP, CROP))
        best = max(best, len(images) / (time.perf_counter() - start))
    print(f"  floor: one core decodes {best:.0f} {CROP}^2 windows/s of 1024^2 photos from local disk")


def window_bytes(url: str, opts: dict, local, cache: str) -> tuple[float, float]:
    """Mean bytes moved by range per 256^2 window at a random place, and as a share of the record."""
    ds = fio.PackedDataset(url, cache_dir=cache, storage_options=opts, fetch="ranges", layout="HWC")
    rng, moved, share = random.Random(0), [], []
    for i in range(len(ds)):
        img = ds.load_raw(i)[0]
        top, left = rng.randrange(img.height - CROP + 1), rng.randrange(img.width - CROP + 1)
        before = ds.bytes_fetched
        img.decode((top, left, CROP, CROP))
        moved.append(ds.bytes_fetched - before)
        share.append(moved[-1] / int(local._entries["length"][i]))
    return float(np.mean(moved)), float(np.mean(share))


def main() -> None:
    from helpers import s3_server  # noqa: PLC0415 (tests/: the loopback server and the fault proxy)

    where, handle = s3_server.start_processes(LATENCY)
    tmp = tempfile.mkdtemp(prefix="fastprep-bench-remote-")
    files = FileSet(FILES)
    try:
        local_path = os.path.join(tmp, "local")
        fio.pack(files.folder, where.url("photos"), storage_options=where.options(), staging=local_path,
                 shard_bytes=SHARD, progress=False)
        local = fio.PackedDataset(local_path, layout="HWC")
        n = len(local)
        once = list(range(n))
        random.Random(1).shuffle(once)
        order = list(range(n)) * PASSES
        random.Random(2).shuffle(order)
        opts = where.options()
        if "--ranges" in sys.argv:
            print(f"{n} photos 1024^2 q90, crop {CROP}, +{LATENCY * 1e3:.0f} ms per request, one cold pass per "
                  f"round (samples/s), best of {ROUNDS}")
            mean_record = float(np.mean(local._entries["length"]))
            range_rows(where.url("photos"), opts, once, tmp, mean_record)
            floor(tmp, local, where, opts)
            nginx_rows(local_path, once, tmp, mean_record)
            return
        print(f"{n} photos 1024^2 q90 in {len(local._shards)} shards ({sum(s for _, s in local._shards) / 1e6:.1f} "
              f"MB), crop {CROP}, batch {BATCH}, {THREADS} Loader threads, +{LATENCY * 1e3:.0f} ms per request; "
              f"cold: one pass, warm and local: {PASSES} passes, alternated; best of {ROUNDS}")
        warm = fio.PackedDataset(where.url("photos"), cache_dir=os.path.join(tmp, "cache-warm"),
                                 storage_options=opts, fetch="shards", layout="HWC")
        epoch_rate(warm, once)  # fills the cache
        b0 = warm.bytes_fetched
        local_rates, warm_rates = [], []
        for _ in range(ROUNDS):
            local_rates.append(epoch_rate(local, order))
            warm_rates.append(epoch_rate(warm, order))
        rows = [("local disk", max(local_rates), 0.0),
                ("remote, warm cache", max(warm_rates), (warm.bytes_fetched - b0) / len(order) / ROUNDS)]

        def remote_cold(fetch: str, threads: int = THREADS) -> tuple[float, float]:
            rates, per = [], []
            for r in range(ROUNDS):
                cache = os.path.join(tmp, f"cache-{fetch}-{threads}-{r}")
                ds = fio.PackedDataset(where.url("photos"), cache_dir=cache, storage_options=opts, fetch=fetch,
                                       layout="HWC")
                b0 = ds.bytes_fetched
                start = time.perf_counter()
                if fetch == "shards":
                    ds.prefetch(once)
                rate = epoch_rate(ds, once, threads)
                if fetch == "shards":  # the prefetch's start is part of the cold epoch
                    rate = len(once) / (time.perf_counter() - start)
                rates.append(rate)
                per.append((ds.bytes_fetched - b0) / len(once))
            return max(rates), float(np.mean(per))

        rate, per = remote_cold("shards")
        rows.append(("remote, cold cache (whole shards, prefetch)", rate, per))
        rate, per = remote_cold("shards", 1)
        rows.append(("remote, cold cache, 1 Loader thread", rate, per))
        lit = litdata_cold(where, files.folder, tmp)
        if lit is not None:
            rows.append(("litdata StreamingDataset, cold, 1 reading loop", lit, float("nan")))
        mosaic = mosaic_cold(where, files.folder, tmp)
        if mosaic is not None:
            rows.append((f"MosaicML StreamingDataset, cold, {THREADS} workers", mosaic, float("nan")))
        rate, per = remote_cold("ranges")
        rows.append(("remote, by range (no cache)", rate, per))
        rate, per = remote_cold("ranges", RANGE_THREADS)
        rows.append((f"remote, by range, {RANGE_THREADS} Loader threads", rate, per))
        for name, rate, per in rows:
            fetched = "" if per != per else f"{per / 1e3:8.1f} kB fetched/sample"  # nan: not counted
            print(f"  {name:48s} {rate:8.1f} samples/s  {rate / rows[0][1]:6.1%} of local  {fetched}")
        moved, share = window_bytes(where.url("photos"), opts, local, os.path.join(tmp, "cache-window"))
        print(f"  a {CROP}^2 window of a 1024^2 photo by range: {moved / 1e3:.1f} kB moved, {share:.1%} of its "
              f"record (mean over {n} photos, random places)")
    finally:
        files.close()
        shutil.rmtree(tmp, ignore_errors=True)
        s3_server.stop(handle)


if __name__ == "__main__":
    main()
