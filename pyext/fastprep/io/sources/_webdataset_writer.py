"""fastprep.io.write_webdataset: a dataset written as tar shards in the `webdataset` library's
layout (what its TarWriter / ShardWriter write), readable by webdataset and by
fastprep.io.WebDataset. Each shard is written under a temporary name, synced and renamed: a shard
under its final name is always complete."""

from __future__ import annotations

import io
import json
import os
import tarfile
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import torch

from fastprep.core._args import check_int
from fastprep.io._encode import PIL_FORMATS, encode_pixels
from fastprep.io._pack_format import seal
from fastprep.io._windowed import WindowedImage
from fastprep.io.jpeg._file import JpegFile
from fastprep.io.sources._tar_shards import IMAGE_EXTS, INT_EXTS, JSON_EXTS


def _pixels(value: Any, layout: str) -> np.ndarray:
    """HWC (or HW) uint8 numpy pixels of an image: a tensor in `layout`, a numpy HWC array, PIL."""
    if isinstance(value, WindowedImage):
        value = value.decode(layout="HWC")
        layout = "HWC"
    if isinstance(value, torch.Tensor):
        if value.dim() == 3 and layout == "CHW":
            value = value.permute(1, 2, 0)
        value = value.contiguous().numpy()
    arr = np.asarray(value)
    if arr.dtype != np.uint8 or arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[-1] not in (1, 3, 4)):
        raise ValueError(f"expected a uint8 image ({layout} tensor, HWC array or PIL image), got {arr.dtype} "
                         f"{arr.shape}")
    return arr[..., 0] if arr.ndim == 3 and arr.shape[-1] == 1 else arr


def encode_image(value: Any, ext: str, quality: int, layout: str) -> bytes:
    """An image as the bytes of a file of extension `ext`: a JpegFile's own bytes for .jpg (no
    re-encoding), anything else encoded by Pillow (JPEG at `quality`, 4:2:0)."""
    if isinstance(value, JpegFile) and ext in ("jpg", "jpeg"):
        return bytes(value.data)
    fmt = PIL_FORMATS.get(ext)
    if fmt is None:
        raise ValueError(f"cannot encode an image as {ext!r}; use one of {sorted(PIL_FORMATS)}")
    return encode_pixels(_pixels(value, layout), fmt, quality, who="write_webdataset")


def encode_member(ext: str, value: Any, quality: int, layout: str) -> bytes:
    """A sample's field as the bytes of member ``<key>.<ext>``, by its extension as webdataset's
    default encoders do: bytes as they are, images encoded, ints as ASCII, json, text, .npy."""
    last = ext.rsplit(".", 1)[-1]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value)
    if last in INT_EXTS:  # what readers parse as an int: an int, nothing else
        if isinstance(value, torch.Tensor) and value.numel() == 1:
            value = value.item()
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"expected an int for a .{ext} member, got {value!r}")
        return str(int(value)).encode("ascii")
    if isinstance(value, str):
        return value.encode("utf-8")
    if last in IMAGE_EXTS:
        return encode_image(value, "jpg" if last in ("img", "image") else last, quality, layout)
    if last in JSON_EXTS:
        return json.dumps(value).encode("utf-8")
    if last == "npy":
        buf = io.BytesIO()
        np.save(buf, np.asarray(value), allow_pickle=False)
        return buf.getvalue()
    raise ValueError(f"no encoder for a .{ext} member of type {type(value).__name__}; pass bytes")


def _samples(dataset: Any) -> Iterable[Any]:
    """A map-style dataset's items before its transform (``load_raw`` when it has one), else the iterable."""
    if hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__"):
        load = getattr(dataset, "load_raw", dataset.__getitem__)
        return (load(i) for i in range(len(dataset)))
    return dataset


def _members(sample: Any, fields: Sequence[str]) -> dict[str, Any]:
    if isinstance(sample, dict):
        return dict(sample)
    values = list(sample) if isinstance(sample, (tuple, list)) else [sample]
    if len(values) != len(fields):
        raise ValueError(f"a sample of {len(values)} values for the {len(fields)} fields {tuple(fields)}: "
                         f"pass fields naming each value's extension")
    return dict(zip(fields, values))


class _Shards:
    """The shard being written: a temporary file renamed to its name once complete."""

    def __init__(self, pattern: str, start: int):
        self.pattern, self.index, self.paths = pattern, start, []
        self.tar = self.file = None
        self.count = self.size = 0

    def open_next(self) -> None:
        self.close()
        path = self.pattern % self.index
        self.index += 1
        self.file = open(path + ".partial", "wb")
        self.tar = tarfile.open(fileobj=self.file, mode="w|")
        self.paths.append(path)
        self.count = self.size = 0

    def add(self, name: str, data: bytes) -> None:
        info = tarfile.TarInfo(name)  # as webdataset's TarWriter writes it, with a fixed time
        info.size, info.mode, info.uname, info.gname = len(data), 0o444, "bigdata", "bigdata"
        self.tar.addfile(info, io.BytesIO(data))
        self.size += len(data)

    def close(self) -> None:
        if self.tar is None:
            return
        self.tar.close()
        seal(self.file, self.paths[-1] + ".partial", self.paths[-1])
        self.tar = self.file = None

    def abort(self) -> None:
        """Drop the shard being written (its temporary file): it never appears under its name."""
        if self.tar is not None:
            self.file.close()
            os.remove(self.paths.pop() + ".partial")
            self.tar = self.file = None


def write_webdataset(dataset: Any, pattern: str, *, fields: Sequence[str] = ("jpg", "cls"), maxcount: int = 1000,
                     maxsize: int | None = None, key: Callable[[int], str] = "{:08d}".format, quality: int = 90,
                     layout: str = "CHW", start_shard: int = 0) -> list[str]:
    """Write `dataset` as tar shards in webdataset's layout; returns the shard paths.

    Args:
        dataset: a map-style dataset (its ``load_raw(i)`` when it has one: the items before its
            transform, so ``ImageFolder(root, roi=True)`` gives JpegFiles written as they are) or
            an iterable of samples: tuples (one value per field), one image, or dicts
            ``{extension: value}`` (with an optional ``__key__``).
        pattern: the shard paths, ``%`` formatted with the shard number (``"out/train-%06d.tar"``).
        fields: the extension of each value of a tuple sample.
        maxcount: samples per shard (every shard but the last holds exactly this many).
        maxsize: bytes of members per shard at most before starting the next (None: no limit).
        key: sample number -> its key (unique; the transform seeds of WebDataset follow it).
        quality: JPEG quality for pixels that must be encoded (tensors, arrays, PIL images).
        layout: the layout of image tensors ("CHW" or "HWC").
        start_shard: the first shard number.

    Example:
        >>> write_webdataset(ImageFolder("train/", roi=True), "shards/train-%06d.tar", maxcount=5000)
    """
    who = "write_webdataset"
    if not isinstance(pattern, str) or "%" not in pattern:
        raise ValueError(f"{who}: expected pattern to hold a %-format for the shard number, got {pattern!r}")
    check_int(who, "maxcount", maxcount, 1)
    if maxsize is not None:
        check_int(who, "maxsize", maxsize, 1)
    shards = _Shards(pattern, start_shard)
    try:
        for i, sample in enumerate(_samples(dataset)):
            if shards.tar is None or shards.count >= maxcount or (maxsize is not None and shards.size >= maxsize):
                shards.open_next()
            try:
                members = _members(sample, fields)
                name = str(members.pop("__key__", key(i)))
                encoded = {ext: encode_member(ext, v, quality, layout) for ext, v in members.items()}
            except ValueError as exc:
                raise ValueError(f"{who}: sample {i}: {exc}") from exc
            for ext in sorted(encoded):
                shards.add(f"{name}.{ext}", encoded[ext])
            shards.count += 1
    except BaseException:
        shards.abort()  # the shards before it are complete; this one is not
        raise
    shards.close()
    return shards.paths
