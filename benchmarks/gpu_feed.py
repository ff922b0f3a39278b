"""Samples/s into a real training step, by how much of the input pipeline is cached.

The caching levels of `fastprep diagnose`, on a torchvision model (ResNet-18 and ResNet-50,
bf16 autocast, channels_last, SGD with momentum, batch 256) fed the target workload
(synthetic 1024^2 sources, crop 256, dilated Bernoulli(0.25) mask, YCbCr, /255):

  device-cached          one expanded batch kept on the device: the model's ceiling
  host-cached float32    one pinned float32 batch (what the usual pipeline ships) copied every step
  host-cached compact    one pinned CompactBatch (uint8) copied and expanded on the device every step
  usual DataLoader       PIL/numpy -> usual transform, default_collate, pin_memory, num_workers=W
  fastprep DataLoader    fused transform, compact_collate, pin_memory, DevicePrefetcher(expand=True)
  fastprep.Loader t=N    fastprep.Loader(..., threads=N, device=..., expand=True)
  ... t=N decode_on      the GPU decode split, Loader(..., decode_on=device): the threads cut each
                         window's restart intervals out of the shard, nvJPEG decodes the batch and
                         mask + YCbCr run on the device (source jpeg only; skipped without CUDA)

Sources: pil / numpy are synthetic 1024^2 images in memory (no decode); jpeg is real files: FILES
1024^2 q90 4:2:0 JPEGs of a photo mosaic (scikit-image's photos, or synthetic pictures without it)
read by the usual DataLoader with PIL, and as restart-indexed jpeg shards (fastprep.io.pack) by
the Loader, which decodes each window in its threads, or (decode_on) on the device.

Each level prints samples/s and its share of device-cached. On a GPU box (after
benchmarks/gpu_check.sh has built fastprep against its torch):

    python benchmarks/gpu_feed.py --json gpu_feed.json              # both models, every level
    python benchmarks/gpu_feed.py --model resnet50 --threads 8,16 --sources numpy
    python benchmarks/gpu_feed.py --model tiny --sources jpeg       # the split against the threads' decode

and, with no GPU and no torchvision, a smoke run on a tiny conv net:

    python benchmarks/gpu_feed.py --device cpu --model tiny --steps 2 --batch-size 8
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, default_collate

import fastprep
import fastprep.tools.bench._pipelines as pipelines
from fastprep import transforms as T
from fastprep.core._iterators import stop_iterator

MODELS = {"resnet18": "ResNet-18", "resnet50": "ResNet-50", "tiny": "TinyNet (fastprep.tools.diagnose._demo_model)"}
SOURCES = ("pil", "numpy", "jpeg")
FILES = 32  # JPEG files of the jpeg source (each sample a random 256^2 window of one)


def _say(msg: str) -> None:
    print(f"  .. {msg}", file=sys.stderr, flush=True)


def build_model(name: str) -> torch.nn.Module:
    if name == "tiny":
        from fastprep.tools.diagnose._demo_model import TinyNet

        return TinyNet()
    try:
        import torchvision.models
    except ImportError as exc:
        raise SystemExit(f"gpu_feed: --model {name} needs torchvision (pip install torchvision built for torch "
                         f"{torch.__version__}), or use --model tiny ({exc})") from None
    return getattr(torchvision.models, name)(weights=None, num_classes=pipelines.NUM_CLASSES)


def make_step(model: torch.nn.Module, device: torch.device, amp: bool) -> Callable[[Any], None]:
    """One training step on a (images, labels) batch already on `device`."""
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step(batch: Any) -> None:
        images, labels = batch
        images = images.contiguous(memory_format=torch.channels_last)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=amp):
            loss = F.cross_entropy(model(images), labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def rate(batches: Iterable[Any], step: Callable[[Any], None], device: torch.device, batch_size: int,
         warmup: int, steps: int, seconds: float | None = None) -> float:
    """Samples/s of `steps` training steps on `batches`, after `warmup` untimed ones; with `seconds`,
    of as many steps as run in that time (at least `steps`, fewer when `batches` ends first)."""
    it = iter(batches)
    try:
        for _ in range(warmup):
            step(next(it))
        _sync(device)
        done, t0 = 0, time.perf_counter()
        while done < steps or (seconds is not None and time.perf_counter() - t0 < seconds):
            try:
                batch = next(it)
            except StopIteration:
                if done == 0:
                    raise RuntimeError("rate: the batches ended before a timed step") from None
                break
            step(batch)
            done += 1
        _sync(device)  # the device may run behind the clock read above: the time includes its queue
        return done * batch_size / (time.perf_counter() - t0)
    finally:
        stop_iterator(it)


def forever(make: Callable[[], Any]) -> Iterator[Any]:
    while True:
        yield make()


def _host_batch(transform: Callable, collate: Callable, batch_size: int, pin: bool) -> Any:
    sources = [pipelines.make_source(i) for i in range(4)]
    batch = collate([(transform(sources[i % 4]), i % pipelines.NUM_CLASSES) for i in range(batch_size)])
    if isinstance(batch, fastprep.CompactBatch):
        return batch.pin_memory() if pin else batch
    return tuple(t.pin_memory() if pin else t for t in batch)  # default_collate's [images, labels]


def split_unavailable(device: torch.device) -> str | None:
    """Why the decode_on rows cannot run here (None: they can)."""
    if device.type != "cuda":
        return f"skipped: decode_on decodes on a CUDA device (nvImageCodec or torchvision); --device is {device}"
    from fastprep.io.jpeg._device_decoders import nvimagecodec_module  # noqa: PLC0415

    if nvimagecodec_module() is not None:
        return None
    try:
        import torchvision.io  # noqa: F401, PLC0415
    except (ImportError, RuntimeError, OSError) as exc:
        return f"skipped: decode_on needs nvImageCodec or torchvision built for torch {torch.__version__} ({exc})"
    return None


def _jpeg_levels(device: torch.device, batch_size: int, workers: int, threads: list[int], warmup: int, length: int,
                 files: Any) -> Iterator[tuple[str, str, Any]]:
    """The jpeg source's levels: real files, decoded in the workers or threads, or by the device."""
    from fastprep.tools.bench._file_sources import FileImages  # noqa: PLC0415

    pin = device.type == "cuda"

    def usual_dl():
        ds = FileImages(files, "folder", length, pipelines.usual_transform, pil=True)
        dl = DataLoader(ds, batch_size, num_workers=workers, pin_memory=pin, drop_last=True)
        return (tuple(t.to(device, non_blocking=True) for t in b) for b in dl), max(warmup, workers)

    yield f"usual DataLoader w={workers}", "jpeg", usual_dl
    skipped = split_unavailable(device)
    for t in threads:
        def loader(t=t, **split):
            tf = T.seed_workload(layout="HWC")
            ds = FileImages(files, "packed-jpeg", length, tf)
            return iter(fastprep.Loader(ds, batch_size, transform=tf, threads=t, seed=0, drop_last=True,
                                        device=device, expand=True, **split)), max(warmup, 3)

        yield f"fastprep.Loader t={t}", "jpeg", loader
        yield f"fastprep.Loader t={t} decode_on", "jpeg", skipped or (lambda t=t: loader(t, decode_on=device))


def levels(device: torch.device, batch_size: int, workers: int, threads: list[int], sources: list[str],
           warmup: int, steps: int, files: Any = None) -> Iterator[tuple[str, str, Any]]:
    """(level, source, factory -> (batches on the device, warm-up steps), or a string: why the
    level is skipped) in the order printed."""
    pin = device.type == "cuda"
    length = batch_size * (warmup + max(workers, 1) + steps + 4 * max(workers, 1) + 8)
    usual = _host_batch(pipelines.usual_transform, default_collate, batch_size, pin)
    compact = _host_batch(pipelines.fastprep_transform, fastprep.compact_collate, batch_size, pin)
    cached = (usual[0].to(device).contiguous(memory_format=torch.channels_last), usual[1].to(device))
    yield "device-cached (ceiling)", "-", lambda: (forever(lambda: cached), warmup)
    yield "host-cached float32, pinned", "-", lambda: (
        forever(lambda: tuple(t.to(device, non_blocking=True) for t in usual)), warmup)
    yield "host-cached compact, pinned", "-", lambda: (
        forever(lambda: compact.to(device, non_blocking=True).expand()), warmup)
    skip = max(warmup, workers)
    for source in sources:
        if source == "jpeg":
            yield from _jpeg_levels(device, batch_size, workers, threads, warmup, length, files)
            continue
        as_pil = source == "pil"

        def usual_dl(as_pil=as_pil):
            ds = pipelines.SyntheticImages(length, pipelines.usual_transform, pool=8, as_pil=as_pil)
            dl = DataLoader(ds, batch_size, num_workers=workers, pin_memory=pin, drop_last=True)
            return (tuple(t.to(device, non_blocking=True) for t in b) for b in dl), skip

        def fastprep_dl(as_pil=as_pil):
            ds = T.SeedByIndex(pipelines.SyntheticImages(length, pipelines.fastprep_transform, pool=8,
                                                         as_pil=as_pil), seed=0)
            dl = DataLoader(ds, batch_size, num_workers=workers, pin_memory=pin, drop_last=True,
                            collate_fn=fastprep.compact_collate)
            return iter(fastprep.DevicePrefetcher(dl, device, expand=True)), skip

        yield f"usual DataLoader w={workers}", source, usual_dl
        yield f"fastprep DataLoader w={workers}", source, fastprep_dl
        for t in threads:
            def loader(as_pil=as_pil, t=t):
                tf = T.seed_workload(layout="HWC")
                ds = pipelines.SyntheticImages(length, tf, pool=8, as_pil=as_pil)
                return iter(fastprep.Loader(ds, batch_size, transform=tf, threads=t, seed=0, drop_last=True,
                                            device=device, expand=True)), max(warmup, 3)

            yield f"fastprep.Loader t={t}", source, loader


def run(args: argparse.Namespace) -> dict:
    device = torch.device(args.device)
    models = args.model.split(",")
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        raise SystemExit(f"gpu_feed: unknown --model {','.join(unknown)}; expected among {', '.join(MODELS)}")
    built = {m: build_model(m) for m in models}  # fails here, before any timing, without torchvision
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    workers = cores if args.workers is None else args.workers
    threads = ([t for t in (1, 2, 4, 8, 16, 32, 64) if t < cores] + [cores]) if args.threads is None \
        else [int(t) for t in args.threads.split(",")]
    sources = args.sources.split(",")
    torch.manual_seed(0)
    files = None
    if "jpeg" in sources:
        from fastprep.tools.bench._file_sources import FileSet  # noqa: PLC0415

        _say(f"writing {FILES} 1024^2 JPEGs and packing them")
        files = FileSet(FILES)
        files.dataset("packed-jpeg")
    result = {"device": str(device), "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
              else "cpu", "torch": torch.__version__, "fastprep_backend": fastprep.backend(), "cores": cores,
              "batch_size": args.batch_size, "steps": args.steps, "warmup": args.warmup, "amp": "bf16",
              "channels_last": True, "sources_are": "pil, numpy: synthetic in memory; jpeg: real JPEG files",
              "models": {}}
    try:
        for name, model in built.items():
            model = model.to(device, memory_format=torch.channels_last)
            step = make_step(model, device, amp=True)
            rows = []
            for level, source, factory in levels(device, args.batch_size, workers, threads, sources, args.warmup,
                                                 args.steps, files):
                if isinstance(factory, str):
                    _say(f"{MODELS[name]}: {level}, {source} sources: {factory}")
                    rows.append({"level": level, "source": source, "samples_per_s": None, "skipped": factory})
                    continue
                _say(f"{MODELS[name]}: {level}, {source} sources")
                batches, warm = factory()
                rows.append({"level": level, "source": source,
                             "samples_per_s": rate(batches, step, device, args.batch_size, warm, args.steps)})
            ceiling = rows[0]["samples_per_s"]
            for r in rows:
                r["of_device_cached"] = None if r["samples_per_s"] is None else r["samples_per_s"] / ceiling
            result["models"][name] = rows
    finally:
        if files is not None:
            files.close()
    return result


def table(result: dict) -> str:
    lines = [f"gpu_feed: {result['device_name']}, torch {result['torch']}, {result['cores']} cores, batch "
             f"{result['batch_size']}, bf16 autocast, channels_last, SGD; pil/numpy: SYNTHETIC sources in memory, "
             f"jpeg: JPEG files; {result['steps']} timed steps per level"]
    for name, rows in result["models"].items():
        lines += ["", f"{MODELS[name]:<36}{'source':<8}{'samples/s':>11}{'of device-cached':>18}"]
        lines += [f"{r['level']:<36}{r['source']:<8}" + (f"  {r['skipped']}" if r["samples_per_s"] is None else
                  f"{r['samples_per_s']:>11,.0f}{r['of_device_cached']:>17.0%}") for r in rows]
    lines += ["", "w=N: DataLoader num_workers; t=N: fastprep.Loader threads in the training process; decode_on: "
              "the threads cut JPEG windows, the device decodes them (nvJPEG)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda")
    p.add_argument("--model", default="resnet18,resnet50", help=f"comma-separated, among {', '.join(MODELS)}")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--steps", type=int, default=30, help="timed steps per level")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps first (at least num_workers for loaders)")
    p.add_argument("--workers", type=int, help="DataLoader num_workers (default: every core)")
    p.add_argument("--threads", help="comma-separated Loader threads (default 1, 2, 4, ... up to every core)")
    p.add_argument("--sources", default=",".join(SOURCES), help=f"source kinds for the loader levels: {','.join(SOURCES)}")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)
    if any(s not in SOURCES for s in args.sources.split(",")):
        raise SystemExit(f"gpu_feed: expected --sources among {', '.join(SOURCES)}, got {args.sources!r}")
    result = run(args)
    print(table(result))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
