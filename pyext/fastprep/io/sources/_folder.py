"""fastprep.io.ImageFolder: image files in torchvision's ImageFolder layout (one subfolder per
class), read and decoded by ``load_raw`` so that fastprep.Loader decodes in its threads.

With ``roi=True``, ``load_raw`` returns a :class:`JpegFile` (the file's bytes and header) instead
of pixels: whoever crops it decodes only the crop's window (``JpegFile.random_crop``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

from fastprep.core._args import check_bool
from fastprep.io._files import list_files, read_file
from fastprep.io._source import ImageSource, image_from_bytes
from fastprep.io.jpeg import check_image_args

# torchvision's IMG_EXTENSIONS: what its ImageFolder lists.
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")


def find_classes(root: str | os.PathLike) -> tuple[list[str], dict[str, int]]:
    """The class folders of `root`, sorted, and their indices (torchvision's find_classes)."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    if not classes:
        raise FileNotFoundError(f"ImageFolder: no class folder in {os.fspath(root)!r}")
    return classes, {c: i for i, c in enumerate(classes)}


def make_dataset(root: str | os.PathLike, class_to_idx: dict[str, int],
                 extensions: Sequence[str]) -> list[tuple[str, int]]:
    """(path, class index) of every regular file with one of `extensions` (any case) under each
    class folder, in sorted order, as torchvision's make_dataset lists them (io.files.list_files:
    FIFOs, devices and symlink loops are skipped, not read)."""
    samples, empty = [], []
    for cls in sorted(class_to_idx):
        files = list_files(os.path.join(root, cls), extensions, "ImageFolder")
        samples.extend((path, class_to_idx[cls]) for path in files)
        if not files:
            empty.append(cls)
    if empty:
        exts = tuple(e.lower() for e in extensions)
        raise FileNotFoundError(f"ImageFolder: no file ending in {', '.join(exts)} in the class folders {empty}")
    return samples


class ImageFolder(ImageSource):
    """Images in class subfolders (``root/dog/1.jpg``, ``root/cat/2.png``), decoded by fastprep's
    libjpeg-turbo decoder (other formats through Pillow), in torchvision's ImageFolder order.

    ``load_raw(i)`` reads and decodes file i and returns ``(image, class_index)``: fastprep.Loader
    calls it in its threads (the decoder releases the GIL) and applies its transform there. With
    ``roi=True`` the image is a :class:`JpegFile` instead, decoded by whoever crops it, window only;
    ``dataset[i]`` (a DataLoader's path) decodes it whole before `transform`, same bits.

    Args:
        root: the folder holding one subfolder per class.
        transform: applied to the decoded image by ``dataset[i]`` / ``apply_transform``.
        target_transform: applied to the class index likewise.
        roi: ``load_raw`` returns JpegFiles (JPEG content only; other files are decoded).
        mode: "RGB", "YCbCr" or "GRAY", as in :func:`fastprep.io.decode_jpeg`.
        layout: "CHW" (default, torchvision's) or "HWC".
        extensions: the file endings listed (any case); the content decides the decoder.
        strict: corrupt JPEG data (a truncated file, a damaged scan) raises ValueError, so the file
            is a bad sample (`on_error` decides), as Pillow and torchvision's ImageFolder raise:
            the default. False decodes it as libjpeg recovers it (the missing part grey) with a
            :class:`fastprep.io.CorruptJpegWarning` naming the file. With `roi` the JPEG body is
            decoded by window later, so the error comes from the decode (see docs/real-files.md).
        exif: turn each photo upright by its EXIF orientation (decode_jpeg's `exif`; with `roi`,
            JpegFiles whose windows are the upright image's). Default False, as torchvision's
            ImageFolder (Pillow's ``convert("RGB")`` ignores the tag).
        on_error: what a file that cannot be read or decoded does: "raise" (default), "skip" (the
            next file that reads takes its place, recorded in ``bad_samples`` under its path) or
            "warn" (as skip, warning once per file): see fastprep.io._source.ImageSource.

    Example:
        >>> ds = ImageFolder("train/")
        >>> loader = fastprep.Loader(ds, 256, transform=train_tf, shuffle=True)
    """

    @property
    def source_kind(self) -> str:
        """What it is, in fastprep.monitor's words: "jpeg-files" (roi: JPEGs read by window) or "files"."""
        return "jpeg-files" if self.roi else "files"

    def __init__(self, root: str | os.PathLike, transform: Callable | None = None,
                 target_transform: Callable | None = None, *, roi: bool = False, mode: str = "RGB",
                 layout: str = "CHW", extensions: Sequence[str] = IMG_EXTENSIONS, strict: bool = True,
                 exif: bool = False, on_error: str = "raise"):
        check_image_args("ImageFolder", mode, layout)
        self.root = os.fspath(root)
        self.transform, self.target_transform = transform, target_transform
        self.roi, self.mode, self.layout = roi, mode, layout
        self.strict = check_bool("ImageFolder", "strict", strict)
        self.exif = check_bool("ImageFolder", "exif", exif)
        self.set_on_error("ImageFolder", on_error)
        self.classes, self.class_to_idx = find_classes(self.root)
        self.samples = make_dataset(self.root, self.class_to_idx, extensions)
        self.targets = [t for _, t in self.samples]

    def __len__(self) -> int:
        return len(self.samples)

    def read_item(self, i: int) -> tuple[Any, int]:
        """(image, class index) of file i before `transform`: decoded, or a JpegFile with roi
        (``load_raw(i)`` is this under the `on_error` policy)."""
        path, target = self.samples[i]
        data = read_file("ImageFolder", path)
        return image_from_bytes("ImageFolder", data, path, roi=self.roi, mode=self.mode, layout=self.layout,
                                strict=self.strict, exif=self.exif), target

    def sample_name(self, i: int) -> str:
        return self.samples[i][0]

    def __repr__(self) -> str:
        return (f"ImageFolder({self.root!r}, {len(self)} files, {len(self.classes)} classes, mode={self.mode!r}, "
                f"layout={self.layout!r}, roi={self.roi}{', exif=True' if self.exif else ''}"
                f"{f', on_error={self.on_error!r}' if self.on_error != 'raise' else ''})")
