"""torchvision-style transforms backed by fastprep ops.

Each transform is an nn.Module that takes a PIL image, a numpy HWC array or a tensor (CHW, or
HWC with layout="HWC"; a leading batch dim is allowed) and returns a CHW tensor. Random ones draw
an int64 seed from torch's generator (or `generator=`) on every call, so torch.manual_seed and
the DataLoader's per-worker seeding make them reproducible; they compose with torchvision's
Compose. fastprep's Compose also runs RandomCrop -> RandomDilatedMask -> RGBToYCbCr as the one
fused op `crop_mask_ycbcr`, with the same bits as the three steps.
"""

from __future__ import annotations

import threading
import warnings
from typing import Any

import numpy as np
import torch
from torch import nn

from fastprep.rng import draw_seed, item_seed, seeded

_WARNINGS_LOCK = threading.Lock()


def as_image(img: Any, layout: str = "CHW") -> tuple[torch.Tensor, str]:
    """(tensor, layout) without copying: PIL images and numpy arrays are HWC (a 2-D one gets a
    channel dim); tensors keep the given layout (a 2-D tensor is one channel)."""
    if isinstance(img, torch.Tensor):
        if img.dim() == 2:
            return img.unsqueeze(0 if layout == "CHW" else -1), layout
        return img, layout
    if not isinstance(img, np.ndarray):
        if not hasattr(img, "__array_interface__"):
            raise TypeError(f"expected a PIL image, a numpy array or a tensor, got {type(img).__name__}")
        _check_pil_mode(img)
        img = np.asarray(img)  # PIL: a read-only view of the decoded pixels
    if img.ndim == 2:
        img = img[:, :, None]
    if img.ndim != 3:
        raise ValueError(f"expected an HWC image array, got {img.ndim}-D with shape {img.shape}")
    # The ops only read their input, so a read-only array (PIL's) is safe to wrap. catch_warnings
    # swaps process-wide state: the lock keeps Loader threads from restoring each other's filters.
    with _WARNINGS_LOCK, warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return torch.from_numpy(img), "HWC"


# PIL modes whose numpy pixels are not intensities the ops take (uint8 or float32 per channel).
_PIL_MODE_ADVICE = {
    "P": "holds palette indices, not colours; convert it first: img.convert('RGB')",
    "PA": "holds palette indices, not colours; convert it first: img.convert('RGBA')",
    "1": "holds 1-bit pixels (numpy gives bool); convert it first: img.convert('L')",
    "I": "holds int32 pixels; fastprep takes uint8 or float32 images: img.convert('F')",
}
# 3-channel uint8 modes that are not RGB: crops are fine, a colour conversion would be garbage.
_NOT_RGB_MODES = ("YCbCr", "LAB", "HSV")


def _check_pil_mode(img: Any) -> None:
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
    converting its pixels as if they were RGB."""
    mode = getattr(img, "mode", None)
    if mode in _NOT_RGB_MODES:
        raise ValueError(f"{who} expects RGB pixels, got a PIL image in mode {mode!r}; "
                         f"convert it first: img.convert('RGB')")


def _hw(t: torch.Tensor, layout: str) -> tuple[int, int]:
    return (t.shape[-3], t.shape[-2]) if layout == "HWC" else (t.shape[-2], t.shape[-1])


def _chw(t: torch.Tensor, layout: str) -> torch.Tensor:
    return t.movedim(-1, -3) if layout == "HWC" else t


class _Random(nn.Module):
    def __init__(self, generator: torch.Generator | None):
        super().__init__()
        self.generator = generator

    def draw(self) -> int:
        return draw_seed(self.generator)


class RandomCrop(_Random):
    """Crop `size` (int or (h, w)) at a uniformly random position; see fastprep.random_crop."""

    def __init__(self, size: int | tuple[int, int], pad_if_needed: bool = False, fill: float = 0.0,
                 layout: str = "CHW", generator: torch.Generator | None = None):
        super().__init__(generator)
        self.size = (size, size) if isinstance(size, int) else tuple(size)
        self.pad_if_needed, self.fill, self.layout = pad_if_needed, fill, layout

    def forward(self, img: Any) -> torch.Tensor:
        t, layout = as_image(img, self.layout)
        return torch.ops.fastprep.random_crop(t, self.size[0], self.size[1], self.draw(), layout,
                                              self.pad_if_needed, self.fill)


class RandomDilatedMask(_Random):
    """Set every channel of the pixels covered by a dilated Bernoulli(p) mask to `value`."""

    def __init__(self, p: float, structure: str = "cross", iterations: int = 1, value: float = 0.0,
                 layout: str = "CHW", generator: torch.Generator | None = None):
        super().__init__(generator)
        self.p, self.structure, self.iterations = p, structure, iterations
        self.value, self.layout = value, layout

    def forward(self, img: Any) -> torch.Tensor:
        t, layout = as_image(img, self.layout)
        h, w = _hw(t, layout)
        shape = [t.shape[0], h, w] if t.dim() == 4 else [h, w]
        mask = torch.ops.fastprep.random_dilated_mask(shape, self.p, self.draw(), self.structure,
                                                      self.iterations, True)
        return torch.ops.fastprep.mask_fill(_chw(t, layout), mask, self.value, "CHW")


class RGBToYCbCr(nn.Module):
    """JFIF RGB -> YCbCr (exact for uint8); out_dtype/scale as in fastprep.rgb_to_ycbcr."""

    def __init__(self, out_dtype: torch.dtype | None = None, scale: float = 1.0, layout: str = "CHW"):
        super().__init__()
        self.out_dtype, self.scale, self.layout = out_dtype, scale, layout

    def forward(self, img: Any) -> torch.Tensor:
        require_rgb(img, "RGBToYCbCr")
        t, layout = as_image(img, self.layout)
        return torch.ops.fastprep.rgb_to_ycbcr(t, layout, self.out_dtype, self.scale)


class ToDtype(nn.Module):
    """Cast to `dtype`; with scale=True uint8 values are mapped to [0, 1] (torchvision v2 style)."""

    def __init__(self, dtype: torch.dtype = torch.float32, scale: bool = False, layout: str = "CHW"):
        super().__init__()
        self.dtype, self.scale, self.layout = dtype, scale, layout

    def forward(self, img: Any) -> torch.Tensor:
        t, layout = as_image(img, self.layout)
        out = _chw(t, layout).to(self.dtype)
        if self.scale and t.dtype == torch.uint8 and self.dtype.is_floating_point:
            out = out / 255
        return out


def fusable(steps: list[nn.Module]) -> bool:
    """Whether steps are RandomCrop, RandomDilatedMask, RGBToYCbCr as crop_mask_ycbcr runs them."""
    if len(steps) != 3:
        return False
    crop, mask, color = steps
    return (type(crop) is RandomCrop and type(mask) is RandomDilatedMask and type(color) is RGBToYCbCr
            and not crop.pad_if_needed and mask.iterations == 1 and mask.value == 0
            and mask.structure in ("cross", "square"))


class Compose(nn.Module):
    """Run transforms in order, fusing RandomCrop -> RandomDilatedMask -> RGBToYCbCr into the one
    op crop_mask_ycbcr for uint8 images: it draws the same seeds from the same generators and
    returns the same bits as the three steps, reading only the crop window of the source."""

    def __init__(self, transforms: list[nn.Module], fuse: bool = True):
        super().__init__()
        self.transforms = nn.ModuleList(transforms)
        self.fuse = fuse

    def forward(self, img: Any) -> Any:
        steps = list(self.transforms)
        if any(isinstance(step, RGBToYCbCr) for step in steps):
            require_rgb(img, "Compose (it has an RGBToYCbCr step)")  # the mode is gone after a crop
        i = 0
        while i < len(steps):
            if self.fuse and fusable(steps[i:i + 3]):
                t, layout = as_image(img, steps[i].layout)
                if t.dtype == torch.uint8 and t.dim() == 3:
                    img = self._fused(t, layout, *steps[i:i + 3])
                    i += 3
                    continue
            img = steps[i](img)
            i += 1
        return img

    @staticmethod
    def _fused(t: torch.Tensor, layout: str, crop: RandomCrop, mask: RandomDilatedMask,
               color: RGBToYCbCr) -> torch.Tensor:
        crop_seed, mask_seed = crop.draw(), mask.draw()  # the draws the three steps would make
        out_dtype = color.out_dtype or torch.uint8
        image, _ = torch.ops.fastprep.crop_mask_ycbcr(t, crop.size[0], crop.size[1], mask.p, crop_seed,
                                                      layout, mask.structure, out_dtype, color.scale,
                                                      True, False, mask_seed)
        return image


class SeedByIndex(torch.utils.data.Dataset):
    """Makes every random transform of item i draw from a generator seeded by (seed, i), so an
    item is the same whatever num_workers, worker order or epoch shuffling is.

    `seed` defaults to one drawn from torch's generator when the wrapper is made, so
    torch.manual_seed before building the dataset fixes everything. Call set_epoch(e) to get
    fresh (still reproducible) randomness every epoch.
    """

    def __init__(self, dataset: Any, seed: int | None = None):
        self.dataset = dataset
        self.seed = draw_seed() if seed is None else seed
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int) -> Any:
        with seeded(item_seed(self.seed, i, self.epoch)):
            return self.dataset[i]
