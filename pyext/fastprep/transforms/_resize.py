"""Resize and CenterCrop (torchvision v2's; the validation pipeline Resize(256) + CenterCrop(224)):
deterministic geometry, as values of the image size, for one sample (ints) or a chunk (arrays)."""

from __future__ import annotations

from typing import Any

from fastprep.core._args import check_bool, check_int
from fastprep.transforms._base import trunc_int, where
from fastprep.transforms._fusion_roles import FusionRole
from fastprep.transforms._geometry import GeometricTransform
from fastprep.transforms._inputs import check_interpolation, check_layout, check_size, is_int
from fastprep.transforms._sample import Item
from fastprep.transforms._window import (
    INTERPOLATIONS,
    Window,
    check_jpeg_scale,
    crop_dense,
    resize_region,
    tv_functional,
)


class Resize(GeometricTransform):
    """torchvision v2's ``Resize``: every image, video and mask of the sample resized (masks nearest),
    boxes and key points scaled by torchvision's kernels.

    uint8 images, bilinear, on CPUs where torchvision keeps uint8 (AVX2, AVX-512, ARM) go through
    fastprep's ``resized_crop`` op (torch's uint8 resampler's bits); other dtypes and modes through
    torch's ``interpolate`` in torchvision's calls; PIL images are read as tensors (so the result is
    torchvision's on the image's tensor, not PIL's resampler). In :class:`Compose`, a CenterCrop,
    flips, ``ToDtype`` and ``Normalize`` after it run in the same op call (only the kept outputs of
    the resize are computed).

    Args:
        size: an int (the smaller edge's new length, the aspect ratio kept), (h, w), a 1-element
            sequence (as an int), or None with `max_size` (the longer edge's).
        interpolation: "bilinear" (default), "nearest", "nearest-exact", "bicubic" (an
            InterpolationMode or PIL's constant too).
        max_size: the longer edge's bound with an int size (or None size), as torchvision's.
        antialias: torchvision's default True (None: False, as torchvision's for tensors).
        layout: "CHW", or "HWC" for plain HWC tensors.
        jpeg_scale: "exact" (default) or "reduced": a JPEG image (a packed record, a JpegFile) that is
            shrunk is decoded at the smallest of libjpeg-turbo's 1/8, 2/8, 4/8 scales that keeps it
            at least the output size, then resized, as RandomResizedCrop's `jpeg_scale`.

    Example:
        >>> Resize(256)(torch.zeros(3, 480, 640, dtype=torch.uint8)).shape
        torch.Size([3, 256, 341])
    """

    def __init__(self, size: Any, interpolation: Any = "bilinear", max_size: int | None = None,
                 antialias: bool | None = True, layout: str = "CHW", jpeg_scale: str = "exact"):
        super().__init__()
        self.jpeg_scale = check_jpeg_scale("Resize", jpeg_scale)
        if size is None:
            if not is_int(max_size):
                raise ValueError(f"Resize: expected max_size to be an int when size is None, got {max_size!r}")
            self.size: tuple[int, ...] | None = None
        elif is_int(size) or (isinstance(size, (tuple, list)) and len(size) == 1):
            self.size = (check_size("Resize", size)[0],)
        else:
            self.size = check_size("Resize", size)
            if max_size is not None:
                raise ValueError(f"Resize: max_size is for an int size (the smaller edge) or None, got size={size!r} "
                                 f"and max_size={max_size!r}")
        if max_size is not None:
            max_size = check_int("Resize", "max_size", max_size, 1)
            if self.size is not None and max_size <= self.size[0]:
                raise ValueError(f"Resize: expected max_size to be greater than size, got max_size={max_size}, "
                                 f"size={size!r}")
        self.max_size = max_size
        self.interpolation = check_interpolation("Resize", interpolation, INTERPOLATIONS)
        self.antialias = False if antialias is None else check_bool("Resize", "antialias", antialias)
        self.layout = check_layout("Resize", layout)

    def repr_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {"size": self.size[0] if self.size and len(self.size) == 1 else self.size}
        if self.interpolation != "bilinear":
            args["interpolation"] = self.interpolation
        if self.max_size is not None:
            args["max_size"] = self.max_size
        if not self.antialias:
            args["antialias"] = False
        args |= {"jpeg_scale": self.jpeg_scale} if self.jpeg_scale != "exact" else {}
        return args | ({"layout": self.layout} if self.layout != "CHW" else {})

    @property
    def fusion_role(self) -> FusionRole | None:
        return FusionRole.RESIZE if self.interpolation == "bilinear" else None

    @property
    def fixed_size(self) -> tuple[int, int] | None:
        """(h, w) every image is resized to; None when the output follows each image's shape."""
        return self.size if self.size is not None and len(self.size) == 2 else None

    def make_params(self, seed: Any, H: Any, W: Any) -> tuple[Any, Any]:
        """The output size of an H x W image (`seed`: unused, nothing is drawn), torchvision's
        _compute_resized_output_size: ints, or arrays (one per sample)."""
        if self.fixed_size is not None:
            return self.fixed_size
        tall = W <= H
        short, long = where(tall, W, H), where(tall, H, W)
        if self.size is None:
            new_short, new_long = trunc_int(self.max_size * short / long), self.max_size
        else:
            new_short, new_long = self.size[0], trunc_int(self.size[0] * long / short)
            if self.max_size is not None:
                over = new_long > self.max_size
                new_short = where(over, trunc_int(self.max_size * new_short / new_long), new_short)
                new_long = where(over, self.max_size, new_long)
        return where(tall, new_long, new_short), where(tall, new_short, new_long)

    def window(self, H: int, W: int, seed: Any = None, flip: bool = False) -> Window:
        return Window(0, 0, H, W, flip=flip)

    def cut(self, item: Item, win: Window, seed: Any, H: int, W: int) -> Any:
        size = self.make_params(seed, H, W)
        if not item.dense:
            return tv_functional().resize(item.value, size=list(size))
        return item.wrap(resize_region(item, win, W, size, self.antialias, self.interpolation, self.jpeg_scale))


class CenterCrop(GeometricTransform):
    """torchvision v2's ``CenterCrop``: the central `size` window of every image, video, mask, boxes
    and key points (``round((H - h) / 2)`` from the top, halves to even as Python's round); an image
    smaller than `size` is padded with zeros first, as torchvision's. In :class:`Compose`, after a
    Resize, it is where the fused op's output lies in the resize (one pass, only what is kept).

    Args:
        size: an int (square) or (h, w).
        layout: "CHW", or "HWC" for plain HWC tensors.

    Example:
        >>> CenterCrop(224)(torch.zeros(3, 256, 341, dtype=torch.uint8)).shape
        torch.Size([3, 224, 224])
    """

    fusion_role = FusionRole.CROP

    def __init__(self, size: int | tuple[int, int], layout: str = "CHW"):
        super().__init__()
        self.size = check_size("CenterCrop", size)
        self.layout = check_layout("CenterCrop", layout)

    def repr_args(self) -> dict[str, Any]:
        return {"size": self.size} | ({"layout": self.layout} if self.layout != "CHW" else {})

    def make_params(self, seed: Any, H: Any, W: Any) -> tuple[Any, Any]:
        """(top, left) of the crop in an H x W image it fits: ``round(d / 2)`` with halves to even is
        d // 2, plus 1 when d // 2 is odd and d is: d % 4 == 3 (ints or arrays alike)."""
        dh, dw = H - self.size[0], W - self.size[1]
        return dh // 2 + (dh % 4 == 3), dw // 2 + (dw % 4 == 3)

    def window(self, H: int, W: int, seed: Any = None, flip: bool = False) -> Window:
        """torchvision's center_crop_image: pad what is too small (zeros), then the anchors."""
        h, w = self.size
        pl, pt = max(w - W, 0) // 2, max(h - H, 0) // 2
        pad = (pl, pt, max(w - W, 0) - pl, max(h - H, 0) - pt)
        return Window(*self.make_params(seed, H + pt + pad[3], W + pl + pad[2]), h, w, pad, flip)

    def cut(self, item: Item, win: Window, seed: Any, H: int, W: int) -> Any:
        if not item.dense:
            return tv_functional().center_crop(item.value, output_size=list(self.size))
        return item.wrap(crop_dense(item, win, "constant", 0))
