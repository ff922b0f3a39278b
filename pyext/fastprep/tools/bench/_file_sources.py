"""Image files as benchmark sources: the photos as a folder of JPEGs, read four ways.

`FileSet(root)` writes `files` 1024^2 quality-90 4:2:0 JPEGs of the photo mosaic (photos.py) and,
on first use, packs them (fastprep.io.pack) as restart-indexed JPEG shards and as raw pixels.
`FileImages(files, kind, length, transform)` is a map-style dataset over them, split as
`load_raw(i) -> (image, label)` + `apply_transform` like the synthetic sources, where the image is:

- ``folder``: the file decoded whole (fastprep.io.ImageFolder, roi=False; PIL for the usual pipeline)
- ``roi``: a JpegFile, whose crop decodes the window's rows (ImageFolder(roi=True))
- ``packed-jpeg``: a PackedJpeg, whose crop decodes the window's restart intervals only
- ``packed-raw``: a PackedRaw, whose crop is a view of the memory map (its CRCs checked)
- ``packed-raw-unverified``: the same, PackedDataset(verify=False): no CRC pass over the window
- ``arrays``: the decoded pixels held in memory (the ceiling: no file read, no decode)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

KINDS = ("folder", "roi", "packed-jpeg", "packed-raw", "packed-raw-unverified", "arrays")


class FileSet:
    """`files` JPEG photo mosaics (or, with `mixed`, photos.write_mixed_folder's mix of sizes and
    kinds) under `root` (a temporary folder by default), with their packs."""

    def __init__(self, files: int = 16, root: str | None = None, size: int = 1024, mixed: bool = False):
        from fastprep.tools.photos import write_mixed_folder, write_mosaic_folder  # noqa: PLC0415

        self._tmp = None if root else tempfile.mkdtemp(prefix="fastprep-files-")
        self.root = root or self._tmp
        folder = os.path.join(self.root, "files")
        self.folder = write_mixed_folder(folder) if mixed else write_mosaic_folder(folder, files, size)
        self._datasets: dict[str, Any] = {}
        self._arrays: list[np.ndarray] | None = None

    def dataset(self, kind: str) -> Any:
        """The fastprep.io dataset behind a kind (HWC, the fused op's layout), made once."""
        import fastprep.io as fio  # noqa: PLC0415

        if kind not in self._datasets:
            if kind in ("folder", "roi"):
                self._datasets[kind] = fio.ImageFolder(self.folder, roi=kind == "roi", layout="HWC")
            elif kind == "packed-raw-unverified":
                self.dataset("packed-raw")
                self._datasets[kind] = fio.PackedDataset(os.path.join(self.root, "packed-raw"), layout="HWC",
                                                         verify=False)
            else:
                dest = os.path.join(self.root, kind)
                fio.pack(self.folder, dest, mode=kind.removeprefix("packed-"), progress=False)
                self._datasets[kind] = fio.PackedDataset(dest, layout="HWC")
        return self._datasets[kind]

    def arrays(self) -> list[np.ndarray]:
        if self._arrays is None:
            ds = self.dataset("folder")
            self._arrays = [ds.load_raw(i)[0].numpy() for i in range(len(ds))]
        return self._arrays

    def bytes_on_disk(self, kind: str) -> int:
        """Bytes of the folder's files or of a pack (shards and index)."""
        if kind in ("folder", "roi"):
            return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(self.folder) for f in fs)
        kind = kind.removesuffix("-unverified")
        self.dataset(kind)
        dest = os.path.join(self.root, kind)
        return sum(os.path.getsize(os.path.join(dest, f)) for f in os.listdir(dest))

    def describe(self) -> dict:
        """What the files are and the bytes of each form, for bench results."""
        n = len(self.dataset("folder"))
        return {"what": f"{n} JPEGs of scikit-image's photos (1024^2 mosaics, q90 4:2:0)", "count": n,
                "bytes": {k: self.bytes_on_disk(k) for k in ("folder", "packed-jpeg", "packed-raw")
                          if k == "folder" or k in self._datasets}}

    def close(self) -> None:
        if self._tmp:
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None


def bytes_read(item: Any, crop: tuple[int, int, int, int]) -> int:
    """Bytes of the source a window read touches: the whole file for a decoded file; for a packed
    JPEG its record's tables, JPEG header and the MCU rows the cut checks; for raw pixels the
    window's rows rounded out to the CRC bands; 0 for arrays in memory."""
    from fastprep.io import JpegFile, PackedJpeg, PackedRaw  # noqa: PLC0415

    top, left, h, w = crop
    if isinstance(item, JpegFile):
        return len(item.data)
    if isinstance(item, PackedRaw):
        band = 64
        cols = (-(-(left + w) // band) - left // band) * band
        return 64 + h * (min(cols, item.width) * 3 + 4 * -(-item.width // band))
    if isinstance(item, PackedJpeg):
        rec = bytes(item.record[:64])
        rows, n = int.from_bytes(rec[24:28], "little"), int.from_bytes(rec[28:32], "little")
        jpeg_size = int.from_bytes(rec[12:16], "little")
        table = bytes(item.record[64:64 + 4 * rows])
        starts = [int.from_bytes(table[4 * r:4 * r + 4], "little") for r in range(rows)] + [jpeg_size]
        mcu = -(-item.height // rows)
        r0, r1 = max(0, top - 2) // mcu, min(rows, -(-(top + h + 2) // mcu))
        return 64 + 8 * rows + 2 * n + starts[0] + starts[r1] - starts[r0]
    return 0


class FileImages(Dataset):
    """`length` samples cycling over the files of `files`, read as `kind` (see the module doc);
    `pil=True` decodes with Pillow for the usual pipeline."""

    def __init__(self, files: FileSet, kind: str, length: int, transform: Callable[[Any], Any],
                 pil: bool = False):
        if kind not in KINDS:
            raise ValueError(f"FileImages: expected kind among {KINDS}, got {kind!r}")
        self.files, self.kind, self.length, self.transform, self.pil = files, kind, length, transform, pil
        self.base = files.arrays() if kind == "arrays" else files.dataset("folder" if pil else kind)
        self.n = len(self.base)

    def __len__(self) -> int:
        return self.length

    def load_raw(self, i: int) -> tuple[Any, int]:
        j = i % self.n
        if self.kind == "arrays":
            return self.base[j], self.files.dataset("folder").targets[j]
        if self.pil:
            from fastprep.tools.photos import decode_rgb  # noqa: PLC0415

            return decode_rgb(self.base.samples[j][0]), self.base.targets[j]
        return self.base.load_raw(j)[:2]

    def apply_transform(self, raw: tuple[Any, int]) -> tuple[torch.Tensor, int]:
        image, label = raw
        return self.transform(image), label

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.apply_transform(self.load_raw(i))
