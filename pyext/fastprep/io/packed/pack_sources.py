"""What :func:`fastprep.io.pack` packs: a folder's files or a dataset's items, each read into an
:class:`Item` (its name, image, label, extras) with a digest of what it holds.

The digests are the pack's identity (identity.py): a folder item's digest covers its relative
path, size and modification time (no read), a dataset item's the image as given (encoded bytes, a
file's bytes, or pixels with their shape), its label and its extras. A dataset item that raises
is a bad sample (an Item saying why, its exception kept: pack's ``on_error`` decides); one that
holds a bad label, extras or image is a bug of the dataset: a :class:`PackSourceError` naming the item.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from fastprep.core.bad_samples import NEVER_SKIPPED
from fastprep.io.errors import PackSourceError
from fastprep.io.jpeg.file import JpegFile
from fastprep.io.packed.format import crc32c, shown  # noqa: F401 (shown: pack's modules import it from here)
from fastprep.io.packed.pack_item import Unreadable, extras_of, label_of, pixels_of, read_input
from fastprep.io.sources.folder import IMG_EXTENSIONS, find_classes, make_dataset
from fastprep.io.windowed import WindowedImage


@dataclass
class Item:
    """One source item read for packing: image is encoded bytes, HWC pixels or a file's path (a
    folder's: read by the converter), or None with `unreadable` saying why it cannot be packed
    (and `error`, the exception that said so, where there is one)."""

    name: str
    image: Any
    label: int
    extras: list | None
    digest: str
    unreadable: str | None = None
    error: BaseException | None = None


@dataclass
class Sources:
    """What to pack: item i's name and reader, the classes, and what identifies the source."""

    names: list[str]
    read: Callable[[int], Item]
    digest: Callable[[int], str]  # item i's digest (a folder's costs no read)
    classes: list[str] | None
    kind: dict  # {"type": "folder" or "dataset <module.Type>", "items": n}
    listing_digest: str  # a folder's whole listing (paths, sizes, times); "" for a dataset
    sizes: list[int] | None  # input bytes per item (a folder's files), for the progress and the summary


def _hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def folder_sources(root: str) -> Sources:
    classes, class_to_idx = find_classes(root)
    samples = make_dataset(root, class_to_idx, IMG_EXTENSIONS)
    stats = [os.stat(p) for p, _ in samples]
    names = [os.path.relpath(p, root) for p, _ in samples]
    listing = [json.dumps([n, s.st_size, s.st_mtime_ns]) for n, s in zip(names, stats, strict=True)]

    def digest(i: int) -> str:
        return _hex(listing[i])

    def read(i: int) -> Item:
        return Item(names[i], samples[i][0], samples[i][1], None, digest(i))

    return Sources(names, read, digest, classes, {"type": "folder", "items": len(names)},
                   _hex("\n".join(listing)), [s.st_size for s in stats])


def dataset_sources(ds: Any) -> Sources:
    samples = getattr(ds, "samples", None)
    untransformed = getattr(ds, "transform", None) is None and getattr(ds, "target_transform", None) is None
    root = getattr(ds, "root", None)
    if untransformed and isinstance(root, (str, os.PathLike)) and isinstance(samples, list) and samples and all(
            isinstance(s, tuple) and len(s) == 2 and isinstance(s[0], str) for s in samples):
        files = folder_sources(os.fspath(root))  # an ImageFolder's own files: transcoded, not re-encoded
        if [os.path.join(os.fspath(root), n) for n in files.names] == [s[0] for s in samples]:
            return files
    try:
        n = len(ds)
    except TypeError:
        raise TypeError(f"pack: expected a folder path or a map-style dataset (len and [i]), got "
                        f"{type(ds).__name__}") from None

    def read(i: int) -> Item:
        return _dataset_item(ds, i, n)

    classes = getattr(ds, "classes", None)
    classes = list(classes) if isinstance(classes, (list, tuple)) and all(isinstance(c, str) for c in classes) \
        else None
    kind = {"type": f"dataset {type(ds).__module__}.{type(ds).__qualname__}", "items": n}
    return Sources([f"item {i}" for i in range(n)], read, lambda i: read(i).digest, classes, kind, "", None)


def _dataset_item(ds: Any, i: int, n: int) -> Item:
    where = f"item {i} (of {n})"
    try:
        item = ds[i]
    except NEVER_SKIPPED:
        raise
    except Exception as exc:  # the dataset's own error: a bad sample, named (pack raises it as __cause__)
        digest = _digest(("raised", type(exc).__name__), b"", None, None)
        return Item(f"item {i}", None, 0, None, digest, f"{type(exc).__name__}: {exc}", exc)
    if not isinstance(item, (tuple, list)) or len(item) < 2:
        raise PackSourceError(f"pack: {where}: expected (image, label, ...), got a {type(item).__name__}")
    image, rest = item[0], tuple(item[2:])
    name = image if isinstance(image, str) else f"item {i}"
    label, extras = label_of(item[1], where), extras_of(rest, where)
    try:
        image = _canonical(image, where)
    except Unreadable as exc:
        return Item(name, None, label, extras, _digest(("unreadable", name), b"", label, extras), str(exc), exc)
    tag = ("bytes", len(image)) if isinstance(image, bytes) else ("pixels", image.shape)
    return Item(name, image, label, extras, _digest(tag, image, label, extras))


def _canonical(image: Any, where: str) -> bytes | np.ndarray:
    """The image as encoded bytes (a path is read) or HWC uint8 pixels: what the digest covers and
    the converter takes."""
    if isinstance(image, (str, os.PathLike)):
        return read_input(image)
    if isinstance(image, JpegFile):
        return bytes(image.data)
    if isinstance(image, (bytes, bytearray, memoryview)):
        return bytes(image)
    if isinstance(image, WindowedImage):
        try:
            return image.decode(layout="HWC").numpy()
        except ValueError as exc:  # a corrupt record or file of the source: skipped, named
            raise Unreadable(str(exc)) from None
    try:
        return np.ascontiguousarray(pixels_of(image))
    except TypeError as exc:
        raise PackSourceError(f"pack: {where}: {str(exc).removeprefix('pack: ')}") from None


def _digest(tag: tuple, data: Any, label: int, extras: list | None) -> str:
    """A hash of the data's CRC-32C (the format's checksum: ~7 GB/s, without the GIL) with its shape,
    the label and the extras. 32 bits of the data: another image passes for an item with odds of
    2**-32, and another dataset must pass every item it differs in."""
    if isinstance(data, np.ndarray):
        data = data.reshape(-1)  # contiguous: a flat view
    return _hex(json.dumps([tag, crc32c(data), label, extras], sort_keys=True, default=str))
