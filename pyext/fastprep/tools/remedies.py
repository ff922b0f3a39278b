"""What raw loading is in a diagnosed pipeline, and the remedies its user has not taken yet.

The caching method bills decoding to raw loading (fastprep.tools.stand_ins.decoded), wherever the
pipeline decodes: Pillow in a torchvision-style dataset, fastprep.io.ImageFolder's ``load_raw``,
or the ROI decode inside fastprep's crop of a ``roi=True`` JpegFile. Which remedy helps next
depends on what the pipeline is: its steps, its source (told from the raw sample itself), its
loader. That description, fastprep.monitoring.pipeline.PipelineFacts, and the remedy table keyed
by it, fastprep.monitoring.remedies, are the ones ``fastprep.monitor`` uses too; here they are
made into each stage's advice for the verdict.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

from fastprep.monitoring import remedies as mr
from fastprep.monitoring.pipeline import (
    PACKS,
    PipelineFacts,
    datasets,
    source_of_dataset,
    source_of_image,
    split_refusal,
    steps_of,
)
from fastprep.tools.verdict import ADVICE

gpu_split = mr.gpu_split
HOW = {  # how raw loading happens, by source, for the report: (with fastprep's crop first, without)
    "pil-files": ("Pillow decodes each image whole in the dataset",) * 2,
    "files": ("fastprep decodes each file whole (roi=False)",) * 2,
    "jpeg-files": ("each JpegFile (roi=True) is decoded by window inside the crop, billed here",
                   "each JpegFile (roi=True) is decoded whole before the transform, which is not fastprep's crop"),
    "packed-jpeg": ("each packed JPEG window is decoded from its restart intervals inside the crop, billed here",
                    "each packed JPEG record is decoded whole before the transform, which is not fastprep's crop"),
    "remote-pack": ("each record of the remote pack is fetched (through its cache) and decoded inside the crop",
                    "each record of the remote pack is fetched (through its cache) and decoded whole"),
    "packed-raw": ("raw pixels are read from the shards' memory map (nothing is decoded)",) * 2,
    "windowed": ("each image is read by window inside the crop, billed here",
                 "each image is decoded whole before the transform, which is not fastprep's crop"),
    "tensors": ("the dataset's tensors are indexed (nothing is decoded)",) * 2,
    "other": ("the dataset's raw samples are read (and decoded) before the transforms",) * 2,
}


@dataclass
class RawSource:
    """A diagnosed pipeline's facts, and what its raw loading is.

    Args:
        facts: the PipelineFacts (fastprep.monitoring.pipeline), the source told from the raw sample.

    Example:
        >>> source = source_of(dataset.load_raw(0), dataset, transform, loader="fastprep", workers=2)
        >>> source.describe(); source.advice()
    """
    facts: PipelineFacts

    @property
    def kind(self) -> str:
        return self.facts.source

    @property
    def root(self) -> str | None:
        return self.facts.root

    def with_device(self, device: str) -> RawSource:
        return RawSource(replace(self.facts, device=device))

    def describe(self) -> str:
        """What raw loading covers here, for the report."""
        f = self.facts
        text = HOW[f.source][0 if f.crops_by_window else 1]
        return f"{f.dataset}: {text}" if f.dataset else text

    def advice(self) -> str:
        """The raw-loading remedies this pipeline has not taken yet, most effective first, and those in place."""
        todo, done = mr.remedies(self.facts, (mr.RAW,))
        head = "Reading or decoding raw samples is the bottleneck: "
        text = head + ("; then ".join(todo) if todo else "every remedy for it here is in place") + "."
        if done:
            text += " Already in place: " + "; ".join(done) + "."
        return text + f" Where cores are free: {mr.more_threads(self.facts)}."

    def transforms_advice(self) -> str | None:
        """The transforms' remedies not taken yet, and those in place (None: no step was found, the
        general advice)."""
        todo, done = mr.remedies(self.facts, (mr.TRANSFORMS,))
        if not self.facts.steps:
            return None
        if todo:
            text = "The per-sample transforms are the bottleneck: " + "; ".join(todo) + "."
        else:
            text = "The per-sample transforms are the bottleneck, and they are fastprep's already."
        if done:
            text += " Already in place: " + "; ".join(done) + "."
        return text + f" Then {mr.more_threads(self.facts)}, or move the work to the GPU (ship uint8 + packed " \
                      "masks and decode there)."

    def collate_advice(self) -> str | None:
        """For compact batches or a fastprep.Loader already: what is left (None: the general advice)."""
        f = self.facts
        if f.loader == "fastprep":
            return ("Assembling batches, or the Loader's threads taking the cores the step needs, costs the step: "
                    f"the Loader already writes compact uint8 batches in threads, without IPC; give it fewer "
                    f"threads ({f.workers} now) or torch fewer intra-op threads (torch.set_num_threads) so that "
                    f"the two do not compete, or a larger depth.")
        if f.compact:
            return ("Batches cost too much to move between processes, compact as they are: fastprep.Loader "
                    "(threads, no IPC), more num_workers, persistent_workers=True, a larger prefetch_factor.")
        return None


def advice_table(source: RawSource) -> dict[str, str]:
    """fastprep.tools.verdict.ADVICE with each stage's advice made for `source`'s pipeline."""
    table = dict(ADVICE, **{"raw loading": source.advice()})
    for stage, text in (("transforms", source.transforms_advice()), ("collate/IPC", source.collate_advice())):
        if text:
            table[stage] = text
    return table


def image_of(raw: Any) -> Any:
    """The image of a raw sample: its first element (``(image, target)``), a dict's first image-like
    value, or the sample itself."""
    from fastprep.io.windowed import WindowedImage  # noqa: PLC0415

    if isinstance(raw, (tuple, list)) and raw:
        return raw[0]
    if isinstance(raw, dict):
        for value in raw.values():
            if isinstance(value, WindowedImage) or hasattr(value, "shape") or hasattr(value, "getpixel"):
                return value
    return raw


def source_of(raw: Any, dataset: Any, transform: Any, *, loader: str = "dataloader", workers: int = 0,
              device: str = "cpu", compact: bool = False, decode_on: Any = None) -> RawSource:
    """The RawSource of a pipeline whose raw sample is `raw`, read by `dataset` (the one whose
    ``load_raw`` or ``transform`` split it) and transformed by `transform`; the rest: the loader's
    kind ("fastprep" / "dataloader"), threads or workers, the device type, compact batches, and a
    fastprep.Loader's decode_on."""
    fallback, reader = source_of_dataset(dataset)
    source = source_of_image(image_of(raw), dataset, fallback)
    reader = next((d for d in datasets(dataset) if hasattr(d, "root") or hasattr(d, "path")), reader)
    root = getattr(reader, "root", None) or getattr(reader, "path", None)
    facts = PipelineFacts(steps_of(transform), source, type(dataset).__name__,
                          os.fspath(root) if isinstance(root, (str, os.PathLike)) else None, loader, workers, device,
                          compact, None if decode_on is None else str(decode_on),
                          dict(getattr(reader, "options", None) or {}) if source in PACKS else {},
                          getattr(reader, "verify", None) if source in PACKS else None,
                          split_refused=split_refusal(transform, reader))
    return RawSource(facts)
