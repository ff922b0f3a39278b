"""fastprep.io.ImageFolder: image files in torchvision's ImageFolder layout (one subfolder per
class), read and decoded by ``load_raw`` so that fastprep.Loader decodes in its threads.

With ``roi=True``, ``load_raw`` returns a :class:`JpegFile` (the file's bytes and header) instead
of pixels: whoever crops it decodes only the crop's window (``JpegFile.random_crop``).
"""

from __future__ import annotations

import io
import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from fastprep.io.jpeg import LAYOUTS, MODES, as_bytes, decode_jpeg, read_jpeg_header
from fastprep.io.windowed import WindowedImage
from fastprep.ops.color import rgb_to_ycbcr
from fastprep.ops.crop import random_crop_params

# torchvision's IMG_EXTENSIONS: what its ImageFolder lists.
IMG_EXTENSIONS = (".jpg", ".jpeg", ".png", ".ppm", ".bmp", ".pgm", ".tif", ".tiff", ".webp")
JPEG_MAGIC = b"\xff\xd8\xff"


class JpegFile(WindowedImage):
    """A JPEG's bytes and header, decoded on demand: the whole image or only a window.

    Args:
        data: the file's bytes (or a 1-D uint8 tensor / array) or its path.
        name: what to call it in errors (default: the path, if one was given).
        mode, layout, strict: as in :func:`fastprep.io.decode_jpeg`.

    Example:
        >>> f = JpegFile("cat.jpg")
        >>> f.height, f.width
        (1024, 768)
        >>> patch = f.random_crop(256, 256, seed=7)   # == fastprep.random_crop(f.decode(), 256, 256, 7)
    """

    __slots__ = ("data", "name", "mode", "layout", "strict", "header")

    def __init__(self, data: Any, *, name: str | None = None, mode: str = "RGB", layout: str = "CHW",
                 strict: bool = False):
        if mode not in MODES:
            raise ValueError(f"JpegFile: expected mode to be one of {MODES}, got {mode!r}")
        if layout not in LAYOUTS:
            raise ValueError(f"JpegFile: expected layout to be one of {LAYOUTS}, got {layout!r}")
        self.data, path = as_bytes("JpegFile", data)
        self.name, self.mode, self.layout, self.strict = name or path, mode, layout, strict
        self.header = read_jpeg_header(self.data, name=self.name)

    @property
    def height(self) -> int:
        return self.header.height

    @property
    def width(self) -> int:
        return self.header.width

    def decode(self, crop: tuple[int, int, int, int] | None = None, *, layout: str | None = None,
               out: torch.Tensor | None = None) -> torch.Tensor:
        """The image, or its window `crop` = (top, left, height, width), as a uint8 tensor."""
        return decode_jpeg(self.data, crop=crop, mode=self.mode, layout=layout or self.layout, out=out,
                           strict=self.strict, name=self.name)

    def random_crop(self, height: int, width: int, seed: int, *, layout: str | None = None,
                    out: torch.Tensor | None = None) -> torch.Tensor:
        """The window ``fastprep.random_crop(self.decode(), height, width, seed)`` cuts (same bits),
        decoding only that window. No padding: the crop must fit in the image."""
        top, left = random_crop_params(self.height, self.width, height, width, seed)
        return self.decode((top, left, height, width), layout=layout, out=out)

    def __repr__(self) -> str:
        h = self.header
        return (f"JpegFile({self.name or '<bytes>'}, {h.height}x{h.width} {h.color_space} {h.subsampling}"
                f"{' progressive' if h.progressive else ''}, mode={self.mode!r}, layout={self.layout!r})")


def find_classes(root: str | os.PathLike) -> tuple[list[str], dict[str, int]]:
    """The class folders of `root`, sorted, and their indices (torchvision's find_classes)."""
    classes = sorted(e.name for e in os.scandir(root) if e.is_dir())
    if not classes:
        raise FileNotFoundError(f"ImageFolder: no class folder in {os.fspath(root)!r}")
    return classes, {c: i for i, c in enumerate(classes)}


def make_dataset(root: str | os.PathLike, class_to_idx: dict[str, int],
                 extensions: Sequence[str]) -> list[tuple[str, int]]:
    """(path, class index) of every file with one of `extensions` (any case) under each class
    folder, in sorted order, as torchvision's make_dataset lists them."""
    exts = tuple(e.lower() for e in extensions)
    samples, empty = [], []
    for cls in sorted(class_to_idx):
        found = 0
        for dirpath, _, files in sorted(os.walk(os.path.join(root, cls), followlinks=True)):
            for f in sorted(files):
                if f.lower().endswith(exts):
                    samples.append((os.path.join(dirpath, f), class_to_idx[cls]))
                    found += 1
        if not found:
            empty.append(cls)
    if empty:
        raise FileNotFoundError(f"ImageFolder: no file ending in {', '.join(exts)} in the class folders {empty}")
    return samples


def decode_other(data: bytes, name: str, mode: str, layout: str) -> torch.Tensor:
    """A non-JPEG image file (PNG, BMP, ...) through Pillow, in the same mode and layout."""
    try:
        from PIL import Image  # noqa: PLC0415 (only files that are not JPEGs need Pillow)
    except ImportError as exc:
        raise RuntimeError(f"ImageFolder: {name} is not a JPEG; decoding it needs Pillow (pip install pillow)") from exc
    try:
        with Image.open(io.BytesIO(data)) as img:
            arr = torch.from_numpy(np.array(img.convert("L" if mode == "GRAY" else "RGB")))
    except OSError as exc:  # PIL.UnidentifiedImageError, truncated files
        raise ValueError(f"ImageFolder: {name}: not a JPEG, and Pillow cannot decode it: {exc}") from exc
    hwc = arr.unsqueeze(-1) if arr.dim() == 2 else arr
    if mode == "YCbCr":  # fastprep's conversion, as decode_jpeg does for RGB-coded JPEGs
        hwc = rgb_to_ycbcr(hwc, "HWC").permute(1, 2, 0)
    return hwc.permute(2, 0, 1).contiguous() if layout == "CHW" else hwc.contiguous()


def apply_image_transform(raw: tuple, transform: Callable | None, target_transform: Callable | None) -> tuple:
    """(transform(image), target_transform(label), *rest) of a raw item (image, label, *rest): a
    WindowedImage is decoded whole first unless the transform is fastprep's (which decodes only
    the window it crops)."""
    image, target, *rest = raw
    if isinstance(image, WindowedImage) and not getattr(transform, "reads_jpeg_files", False):
        image = image.decode()
    if transform is not None:
        image = transform(image)
    if target_transform is not None:
        target = target_transform(target)
    return (image, target, *rest)


class ImageFolder(torch.utils.data.Dataset):
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
        strict: corrupt JPEG data raises instead of warning (see decode_jpeg).

    Example:
        >>> ds = ImageFolder("train/")
        >>> loader = fastprep.Loader(ds, 256, transform=train_tf, shuffle=True)
    """

    def __init__(self, root: str | os.PathLike, transform: Callable | None = None,
                 target_transform: Callable | None = None, *, roi: bool = False, mode: str = "RGB",
                 layout: str = "CHW", extensions: Sequence[str] = IMG_EXTENSIONS, strict: bool = False):
        if mode not in MODES:
            raise ValueError(f"ImageFolder: expected mode to be one of {MODES}, got {mode!r}")
        if layout not in LAYOUTS:
            raise ValueError(f"ImageFolder: expected layout to be one of {LAYOUTS}, got {layout!r}")
        self.root = os.fspath(root)
        self.transform, self.target_transform = transform, target_transform
        self.roi, self.mode, self.layout, self.strict = roi, mode, layout, strict
        self.classes, self.class_to_idx = find_classes(self.root)
        self.samples = make_dataset(self.root, self.class_to_idx, extensions)
        self.targets = [t for _, t in self.samples]

    def __len__(self) -> int:
        return len(self.samples)

    def load_image(self, data: bytes, path: str) -> Any:
        if data[:3] != JPEG_MAGIC:
            return decode_other(data, path, self.mode, self.layout)
        if self.roi:
            return JpegFile(data, name=path, mode=self.mode, layout=self.layout, strict=self.strict)
        return decode_jpeg(data, mode=self.mode, layout=self.layout, strict=self.strict, name=path)

    def load_raw(self, i: int) -> tuple[Any, int]:
        """(image, class index) of file i before `transform`: decoded, or a JpegFile with roi."""
        path, target = self.samples[i]
        with open(path, "rb") as f:
            data = f.read()
        return self.load_image(data, path), target

    def apply_transform(self, raw: tuple[Any, int]) -> tuple[Any, Any]:
        return apply_image_transform(raw, self.transform, self.target_transform)

    def __getitem__(self, i: int) -> tuple[Any, Any]:
        return self.apply_transform(self.load_raw(i))

    def __repr__(self) -> str:
        return (f"ImageFolder({self.root!r}, {len(self)} files, {len(self.classes)} classes, mode={self.mode!r}, "
                f"layout={self.layout!r}, roi={self.roi})")
