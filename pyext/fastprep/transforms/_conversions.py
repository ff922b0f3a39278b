"""torchvision v2's type conversions, so a ported pipeline runs with its steps as written:
ToImage and PILToTensor (PIL images and numpy arrays to CHW tensors; no-ops on CHW tensors and on
the WindowedImages fastprep's sources give, and absorbed by a fused run: transforms/_plan.py), and
ToPILImage (a real conversion to a PIL image, which ends fusion).

As torchvision's, they take a sample (an image, or a tuple, list or dict holding one) and convert
the leaves of their types, whatever the PIL mode (a palette image gives its indices, as
torchvision's); they return plain tensors where torchvision returns ``tv_tensors.Image``
(fastprep never imports torchvision; its transforms read either alike).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fastprep.core._tree import leaves, tree_map
from fastprep.io._windowed import WindowedImage
from fastprep.transforms._base import Transform
from fastprep.transforms._inputs import is_pil
from fastprep.transforms._sample import tv_kind


def pil_to_tensor(pic: Any) -> torch.Tensor:
    """A PIL image as a C x H x W tensor of its own dtype, values unscaled (torchvision's
    ``pil_to_tensor``: uint8 for "L", "RGB", "RGBA"...; int32 for "I", float32 for "F", bool for "1").
    Its callers check ``is_pil`` first."""
    pixels = torch.as_tensor(np.array(pic, copy=True))
    return pixels.view(pic.size[1], pic.size[0], len(pic.getbands())).permute(2, 0, 1)


def array_to_tensor(arr: np.ndarray) -> torch.Tensor:
    """A numpy H x W x C (or H x W) array as a contiguous C x H x W tensor (torchvision's to_image)."""
    if arr.ndim not in (2, 3):
        raise ValueError(f"expected an H x W x C or H x W numpy array, got shape {tuple(arr.shape)}")
    return torch.from_numpy(np.atleast_3d(arr)).permute(2, 0, 1).contiguous()


class _Conversion(Transform):
    """A conversion step: no draws, no layout; `convert` maps each leaf of the sample (what it does
    not convert, it returns as it is). Plain tensors are offered as torchvision v2 offers them: the
    first one only, and only when the sample holds no PIL image, tv_tensors Image or Video, or
    WindowedImage (``convert(x, plain_tensor=True)``)."""

    def transform(self, sample: Any) -> Any:
        if not isinstance(sample, (tuple, list, dict)):
            return self.convert(sample, type(sample) is torch.Tensor)
        explicit = any(is_pil(x) or isinstance(x, WindowedImage) or tv_kind(x) in ("image", "video")
                       for x in leaves(sample))
        offered = [explicit]

        def one(x: Any) -> Any:
            plain = type(x) is torch.Tensor and not offered[0]
            offered[0] = offered[0] or plain
            return self.convert(x, plain) if plain or type(x) is not torch.Tensor else x

        return tree_map(one, sample)

    def convert(self, x: Any, plain_tensor: bool) -> Any:
        raise NotImplementedError


class ToImage(_Conversion):
    """torchvision v2's ``ToImage()``: a PIL image or a numpy H x W x C (or H x W) array becomes a
    C x H x W tensor, values and dtype kept (no scaling: uint8 stays uint8); so does a plain H x W
    tensor (1 x H x W, as torchvision's ``tv_tensors.Image`` makes it). C x H x W tensors pass
    through, as do fastprep's WindowedImages (a JPEG file or packed record read by window: every fastprep
    transform and the Loader read them without a full decode; a step that is not fastprep's gets
    them decoded). In a Compose, a ToImage in front of or inside a fused run (RandomResizedCrop,
    flips, ToDtype, Normalize; RandomCrop, mask, YCbCr) is absorbed: the run reads PIL images,
    arrays and windows itself, and gives the same tensor.

    Example:
        >>> ToImage()(np.zeros((4, 6, 3), np.uint8)).shape
        torch.Size([3, 4, 6])
    """

    fusion_noop = True  # transforms/_plan.py: a fused run around it reads what it would read

    def convert(self, x: Any, plain_tensor: bool) -> Any:
        if is_pil(x):
            return pil_to_tensor(x)
        if isinstance(x, np.ndarray):
            return array_to_tensor(x)
        if plain_tensor and x.ndim < 3:  # tv_tensors.Image's rule: H x W is one channel, fewer dims no image
            if x.ndim < 2:
                raise ValueError(f"ToImage: expected an image tensor of 2 (H x W) or more dims (C x H x W), got "
                                 f"shape {tuple(x.shape)}")
            return x.unsqueeze(0)
        return x  # a tensor (CHW already), a WindowedImage, or any other value


class PILToTensor(_Conversion):
    """torchvision v2's ``PILToTensor()``: a PIL image becomes a C x H x W tensor, values and dtype
    kept (no scaling); anything else (tensors, numpy arrays, WindowedImages) passes through. In a
    Compose it is absorbed by a fused run as :class:`ToImage` is.

    Example:
        >>> from PIL import Image
        >>> PILToTensor()(Image.new("RGB", (320, 240))).shape
        torch.Size([3, 240, 320])
    """

    fusion_noop = True

    def convert(self, x: Any, plain_tensor: bool) -> Any:
        return pil_to_tensor(x) if is_pil(x) else x


_MODES_BY_CHANNELS = {2: ("LA",), 3: ("RGB", "YCbCr", "HSV"), 4: ("RGBA", "CMYK", "RGBX")}
_ONE_CHANNEL_MODES = {np.dtype(np.uint8): "L", np.dtype(np.int16): "I;16", np.dtype(np.int32): "I",
                      np.dtype(np.float32): "F"}


def to_pil_image(pic: Any, mode: str | None = None) -> Any:
    """A C x H x W (or H x W) tensor or an H x W x C (or H x W) numpy array as a PIL image, as
    torchvision's ``to_pil_image``: floats, tensor or array (unless mode "F"), become uint8 as
    ``(x * 255)`` truncated (torchvision 0.29's bits). 1 channel: "L" (uint8), "I;16" (int16), "I"
    (int32), "F" (float32); 2: "LA"; 3: "RGB"; 4: "RGBA" unless `mode` names another of the channels'
    modes."""
    from PIL import Image  # noqa: PLC0415 (Pillow: only where a PIL image is asked for)

    if isinstance(pic, torch.Tensor):
        pic = (pic.permute(1, 2, 0) if pic.ndim == 3 else pic).numpy(force=True)
    elif not isinstance(pic, np.ndarray):
        raise TypeError(f"ToPILImage: expected a tensor or a numpy array, got {type(pic).__name__}")
    if pic.ndim == 2:
        pic = pic[:, :, None]
    if pic.ndim != 3:
        raise ValueError(f"ToPILImage: expected a 2-D or 3-D image, got {pic.ndim} dims (shape {tuple(pic.shape)})")
    channels = pic.shape[-1]
    if channels > 4:
        raise ValueError(f"ToPILImage: expected at most 4 channels, got {channels} (shape {tuple(pic.shape)}; "
                         f"a tensor is read as C x H x W, an array as H x W x C)")
    if np.issubdtype(pic.dtype, np.floating) and mode != "F":  # tensors and arrays alike (torchvision 0.29.1)
        pic = (pic * 255).astype(np.uint8)
    if channels == 1:
        pic = pic[:, :, 0]
        expected = _ONE_CHANNEL_MODES.get(pic.dtype)
        if mode is not None and mode != expected:
            which = f"which is {expected!r}" if expected is not None else "which has no PIL mode"
            raise ValueError(f"ToPILImage: mode {mode!r} does not fit a one-channel {pic.dtype} image, {which}")
        mode = expected
    elif mode is not None and mode not in _MODES_BY_CHANNELS[channels]:
        raise ValueError(f"ToPILImage: expected mode to be one of {list(_MODES_BY_CHANNELS[channels])} for a "
                         f"{channels}-channel image, got {mode!r}")
    elif mode is None and pic.dtype == np.uint8:
        mode = _MODES_BY_CHANNELS[channels][0]
    if mode is None:
        raise TypeError(f"ToPILImage: a {channels}-channel {pic.dtype} image has no PIL mode; convert it to uint8 "
                        f"first (ToDtype(torch.uint8, scale=True); a float array: (x * 255).astype(np.uint8))")
    # The buffer read in `mode` (as torchvision does: Pillow's fromarray no longer takes a mode):
    # int16 pixels under "I;16" keep their 16 bits, uint8 triples under "YCbCr" are taken as such.
    pic = np.ascontiguousarray(pic)
    return Image.frombuffer(mode, (pic.shape[1], pic.shape[0]), pic.tobytes(), "raw", mode, 0, 1)


class ToPILImage(_Conversion):
    """torchvision v2's ``ToPILImage(mode=None)``: a C x H x W (or H x W) tensor or an H x W x C
    numpy array becomes a PIL image (see :func:`to_pil_image` for the modes and the float scaling);
    a fastprep WindowedImage is decoded whole first; PIL images, masks and boxes pass through.

    It ends fusion: steps after it read the PIL image (fastprep's crops read only their window of
    it), steps before it run as their own fused run. Use it where a PIL image is needed (a
    torchvision v1 transform, saving); fastprep's transforms take tensors as they are.

    Args:
        mode: a PIL mode for the channels (2: "LA"; 3: "RGB", "YCbCr", "HSV"; 4: "RGBA", "CMYK",
            "RGBX"; 1: the dtype's), or None: chosen from the channels and dtype.

    Example:
        >>> ToPILImage()(torch.zeros(3, 4, 6, dtype=torch.uint8)).size
        (6, 4)
    """

    def __init__(self, mode: str | None = None):
        super().__init__()
        if mode is not None and not isinstance(mode, str):
            raise ValueError(f"ToPILImage: expected mode to be a PIL mode string or None, got {mode!r}")
        self.mode = mode

    def repr_args(self) -> dict[str, Any]:
        return {"mode": self.mode} if self.mode is not None else {}

    def convert(self, x: Any, plain_tensor: bool) -> Any:
        if isinstance(x, WindowedImage):  # every pixel is needed
            return to_pil_image(x.decode(layout="CHW"), self.mode)
        if isinstance(x, np.ndarray) or plain_tensor or tv_kind(x) == "image":
            return to_pil_image(x.as_subclass(torch.Tensor) if isinstance(x, torch.Tensor) else x, self.mode)
        return x  # a PIL image, a mask, boxes, another tensor of the sample, any other value
