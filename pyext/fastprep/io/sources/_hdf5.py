"""fastprep.io.HDF5Dataset: images in an HDF5 file as a map-style dataset (``pip install h5py``).

Two layouts of the images dataset:

- uint8 pixels, ``[N, H, W, C]`` or ``[N, C, H, W]`` (C = 1 or 3) or grey ``[N, H, W]``: items
  are :class:`HDF5Image` s, WindowedImages whose ``decode(crop)`` reads only the window's
  hyperslab. A chunked dataset then reads only the chunks the window covers (a contiguous one,
  only the window's rows), so a 256^2 crop of a 1024^2 image reads about a sixteenth of it.
- variable-length uint8 (``h5py.vlen_dtype(np.uint8)``), ``[N]``: each element an encoded image
  (JPEG, PNG, ...); JPEGs come out as JpegFiles (decoded by window) with ``roi=True``.

An optional labels dataset (integers, ``[N]``) is read whole once per process.

Threads and processes: h5py serialises every call under its one global lock, so threads read
one at a time (a JPEG's decode runs outside it, in parallel). The file is opened read-only and
lazily in each process that reads: DataLoader workers open their own after the fork.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from fastprep.core._args import check_bool
from fastprep.io._source import ImageSource, PerProcess, image_from_bytes, optional_module
from fastprep.io._windowed import WindowedImage
from fastprep.io.jpeg import check_crop, check_image_args, check_out


class HDF5Image(WindowedImage):
    """Image `index` of a uint8 HDF5 dataset, read by window: ``decode(crop)`` reads the window's
    hyperslab only (``Dataset.read_direct``), the bits of reading all and cropping."""

    __slots__ = ("dataset", "index", "stored", "height", "width", "mode", "layout", "name")

    def __init__(self, dataset: Any, index: int, stored: str, *, mode: str = "RGB", layout: str = "CHW",
                 name: str | None = None):
        self.dataset, self.index, self.stored, self.mode, self.layout = dataset, index, stored, mode, layout
        shape = dataset.shape
        self.height, self.width = (shape[1], shape[2]) if stored in ("HWC", "HW") else (shape[2], shape[3])
        self.name = name

    def __repr__(self) -> str:
        return (f"HDF5Image({self.name or '<dataset>'}, {self.height}x{self.width}, mode={self.mode!r}, "
                f"stored {self.stored})")

    def decode(self, crop: tuple[int, int, int, int] | None = None, *, layout: str | None = None,
               out: torch.Tensor | None = None) -> torch.Tensor:
        """The image, or its window `crop` = (top, left, height, width), as a uint8 tensor."""
        who = "HDF5Image"
        layout = layout or self.layout
        check_image_args(who, self.mode, layout)
        top, left, h, w = check_crop(who, crop, self.height, self.width, f"{self.name}: " if self.name else "")
        if out is not None:
            check_out(who, out, (self.channels, h, w) if layout == "CHW" else (h, w, self.channels), layout)
        rows, cols = slice(top, top + h), slice(left, left + w)
        if self.stored == "CHW":
            buf = np.empty((self.dataset.shape[1], h, w), np.uint8)
            self.dataset.read_direct(buf, np.s_[self.index, :, rows, cols])
            hwc = torch.from_numpy(buf).permute(1, 2, 0)
        else:
            buf = np.empty((h, w, *self.dataset.shape[3:]), np.uint8)
            self.dataset.read_direct(buf, np.s_[self.index, rows, cols])
            hwc = torch.from_numpy(buf).view(h, w, -1)
        if hwc.shape[2] != self.channels:  # grey pixels read as RGB
            hwc = hwc.expand(h, w, 3)
        image = hwc if layout == "HWC" else hwc.permute(2, 0, 1)
        if out is None:
            return image if image.is_contiguous() else image.contiguous()
        return out.copy_(image)


def storage_layout(who: str, dset: Any, stored: str | None) -> str:
    """"HWC", "CHW" or "HW" (grey) for a uint8 [N, H, W, C], [N, C, H, W] or [N, H, W] dataset."""
    shape = dset.shape
    if dset.ndim == 3:
        return "HW"
    if stored is None:
        stored = "HWC" if shape[3] in (1, 3) else "CHW"
    if stored not in ("HWC", "CHW"):
        raise ValueError(f"{who}: expected stored to be 'HWC' or 'CHW', got {stored!r}")
    c = shape[3] if stored == "HWC" else shape[1]
    if c not in (1, 3):
        raise ValueError(f"{who}: {dset.file.filename}:{dset.name} of shape {shape} read as N{stored} has {c} "
                         f"channels; expected 1 or 3")
    return stored


def check_images(who: str, h5py: Any, file: Any, name: str) -> Any:
    if name not in file or not isinstance(file[name], h5py.Dataset):
        raise KeyError(f"{who}: {file.filename} has no dataset {name!r} (it has {sorted(file.keys())})")
    dset = file[name]
    vlen = h5py.check_vlen_dtype(dset.dtype)
    if vlen is not None and dset.ndim == 1 and vlen == np.uint8:
        return dset
    if dset.dtype == np.uint8 and dset.ndim in (3, 4):
        return dset
    hint = ("; variable-length strings end at the first NUL byte: store encoded images as "
            "h5py.vlen_dtype(np.uint8)") if h5py.check_string_dtype(dset.dtype) is not None else ""
    raise ValueError(f"{who}: {file.filename}:{dset.name} is {dset.dtype} of shape {dset.shape}; expected uint8 "
                     f"pixels [N, H, W, C], [N, C, H, W] or [N, H, W], or variable-length uint8 (encoded images) "
                     f"[N]{hint}")


def check_labels(who: str, h5py: Any, file: Any, name: str, n: int) -> np.ndarray:
    if name not in file or not isinstance(file[name], h5py.Dataset):
        raise KeyError(f"{who}: {file.filename} has no dataset {name!r} (it has {sorted(file.keys())})")
    dset = file[name]
    if dset.dtype.kind not in "iu" or dset.shape != (n,):
        raise ValueError(f"{who}: {file.filename}:{dset.name} is {dset.dtype} of shape {dset.shape}; expected "
                         f"integer labels of shape ({n},)")
    return dset[()]


def open_file(path: str, kwargs: dict[str, Any]) -> Any:
    h5py = optional_module("h5py", "h5py", "HDF5Dataset")
    try:
        return h5py.File(path, "r", **kwargs)
    except OSError as exc:
        raise ValueError(f"HDF5Dataset: cannot open {path!r} as an HDF5 file: {exc}") from exc


def open_state(opener: Callable[[], Any], images: str, labels: str | None) -> tuple[Any, Any, np.ndarray | None]:
    """(file, images dataset, labels array) of one process, checked."""
    h5py = optional_module("h5py", "h5py", "HDF5Dataset")
    file = opener()
    dset = check_images("HDF5Dataset", h5py, file, images)
    return file, dset, None if labels is None else check_labels("HDF5Dataset", h5py, file, labels, len(dset))


def close_state(state: tuple[Any, Any, Any]) -> None:
    state[0].close()


class HDF5Dataset(ImageSource):
    """Images (and labels) in an HDF5 file (see the module's docstring for the two layouts).

    ``load_raw(i)`` returns ``(image, label)`` (the image alone without `labels`): an
    :class:`HDF5Image` read by window (uint8 pixels) or a JpegFile (encoded JPEGs) with
    ``roi=True``, else decoded pixels. ``dataset[i]`` applies the transforms. Across ranks:
    ``DistributedSampler(dataset)`` (or the Loader's `sampler`) splits the indices.

    Args:
        path: the file, or ``callable() -> h5py.File`` (called once per process, and once when
            the dataset is made: a remote file through fsspec, a driver of your choice; a Python
            file object under the File is the callable's to close, h5py does not).
        images: the images dataset's name.
        labels: the labels dataset's name, or None.
        transform, target_transform: as in :class:`fastprep.io.ImageFolder`.
        roi: items read or decoded by window (default); False reads them whole.
        mode: "RGB" (grey pixels repeated), "GRAY" (grey pixels; any mode for encoded images).
        layout: what items decode to: "CHW" (default) or "HWC".
        stored: "HWC" or "CHW" for 4-D pixels (default: HWC when the last dimension is 1 or 3).
        strict: as in ImageFolder, for encoded images: corrupt JPEG data raises (default True, a bad
            sample); False decodes it as libjpeg recovers it, with a CorruptJpegWarning.
        exif: encoded images turned upright by their EXIF orientation, as in ImageFolder (pixel
            arrays are read as stored).
        on_error: an image that cannot be read or decoded: "raise" (default), "skip" or "warn", as
            in ImageFolder (recorded in ``bad_samples`` under ``file:images[i]``).
        file_kwargs: passed on to ``h5py.File`` (``rdcc_nbytes``: the chunk cache, ...).

    Example:
        >>> ds = HDF5Dataset("train.h5", "images", "labels")
        >>> loader = fastprep.Loader(ds, 256, transform=train_tf, shuffle=True)
    """

    source_kind = "windowed"  # what it is, in fastprep.monitor's words: arrays read by window

    def __init__(self, path: str | os.PathLike | Callable[[], Any], images: str = "images", labels: str | None = None,
                 transform: Callable | None = None, target_transform: Callable | None = None, *, roi: bool = True,
                 mode: str = "RGB", layout: str = "CHW", stored: str | None = None, strict: bool = True,
                 exif: bool = False, on_error: str = "raise", file_kwargs: dict[str, Any] | None = None):
        who = "HDF5Dataset"
        check_image_args(who, mode, layout)
        self.exif = check_bool(who, "exif", exif)
        self.set_on_error(who, on_error)
        opener = path if callable(path) else functools.partial(open_file, os.fspath(path), dict(file_kwargs or {}))
        self.transform, self.target_transform = transform, target_transform
        self.roi, self.mode, self.layout = roi, mode, layout
        self.strict = check_bool(who, "strict", strict)
        self._state = PerProcess(functools.partial(open_state, opener, images, labels), close_state)
        file, dset, _ = open_state(opener, images, labels)  # checked now, closed before any fork
        try:
            self.filename, self.images, self.length = file.filename, dset.name, len(dset)
            self.encoded = dset.dtype != np.uint8
            self.stored = None if self.encoded else storage_layout(who, dset, stored)
            shape = dset.shape
        finally:
            file.close()
        if not self.encoded:
            channels = 1 if self.stored == "HW" else shape[3] if self.stored == "HWC" else shape[1]
            if mode == "YCbCr" or (mode == "GRAY" and channels != 1):
                raise ValueError(f"{who}: mode {mode!r} for pixels with {channels} channels: pixel arrays are read "
                                 f"as they are ('RGB', or 'GRAY' for grey ones); convert with fastprep.rgb_to_ycbcr")

    def __len__(self) -> int:
        return self.length

    def sample_name(self, i: int) -> str:
        return f"{self.filename}:{self.images}[{i}]"

    def read_item(self, i: int) -> Any:
        """Item i before the transforms: ``(image, label)`` or the image (``load_raw(i)`` is this
        under the `on_error` policy)."""
        if not -self.length <= i < self.length:
            raise IndexError(f"HDF5Dataset: index {i} is out of range for {self.length} images in {self.filename}")
        i %= self.length
        _, dset, labels = self._state.get()
        name = self.sample_name(i)
        if self.encoded:
            data = dset[i]
            if len(data) == 0:
                raise ValueError(f"HDF5Dataset: {name}: the image is empty (0 bytes)")
            image = image_from_bytes("HDF5Dataset", data, name, roi=self.roi, mode=self.mode, layout=self.layout,
                                     strict=self.strict, exif=self.exif)
        else:
            image = HDF5Image(dset, i, self.stored, mode=self.mode, layout=self.layout, name=name)
            image = image if self.roi else image.decode()
        return image if labels is None else (image, int(labels[i]))

    def close(self) -> None:
        """Close this process's file (the next read opens it again). Close a file opened on a Python
        file object before the interpreter exits: h5py 3.x can crash at exit with one still open."""
        self._state.close()

    def __repr__(self) -> str:
        kind = "encoded images" if self.encoded else f"uint8 N{self.stored}"
        return f"HDF5Dataset({self.filename!r}:{self.images}, {self.length} {kind}, roi={self.roi})"
