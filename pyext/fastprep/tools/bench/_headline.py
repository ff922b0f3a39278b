"""`python -m fastprep bench`'s first screen: how many times the usual pipeline fastprep delivers,
per workload, measured side by side in one run at the same worker / thread count.

Workloads: torchvision's ImageNet training and validation pipelines (_usual.py) on a folder of
real photos (scikit-image's, written by photos.write_photo_folder at several sizes), read from the
files and from a fastprep pack of them; and the seed workload (_pipelines.py: 256² crop, dilated
mask, YCbCr) on 1024² images decoded in memory as PIL images. Each is run

- the usual way: the usual transform in torchvision's ImageFolder (Pillow decodes each file whole)
  in a DataLoader(num_workers=n), default_collate;
- fastprep's ways: fastprep.Loader(threads=n) over fastprep.io.ImageFolder(roi=True) or
  PackedDataset with the fused port as its transform, and the same dataset applying the port
  itself (SeedByIndex) in a DataLoader(num_workers=n); the better of the two is fastprep's figure,

delivered into feeds.Consumer (each batch copied once, as the host to device copy would), best of
`repeats` interleaved rounds. The packed lines compare fastprep from the pack with the usual way
from the files (what a user has today). Then where one sample's time goes on one core.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

import torch
from torch.utils.data import default_collate

import fastprep.tools.bench._feeds as feeds
import fastprep.tools.bench._pipelines as pipelines
import fastprep.tools.bench._usual as bench_usual
from fastprep.tools.bench._sweep import usable_cores
from fastprep.tools.measuring._stand_ins import Cycle

QUICK_SIZES, FULL_SIZES = (300, 375, 450), (256, 300, 375, 450, 512, 640)  # photos' short sides (px)
WORKLOADS = {"train files": "ImageNet training, JPEG files", "train packed": "ImageNet training, packed",
             "val files": "ImageNet validation, JPEG files", "val packed": "ImageNet validation, packed",
             "seed": "seed workload, decoded in memory"}


def _say(msg: str) -> None:
    import sys  # noqa: PLC0415

    print(f"  .. {msg}", file=sys.stderr, flush=True)


def photo_set(root: str, sizes: tuple[int, ...]) -> dict:
    """Write the photo folder and its pack under `root`: {folder, packed, count, sizes, bytes, where}."""
    from PIL import Image  # noqa: PLC0415

    import fastprep.io as fio  # noqa: PLC0415
    from fastprep.tools.photos import write_photo_folder  # noqa: PLC0415

    try:
        import skimage  # noqa: F401, PLC0415 (the photos are its bundled sample photos)
    except ImportError:
        raise SystemExit("bench: the headline's photos are scikit-image's sample photos, and scikit-image is not "
                         "installed: pip install 'fastprep[bench]' (or scikit-image)") from None
    folder, packed = os.path.join(root, "photos"), os.path.join(root, "photos.packed")
    where = write_photo_folder(folder, sizes=list(sizes))
    fio.pack(folder, packed, progress=False)
    paths = [p for p, _ in fio.ImageFolder(folder).samples]
    dims = []
    for p in paths:
        with Image.open(p) as im:
            dims.append(im.size)
    return {"folder": folder, "packed": packed, "count": len(paths), "where": where,
            "smallest": min(dims, key=lambda d: d[0] * d[1]), "largest": max(dims, key=lambda d: d[0] * d[1]),
            "bytes": sum(os.path.getsize(p) for p in paths),
            "packed_bytes": sum(os.path.getsize(os.path.join(packed, f)) for f in os.listdir(packed))}


def loader_way(dataset: Any, transform: Any, batch_size: int, threads: int) -> Callable[[], tuple]:
    """One measurement of fastprep.Loader(dataset, transform=..., threads=...): makes (batches, skip, 1)."""
    return lambda: (*feeds.fastprep_loader(dataset, batch_size, threads, transform), 1)


def dataloader_way(dataset: Any, collate: Callable, batch_size: int, workers: int) -> Callable[[], tuple]:
    """One measurement of DataLoader(dataset, num_workers=workers, prefetch_factor=2): (batches, skip,
    rounds of `workers` batches)."""
    return lambda: (*feeds.dataloader(dataset, batch_size, workers, collate, 2 if workers else None), max(workers, 1))


def _ways(workload: str, photos: dict, length: int, n: int, pool: int,
          batch_size: int) -> dict[str, Callable[[], tuple]]:
    """name -> a function making (batches, warm-up batches to skip, multiple) for one measurement."""
    import fastprep  # noqa: PLC0415
    import fastprep.io as fio  # noqa: PLC0415
    from fastprep import transforms as T  # noqa: PLC0415

    def loader(dataset: Any, transform: Any) -> Callable[[], tuple]:
        return loader_way(dataset, transform, batch_size, n)

    def dl(dataset: Any, collate: Callable) -> Callable[[], tuple]:
        return dataloader_way(dataset, collate, batch_size, n)

    if workload == "seed":
        def synthetic(tf: Any) -> Any:
            return pipelines.SyntheticImages(length, tf, pool=pool, as_pil=True)

        fused = synthetic(pipelines.fastprep_transform)
        return {"usual": dl(synthetic(pipelines.usual_transform), default_collate),
                "fastprep.Loader": loader(fused, T.seed_workload(layout="HWC")),
                "fastprep in a DataLoader": dl(T.SeedByIndex(fused, seed=0), fastprep.compact_collate)}
    pipeline, source = workload.split()
    port = bench_usual.fastprep_port(pipeline)
    if source == "files":
        fp, fp_applying = fio.ImageFolder(photos["folder"], roi=True), fio.ImageFolder(photos["folder"], port, roi=True)
    else:
        fp, fp_applying = fio.PackedDataset(photos["packed"]), fio.PackedDataset(photos["packed"], port)
    ways = {"fastprep.Loader": loader(Cycle(fp, length), port),
            "fastprep in a DataLoader": dl(T.SeedByIndex(Cycle(fp_applying, length), seed=0), default_collate)}
    if source == "files":  # the packed lines compare with the usual way from the files
        usual_tf, _ = bench_usual.usual(pipeline)
        ways["usual"] = dl(Cycle(bench_usual.usual_folder(photos["folder"], usual_tf), length), default_collate)
    return ways



def run(quick: bool = False, cores: int | None = None, batch_size: int = 64, repeats: int | None = None,
        seconds: float | None = None, sizes: tuple[int, ...] | None = None, pool: int = 4,
        workloads: tuple[str, ...] | None = None) -> dict:
    """Measure the headline `workloads` (WORKLOADS' keys, default all; see the module doc); returns
    the result bench_headline_text formats."""
    workloads = tuple(WORKLOADS) if workloads is None else workloads
    if not workloads or any(w not in WORKLOADS for w in workloads):
        raise ValueError(f"bench_headline.run: expected workloads among {list(WORKLOADS)}, got {workloads!r}")
    n = cores or usable_cores()
    repeats = repeats or (1 if seconds == 0 else 2 if quick else 3)  # --seconds 0: a smoke run
    budget = feeds.Budget(2, 0.8 if quick else 2.0, 40 if quick else 200)
    if seconds is not None:
        budget.min_seconds = seconds
    torch.set_num_threads(1)
    length = batch_size * (budget.max_batches + 2 * n + 8)
    import fastprep.io as fio  # noqa: PLC0415

    skipped = None
    if not fio.available():  # the photo lines read JPEGs with fastprep's decoder: the seed line alone
        skipped = ("the ImageNet lines: fastprep's JPEG decoder is not built here (fastprep.io.available() is False; "
                   "build fastprep where CMake finds libjpeg-turbo >= 1.5)")
        workloads = tuple(w for w in workloads if w == "seed") or ("seed",)
    photos: dict = {}
    with tempfile.TemporaryDirectory(prefix="fastprep-bench-") as root:
        if skipped is None:
            _say("writing the photo folder and packing it")
            photos = photo_set(root, sizes or (QUICK_SIZES if quick else FULL_SIZES))
        ways = {w: _ways(w, photos, length, n, pool, batch_size) for w in workloads}
        rates = measure(ways, repeats, budget, WORKLOADS)
        costs = {p: per_sample_ms(p, photos, rounds=1 if seconds == 0 else 2) for p in ("train", "val")
                 if any(w.startswith(p) for w in workloads)}
    _, usual_what = bench_usual.usual("train")
    return {"photos": {k: v for k, v in photos.items() if k not in ("folder", "packed")}, "cores": n,
            "batch_size": batch_size, "repeats": repeats, "usual": usual_what, "rates": rates, "costs": costs,
            "quick": quick, "torch": torch.__version__, "skipped": skipped}


def measure(ways: dict[str, dict[str, Callable[[], tuple]]], repeats: int, budget: feeds.Budget,
            labels: dict[str, str]) -> dict[str, dict[str, float]]:
    """Best delivered samples/s of each (workload, way) over `repeats` interleaved rounds (a slow
    moment of the machine then spreads over every row instead of sinking one)."""
    rates: dict[str, dict[str, float]] = {w: {} for w in ways}
    for r in range(repeats):
        for w, by_way in ways.items():
            for way, make in by_way.items():
                _say(f"{labels.get(w, w)}: {way} (round {r + 1} of {repeats})")
                batches, skip, multiple = make()
                rate = feeds.delivered_rate(batches, feeds.Consumer(), skip, budget, multiple=multiple)
                rates[w][way] = max(rate, rates[w].get(way, 0.0))
    return rates


def per_sample_ms(pipeline: str, photos: dict, rounds: int = 2) -> dict[str, float]:
    """Milliseconds per sample on one thread, best of `rounds` passes over the photos: Pillow's
    whole decode, the usual transform on the decoded image, fastprep's port from the files (read,
    window decode, fused resize) and from the pack."""
    import fastprep.io as fio  # noqa: PLC0415
    from fastprep.tools.photos import decode_rgb  # noqa: PLC0415

    usual_tf, _ = bench_usual.usual(pipeline)
    port = bench_usual.fastprep_port(pipeline)
    files, packed = fio.ImageFolder(photos["folder"], roi=True), fio.PackedDataset(photos["packed"])
    paths = [p for p, _ in files.samples]
    decoded = [decode_rgb(p) for p in paths]
    work = {"decode": (decode_rgb, paths), "transform": (usual_tf, decoded),
            "fastprep files": (lambda i: port(files.load_raw(i)[0]), range(len(paths))),
            "fastprep packed": (lambda i: port(packed.load_raw(i)[0]), range(len(packed)))}
    out = {}
    for name, (fn, items) in work.items():
        items = list(items)
        fn(items[0])
        best = float("inf")
        for _ in range(rounds):
            t0 = time.perf_counter()
            for x in items:
                fn(x)
            best = min(best, (time.perf_counter() - t0) / len(items))
        out[name] = best * 1e3
    return out
