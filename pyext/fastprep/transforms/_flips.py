"""RandomHorizontalFlip, RandomVerticalFlip and RandomRotate90: mirror or turn every image, video,
mask, bounding boxes and key points of a sample, with one draw per sample. In a fused group a flip
or a quarter turn is no pass of its own: the op reads the window's columns right to left, writes
its rows bottom-up, or writes its columns as rows (a quarter turn is a flip and a transpose)."""

from __future__ import annotations

from typing import Any

import torch

import fastprep.core._counter_rng as counter_rng
from fastprep.core._args import check_real
from fastprep.transforms._base import RandomTransform, describe_sample, unit_float, where, word
from fastprep.transforms._fusion_roles import FusionRole
from fastprep.transforms._inputs import check_layout, chw, error_context
from fastprep.transforms._sample import GEOMETRY, Item, Sample
from fastprep.transforms._window import Window, crop_dense, geometry_tv, read_region, tv_functional


class RandomFlip(RandomTransform):
    """A flip with probability `p`: flipped when ``unit_float(random_word(seed, 0)) < p``, one seed
    drawn per sample. Images not flipped come back as CHW tensors (PIL and numpy converted, tensors
    as given)."""

    def __init__(self, p: float = 0.5, layout: str = "CHW", generator: torch.Generator | None = None):
        super().__init__(generator)
        name = type(self).__name__
        self.p = check_real(name, "p", p)
        if not 0 <= self.p <= 1:
            raise ValueError(f"{name}: expected p to be in [0, 1], got {p!r}")
        self.layout = check_layout(name, layout)

    def repr_args(self) -> dict[str, Any]:
        return {"p": self.p} | ({"layout": self.layout} if self.layout != "CHW" else {})

    def make_params(self, seed: Any) -> Any:
        """Whether the sample of `seed` flips (a bool array for an array of seeds)."""
        return unit_float(word(seed, 0)) < self.p

    def transform(self, sample: Any) -> Any:
        s = Sample(sample, self.layout, GEOMETRY, self)
        drawn = self.make_params(self.draw())  # falsy: the sample stays as it is
        outs = {}
        with error_context(self, describe_sample(s)):
            H, W = s.size()
            for item in s.items:
                if drawn:
                    outs[item.index] = self.move(item, H, W, drawn)
                elif item.kind == "image" and not (isinstance(item.value, torch.Tensor) and item.layout == "CHW"):
                    outs[item.index] = chw(read_region(item, 0, H, 0, W), item.layout)  # PIL, numpy, HWC: CHW
        return s.rebuild(outs)

    def move(self, item: Item, H: int, W: int, drawn: Any) -> Any:
        """Item moved as make_params' value `drawn` (true) says."""
        raise NotImplementedError


class RandomHorizontalFlip(RandomFlip):
    """Mirror the sample left to right with probability `p` (torchvision v2's ``RandomHorizontalFlip``):
    images, videos and masks are reversed, boxes and key points mirrored by torchvision's kernels.

    In :class:`Compose`, a flip followed by RandomCrop or RandomResizedCrop is not made on the whole
    image: the crop reads the mirrored window and reverses it, the same bits as flipping first.

    Example:
        >>> RandomHorizontalFlip(p=1.0)(torch.arange(3).view(1, 1, 3))
        tensor([[[2, 1, 0]]])
    """

    fusion_role = FusionRole.HFLIP

    def move(self, item: Item, H: int, W: int, drawn: Any) -> Any:
        win = Window(0, 0, H, W, flip=True)
        if item.dense:
            return item.wrap(crop_dense(item, win, "constant", 0))
        return geometry_tv(item, win, "constant", H, W)


class RandomVerticalFlip(RandomFlip):
    """Turn the sample upside down with probability `p` (torchvision v2's ``RandomVerticalFlip``):
    images, videos and masks have their rows reversed, boxes and key points are flipped by
    torchvision's kernels. Fused with a resize (RandomResizedCrop, Resize) in :class:`Compose`: the
    op writes the rows bottom-up, before or after the resize alike.

    Example:
        >>> RandomVerticalFlip(p=1.0)(torch.arange(3).view(1, 3, 1)).flatten()
        tensor([2, 1, 0])
    """

    fusion_role = FusionRole.VFLIP

    def move(self, item: Item, H: int, W: int, drawn: Any) -> Any:
        if not item.dense:
            return tv_functional().vertical_flip(item.value)
        x = read_region(item, 0, H, 0, W)
        return item.wrap(chw(x, item.layout).flip(-2).contiguous())


class RandomRotate90(RandomFlip):
    """Turn the sample by k quarter turns counter-clockwise, k drawn per sample: with probability
    `p` uniform in {0, 1, 2, 3} (``uniform_below(random_word(seed, 1), 4)``), else 0 (the draw:
    ``unit_float(random_word(seed, 0)) < p``, as the flips'). Images, videos and masks become
    ``torch.rot90(x, k, dims=(-2, -1))``; boxes and key points are turned by torchvision's
    ``rotate(angle=90 * k, expand=True)``. An odd k swaps height and width: batch square images
    (or crop them square after the turn).

    Fused in :class:`Compose` after a resize (RandomResizedCrop, Resize; flips and a crop around it
    alike): the op writes the output's columns as rows, the same bits. A turn before the resize runs
    unfused: torch resamples columns first, then rows, each rounded to uint8, so a resize does not
    commute with a transpose bit for bit. In the crop + RandomDilatedMask + RGBToYCbCr row it fuses
    before the mask (before or after the crop); between the mask and RGBToYCbCr it runs unfused.

    Example:
        >>> RandomRotate90(p=1.0)(torch.arange(4).view(1, 2, 2)).shape
        torch.Size([1, 2, 2])
    """

    fusion_role = FusionRole.ROTATE90

    def make_params(self, seed: Any) -> Any:
        """k, the quarter turns of the sample of `seed` (an int64 array for an array of seeds)."""
        k = where(unit_float(word(seed, 0)) < self.p, counter_rng.uniform_below(word(seed, 1), 4), 0)
        return k.astype("int64") if hasattr(k, "astype") else int(k)

    def move(self, item: Item, H: int, W: int, drawn: Any) -> Any:
        k = int(drawn)
        if not item.dense:
            return tv_functional().rotate(item.value, 90.0 * k, expand=True)
        x = chw(read_region(item, 0, H, 0, W), item.layout)
        return item.wrap(torch.rot90(x, k, dims=(-2, -1)).contiguous())
