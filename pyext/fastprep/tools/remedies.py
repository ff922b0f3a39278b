"""What raw loading is in a diagnosed pipeline, and the remedy its user has not taken yet.

The caching method bills decoding to raw loading (fastprep.tools.stand_ins.decoded), wherever the
pipeline decodes: Pillow in a torchvision-style dataset, fastprep.io.ImageFolder's ``load_raw``,
or the ROI decode inside fastprep's crop of a ``roi=True`` JpegFile. Which remedy helps next
depends on which of those it is, so the advice is built from the raw sample itself (its image's
type), the dataset (its ``roi``, ``root``) and the transform (does fastprep's crop read windows?):

==================================  ==========================================================
raw image                           remedy named (the ones already taken are left out)
==================================  ==========================================================
PIL image (torchvision's way)       fastprep.io.ImageFolder(roi=True) + fastprep's crop, then pack
pixels of ImageFolder(roi=False)    roi=True (+ fastprep's crop first), then pack
JpegFile (roi=True)                 ``python -m fastprep pack`` + PackedDataset
PackedJpeg (packed shards)          the GPU decode split, ``pack --mode raw``, ``--max-side``
PackedRaw (raw shards)              storage, ``verify=False``, threads: nothing is decoded
anything else                       the general advice, and ``python -m fastprep pack``
==================================  ==========================================================
"""

from __future__ import annotations

import inspect
import os
from dataclasses import dataclass
from typing import Any

from fastprep.io.jpeg_file import JpegFile
from fastprep.io.packed_items import PackedJpeg, PackedRaw
from fastprep.io.windowed import WindowedImage
from fastprep.tools.verdict import ADVICE
from fastprep.transforms import RandomCrop, RandomHorizontalFlip, RandomResizedCrop

KINDS = ("pil", "decoded", "jpeg-file", "packed-jpeg", "packed-raw", "windowed", "pixels")
PACKING = ("a few large shard files instead of one small file per sample, and a crop window decodes from only "
           "the restart intervals that cover it (docs/real-files.md)")


@dataclass
class RawSource:
    """What a pipeline's raw loading is.

    Args:
        kind: one of KINDS: the raw image's type (see the module doc).
        dataset: the dataset's class name (where the split was found).
        root: the folder its files come from, when the dataset says (its ``root``).
        crops_by_window: the transform is fastprep's, with a RandomCrop / RandomResizedCrop first
            (after flips): it decodes only the window of a WindowedImage.
        fastprep_transform: the transform is fastprep's (its per-sample work is fastprep ops).
        loader: "fastprep" (a fastprep.Loader) or "dataloader".
        workers: the Loader's threads or the DataLoader's num_workers.
        device: the device type steps run on ("cpu", "cuda", ...).
        compact: the loader yields CompactBatch es (compact_collate, a fastprep.Loader).
    """
    kind: str
    dataset: str = ""
    root: str | None = None
    crops_by_window: bool = False
    fastprep_transform: bool = False
    loader: str = "dataloader"
    workers: int = 0
    device: str = "cpu"
    compact: bool = False

    def describe(self) -> str:
        """What raw loading covers here, for the report."""
        where = f"{self.dataset}: " if self.dataset else ""
        return where + {
            "pil": "Pillow decodes each image whole in the dataset",
            "decoded": "fastprep decodes each file whole (roi=False)",
            "jpeg-file": ("each JpegFile (roi=True) is decoded by window inside the crop, billed here"
                          if self.crops_by_window else "each JpegFile (roi=True) is decoded whole before the "
                                                       "transform, which is not fastprep's crop"),
            "packed-jpeg": ("each packed JPEG window is decoded from its restart intervals inside the crop, billed "
                            "here" if self.crops_by_window else "each packed JPEG record is decoded whole before the "
                                                                "transform, which is not fastprep's crop"),
            "packed-raw": "raw pixels are read from the shards' memory map (nothing is decoded)",
            "windowed": "each image is read by window inside the crop, billed here",
            "pixels": "the dataset's raw samples are read (and decoded) before the transforms",
        }[self.kind]

    def advice(self) -> str:
        """The raw-loading remedies this pipeline has not taken yet, most effective first."""
        fastprep_crop = ("crop with fastprep's RandomResizedCrop / RandomCrop as the first transform (in a "
                         "fastprep.transforms.Compose) so that only the crop's window is decoded")
        steps = {
            "pil": [f"read the files with fastprep.io.ImageFolder({self._root()}, roi=True) and {fastprep_crop}, in "
                    f"a fastprep.Loader (libjpeg-turbo in its threads, without the GIL)", self._pack()],
            "decoded": ([f"pass roi=True to {self.dataset or 'the dataset'} so that fastprep's crop decodes only "
                         f"its window"] if self.crops_by_window else
                        [f"pass roi=True to {self.dataset or 'the dataset'} and {fastprep_crop}"]) + [self._pack()],
            "jpeg-file": ([] if self.crops_by_window else [fastprep_crop]) + [
                "you already decode by window (roi=True), but a JPEG has no random access (the rows above each "
                "window are still entropy-decoded): " + self._pack()],
            "packed-jpeg": ([] if self.crops_by_window else [fastprep_crop]) + ["; or ".join(self._past_packing())],
            "packed-raw": ["nothing is decoded any more: raw loading is reading the memory-mapped shards; faster "
                           "storage or enough RAM for the page cache to hold them, PackedDataset(verify=False) to "
                           "skip the CRC pass"],
            "windowed": ["decode less: smaller stored images, " + self._pack()],
            "pixels": ["decode less (smaller stored images, a faster decoder), faster storage, cache decoded data; "
                       + self._pack()],
        }[self.kind]
        return "Reading or decoding raw samples is the bottleneck: " + "; then ".join(steps) + ". " + self._more()

    def transforms_advice(self) -> str | None:
        """For a transform that is fastprep's already: what is left (None: the general advice)."""
        if not self.fastprep_transform:
            return None
        return (f"The per-sample transforms are the bottleneck, and they are fastprep's already: {self._more(True)} "
                f"or move the work to the GPU (ship uint8 + packed masks and decode there).")

    def collate_advice(self) -> str | None:
        """For compact batches or a fastprep.Loader already: what is left (None: the general advice)."""
        if self.loader == "fastprep":
            return ("Assembling batches, or the Loader's threads taking the cores the step needs, costs the step: "
                    f"the Loader already writes compact uint8 batches in threads, without IPC; give it fewer "
                    f"threads ({self.workers} now) or torch fewer intra-op threads (torch.set_num_threads) so that "
                    f"the two do not compete, or a larger depth.")
        if self.compact:
            return ("Batches cost too much to move between processes, compact as they are: fastprep.Loader "
                    "(threads, no IPC), more num_workers, persistent_workers=True, a larger prefetch_factor.")
        return None

    def _root(self) -> str:
        return repr(self.root) if self.root else "root"

    def _pack(self) -> str:
        src = os.path.normpath(self.root) if self.root else "ROOT"
        dest = src + ".packed" if self.root else "DEST"
        return (f"pack the files, `python -m fastprep pack {src} {dest}`, and read them with "
                f"fastprep.io.PackedDataset({dest!r}): {PACKING}")

    def _past_packing(self) -> list[str]:
        out = []
        if self.device != "cpu":
            out.append(gpu_split())
        out.append("pack with `--mode raw` (uint8 pixels through a memory map: no decode at all, larger shards)")
        out.append("shrink the stored images (`pack --max-side`, lossy)")
        return out

    def _more(self, bare: bool = False) -> str:
        more = (f"more threads (fastprep.Loader(threads=...): {self.workers} now)" if self.loader == "fastprep"
                else f"more num_workers ({self.workers} now) and a larger prefetch_factor")
        return more + "," if bare else f"Where cores are free: {more}."


def advice_table(source: RawSource) -> dict[str, str]:
    """fastprep.tools.verdict.ADVICE with the raw-loading advice made for `source` (and the
    transforms' and collate's, where fastprep's already do that work)."""
    table = dict(ADVICE, **{"raw loading": source.advice()})
    for stage, text in (("transforms", source.transforms_advice()), ("collate/IPC", source.collate_advice())):
        if text:
            table[stage] = text
    return table


def gpu_split() -> str:
    """The GPU decode split, as this version offers it."""
    from fastprep.loader import Loader  # noqa: PLC0415 (the Loader pulls in the slots machinery)

    if "decode_on" in inspect.signature(Loader).parameters:
        return ('decode on the GPU: fastprep.Loader(..., decode_on="cuda") leaves the loader threads only the '
                "byte copies of each window's restart intervals, and nvJPEG decodes the batch")
    return ("decode on the GPU: cut each window's restart intervals in the loader threads (PackedJpeg.cut / "
            'PackedDataset.cut_window: byte copies, no entropy decoding) and decode the batch of cuts with '
            'fastprep.io.decode_window_batch(cuts, device="cuda") (nvJPEG)')


def kind_of(image: Any, dataset: Any) -> str:
    """The KINDS entry of a raw sample's image, read by `dataset`."""
    if isinstance(image, PackedJpeg):
        return "packed-jpeg"
    if isinstance(image, PackedRaw):
        return "packed-raw"
    if isinstance(image, JpegFile):
        return "jpeg-file"
    if isinstance(image, WindowedImage):
        return "windowed"
    if type(image).__module__.startswith("PIL."):
        return "pil"
    if getattr(dataset, "roi", None) is False:
        return "decoded"
    return "pixels"


def image_of(raw: Any) -> Any:
    """The image of a raw sample: its first element (``(image, target)``), a dict's first image-like
    value, or the sample itself."""
    if isinstance(raw, (tuple, list)) and raw:
        return raw[0]
    if isinstance(raw, dict):
        for value in raw.values():
            if isinstance(value, WindowedImage) or hasattr(value, "shape") or hasattr(value, "getpixel"):
                return value
    return raw


def crops_by_window(transform: Any) -> bool:
    """Whether `transform` is fastprep's, reading a WindowedImage by window: a RandomCrop or
    RandomResizedCrop first (flips before it ride along)."""
    if not getattr(transform, "reads_jpeg_files", False):
        return False
    for step in getattr(transform, "transforms", [transform]):
        if not isinstance(step, RandomHorizontalFlip):
            return isinstance(step, (RandomCrop, RandomResizedCrop))
    return False


def source_of(raw: Any, dataset: Any, transform: Any, **pipeline: Any) -> RawSource:
    """The RawSource of a pipeline whose raw sample is `raw`, read by `dataset` (the one whose
    ``load_raw`` or ``transform`` split it) and transformed by `transform`; `pipeline`: RawSource's
    loader, workers, device and compact."""
    root = getattr(dataset, "root", None)
    return RawSource(kind_of(image_of(raw), dataset), type(dataset).__name__,
                     os.fspath(root) if isinstance(root, (str, os.PathLike)) else None,
                     crops_by_window(transform), bool(getattr(transform, "reads_jpeg_files", False)), **pipeline)
