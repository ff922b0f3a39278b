"""Pixel transforms: RandomDilatedMask and RGBToYCbCr change the images and videos of a sample;
masks, boxes, key points and other values pass through (torchvision v2's colour transforms do
the same)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from fastprep.core._args import check_int, check_real
from fastprep.core._tree import leaves
from fastprep.ops._color import rgb_to_ycbcr
from fastprep.ops._mask_fill import mask_fill
from fastprep.transforms._base import RandomTransform, Transform, describe_sample
from fastprep.transforms._fusion_roles import FusionRole
from fastprep.transforms._inputs import (
    as_image,
    channel_hint,
    check_layout,
    chw,
    error_context,
    hw,
    require_rgb,
)
from fastprep.transforms._sample import PIXELS, Sample


def map_pixels(owner: Any, sample: Any, layout: str, fn: Callable[[torch.Tensor, str], torch.Tensor]) -> Any:
    """`fn(tensor, layout)` on every image and video of the sample (PIL and numpy images as HWC
    tensors), outputs wrapped in their inputs' tv_tensors types; errors name `owner`."""
    s = Sample(sample, layout, PIXELS, owner)
    outs = {}
    with error_context(owner, describe_sample(s)):
        for item in s.items:
            t, lay = as_image(item.value, item.layout) if item.pil else (item.tensor(), item.layout)
            outs[item.index] = item.wrap(fn(t, lay))
    return s.rebuild(outs)


class RandomDilatedMask(RandomTransform):
    """Set every channel of the pixels covered by a dilated Bernoulli(p) mask to `value`: one draw
    per sample, the same mask for every image of it (a video gets one mask per frame)."""

    def __init__(self, p: float, structure: str = "cross", iterations: int = 1, value: float = 0.0,
                 layout: str = "CHW", generator: torch.Generator | None = None):
        super().__init__(generator)
        self.p = check_real("RandomDilatedMask", "p", p)
        if not 0 <= self.p <= 1:
            raise ValueError(f"RandomDilatedMask: expected p to be in [0, 1], got {p!r}")
        if structure not in ("cross", "square"):
            raise ValueError(f"RandomDilatedMask: expected structure to be 'cross' or 'square', got {structure!r}")
        self.structure = structure
        self.iterations = check_int("RandomDilatedMask", "iterations", iterations, 0)
        self.value = check_real("RandomDilatedMask", "value", value)
        self.layout = check_layout("RandomDilatedMask", layout)

    @property
    def fusion_role(self) -> FusionRole | None:
        """One dilation zeroing the masked pixels is what the fused ops draw and apply."""
        return FusionRole.MASK if self.iterations == 1 and self.value == 0 else None

    def repr_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {"p": self.p}
        if self.structure != "cross":
            args["structure"] = self.structure
        if self.iterations != 1:
            args["iterations"] = self.iterations
        if self.value != 0:
            args["value"] = self.value
        return args | ({"layout": self.layout} if self.layout != "CHW" else {})

    def transform(self, sample: Any) -> Any:
        seed = self.draw()

        def fill(t: torch.Tensor, layout: str) -> torch.Tensor:
            h, w = hw(t, layout)
            x = chw(t, layout)
            flat = x.reshape(-1, *x.shape[-3:]) if x.dim() > 4 else x
            shape = [flat.shape[0], h, w] if flat.dim() == 4 else [h, w]
            mask = torch.ops.fastprep.random_dilated_mask.default(shape, self.p, seed, self.structure, self.iterations,
                                                                  True)
            return mask_fill(flat, mask, self.value, "CHW").reshape(x.shape)

        return map_pixels(self, sample, self.layout, fill)


ALPHA = ("error", "drop")


class RGBToYCbCr(Transform):
    """JFIF RGB -> YCbCr (exact for uint8); out_dtype/scale as in fastprep.rgb_to_ycbcr.

    Args:
        out_dtype: uint8 (default), float32, float16 or bfloat16.
        scale: multiplies float outputs (1/255 for [0, 1] values).
        layout: "CHW", or "HWC" for plain HWC tensors.
        alpha: what a 4-channel (RGBA) image gets: "error" (default) names the conversion to make,
            "drop" converts its first 3 channels, a view, no copy. Grey (1-channel) images are an
            error naming ``img.convert('RGB')``, as are PIL images in another colour space.
    """

    def __init__(self, out_dtype: torch.dtype | None = None, scale: float = 1.0, layout: str = "CHW",
                 alpha: str = "error"):
        super().__init__()
        if out_dtype is not None and not isinstance(out_dtype, torch.dtype):
            raise ValueError(f"RGBToYCbCr: expected out_dtype to be a torch.dtype or None, got {out_dtype!r}")
        self.out_dtype = out_dtype
        self.scale = check_real("RGBToYCbCr", "scale", scale)
        self.layout = check_layout("RGBToYCbCr", layout)
        if alpha not in ALPHA:
            raise ValueError(f"RGBToYCbCr: expected alpha to be 'error' or 'drop', got {alpha!r}")
        self.alpha = alpha

    fusion_role = FusionRole.YCBCR

    def repr_args(self) -> dict[str, Any]:
        args: dict[str, Any] = {}
        if self.out_dtype is not None:
            args["out_dtype"] = self.out_dtype
        if self.scale != 1:
            args["scale"] = self.scale
        if self.layout != "CHW":
            args["layout"] = self.layout
        return args | ({"alpha": self.alpha} if self.alpha != "error" else {})

    def rgb(self, t: torch.Tensor, layout: str, source: Any = None) -> torch.Tensor:
        """The RGB channels of image `t` (RGBA with alpha='drop': a view of the first 3), or a
        ValueError saying what the image is and what to do."""
        c = t.shape[-1] if layout == "HWC" else t.shape[-3] if t.dim() >= 3 else 1
        if c == 3:
            return t
        if c == 4 and self.alpha == "drop":
            return t[..., :3] if layout == "HWC" else t[..., :3, :, :]
        if c == 4:
            advice = "; an RGBA image: pass alpha='drop', or convert it first: img.convert('RGB')"
        elif c == 1:
            advice = "; a grey image: convert it first: img.convert('RGB') (PIL) or img.expand(3, -1, -1) (CHW tensor)"
        elif c == 2:
            advice = "; a grey image with alpha (PIL 'LA'): convert it first: img.convert('RGB')"
        else:
            advice = channel_hint(source if source is not None else t, layout, (3, 4))
        raise ValueError(f"expected an RGB image with 3 channels, got {c} channels{advice}")

    def transform(self, sample: Any) -> Any:
        for x in leaves(sample):
            require_rgb(x, "RGBToYCbCr")

        def convert(t: torch.Tensor, layout: str) -> torch.Tensor:
            return rgb_to_ycbcr(self.rgb(t, layout), layout, self.out_dtype, self.scale)

        return map_pixels(self, sample, self.layout, convert)
