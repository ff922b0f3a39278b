"""`diagnose` on real JPEG ImageFolder pipelines, ported both ways, run N times: how often the
verdict names raw loading (decoding), how long each run took, and what it advised.

Photos: scikit-image's colour photos written by fastprep.tools.photos.write_photo_folder with a
short side of 1024 (12 JPEGs, 1024x1024 to 1024x1536, Pillow quality 90, 4:2:0). The pipelines
are diagnose --demo's (fastprep.tools.diagnose._demo_model), batch 8, one torch thread, with the step on the
batch pooled 4x: TinyNet then trains as fast, next to the CPU's decoding, as an accelerator
would (~2 ms a batch here), so decoding is what starves it, as it starves users' GPUs.

- torchvision port: a torchvision-style ImageFolder (Pillow decodes each file whole in
  __getitem__, then its `transform` attribute runs: PIL -> tensor, float crop, mask, YCbCr) in a
  DataLoader(num_workers=W, default this box's cores);
- fastprep port: fastprep.io.ImageFolder(roi=True) + fastprep.Loader(threads=T, default the
  cores) with transforms.seed_workload() (RandomCrop(256) -> RandomDilatedMask(0.25) -> RGBToYCbCr()),
  decoding each crop's window only;
- packed: the fastprep port over the photos packed by fastprep.io.pack (the remedy diagnose
  names for the fastprep port), read by fastprep.io.PackedDataset.

Run: python benchmarks/imagefolder_diagnose.py --runs 10            (all three)
     python -m fastprep diagnose benchmarks.imagefolder_diagnose:fastprep_port
     python -m fastprep diagnose benchmarks.imagefolder_diagnose:torchvision_port
"""

import argparse
import atexit
import collections
import functools
import os
import platform
import shutil
import sys
import tempfile
import time

import torch

import fastprep
import fastprep.tools.diagnose._demo_model as demo_model
from fastprep import transforms as T
from fastprep.tools import photos
from fastprep.tools.diagnose._bottleneck import find_bottleneck

BATCH, SIDE, POOL = 8, 1024, 4
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@functools.cache
def photo_folder(side: int = SIDE) -> str:
    """The photos as an ImageFolder (one class per photo), written once per process."""
    root = tempfile.mkdtemp(prefix="fastprep-diagnose-photos-")
    atexit.register(shutil.rmtree, root, True)
    photos.write_photo_folder(root, sizes=(side,))
    return root


def torchvision_port(workers: int = CORES):
    """(DataLoader, step_fn): Pillow decodes whole in the dataset, the usual float transforms."""
    return demo_model.usual_pipeline(photo_folder(), BATCH, workers, pool=POOL)


def fastprep_port(threads: int = CORES):
    """(fastprep.Loader, step_fn): ImageFolder(roi=True), the fused transform reading crop windows."""
    return demo_model.fastprep_pipeline(photo_folder(), BATCH, threads, pool=POOL)


@functools.cache
def packed_photos() -> str:
    """The photo folder packed (python -m fastprep pack): the remedy diagnose names for the fastprep port."""
    import fastprep.io as fio  # noqa: PLC0415

    dest = photo_folder() + ".packed"
    atexit.register(shutil.rmtree, dest, True)
    fio.pack(photo_folder(), dest, progress=False)
    return dest


def packed_port(threads: int = CORES):
    """(fastprep.Loader, step_fn): the fastprep port over the packed photos (fastprep.io.PackedDataset)."""
    import fastprep.io as fio  # noqa: PLC0415

    dataset = fio.PackedDataset(packed_photos())
    loader = fastprep.Loader(dataset, BATCH, transform=T.seed_workload(), shuffle=True, threads=threads,
                             expand=True, seed=0)
    return loader, demo_model.train_step(len(dataset.classes), pool=POOL)


PORTS = {"torchvision": torchvision_port, "fastprep": fastprep_port, "packed": packed_port}


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.machine()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--port", choices=(*PORTS, "all"), default="all")
    p.add_argument("--time-limit", type=float, default=120.0, help="find_bottleneck's time_limit (seconds)")
    p.add_argument("--tables", action="store_true", help="print every run's table, not only the first")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch's intra-op threads for the step (default 1, as diagnose --demo runs it)")
    args = p.parse_args(argv)
    torch.set_num_threads(args.torch_threads)
    root = photo_folder()
    print(f"{cpu_name()}, {CORES} cores, load {os.getloadavg()[0]:.1f}; "
          f"torch {torch.__version__}, fastprep backend {fastprep.backend()}; {len(photos.ImageFolder(root))} photos at "
          f"short side {SIDE}, batch {BATCH}, torch threads {torch.get_num_threads()}; {time.strftime('%Y-%m-%d')}")
    for name in PORTS if args.port == "all" else (args.port,):
        verdicts, seconds = collections.Counter(), []
        for run in range(args.runs):
            loader, step = PORTS[name]()
            began = time.perf_counter()
            report = find_bottleneck(loader, step, time_limit=args.time_limit)
            seconds.append(time.perf_counter() - began)
            verdicts[report.verdict] += 1
            print(f"{name} run {run + 1}: {report.verdict} in {seconds[-1]:.0f} s, {report.settings['rounds']} "
                  f"rounds, load {os.getloadavg()[0]:.1f}", flush=True)
            if run == 0 or args.tables or report.verdict != "raw loading":
                print(report.table(), flush=True)
        print(f"{name}: {dict(verdicts)} in {args.runs} runs; {min(seconds):.0f}-{max(seconds):.0f} s per run, "
              f"median {sorted(seconds)[len(seconds) // 2]:.0f} s\n", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
