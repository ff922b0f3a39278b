"""Images as users have them: PIL images, numpy HWC arrays, tensors (CHW, or HWC with
layout="HWC"), torchvision's tv_tensors; the argument checks the transforms share; error context.

PIL and torchvision are never imported here: a PIL image is recognised through ``sys.modules``
(an object can only be a PIL image once PIL is imported), as _roles.py does for tv_tensors.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch

from fastprep.core._args import check_real
from fastprep.io._windowed import WindowedImage

_WARNINGS_LOCK = threading.Lock()


def is_pil(x: Any) -> bool:
    # getattr: another thread may be importing PIL.Image right now (the first PNG a loader thread
    # decodes): the module is in sys.modules before its Image class is defined, and then nothing
    # can be an instance of it yet.
    cls = getattr(sys.modules.get("PIL.Image"), "Image", None)
    return cls is not None and isinstance(x, cls)


def as_image(img: Any, layout: str = "CHW") -> tuple[torch.Tensor, str]:
    """(tensor, layout) without copying: PIL images and numpy arrays are HWC (a 2-D one gets a
    channel dim); tensors keep the given layout (a 2-D tensor is one channel). A PIL image is read
    whole here (``np.asarray``); the cropping transforms read only their window instead."""
    if isinstance(img, torch.Tensor):
        if img.dim() == 2:
            return img.unsqueeze(0 if layout == "CHW" else -1), layout
        return img, layout
    if not isinstance(img, np.ndarray):
        if not hasattr(img, "__array_interface__"):
            raise TypeError(f"expected a PIL image, a numpy array or a tensor, got {type(img).__name__}")
        check_pil_mode(img)
        img = np.asarray(img)  # PIL: a read-only copy of the decoded pixels
    return hwc_tensor(img), "HWC"


def hwc_tensor(arr: np.ndarray) -> torch.Tensor:
    """A numpy HWC (or 2-D) image as a tensor view, without a copy."""
    if arr.ndim == 2:
        arr = arr[:, :, None]
    if arr.ndim != 3:
        raise ValueError(f"expected an HWC image array, got {arr.ndim}-D with shape {arr.shape}")
    if arr.flags.writeable:  # torch warns only about read-only arrays; the filter swap costs 2 us
        return torch.from_numpy(arr)
    # The ops only read their input, so a read-only array (PIL's) is safe to wrap. catch_warnings
    # swaps process-wide state: the lock keeps Loader threads from restoring each other's filters.
    with _WARNINGS_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(arr)


# PIL modes whose numpy pixels are not intensities the ops take (uint8 or float32 per channel).
_PIL_MODE_ADVICE = {
    "P": "holds palette indices, not colours; convert it first: img.convert('RGB')",
    "PA": "holds palette indices, not colours; convert it first: img.convert('RGBA')",
    "1": "holds 1-bit pixels (numpy gives bool); convert it first: img.convert('L')",
    "I": "holds int32 pixels; fastprep takes uint8 or float32 images: img.convert('F')",
}
# 3-channel uint8 modes that are not RGB: crops are fine, a colour conversion would be garbage.
_NOT_RGB_MODES = ("YCbCr", "LAB", "HSV")


def check_pil_mode(img: Any) -> None:
    mode = getattr(img, "mode", None)
    if not isinstance(mode, str):
        return
    advice = _PIL_MODE_ADVICE.get(mode)
    if advice is None and mode.startswith("I;16"):
        advice = "holds 16-bit pixels; fastprep takes uint8 or float32 images: img.convert('F')"
    if advice is not None:
        raise ValueError(f"PIL image mode {mode!r} {advice}")


def require_rgb(img: Any, who: str) -> None:
    """A PIL image in a non-RGB colour space has 3 uint8 channels too: name it instead of
    converting its pixels as if they were RGB; so does a WindowedImage (a JpegFile, ...) of YCbCr or grey."""
    if isinstance(img, WindowedImage):
        if img.mode != "RGB":
            raise ValueError(f"{who} expects RGB pixels, got {describe(img)}; read it with mode='RGB' "
                             f"(JpegFile(..., mode='RGB'), ImageFolder(..., mode='RGB'))")
        return
    mode = getattr(img, "mode", None)
    if mode in _NOT_RGB_MODES:
        raise ValueError(f"{who} expects RGB pixels, got a PIL image in mode {mode!r}; "
                         f"convert it first: img.convert('RGB')")


def hw(t: torch.Tensor, layout: str) -> tuple[int, int]:
    return (t.shape[-3], t.shape[-2]) if layout == "HWC" else (t.shape[-2], t.shape[-1])


def chw(t: torch.Tensor, layout: str) -> torch.Tensor:
    return t.movedim(-1, -3) if layout == "HWC" else t


def check_layout(owner: str, layout: Any) -> str:
    if layout not in ("CHW", "HWC"):
        raise ValueError(f"{owner}: expected layout to be 'CHW' or 'HWC', got {layout!r}")
    return layout


def is_int(v: Any) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def check_size(owner: str, size: Any) -> tuple[int, int]:
    """torchvision's size argument: an int, or a sequence of 1 or 2 ints (h, w), each >= 1."""
    pair = [size] if is_int(size) else size
    if isinstance(pair, (tuple, list)) and len(pair) in (1, 2) and all(is_int(v) and v >= 1 for v in pair):
        return (int(pair[0]), int(pair[-1]))
    raise ValueError(f"{owner}: expected size to be an int >= 1 or a pair of them (h, w), got {size!r}")


def check_padding(owner: str, padding: Any) -> tuple[int, int, int, int]:
    """torchvision's padding argument as (left, top, right, bottom): None, an int (all sides), a
    pair (left/right, top/bottom) or 4 ints (left, top, right, bottom), each >= 0."""
    if padding is None:
        return (0, 0, 0, 0)
    values = [padding] if is_int(padding) else padding
    if isinstance(values, (tuple, list)) and len(values) in (1, 2, 4) and all(is_int(v) and v >= 0 for v in values):
        v = [int(x) for x in values]
        return (v[0],) * 4 if len(v) == 1 else (v[0], v[1], v[0], v[1]) if len(v) == 2 else tuple(v)
    raise ValueError(f"{owner}: expected padding to be an int >= 0 or a sequence of 1, 2 or 4 of them "
                     f"(left, top, right, bottom), got {padding!r}")


PADDING_MODES = ("constant", "edge", "reflect", "symmetric")

# torchvision's InterpolationMode values by PIL's integer constants (_interpolation_modes_from_int).
_PIL_INTERPOLATION = {0: "nearest", 2: "bilinear", 3: "bicubic", 4: "box", 5: "hamming", 1: "lanczos"}


def check_interpolation(owner: str, value: Any, modes: tuple[str, ...]) -> str:
    """torchvision's interpolation argument (an InterpolationMode, its string value, or PIL's int
    constant) as its string, one of `modes` (the ones torch's interpolate runs on tensors)."""
    mode = getattr(value, "value", value) if not isinstance(value, (str, int)) else value
    if isinstance(mode, int) and not isinstance(mode, bool):
        mode = _PIL_INTERPOLATION.get(mode, mode)
    if mode in modes:
        return mode
    if mode in ("box", "hamming", "lanczos"):
        raise ValueError(f"{owner}: interpolation {mode!r} is not supported: fastprep resizes with {list(modes)} "
                         f"(torch's interpolate; PIL images are read as tensors); use torchvision's transform for it")
    raise ValueError(f"{owner}: expected interpolation to be one of {list(modes)} (an InterpolationMode, its "
                     f"string, or PIL's integer constant), got {value!r}")


def check_fill(owner: str, fill: Any) -> Any:
    """torchvision's fill: a number, a sequence of numbers (one per channel), or a dict
    {tv_tensors type or "others": number or sequence}."""
    def one(v: Any, where: str) -> Any:
        if isinstance(v, (tuple, list)) and v and all(not isinstance(x, (bool, np.bool_)) for x in v):
            return tuple(check_real(owner, where, x) for x in v)
        return check_real(owner, where, v)

    if isinstance(fill, dict):
        for key in fill:
            if key != "others" and not isinstance(key, type):
                raise ValueError(f"{owner}: expected the keys of fill to be types (tv_tensors.Image, "
                                 f"tv_tensors.Mask, ...) or 'others', got {key!r}")
        return {key: one(v, f"fill[{getattr(key, '__name__', key)}]") for key, v in fill.items()}
    return one(fill, "fill")


def describe(x: Any, layout: str = "CHW", hint: bool = True) -> str:
    """What a sample's image is, for error messages: type, dtype, shape and the layout read (with
    `hint`, the other layout when it fits the channel counts and this one does not)."""
    if is_pil(x):
        return f"a PIL image, mode {x.mode!r}, {x.size[0]}x{x.size[1]} (read as HWC)"
    if isinstance(x, np.ndarray):
        return f"a {x.dtype} numpy array of shape {tuple(x.shape)} (read as HWC)"
    if isinstance(x, WindowedImage):
        return f"{x.describe()} (decoded as HWC)"
    if isinstance(x, torch.Tensor):
        name = type(x).__name__
        how = "CHW" if name in ("Image", "Video", "Mask") else layout
        advice = channel_hint(x, how, (1, 3, 4)) if hint else ""  # an HWC image read as CHW: a crop misfits
        return f"a {x.dtype} {name} of shape {list(x.shape)} (read as {how}{advice})"
    return f"a {type(x).__name__}"


def channel_hint(x: Any, layout: str, want: tuple[int, ...]) -> str:
    """'; is it CHW? pass layout='CHW'' when the other layout would give an expected channel count
    and `layout` does not."""
    if type(x) is torch.Tensor and x.dim() >= 3:
        other = "CHW" if layout == "HWC" else "HWC"
        here, there = (x.shape[-1], x.shape[-3]) if other == "CHW" else (x.shape[-3], x.shape[-1])
        if there in want and here not in want:
            return f"; is it {other}? pass layout={other!r}"
    return ""


CONTEXT_ERRORS = (RuntimeError, ValueError, TypeError)  # what error_context rewrites


@contextlib.contextmanager
def error_context(owner: Any, what: Callable[..., str]) -> Iterator[None]:
    """Errors raised inside (an op's, a check's) start with `owner`'s repr, the transform the user
    called, and end with `what()`: the sample's image, its shape and the layout it was read in."""
    try:
        yield
    except CONTEXT_ERRORS as exc:
        new = in_context(owner, what, exc)
        if new is exc:
            raise
        raise new from exc


def in_context(owner: Any, what: Callable[..., str], exc: Exception) -> Exception:
    """error_context's error for `exc` (`exc` itself when it names `owner` already); for hot code
    that catches CONTEXT_ERRORS itself rather than entering a context manager per call."""
    prefix = repr(owner)
    msg = str(exc)
    if msg.startswith(prefix):
        return exc
    # what(hint=): the image's description, with the layout hint unless the error gave it already
    text = f"{prefix}: {msg} (the image: {what(hint='pass layout=' not in msg)})"
    try:
        return type(exc)(text)
    except Exception:  # noqa: BLE001 (an exception type with its own constructor)
        return RuntimeError(text)
