"""`diagnose` on real JPEG ImageFolder pipelines, ported both ways, run N times: how often the
verdict names raw loading (decoding), how long each run took, and what it advised.

Photos: scikit-image's colour photos written by fastprep.tools.photos.write_photo_folder with a
short side of 1024 (12 JPEGs, 1024x1024 to 1024x1536, Pillow quality 90, 4:2:0). The step stands
in for an accelerator's: TinyNet (diagnose --demo's model, one torch thread) on the batch pooled
4x, ~2 ms per batch of 8 here, so that decoding on the CPU is what starves it, as it starves
users' GPUs (one core decodes ~700 of these photos' ROI windows per second; an H100 trains
ResNet-18 on ~9,300 samples/s).

- torchvision port: fastprep.tools.photos.ImageFolder (torchvision's ImageFolder stand-in: Pillow
  decodes each file whole in __getitem__, then its `transform` attribute runs), the transform a
  plain Compose (not fastprep's) of RandomResizedCrop(224), RandomHorizontalFlip,
  ToDtype(float32, scale=True) and a Normalize, in a DataLoader(num_workers=W);
- fastprep port: fastprep.io.ImageFolder(roi=True) + fastprep.Loader(threads=T) with the fused
  Compose RandomCrop(256) -> RandomDilatedMask(0.25) -> RGBToYCbCr(), decode=True.

Run: python benchmarks/imagefolder_diagnose.py --runs 10            (both ports, this box's cores)
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
from torch.utils.data import DataLoader

import fastprep
import fastprep.io as fio
from fastprep import transforms as T
from fastprep.tools import photos
from fastprep.tools.demo_model import train_step
from fastprep.tools.diagnose import find_bottleneck

BATCH, SIDE = 8, 1024
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(3, 1, 1)


@functools.cache
def photo_folder(side: int = SIDE) -> str:
    """The photos as an ImageFolder (one class per photo), written once per process."""
    root = tempfile.mkdtemp(prefix="fastprep-diagnose-photos-")
    atexit.register(shutil.rmtree, root, True)
    photos.write_photo_folder(root, sizes=(side,))
    return root


class PlainCompose:
    """torchvision's Compose as users write it: a loop over callables, not fastprep's."""

    def __init__(self, transforms):
        self.transforms = transforms

    def __call__(self, image):
        for t in self.transforms:
            image = t(image)
        return image


def normalize(image: torch.Tensor) -> torch.Tensor:
    return (image - MEAN) / STD


def accelerator_step(num_classes: int):
    """TinyNet's training step on the batch pooled 4x: an accelerator-fast step on this CPU."""
    step = train_step(num_classes)
    return lambda batch: step((torch.nn.functional.avg_pool2d(batch[0], 4), batch[1]))


def torchvision_port(root: str | None = None, batch_size: int = BATCH, workers: int = CORES):
    """(DataLoader, step_fn): Pillow decodes whole in the dataset, a foreign Compose transforms."""
    tf = PlainCompose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True),
                       normalize])
    dataset = photos.ImageFolder(root or photo_folder(), transform=tf)
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True, num_workers=workers)
    return loader, accelerator_step(len(dataset.classes))


def fastprep_port(root: str | None = None, batch_size: int = BATCH, threads: int = CORES):
    """(fastprep.Loader, step_fn): ImageFolder(roi=True), the fused crop -> mask -> YCbCr reading
    each file's crop window only."""
    dataset = fio.ImageFolder(root or photo_folder(), roi=True)
    tf = T.Compose([T.RandomCrop(256), T.RandomDilatedMask(0.25), T.RGBToYCbCr()])
    loader = fastprep.Loader(dataset, batch_size, transform=tf, shuffle=True, threads=threads, decode=True, seed=0)
    return loader, accelerator_step(len(dataset.classes))


def factory(batch_size: int = BATCH):
    """(dataset, step_fn, batch_size): the fastprep ImageFolder decoding whole (roi=False) with the
    fused transform, for `diagnose` to build a DataLoader or (--loader fastprep) a Loader over."""
    tf = T.Compose([T.RandomCrop(256), T.RandomDilatedMask(0.25), T.RGBToYCbCr(out_dtype=torch.float32,
                                                                           scale=1 / 255)])
    dataset = fio.ImageFolder(photo_folder(), transform=tf)
    return dataset, accelerator_step(len(dataset.classes)), batch_size


PORTS = {"torchvision": torchvision_port, "fastprep": fastprep_port}


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.machine()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--port", choices=(*PORTS, "both"), default="both")
    p.add_argument("--time-limit", type=float, default=60.0, help="find_bottleneck's time_limit (seconds)")
    p.add_argument("--tables", action="store_true", help="print every run's table, not only the first")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    root = photo_folder()
    print(f"{cpu_name()}, {CORES} cores, load {os.getloadavg()[0]:.1f}; "
          f"torch {torch.__version__}, fastprep backend {fastprep.backend()}; {len(photos.ImageFolder(root))} photos at "
          f"short side {SIDE}, batch {BATCH}; {time.strftime('%Y-%m-%d')}")
    for name in PORTS if args.port == "both" else (args.port,):
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
