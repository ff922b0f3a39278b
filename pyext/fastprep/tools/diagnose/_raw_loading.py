"""What raw loading is in a diagnosed pipeline, and the remedies its user has not taken yet.

The caching method bills decoding to raw loading (fastprep.tools.measuring._stand_ins.decoded), wherever the
pipeline decodes: Pillow in a torchvision-style dataset, fastprep.io.ImageFolder's ``load_raw``,
or the ROI decode inside fastprep's crop of a ``roi=True`` JpegFile. Which remedy helps next
depends on what the pipeline is: its steps, its source (told from the raw sample itself), its
loader. That description, fastprep.monitoring._pipeline.PipelineFacts, the remedy table keyed by it,
fastprep.monitoring._remedies, and the wording of every piece of advice,
fastprep.monitoring._advice, are the ones ``fastprep.monitor`` uses too; here they are made into
each stage's advice for the verdict.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any

import fastprep.monitoring._remedies as mr
from fastprep.monitoring._advice import COLLATE, GENERAL, RAW, SOURCES, TRANSFORMS
from fastprep.monitoring._pipeline import (
    PACKS,
    PipelineFacts,
    datasets,
    source_of_dataset,
    source_of_image,
    split_refusal,
    steps_of,
)

gpu_split = mr.gpu_split


@dataclass
class RawSource:
    """A diagnosed pipeline's facts, and what its raw loading is.

    Args:
        facts: the PipelineFacts (fastprep.monitoring._pipeline), the source told from the raw sample.

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
        text = SOURCES[f.source].raw_loading(f.crops_by_window)
        return f"{f.dataset}: {text}" if f.dataset else text

    def advice(self) -> str:
        """The raw-loading remedies this pipeline has not taken yet, most effective first, and those in place."""
        return mr.stage_advice(self.facts, RAW)

    def transforms_advice(self) -> str | None:
        """The transforms' remedies not taken yet, and those in place (None: no step was found, the
        general advice)."""
        return mr.stage_advice(self.facts, TRANSFORMS)

    def collate_advice(self) -> str | None:
        """For a fastprep.Loader or a DataLoader: what is left (None: the general advice)."""
        return mr.stage_advice(self.facts, COLLATE)


def advice_table(source: RawSource) -> dict[str, str]:
    """The general advice (fastprep.monitoring._advice.GENERAL) with each stage's made for `source`'s pipeline."""
    table = dict(GENERAL)
    for stage, text in ((RAW, source.advice()), (TRANSFORMS, source.transforms_advice()),
                        (COLLATE, source.collate_advice())):
        if text:
            table[stage] = text
    return table


def image_of(raw: Any) -> Any:
    """The image of a raw sample: its first element (``(image, target)``), a dict's first image-like
    value, or the sample itself."""
    from fastprep.io._windowed import WindowedImage  # noqa: PLC0415

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
