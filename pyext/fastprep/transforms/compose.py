"""Compose (with its fused paths) and SeedByIndex."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from fastprep._tree import leaves
from fastprep.args import check_bool
from fastprep.rng import check_epoch, draw_seed, item_seed, seed_argument, seeded
from fastprep.transforms.base import Transform, describe_sample
from fastprep.transforms.geometry import RandomCrop, RandomHorizontalFlip, RandomResizedCrop
from fastprep.transforms.inputs import error_context, require_rgb
from fastprep.transforms.pixels import RandomDilatedMask, RGBToYCbCr
from fastprep.transforms.sample import GEOMETRY, Item, Sample, decode_jpeg_files
from fastprep.transforms.window import Window, read_region


def fusable(steps: list[nn.Module]) -> bool:
    """Whether steps are RandomCrop, RandomDilatedMask, RGBToYCbCr as crop_mask_ycbcr runs them."""
    if len(steps) != 3:
        return False
    crop, mask, color = steps
    return (type(crop) is RandomCrop and type(mask) is RandomDilatedMask and type(color) is RGBToYCbCr
            and not crop.pad_if_needed and not any(crop.padding) and mask.iterations == 1 and mask.value == 0
            and mask.structure in ("cross", "square"))


def fused_image(s: Sample, color: RGBToYCbCr) -> Item | None:
    """The sample's one image when the fused op can take it: uint8, 3-D, RGB (RGBA with
    alpha='drop'), no video; None sends the sample through the steps one by one."""
    images = [it for it in s.items if it.kind in ("image", "video")]
    if len(images) != 1 or images[0].kind != "image":
        return None
    item = images[0]
    if item.pil:
        ok = item.value.mode == "RGB" or (item.value.mode == "RGBA" and color.alpha == "drop")
        return item if ok else None
    if item.lazy:
        return item if item.value.mode == "RGB" else None
    t = item.tensor()
    c = t.shape[-1] if item.layout == "HWC" else t.shape[-3]
    return item if t.dtype == torch.uint8 and t.dim() == 3 and (c == 3 or (c == 4 and color.alpha == "drop")) \
        else None


def fused_source(item: Item, win: Window, W: int) -> tuple[torch.Tensor, str]:
    """What the fused op reads for the (possibly flipped) window `win` of an image `W` wide: the
    window's pixels only (a view of a tensor; read or decoded from a PIL image or WindowedImage). The op's
    own window in it is then all of it, which it reads right to left when told to flip."""
    u = win.unflipped(W)  # the same columns in the image as it is
    region = read_region(item, u.top, u.top + u.height, u.left, u.left + u.width)
    return region, "HWC" if item.windowed else item.layout


def flip_after_crop(steps: list[nn.Module]) -> bool:
    """[RandomCrop, RandomHorizontalFlip, RandomDilatedMask, RGBToYCbCr] as the fused op runs them
    (torchvision's usual order: the flip after the crop, on its CHW output)."""
    return (len(steps) == 4 and type(steps[1]) is RandomHorizontalFlip and steps[1].layout == "CHW"
            and fusable([steps[0], *steps[2:]]))


class Compose(Transform):
    """Run transforms in order (fastprep's, torchvision's, any callable module), passing the whole
    sample to each. Two shortcuts, each with the bits and the random draws of the steps:

    - RandomCrop -> RandomDilatedMask -> RGBToYCbCr on a uint8 RGB image runs as the one op
      ``crop_mask_ycbcr``, reading only the crop window (of a PIL image too); the sample's masks,
      boxes and key points are cropped at the same window.
    - RandomHorizontalFlip -> RandomCrop / RandomResizedCrop never flips the whole image: the crop
      reads the mirrored window and reverses it. A flip in front of the fused three, or right
      after their crop (torchvision's usual order), rides along in the fused op (its ``hflip``: it
      reads the window's columns right to left), same bits and draws as the steps.
    """

    def __init__(self, transforms: list[nn.Module], fuse: bool = True):
        super().__init__()
        if not isinstance(transforms, (list, tuple, nn.ModuleList)) or not all(
                isinstance(t, nn.Module) for t in transforms):
            raise ValueError(f"Compose: expected transforms to be a list of nn.Modules (fastprep's or "
                             f"torchvision's transforms), got {transforms!r}")
        self.transforms = nn.ModuleList(transforms)
        self.fuse = check_bool("Compose", "fuse", fuse)

    def transform(self, sample: Any) -> Any:
        steps = list(self.transforms)
        if any(isinstance(step, RGBToYCbCr) for step in steps):
            for x in leaves(sample):  # the PIL mode is gone after a crop
                require_rgb(x, "Compose (it has an RGBToYCbCr step)")
        i = 0
        while i < len(steps):
            step = steps[i]
            if self.fuse and fusable(steps[i:i + 3]):
                s = Sample(sample, step.layout, GEOMETRY)
                item = fused_image(s, steps[i + 2])
                if item is not None:
                    sample = self._fused(s, item, *steps[i:i + 3])
                    i += 3
                    continue
            if self.fuse and flip_after_crop(steps[i:i + 4]):
                s = Sample(sample, step.layout, GEOMETRY)
                item = fused_image(s, steps[i + 3])
                if item is not None:
                    sample = self._fused(s, item, step, *steps[i + 2:i + 4], flip_step=steps[i + 1])
                    i += 4
                    continue
            nxt = steps[i + 1] if i + 1 < len(steps) else None
            if type(step) is RandomHorizontalFlip and type(nxt) in (RandomCrop, RandomResizedCrop):
                flip = step.decide()
                s = Sample(sample, nxt.layout, GEOMETRY)
                item = fused_image(s, steps[i + 3]) if self.fuse and fusable(steps[i + 1:i + 4]) else None
                if item is not None:
                    sample = self._fused(s, item, *steps[i + 1:i + 4], flip=flip)  # the op flips as it reads
                    i += 4
                    continue
                sample = nxt.apply(s, nxt.draw(), flip)
                i += 2
                continue
            sample = step(sample if isinstance(step, Transform) else decode_jpeg_files(sample))
            i += 1
        return sample

    @staticmethod
    def _fused(s: Sample, item: Item, crop: RandomCrop, mask: RandomDilatedMask, color: RGBToYCbCr,
               flip: bool = False, flip_step: RandomHorizontalFlip | None = None) -> Any:
        """The three steps in one op on `item` (fused_image's pick), the sample's other items cut
        at the same window; `flip`: a flip drawn before the crop; `flip_step`: a flip between the
        crop and the mask (drawn there, so the draws are the steps' own, in order)."""
        crop_seed = crop.draw()
        if flip_step is not None:
            flip = flip_step.decide()
        mask_seed = mask.draw()
        out_dtype = color.out_dtype or torch.uint8
        outs = {}
        with error_context(crop, describe_sample(s)):
            H, W = s.size()
            win = crop.window(H, W, crop_seed, flip and flip_step is None)
            if flip_step is not None and flip:
                win = win.mirrored(W)  # crop then flip = a crop of the flipped image
            src, layout = fused_source(item, win, W)
            src = color.rgb(src, layout)
            image, _ = torch.ops.fastprep.crop_mask_ycbcr.default(src, win.height, win.width, mask.p, crop_seed, layout,
                                                                  mask.structure, out_dtype, color.scale, True, False,
                                                                  mask_seed, flip)
            outs[item.index] = item.wrap(image)
            for other in s.items:
                if other is not item:
                    outs[other.index] = crop.cut(other, win, crop_seed, H, W)
        return s.rebuild(outs)


class SeedByIndex(torch.utils.data.Dataset):
    """Makes every random transform of item i draw from a generator seeded by (seed, i), so an
    item is the same whatever num_workers, worker order or epoch shuffling is.

    `seed` defaults to one drawn from torch's generator when the wrapper is made, so
    torch.manual_seed before building the dataset fixes everything. Call set_epoch(e) to get
    fresh (still reproducible) randomness every epoch.
    """

    def __init__(self, dataset: Any, seed: int | None = None):
        self.dataset = dataset
        self.seed = draw_seed() if seed is None else seed_argument("SeedByIndex", "seed", seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = check_epoch("SeedByIndex", epoch)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int) -> Any:
        with seeded(item_seed(self.seed, i, self.epoch)):
            return self.dataset[i]
