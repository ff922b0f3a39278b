"""What a training pipeline is, read from the objects in front of us: its transform's steps, where its
images come from, its loader and threads. ``fastprep.monitor`` and ``python -m fastprep diagnose``
both print it and choose their remedies from it (fastprep.monitoring._remedies).

Nothing is loaded to find it out: the loader is unwrapped (a tqdm bar's ``iterable``, a
DevicePrefetcher's ``loader``, another wrapper's ``source``), its dataset is looked through
wrappers' ``.dataset``, and the source is what the dataset declares it is (its ``source_kind``,
one of the words below: fastprep.io's datasets and images each say theirs), else told from its
type. diagnose, which holds a raw sample, refines the source from its image (`source_of_image`).

===============  ===========================================================================
source           what it is
===============  ===========================================================================
pil-files        image files decoded whole by Pillow in the dataset (torchvision's ImageFolder)
files            image files decoded whole by fastprep (fastprep.io.ImageFolder, roi=False)
jpeg-files       JPEG files read by window (fastprep.io.ImageFolder(roi=True): JpegFile s)
packed-jpeg      a local pack of JPEG records, read by window from their restart intervals
packed-raw       a local pack of raw uint8 pixels, read from a memory map (nothing decoded)
remote-pack      a pack at a URL (s3://, gs://, https://, ...), fetched into a local cache
windowed         another source read by window (WebDataset, LMDB, HDF5, a WindowedImage)
tensors          tensors or arrays (a TensorDataset, a list of arrays): nothing is decoded
other            anything else (a dataset of your own)
===============  ===========================================================================
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from fastprep.monitoring._advice import SOURCES  # what each source is, worded in the advice catalogue
from fastprep.monitoring._steps import Step, steps_of

__all__ = ["FILES", "PACKS", "SOURCES", "PipelineFacts", "Step", "datasets", "facts_of", "source_of_dataset",
           "source_of_image", "split_refusal", "steps_of", "unwrap"]

FILES = ("pil-files", "files", "jpeg-files")  # one file per sample: packing applies
PACKS = ("packed-jpeg", "packed-raw", "remote-pack")
WRAPPED = ("iterable", "loader", "source")  # tqdm's, DevicePrefetcher's, others': where wrappers keep the loader


@dataclass
class PipelineFacts:
    """The pipeline in front of the advice.

    Args:
        steps: the transform's steps, in order (empty: no transform found).
        source: one of SOURCES (see the module doc).
        dataset: the dataset's class name; root: the folder or URL its images come from, if known.
        loader: "fastprep" (a fastprep.Loader), "dataloader" (a torch DataLoader) or "other".
        workers: the Loader's threads or the DataLoader's num_workers.
        device: where steps run ("cpu", "cuda", ...).
        compact: batches are CompactBatch es (a fastprep.Loader, compact_collate).
        decode_on: a fastprep.Loader's decode_on (the GPU decode split), else None.
        pack: a pack's options (mode, max_side, ...), {} when the source is no pack.
        verify: a pack's `verify` (the CRC pass), None when not a pack.
        loader_device: a fastprep.Loader's own `device` (its batches copied there as uint8, expanded
            there), else None.
        split_refused: why ``fastprep.Loader(..., decode_on=...)`` would refuse to split this
            transform or source (the Loader's own rule, `split_refusal`), None where it splits.
        split_stage: with decode_on, the device stage's streams and JPEG decoders, tried in order
            ("4 streams; JPEG: nvImageCodec hardware > nvImageCodec cuda > libjpeg-turbo (host)").
    """
    steps: tuple[Step, ...] = ()
    source: str = "other"
    dataset: str = ""
    root: str | None = None
    loader: str = "other"
    workers: int = 0
    device: str = "cpu"
    compact: bool = False
    decode_on: str | None = None
    pack: dict = field(default_factory=dict)
    verify: bool | None = None
    loader_device: str | None = None
    split_refused: str | None = None
    split_stage: str | None = None

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.steps]

    @property
    def kind(self) -> str:
        """What the transform does, for the recipe: "resized-crop" (RandomResizedCrop: ImageNet-style
        training), "seed" (RandomCrop + RandomDilatedMask / RGBToYCbCr: fastprep's fused
        crop_mask_ycbcr workload), "resize" (Resize / CenterCrop: validation), "crop" (RandomCrop or
        CenterCrop alone), "other" or "none" (no transform)."""
        names = set(self.names)
        if not names:
            return "none"
        if "RandomResizedCrop" in names:
            return "resized-crop"
        if "RandomCrop" in names and names & {"RandomDilatedMask", "RGBToYCbCr"}:
            return "seed"
        if "Resize" in names:
            return "resize"
        if names & {"RandomCrop", "CenterCrop"}:
            return "crop"
        return "other"

    @property
    def fastprep_steps(self) -> bool:
        """Every step is fastprep's (and there is one)."""
        return bool(self.steps) and all(s.fastprep for s in self.steps)

    @property
    def fused(self) -> list[str]:
        """The fused ops the steps run as, in order."""
        return list(dict.fromkeys(s.fused for s in self.steps if s.fused))

    @property
    def crops_by_window(self) -> bool:
        """fastprep's crop (RandomCrop / RandomResizedCrop / Resize) comes first (after flips): a
        JPEG window source is decoded only where it is read."""
        for s in self.steps:
            if s.name not in ("RandomHorizontalFlip", "RandomVerticalFlip"):
                return s.fastprep and s.name in ("RandomCrop", "RandomResizedCrop", "Resize", "CenterCrop")
        return False

    @property
    def reduced_decode(self) -> bool:
        return any(s.jpeg_scale == "reduced" for s in self.steps)

    def step(self, name: str) -> Step | None:
        """The first step called `name`, None without one."""
        return next((s for s in self.steps if s.name == name), None)

    def describe(self) -> str:
        """Two lines: the steps (fused or not), then the source, the loader and its threads."""
        if self.steps:
            runs, k = [], 0
            while k < len(self.steps):
                s = self.steps[k]
                group = [s]
                while s.fused and k + len(group) < len(self.steps) and self.steps[k + len(group)].fused == s.fused:
                    group.append(self.steps[k + len(group)])
                text = " + ".join(g.describe() for g in group)
                runs.append(f"[{text}: one fused {s.fused} op]" if s.fused else text)
                k += len(group)
            steps = " -> ".join(runs)
        else:
            steps = "no transform found"
        where = f" {self.root}" if self.root else ""
        extra = ""
        if self.pack.get("max_side"):
            extra += f", max_side={self.pack['max_side']}"
        loader = {"fastprep": f"fastprep.Loader(threads={self.workers}"
                              + (f", decode_on={self.decode_on!r}" if self.decode_on else "") + ")"
                              + (f" [{self.split_stage}]" if self.split_stage else ""),
                  "dataloader": f"DataLoader(num_workers={self.workers})"}.get(
            self.loader, "no DataLoader or fastprep.Loader to read")
        source = f"{self.dataset or 'a dataset'}{where}: {SOURCES[self.source].what}{extra}"
        return f"pipeline: {steps}\nsource: {source}; {loader} on {self.device}"


def unwrap(batches: Any) -> Any:
    """The DataLoader or fastprep.Loader behind `batches` (a tqdm bar, a DevicePrefetcher, ...), or
    `batches` itself."""
    from torch.utils.data import DataLoader  # noqa: PLC0415

    from fastprep.loader import Loader  # noqa: PLC0415 (the Loader pulls in the slots machinery)

    for _ in range(8):
        if isinstance(batches, (DataLoader, Loader)):
            return batches
        inner = next((getattr(batches, n) for n in WRAPPED if getattr(batches, n, None) is not None), None)
        if inner is None or isinstance(inner, (str, bytes)):
            return batches
        batches = inner
    return batches


def datasets(dataset: Any) -> list[Any]:
    """`dataset` and the datasets it wraps (``.dataset``: SeedByIndex, Subset, ...), outermost first."""
    chain: list[Any] = []
    while dataset is not None and len(chain) < 32 and all(dataset is not d for d in chain):
        chain.append(dataset)
        dataset = getattr(dataset, "dataset", None)
    return chain


def split_refusal(transform: Any, reader: Any) -> str | None:
    """Why ``fastprep.Loader(..., decode_on=...)`` would not split `transform` over `reader`'s
    images (None: it would): the Loader's own check of the transform's plan
    (loader.device_split.split_problem), and a pack read upright by EXIF (exif=True), whose turned
    windows the device does not turn."""
    from fastprep.loader._device_split import split_problem  # noqa: PLC0415 (the Loader's rule, not a copy)
    from fastprep.transforms import FusionPlan  # noqa: PLC0415

    if getattr(reader, "exif", False) is True:
        return "the images are read upright by their EXIF orientation (exif=True), which the split does not turn"
    return split_problem(None if transform is None else FusionPlan.of(transform))


def source_of_dataset(dataset: Any) -> tuple[str, Any]:
    """(source, the dataset that reads the images): what the dataset declares (``source_kind``:
    fastprep.io's PackedDataset, ImageFolder, WebDataset, LMDBDataset, HDF5Dataset), else from its type."""
    import torch  # noqa: PLC0415

    for d in datasets(dataset):
        if (kind := declared(d)) is not None:
            return kind, d
        if isinstance(d, torch.utils.data.TensorDataset):
            return "tensors", d
        if hasattr(d, "samples") and callable(getattr(d, "loader", None)):
            return "pil-files", d  # torchvision's DatasetFolder API: (path, class) samples, a PIL loader
    if isinstance(dataset, (list, tuple)) and dataset and hasattr(dataset[0], "shape"):
        return "tensors", dataset
    return "other", dataset


def declared(obj: Any) -> str | None:
    """The source `obj` declares it is (its ``source_kind``, one of SOURCES), None where it declares none."""
    kind = getattr(obj, "source_kind", None)
    return kind if isinstance(kind, str) and kind in SOURCES else None


def source_of_image(image: Any, dataset: Any, fallback: str = "other") -> str:
    """The source of a raw sample's image, read by `dataset` (diagnose holds one): what the image
    declares (``source_kind``: fastprep.io's WindowedImage s), a pack record's "remote-pack" where
    `dataset` says it is one; else told from its type."""
    kind = declared(image)
    if kind in ("packed-jpeg", "packed-raw") and declared(dataset) == "remote-pack":
        return "remote-pack"
    if kind is not None:
        return kind
    if type(image).__module__.startswith("PIL."):
        return "pil-files"
    if getattr(dataset, "roi", None) is False:
        return "files"
    return fallback


def facts_of(batches: Any, device: Any = None) -> PipelineFacts:
    """The PipelineFacts of what a training loop iterates (see the module doc); `device`: where the
    steps run (default the loader's, else "cpu")."""
    from torch.utils.data import DataLoader  # noqa: PLC0415

    from fastprep.loader import Loader  # noqa: PLC0415

    loader = unwrap(batches)
    dataset = getattr(loader, "dataset", None)
    transform = getattr(loader, "transform", None) if isinstance(loader, Loader) else None
    if transform is None:
        transform = next((getattr(d, "transform", None) for d in datasets(dataset)
                          if getattr(d, "transform", None) is not None), None)
    source, reader = source_of_dataset(dataset) if dataset is not None else ("other", loader)
    root = getattr(reader, "root", None) or getattr(reader, "path", None)
    kind, workers, compact, decode_on, stage = "other", 0, False, None, None
    if isinstance(loader, Loader):
        kind, workers, compact = "fastprep", loader.threads, True
        decode_on = str(loader.decode_on) if loader.decode_on is not None else None
        if decode_on is not None:
            stage = (f"{loader.streams} stream{'s' * (loader.streams != 1)}; JPEG: "
                     + " > ".join(loader.jpeg_decoders.names))
    elif isinstance(loader, DataLoader):
        kind, workers = "dataloader", loader.num_workers
        compact = "compact" in getattr(loader.collate_fn, "__name__", type(loader.collate_fn).__name__).lower()
    dev = device if device is not None else getattr(loader, "device", None)
    pack = dict(getattr(reader, "options", None) or {}) if source in PACKS else {}
    return PipelineFacts(steps_of(transform), source, type(reader).__name__ if reader is not None else "",
                         os.fspath(root) if isinstance(root, (str, os.PathLike)) else None, kind, workers,
                         getattr(dev, "type", None) or str(dev or "cpu").split(":")[0], compact, decode_on, pack,
                         getattr(reader, "verify", None) if source in PACKS else None,
                         str(loader.device) if isinstance(loader, Loader) and loader.device is not None else None,
                         split_refusal(transform, reader), stage)
