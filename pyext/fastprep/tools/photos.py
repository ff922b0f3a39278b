"""A real ImageFolder of JPEG photos, for the diagnosis demo, tests and benchmarks.

`write_photo_folder(root)` writes the colour photos scikit-image ships (astronaut, coffee, chelsea,
...; no download) as JPEGs of several sizes, one class folder per photo, in torchvision's
ImageFolder layout (``root/<class>/<file>.jpg``). Without scikit-image it refuses, naming the
install (``pip install 'fastprep[photos]'``), unless synthetic pictures are asked for
(``synthetic=True``). `ImageFolder` reads that layout as torchvision's does, without
torchvision: item i is ``(transform(loader(path)), class_index)``, with a ``transform`` attribute
(so fastprep.tools.diagnose._bottleneck splits decoding from the transforms).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from torch.utils.data import Dataset

from fastprep.io._encode import encode_pixels

PHOTOS_INSTALL = "pip install 'fastprep[photos]' (or: pip install scikit-image)"
PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "immunohistochemistry")
SIZES = (256, 320, 400, 512)  # the short side of the written JPEGs, in pixels (>= the 256 crop)
EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".webp")


def source_pictures(names: Sequence[str] = PHOTOS, fallback: bool = True,
                    synthetic: bool = False) -> tuple[dict[str, np.ndarray], str]:
    """HWC uint8 RGB pictures by name, and where they come from: scikit-image's data photos, or
    smooth synthetic pictures with noise (deterministic): when `synthetic`, or without
    scikit-image when `fallback` (else a RuntimeError naming the install)."""
    if synthetic:
        return {name: _synthetic(k) for k, name in enumerate(names)}, "synthetic (asked for)"
    try:
        import skimage.data  # noqa: PLC0415 (optional: pip install 'fastprep[photos]')
    except ImportError:
        if not fallback:
            raise RuntimeError(f"write_photo_folder: writes scikit-image's photos, and scikit-image is not "
                               f"installed: {PHOTOS_INSTALL}; or pass synthetic=True for synthetic pictures "
                               f"(not photos: they decode and compress unlike real ones)") from None
        return {name: _synthetic(k) for k, name in enumerate(names)}, "synthetic (scikit-image not installed)"
    pictures = {}
    for name in names:
        image = np.asarray(getattr(skimage.data, name)())
        if image.ndim == 2:
            image = np.repeat(image[:, :, None], 3, axis=2)
        pictures[name] = np.ascontiguousarray(image[:, :, :3].astype(np.uint8))
    return pictures, f"scikit-image {skimage.__version__} data photos"


def _synthetic(k: int, size: int = 512) -> np.ndarray:
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
    rng = np.random.default_rng(k)
    channels = [np.sin((x * rng.uniform(2, 9) + y * rng.uniform(2, 9)) * np.pi + rng.uniform(0, 6)) for _ in range(3)]
    image = (np.stack(channels, axis=2) + 1) * 110 + rng.normal(0, 12, (size, size, 3))
    return np.clip(image, 0, 255).astype(np.uint8)


def _resized(pictures: dict[str, np.ndarray], root: str | os.PathLike, sides: Sequence[int],
             which: Callable[[Any], int]) -> Any:
    """(folder, name, side, image) for each picture resized (bicubic) so that its `which` (min or
    max) side is each of `sides`, with its folder ``root/<name>`` made."""
    from PIL import Image  # noqa: PLC0415

    for name, array in pictures.items():
        folder = Path(root) / name
        folder.mkdir(parents=True, exist_ok=True)
        image = Image.fromarray(array)
        for side in sides:
            scale = side / which(image.size)
            yield folder, name, side, image.resize((round(image.size[0] * scale), round(image.size[1] * scale)),
                                                   Image.BICUBIC)


def write_photo_folder(root: str | os.PathLike, sizes: Sequence[int] = SIZES, names: Sequence[str] = PHOTOS,
                       quality: int = 90, synthetic: bool = False) -> str:
    """Write each picture as JPEGs whose short side is each of `sizes` (plus a mirrored copy) into
    ``root/<name>/``; returns where the pictures came from (see source_pictures).

    Args:
        root: the folder to write (created).
        sizes: the short sides, in pixels.
        names: scikit-image's colour photos to write (``skimage.data.<name>``).
        quality: the JPEG quality.
        synthetic: write deterministic synthetic pictures under those names instead of the photos
            (no scikit-image needed).

    Raises:
        RuntimeError: scikit-image is not installed (and not `synthetic`): the message names the install.

    Example:
        >>> where = write_photo_folder("/tmp/photos")
        >>> dataset = ImageFolder("/tmp/photos", transform=my_transform)
    """
    if not sizes or any(isinstance(s, bool) or not isinstance(s, int) or s < 1 for s in sizes):
        raise ValueError(f"write_photo_folder: expected sizes to be positive ints, got {sizes!r}")
    if not isinstance(synthetic, bool):
        raise ValueError(f"write_photo_folder: expected synthetic to be a bool, got {synthetic!r}")
    pictures, where = source_pictures(names, fallback=False, synthetic=synthetic)
    for folder, name, size, resized in _resized(pictures, root, sizes, min):
        pixels = np.asarray(resized)
        for suffix, image in (("", pixels), ("_mirrored", pixels[:, ::-1])):
            (folder / f"{name}_{size}{suffix}.jpg").write_bytes(
                encode_pixels(image, "JPEG", quality, who="write_photo_folder"))
    return where


def mosaic(size: int, tile: int = 512, names: Sequence[str] = PHOTOS) -> np.ndarray:
    """A size x size HWC photo mosaic: each picture resized (bicubic) to tile x tile, laid in rows,
    so every size has real photos' detail per pixel rather than an upscale's."""
    from PIL import Image  # noqa: PLC0415

    pictures, _ = source_pictures(names)
    tiles = [np.asarray(Image.fromarray(pictures[n]).resize((tile, tile), Image.BICUBIC)) for n in names]
    k = -(-size // tile)
    rows = [np.concatenate([tiles[(r * k + c) % len(tiles)] for c in range(k)], axis=1) for r in range(k)]
    return np.ascontiguousarray(np.concatenate(rows, axis=0)[:size, :size])


def write_mosaic_folder(root: str | os.PathLike, files: int, size: int = 1024, classes: int = 4,
                        quality: int = 90) -> str:
    """root/class_k/i.jpg: `files` JPEGs (4:2:0) of the photo mosaic, each rolled differently so
    no two files are the same image; returns root."""
    base = mosaic(size)
    for i in range(files):
        folder = Path(root) / f"class_{i % classes}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i}.jpg").write_bytes(encode_pixels(np.roll(base, (37 * i, 53 * i), axis=(0, 1)), "JPEG", quality,
                                                        who="write_mosaic_folder"))
    return os.fspath(root)


MIXED_SIDES = (500, 640, 800, 1024, 1280, 1600)
MIXED_GREY = ("camera", "moon", "coins")


def write_mixed_folder(root: str | os.PathLike, quality: int = 90) -> str:
    """root/<photo>/<side>.jpg: every colour and grey photo with its longer side at each of
    MIXED_SIDES (aspect kept), quality 90, every third one progressive, and one PNG: the mix of
    sizes and kinds a real folder has. Returns root."""

    pictures, _ = source_pictures(PHOTOS)
    try:
        import skimage.data  # noqa: PLC0415

        pictures.update({n: np.asarray(getattr(skimage.data, n)()) for n in MIXED_GREY})
    except ImportError:
        pass
    for k, (folder, _, side, resized) in enumerate(_resized(pictures, root, MIXED_SIDES, max)):
        pixels = np.asarray(resized)
        if k == 0:
            (folder / f"{side}.png").write_bytes(encode_pixels(pixels, "PNG", who="write_mixed_folder"))
        else:
            (folder / f"{side}.jpg").write_bytes(encode_pixels(pixels, "JPEG", quality, who="write_mixed_folder",
                                                               progressive=k % 3 == 2))
    return os.fspath(root)


def decode_rgb(path: str) -> Any:
    """The image at `path` decoded as an RGB PIL image (torchvision's default loader)."""
    from PIL import Image  # noqa: PLC0415

    with open(path, "rb") as f:
        return Image.open(f).convert("RGB")


def decode_array(path: str) -> np.ndarray:
    """The image at `path` decoded to an HWC uint8 RGB array (what fastprep's HWC ops take)."""
    return np.asarray(decode_rgb(path))


class ImageFolder(Dataset):
    """``root/<class>/<image>`` as (image, class index), classes sorted by name, as torchvision's
    ImageFolder.

    Args:
        root: the folder of class folders.
        transform: applied to the decoded image (torchvision's convention: may be None).
        loader: decodes a path (default decode_rgb: a PIL image; decode_array gives numpy HWC).
    """

    def __init__(self, root: str | os.PathLike, transform: Callable[[Any], Any] | None = None,
                 loader: Callable[[str], Any] = decode_rgb):
        root = Path(root)
        if not root.is_dir():
            raise ValueError(f"ImageFolder: root {str(root)!r} is not a directory")
        self.classes = sorted(p.name for p in root.iterdir() if p.is_dir())
        self.class_to_idx = {c: i for i, c in enumerate(self.classes)}
        self.samples = [(str(p), self.class_to_idx[c]) for c in self.classes
                        for p in sorted((root / c).iterdir()) if p.suffix.lower() in EXTENSIONS]
        if not self.samples:
            raise ValueError(f"ImageFolder: no images ({', '.join(EXTENSIONS)}) in class folders of {str(root)!r}")
        self.root, self.transform, self.loader = str(root), transform, loader

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[Any, int]:
        path, target = self.samples[i]
        image = self.loader(path)
        return (self.transform(image) if self.transform is not None else image), target
