"""What fastprep.io's dataset sources share: encoded bytes to an image (a window-readable JpegFile
or decoded pixels), the transform step of a map-style source, per-process handles that never
cross a fork, optional libraries imported on first use, and the rank a process reads as.
"""

from __future__ import annotations

import importlib
import io
import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from fastprep.core._bad_samples import NEVER_SKIPPED, BadSamples, check_on_error, substitutes
from fastprep.core._failure_text import with_skip_hint
from fastprep.core._rng import owns_generator
from fastprep.core._tree import tree_map
from fastprep.errors import SubstitutesExhausted
from fastprep.io._windowed import WindowedImage
from fastprep.io.jpeg import decode_jpeg, ycbcr_in_layout
from fastprep.io.jpeg._file import JpegFile

JPEG_MAGIC = b"\xff\xd8\xff"


_pil_lock = threading.Lock()


def pil_image(who: str, need: str) -> Any:
    """PIL.Image with every format plugin loaded, imported once under a lock: the first PNG met by
    several loader threads at once had them import Pillow together, and a thread could see the
    partly initialised module ("module 'PIL.Image' has no attribute 'Image'"); Image.open also
    imports its plugins on first use, as racy. Without Pillow, a RuntimeError: "`who`: `need`
    needs Pillow" (`need`: what Pillow is for here, e.g. "x.png is not a JPEG; decoding it")."""
    with _pil_lock:
        try:
            from PIL import Image  # noqa: PLC0415 (only images that are not JPEGs need Pillow)
        except ImportError as exc:
            raise RuntimeError(f"{who}: {need} needs Pillow (pip install pillow)") from exc
        Image.init()
    return Image


def decode_other(who: str, data: Any, name: str, mode: str, layout: str, exif: bool = False) -> torch.Tensor:
    """A non-JPEG image (PNG, BMP, ...) through Pillow, in the same mode and layout; with `exif`,
    turned upright by its EXIF orientation (``ImageOps.exif_transpose``: PNG, WebP and TIFF carry one too)."""
    Image = pil_image(who, f"{name} is not a JPEG; decoding it")  # noqa: N806 (the module, under its usual name)
    try:
        with Image.open(io.BytesIO(data)) as img:
            if exif:
                from PIL import ImageOps  # noqa: PLC0415 (Pillow is imported by pil_image above)

                img = ImageOps.exif_transpose(img)
            arr = torch.from_numpy(np.array(img.convert("L" if mode == "GRAY" else "RGB")))
    except OSError as exc:  # PIL.UnidentifiedImageError, truncated files
        raise ValueError(f"{who}: {name}: not a JPEG, and Pillow cannot decode it: {exc}") from exc
    hwc = arr.unsqueeze(-1) if arr.dim() == 2 else arr
    if mode == "YCbCr":  # fastprep's conversion, as decode_jpeg does for RGB-coded JPEGs
        hwc = ycbcr_in_layout(hwc, "HWC")
    return hwc.permute(2, 0, 1).contiguous() if layout == "CHW" else hwc.contiguous()


def image_from_bytes(who: str, data: Any, name: str, *, roi: bool, mode: str, layout: str,
                     strict: bool, exif: bool = False) -> JpegFile | torch.Tensor:
    """An encoded image's bytes (bytes or a 1-D uint8 array) as a :class:`JpegFile` (with `roi`:
    decoded later, by window) or decoded pixels. The content decides: JPEGs go to libjpeg-turbo,
    anything else to Pillow, decoded now. `name` (a path, ``shard.tar:key.jpg``, ``db[key]``)
    leads every error. `exif`: turned upright by the EXIF orientation (decode_jpeg's `exif`)."""
    if bytes(data[:3]) != JPEG_MAGIC:
        return decode_other(who, data, name, mode, layout, exif)
    if roi:
        return JpegFile(data, name=name, mode=mode, layout=layout, strict=strict, exif=exif)
    return decode_jpeg(data, mode=mode, layout=layout, strict=strict, name=name, exif=exif)


def _decoded(x: Any) -> Any:
    return x.decode() if isinstance(x, WindowedImage) else x


def wants_pil(transform: Any) -> bool:
    """Whether `transform` is (or composes) torchvision's v1 transforms, which take PIL images
    (``ToTensor()`` takes nothing else that an image folder gives): torchvision's ImageFolder hands
    them PIL images, so fastprep's sources do too. v2 transforms, fastprep's and other callables
    get tensors."""
    module = type(transform).__module__
    if not module.startswith("torchvision.transforms") or module.startswith("torchvision.transforms.v2"):
        return False
    steps = getattr(transform, "transforms", None) if type(transform).__name__ == "Compose" else None
    return True if steps is None else any(wants_pil(s) for s in steps)


def as_pil(image: Any, layout: str) -> Any:
    """An image as a source gives it (a WindowedImage, or decoded uint8 pixels in `layout`) as the
    PIL image torchvision's ImageFolder would have read: mode RGB, or L for one channel."""
    if isinstance(image, WindowedImage):
        hwc = image.decode(layout="HWC")
    elif isinstance(image, torch.Tensor) and image.dim() == 3 and image.dtype == torch.uint8:
        hwc = image if layout == "HWC" else image.permute(1, 2, 0)
    else:
        return image
    arr = hwc.contiguous().numpy()
    image = pil_image("a torchvision v1 transform", "handing it a PIL image")
    return image.fromarray(arr[..., 0] if arr.shape[-1] == 1 else arr)


class ImageSource(torch.utils.data.Dataset):
    """A map-style dataset of images read by ``load_raw(i)`` (fastprep.Loader's threads call it)
    and transformed by ``apply_transform`` (``dataset[i]`` runs both, as a DataLoader wants).

    An item is ``(image, target, ...)`` or one image or a dict. `transform` gets the image (the
    item, or its first element); `target_transform` the target (the second element). fastprep's
    transforms read a WindowedImage by window (a crop decodes or reads only what it keeps);
    torchvision's v1 transforms get a PIL image, as torchvision's ImageFolder gives them; any other
    transform gets the image decoded whole, a uint8 tensor.

    Bad samples (fastprep.core._bad_samples): a subclass reads item i in ``read_item(i)`` and names it
    in ``sample_name(i)``; ``load_raw`` and ``dataset[i]`` apply `on_error`. Under "skip" / "warn"
    a sample whose reading (``load_raw``: reading only, the Loader's path) or reading and
    transform (``dataset[i]``: a DataLoader's path) raises is replaced by the first of the
    following samples (mod the length) that works, transformed from the random state the bad one
    started with, and recorded in ``bad_samples`` (a BadSamples: counted and named). Under "raise"
    (default) the error propagates unchanged (and is recorded). A source read by DataLoader
    workers records in each worker's copy: the main process's ``bad_samples`` sees only its own.
    """

    transform: Callable | None = None
    target_transform: Callable | None = None
    on_error: str = "raise"

    def set_on_error(self, who: str, on_error: str) -> None:
        """Checks and sets the bad-sample policy (subclasses call it from __init__)."""
        self.on_error = check_on_error(who, on_error)
        self.bad_samples = BadSamples(who, on_error)

    def read_item(self, i: int) -> Any:
        """Item i as stored, before the transform; errors raised (subclasses implement it)."""
        raise NotImplementedError

    def sample_name(self, i: int) -> str | None:
        """What to call item i in the bad-sample record (a path, a key, a record); None: 'item i'."""
        return None

    def load_raw(self, i: int) -> Any:
        """Item i before the transform (a bad one replaced under on_error "skip" / "warn")."""
        if self.on_error == "raise" and not hasattr(self, "bad_samples"):
            return self.read_item(i)
        return self._checked(i, self.read_item, False)

    def apply_transform(self, raw: Any) -> Any:
        return apply_transform(raw, self.transform, self.target_transform, getattr(self, "layout", "CHW"))

    def __getitem__(self, i: int) -> Any:
        if self.on_error == "raise" and not hasattr(self, "bad_samples"):
            return self.apply_transform(self.load_raw(i))
        return self._checked(i, lambda j: self.apply_transform(self.read_item(j)), True)

    def _checked(self, i: int, attempt: Callable[[int], Any], transforms: bool) -> Any:
        """attempt(i), or under skip / warn attempt(j) of the first substitute j that works. With
        `transforms` (dataset[i]: one thread, a DataLoader's) each substitute starts from torch's
        generator as the bad sample found it, where this thread may rewind it (rng.owns_generator:
        not in a Loader thread, whose generator the training loop shares); load_raw draws nothing and
        leaves it alone. A MemoryError is never skipped (bad_samples.NEVER_SKIPPED)."""
        n = len(self)
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)) or not -n <= i < n:
            return attempt(i)  # the source's own IndexError: an index outside it is no bad sample
        i = int(i) % n
        skip = self.on_error != "raise"
        state = torch.default_generator.get_state() if skip and transforms and owns_generator() else None
        try:
            return attempt(i)
        except Exception as exc:
            if isinstance(exc, NEVER_SKIPPED):
                raise
            if not skip:
                self.bad_samples.record(i, self.sample_name(i), exc)
                hinted = with_skip_hint(self.bad_samples.who, self.sample_name(i), exc)
                if hinted is exc:
                    raise
                raise hinted from exc.__cause__  # the same error, its message naming the file and on_error
            failed = [(i, exc)]
        for j in substitutes(i, n):
            j %= n
            if state is not None:
                torch.default_generator.set_state(state)  # the substitute draws what the bad sample would have
            try:
                sample = attempt(j)
            except Exception as exc:
                if isinstance(exc, NEVER_SKIPPED):
                    raise
                failed.append((j, exc))
                continue
            self._record(failed, j)
            return sample
        self._record(failed, None)
        raise SubstitutesExhausted(i, [k for k, _ in failed[1:]], failed[0][1], f"index of the {type(self).__name__}")

    def _record(self, failed: list[tuple[int, BaseException]], substitute: int | None) -> None:
        """Records the samples that failed (each replaced by `substitute`), in the order met."""
        for k, exc in failed:
            self.bad_samples.record(k, self.sample_name(k), exc, substitute=substitute)

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        bad = state.pop("bad_samples", None)  # its lock does not pickle: its record does
        if bad is not None:
            state["_bad_samples_state"] = (bad.who, bad.on_error, bad.state_dict())
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        bad = state.pop("_bad_samples_state", None)
        self.__dict__.update(state)
        if bad is not None:
            self.bad_samples = BadSamples(bad[0], bad[1])
            self.bad_samples.load_state_dict(bad[2])


def apply_transform(raw: Any, transform: Callable | None, target_transform: Callable | None,
                    layout: str = "CHW") -> Any:
    """`transform` on the item's image and `target_transform` on its target (see ImageSource);
    `layout`: how the source lays out decoded pixels."""
    windowed = transform is not None and getattr(transform, "reads_jpeg_files", False)
    if isinstance(raw, (tuple, list)) and raw:
        image = raw[0] if windowed else as_pil(raw[0], layout) if wants_pil(transform) else _decoded(raw[0])
        rest = list(raw[1:])
        if transform is not None:
            image = transform(image)
        if target_transform is not None and rest:
            rest[0] = target_transform(rest[0])
        return type(raw)([image, *rest]) if isinstance(raw, list) else (image, *rest)
    sample = raw if windowed else tree_map(_decoded, raw)
    return sample if transform is None else transform(sample)


def optional_module(module: str, package: str, who: str) -> Any:
    """`module`, imported on first use; a clear error naming the pip install when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise RuntimeError(f"{who} needs {package}: pip install {package} (or pip install 'fastprep[sources]')") \
            from exc


class PerProcess:
    """A handle (an LMDB environment, an HDF5 file) opened by `opener` on first use in each
    process. Neither library's handles may cross a fork (a DataLoader worker) or be pickled: a
    process that did not open the handle opens its own, and a handle inherited through a fork
    is kept referenced but never used or closed there (closing it could release the parent's
    resources)."""

    def __init__(self, opener: Callable[[], Any], closer: Callable[[Any], None]):
        self.opener, self.closer = opener, closer
        self._pid: int | None = None
        self._handle: Any = None
        self._inherited: list[Any] = []
        self._lock = threading.Lock()

    def get(self) -> Any:
        pid = os.getpid()
        if self._pid != pid:
            with self._lock:
                if self._pid != pid:
                    if self._handle is not None:
                        self._inherited.append(self._handle)
                    self._handle, self._pid = self.opener(), pid
        return self._handle

    def close(self) -> None:
        """Close the handle this process opened (a later get() opens a new one)."""
        with self._lock:
            if self._pid == os.getpid():
                self.closer(self._handle)
                self._handle, self._pid = None, None

    def __getstate__(self) -> dict[str, Any]:
        return {"opener": self.opener, "closer": self.closer}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["opener"], state["closer"])


def distributed_rank(who: str, rank: int | None, world_size: int | None) -> tuple[int, int]:
    """(rank, world_size): the arguments when given, else torch.distributed's when it is
    initialised, else torchrun's RANK / WORLD_SIZE environment variables, else (0, 1). Read when
    the source is made, in the training process: a DataLoader worker started by spawn has no
    process group of its own."""
    if rank is None and world_size is None:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
        if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
            rank, world_size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        else:
            return 0, 1
    if rank is None or world_size is None:
        raise ValueError(f"{who}: give rank and world_size together, got rank={rank!r}, world_size={world_size!r}")
    for name, value in (("rank", rank), ("world_size", world_size)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{who}: expected {name} to be an int, got {value!r}")
    if not 0 <= rank < world_size:
        raise ValueError(f"{who}: expected 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    return int(rank), int(world_size)
