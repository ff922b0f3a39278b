"""What the stages of benchmarks/gpu_check.sh share: where results go, the sizes, the photos, the two
pipelines, and the guard that turns a failing measurement into one line of the table.

Each stage (gpu_decode.py, gpu_loader.py, gpu_train.py) is a script run in a fresh process under
its own timeout, so a hang or a crash costs that stage only. It writes its rows, as they come, to
``$GPU_CHECK_DIR/<stage>.json`` (a stage killed by its timeout keeps the rows it finished), and
gpu_report.py makes the one table of them all. Environment (set by gpu_check.sh):

- ``GPU_CHECK_DIR``: the results folder (a temporary one when unset);
- ``GPU_CHECK_DRY_RUN=1``: device "cpu", tiny sizes, the CPU decoder standing in for the device
  (``decode_on="cpu"``), TinyNet for the ResNets: the same code paths, for a machine without CUDA;
- ``GPU_CHECK_DEADLINE``: a Unix time; a row that would start after it is skipped ("out of time")
  so the stage ends by itself, before its timeout.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch

DRY_RUN = os.environ.get("GPU_CHECK_DRY_RUN") == "1"
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


@dataclass(frozen=True)
class Sizes:
    files: int  # JPEG photos written and packed
    side: int  # their side, pixels
    crop: int  # the seed pipeline's crop
    resized: int  # the ImageNet pipeline's RandomResizedCrop size
    batch: int
    cuts: int  # window cuts per nvJPEG batch
    threads: tuple[int, ...]
    streams: tuple[int, ...]  # the split's device-stage threads, each on its own CUDA stream
    split_threads: int  # the Loader's threads for the split rows (its CPU side: drawing and cutting)
    seconds: float  # timed seconds per row (at least `min_steps` batches)
    min_steps: int
    warmup: int  # untimed batches first


FULL = Sizes(files=32, side=1024, crop=256, resized=224, batch=256, cuts=256, threads=(1, 4, 16),
             streams=(1, 2, 4, 8, 16), split_threads=4, seconds=1.5, min_steps=3, warmup=3)
DRY = Sizes(files=4, side=256, crop=48, resized=48, batch=4, cuts=4, threads=(1, 2), streams=(1, 2), split_threads=2,
            seconds=0.05, min_steps=1, warmup=1)


def sizes() -> Sizes:
    return DRY if DRY_RUN else FULL


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def thread_counts() -> list[int]:
    """The sizes' thread counts, none above the cores this process may use."""
    return sorted({min(t, cores()) for t in sizes().threads})


def device() -> torch.device:
    """Where batches go and the models train: CUDA, or the CPU in a dry run."""
    return torch.device("cpu" if DRY_RUN else "cuda")


def no_device() -> str | None:
    """Why nothing can run on the device (None: it can)."""
    if device().type == "cuda" and not torch.cuda.is_available():
        return f"no CUDA device (torch {torch.__version__}, CUDA build {torch.version.cuda})"
    return None


def sync() -> None:
    if device().type == "cuda":
        torch.cuda.synchronize()


def results_dir() -> str:
    folder = os.environ.get("GPU_CHECK_DIR") or os.path.join(tempfile.gettempdir(), "fastprep-gpu-check")
    os.makedirs(folder, exist_ok=True)
    return folder


def out_of_time() -> bool:
    return time.time() > float(os.environ.get("GPU_CHECK_DEADLINE", "inf"))


def photos() -> Any:
    """The packed photos (restart-indexed JPEG shards of `files` side^2 q90 4:2:0 photo mosaics,
    fastprep.tools.bench._file_sources.FileSet), written once per run and shared by the stages."""
    import fastprep.io as fio  # noqa: PLC0415
    from fastprep.tools.bench._file_sources import FileSet  # noqa: PLC0415

    s = sizes()
    root = os.path.join(results_dir(), f"photos-{s.files}x{s.side}")
    done = os.path.join(root, "done")
    if not os.path.exists(done):  # not written, or a stage died writing it
        shutil.rmtree(root, ignore_errors=True)
        FileSet(s.files, root=root, size=s.side).dataset("packed-jpeg")
        open(done, "w").close()
    return fio.PackedDataset(os.path.join(root, "packed-jpeg"), layout="HWC")


def samples(packed: Any, length: int, transform: Any) -> Any:
    """`length` samples cycling over the packed photos, split as the Loader's fused path reads them
    (FileImages: load_raw + apply_transform)."""
    from fastprep.tools.bench._file_sources import FileImages  # noqa: PLC0415

    return FileImages(SimpleNamespace(dataset=lambda kind: packed), "packed-jpeg", length, transform)


def seed_transform() -> Any:
    """The seed workload: RandomCrop -> RandomDilatedMask(0.25) -> RGBToYCbCr (float32 /255 expanded)."""
    from fastprep import transforms as T  # noqa: PLC0415

    return T.seed_workload(sizes().crop, layout="HWC")


def imagenet_transform() -> Any:
    """torchvision's ImageNet training pipeline: RandomResizedCrop + flip + ToDtype + Normalize."""
    from fastprep import transforms as T  # noqa: PLC0415

    return T.Compose([T.RandomResizedCrop(sizes().resized), T.RandomHorizontalFlip(),
                      T.ToDtype(torch.float32, scale=True), T.Normalize(MEAN, STD)])


PIPELINES: dict[str, Callable[[], Any]] = {"seed": seed_transform, "imagenet": imagenet_transform}


def one_line(exc: BaseException) -> str:
    """An exception as one line: its type and the first line of its message."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


class Stage:
    """A stage's rows, saved after each one to ``<results>/<name>.json``.

    Example:
        >>> stage = Stage("loader")
        >>> stage.row("seed t=1", lambda: {"samples_per_s": 123.0})
    """

    def __init__(self, name: str, **info: Any):
        self.name, self.path = name, os.path.join(results_dir(), f"{name}.json")
        self.data: dict[str, Any] = {"stage": name, "dry_run": DRY_RUN, "sizes": sizes().__dict__, **info,
                                     "rows": []}
        self.save()

    def save(self) -> None:
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=1, default=str)
        os.replace(tmp, self.path)

    def row(self, label: str, measure: Callable[[], dict], skip: str | None = None, **info: Any) -> dict:
        """Run `measure` (-> the row's figures) and record its row; a refusal (ValueError), a failure,
        `skip` (why the row cannot run here) or no time left is recorded as one line instead, and the
        stage goes on."""
        row: dict[str, Any] = {"label": label, **info}
        t0 = time.perf_counter()
        if skip:
            row.update(status="skipped", note=skip)
        elif out_of_time():
            row.update(status="skipped", note="out of time (the check's budget)")
        else:
            try:
                row.update(status="ok", **measure())
            except ValueError as exc:  # the Loader refusing a transform it cannot split, say
                row.update(status="refused", note=one_line(exc))
            except (Exception, SystemExit) as exc:  # noqa: BLE001 (fail soft: one line, the next row runs)
                row.update(status="failed", note=one_line(exc))
                traceback.print_exc(file=sys.stderr)
        row["seconds"] = round(time.perf_counter() - t0, 2)
        self.data["rows"].append(row)
        self.save()
        figure = row.get("samples_per_s")
        print(f"{self.name}: {label}: " + (f"{figure:,.0f} samples/s" if figure is not None else row["status"])
              + (f" ({row['note']})" if row.get("note") else ""), flush=True)
        return row

    def skip_all(self, why: str) -> None:
        self.data["skipped"] = why
        self.save()
        print(f"{self.name}: skipped: {why}", flush=True)
