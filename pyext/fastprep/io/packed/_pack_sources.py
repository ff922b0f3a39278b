"""What :func:`fastprep.io.pack` packs: a folder's files or a dataset's items, each read into an
:class:`Item` (its name, image, label, extras) with a digest of what it holds.

The digests are the pack's identity (_identity.py): a folder item's digest covers its relative
path, size, modification time and label (no read), a dataset item's the image as given (encoded
bytes, a file's bytes, or pixels with their shape), its label and its extras.

An ImageFolder (fastprep's or torchvision's, untransformed, its item reading not overridden) is
packed from its files, with the labels, classes and class_to_idx the dataset holds: its
``samples``, not the folder's listing, which a caller may have replaced (a class order fixed by
another dataset). Only an ImageFolder whose samples, classes and class_to_idx are all the folder's
is "the folder" (the pack ``pack(root)`` makes); one whose ``targets`` disagree with its samples is
refused by name; any other dataset is packed from its items, ``ds[i]``. A dataset item that raises
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

from fastprep.core._bad_samples import NEVER_SKIPPED
from fastprep.core._type_names import public_type_name
from fastprep.errors import PackSourceError
from fastprep.io._pack_format import crc32c, shown  # noqa: F401 (shown: pack's modules import it from here)
from fastprep.io._windowed import WindowedImage
from fastprep.io.jpeg._file import JpegFile
from fastprep.io.packed._pack_item import Unreadable, extras_of, label_of, pixels_of, read_input
from fastprep.io.sources._folder import IMG_EXTENSIONS, ImageFolder, find_classes, make_dataset


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
    class_to_idx: dict | None = None  # as the source gives it (None: {class: its place in classes})


def _hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:16]


def folder_sources(root: str) -> Sources:
    classes, class_to_idx = find_classes(root)
    return _files_sources(root, make_dataset(root, class_to_idx, IMG_EXTENSIONS), classes, class_to_idx, "folder")


def _files_sources(root: str, samples: list, classes: list[str], class_to_idx: dict, kind: str) -> Sources:
    """Files with their labels: a folder's (kind "folder") or an image-folder dataset's samples.
    An item's digest covers its name, size, modification time and label."""
    stats = [os.stat(p) for p, _ in samples]
    names = [_relative(p, root) for p, _ in samples]
    listing = [json.dumps([n, s.st_size, s.st_mtime_ns, int(t)])
               for n, s, (_, t) in zip(names, stats, samples, strict=True)]

    def digest(i: int) -> str:
        return _hex(listing[i])

    def read(i: int) -> Item:
        return Item(names[i], samples[i][0], int(samples[i][1]), None, digest(i))

    return Sources(names, read, digest, list(classes), {"type": kind, "items": len(names)},
                   _hex("\n".join(listing)), [s.st_size for s in stats], dict(class_to_idx))


def _relative(path: str, root: str) -> str:
    rel = os.path.relpath(path, root)
    return path if rel.startswith(os.pardir) else rel


def _getitem_reads_samples(ds: Any) -> bool:
    """Whether ``ds[i]`` is (the image of file samples[i][0], samples[i][1]) untransformed: an
    ImageFolder of fastprep or torchvision whose item reading no subclass changed."""
    cls = type(ds)
    if isinstance(ds, ImageFolder):
        return cls.read_item is ImageFolder.read_item and cls.__getitem__ is ImageFolder.__getitem__ and \
            cls.load_raw is ImageFolder.load_raw
    getitem = getattr(cls, "__getitem__", None)
    loader = getattr(ds, "loader", None)
    return getattr(getitem, "__module__", "") == "torchvision.datasets.folder" and \
        getattr(getitem, "__qualname__", "") == "DatasetFolder.__getitem__" and \
        getattr(loader, "__module__", "") == "torchvision.datasets.folder" and \
        getattr(loader, "__name__", "") in ("default_loader", "pil_loader", "accimage_loader")


def _image_folder_sources(ds: Any) -> Sources | None:
    """An untransformed ImageFolder's files, with the labels, classes and class_to_idx the dataset
    gives (not the folder's own, which a caller may have replaced: a class order fixed by another
    dataset, a subset of samples): kind "folder" only where all of them are the folder's, so such a
    pack is pack(root)'s. None for any other dataset (packed from its items, ``ds[i]``)."""
    samples, root = getattr(ds, "samples", None), getattr(ds, "root", None)
    if getattr(ds, "transform", None) is not None or getattr(ds, "target_transform", None) is not None or \
            not isinstance(root, (str, os.PathLike)) or not isinstance(samples, list) or not samples or \
            not all(isinstance(s, tuple) and len(s) == 2 and isinstance(s[0], str) and
                    isinstance(s[1], int) and not isinstance(s[1], bool) for s in samples) or \
            not _getitem_reads_samples(ds):
        return None
    root = os.fspath(root)
    labels = [t for _, t in samples]
    targets = getattr(ds, "targets", None)
    if targets is not None and list(targets) != labels:
        i = next((i for i, (a, b) in enumerate(zip(targets, labels)) if a != b), min(len(targets), len(labels)))
        got = targets[i] if i < len(targets) else "none"
        raise PackSourceError(f"pack: the {type(ds).__name__}'s targets disagree with its samples at item {i} "
                              f"(targets[{i}] = {got!r}, samples[{i}] = {samples[i] if i < len(samples) else None!r}; "
                              f"{len(targets)} targets, {len(samples)} samples): its items are labelled by samples: "
                              f"set samples and targets alike")
    classes, class_to_idx = getattr(ds, "classes", None), getattr(ds, "class_to_idx", None)
    if not isinstance(classes, (list, tuple)) or not all(isinstance(c, str) for c in classes) or \
            not isinstance(class_to_idx, dict):
        return None
    try:
        own_classes, own_idx = find_classes(root)
        own = make_dataset(root, own_idx, IMG_EXTENSIONS)
    except (OSError, ValueError):
        own_classes, own_idx, own = None, None, None
    unchanged = own == samples and own_classes == list(classes) and own_idx == class_to_idx
    if unchanged:
        return _files_sources(root, samples, own_classes, own_idx, "folder")
    kind = f"samples list of {public_type_name(type(ds))}"  # "it packed a samples list of ..."
    return _files_sources(root, samples, list(classes), class_to_idx, kind)


def dataset_sources(ds: Any) -> Sources:
    files = _image_folder_sources(ds)  # an ImageFolder's own files: transcoded, not re-encoded
    if files is not None:
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
    class_to_idx = getattr(ds, "class_to_idx", None)
    class_to_idx = dict(class_to_idx) if classes is not None and isinstance(class_to_idx, dict) and all(
        isinstance(k, str) and isinstance(v, int) for k, v in class_to_idx.items()) else None
    kind = {"type": f"dataset {public_type_name(type(ds))}", "items": n}
    return Sources([f"item {i}" for i in range(n)], read, lambda i: read(i).digest, classes, kind, "", None,
                   class_to_idx)


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
