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

from fastprep.args import check_bool, check_int, check_real
from fastprep.rng import check_epoch, draw_seed, item_seed, seed_argument, seeded

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


def _check_layout(owner: str, layout: Any) -> str:
    if layout not in ("CHW", "HWC"):
        raise ValueError(f"{owner}: expected layout to be 'CHW' or 'HWC', got {layout!r}")
    return layout


def _check_size(owner: str, size: Any) -> tuple[int, int]:
    """torchvision's size argument: an int, or a sequence of 1 or 2 ints (h, w), each >= 1."""
    pair = [size] if isinstance(size, (int, np.integer)) else size
    if isinstance(pair, (tuple, list)) and len(pair) in (1, 2) and all(
            isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_)) and v >= 1 for v in pair):
        return (int(pair[0]), int(pair[-1]))
    raise ValueError(f"{owner}: expected size to be an int >= 1 or a pair of them (h, w), got {size!r}")


class _Random(nn.Module):
    def __init__(self, generator: torch.Generator | None):
        super().__init__()
        if generator is not None and not isinstance(generator, torch.Generator):
            raise ValueError(f"{type(self).__name__}: expected generator to be a torch.Generator or None, "
                             f"got {generator!r}")
        self.generator = generator

    def draw(self) -> int:
        return draw_seed(self.generator)


class RandomCrop(_Random):
    """Crop `size` at a uniformly random position; see fastprep.random_crop.

    Args:
        size: an int (a square crop) or (h, w); as torchvision, a 1-element sequence is square.
        pad_if_needed: pad an image smaller than the crop with `fill` (torchvision's semantics).
        fill: the padding value.
        layout: "CHW", or "HWC" for HWC tensors (PIL images and numpy arrays are HWC anyway).
        generator: draw the seeds from this torch.Generator instead of torch's default one.

    Example:
        >>> RandomCrop(256, layout="HWC")(np.zeros((512, 512, 3), np.uint8)).shape
        torch.Size([3, 256, 256])
    """

    def __init__(self, size: int | tuple[int, int], pad_if_needed: bool = False, fill: float = 0.0,
                 layout: str = "CHW", generator: torch.Generator | None = None):
        super().__init__(generator)
        self.size = _check_size("RandomCrop", size)
        self.pad_if_needed = check_bool("RandomCrop", "pad_if_needed", pad_if_needed)
        self.fill = check_real("RandomCrop", "fill", fill)
        self.layout = _check_layout("RandomCrop", layout)

    def forward(self, img: Any) -> torch.Tensor:
        t, layout = as_image(img, self.layout)
        return torch.ops.fastprep.random_crop(t, self.size[0], self.size[1], self.draw(), layout,
                                              self.pad_if_needed, self.fill)


class RandomDilatedMask(_Random):
    """Set every channel of the pixels covered by a dilated Bernoulli(p) mask to `value`."""

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
        self.layout = _check_layout("RandomDilatedMask", layout)

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
        if out_dtype is not None and not isinstance(out_dtype, torch.dtype):
            raise ValueError(f"RGBToYCbCr: expected out_dtype to be a torch.dtype or None, got {out_dtype!r}")
        self.out_dtype = out_dtype
        self.scale = check_real("RGBToYCbCr", "scale", scale)
        self.layout = _check_layout("RGBToYCbCr", layout)

    def forward(self, img: Any) -> torch.Tensor:
        require_rgb(img, "RGBToYCbCr")
        t, layout = as_image(img, self.layout)
        return torch.ops.fastprep.rgb_to_ycbcr(t, layout, self.out_dtype, self.scale)


def _max_value(dtype: torch.dtype) -> int:
    # torchvision/transforms/_functional_tensor.py _max_value: the integer range's top, 1 for floats.
    if dtype == torch.uint8:
        return 255
    if dtype == torch.int8:
        return 127
    if dtype == torch.int16:
        return 32767
    if dtype == torch.uint16:
        return 65535
    if dtype == torch.int32:
        return 2147483647
    if dtype == torch.int64:
        return 9223372036854775807
    return 1


_VALUE_BITS = {torch.uint8: 8, torch.int8: 7, torch.int16: 15, torch.uint16: 16, torch.int32: 31, torch.int64: 63}


def to_dtype_image(image: torch.Tensor, dtype: torch.dtype, scale: bool = False) -> torch.Tensor:
    """torchvision v2's ``to_dtype_image`` (torchvision/transforms/v2/functional/_misc.py), the same
    torch operations in the same order, so it gives torchvision's bits on every device:

    - same dtype: the image itself; ``scale=False``: ``image.to(dtype)``;
    - int -> float: ``image.to(dtype).mul_(1.0 / max)`` (uint8: times 1/255, not a division by 255,
      which differs by 1 ulp on about half the values);
    - float -> int: ``image.mul(max + 1.0 - 1e-3).to(dtype)`` (0.5 -> 127 for uint8), and float32 ->
      int32/int64 or float64 -> int64 raise as in torchvision (not exactly representable);
    - float -> float: ``image.to(dtype)``; int -> int: a shift by the difference in value bits.

    CompactBatch.decode() converts its images with it, so every fastprep path gives these bits.
    """
    if image.dtype == dtype:
        return image
    if not scale:
        return image.to(dtype)
    if image.is_floating_point():
        if dtype.is_floating_point:
            return image.to(dtype)
        if (image.dtype == torch.float32 and dtype in (torch.int32, torch.int64)) or (
                image.dtype == torch.float64 and dtype == torch.int64):
            raise RuntimeError(f"ToDtype: the conversion from {image.dtype} to {dtype} cannot be performed "
                               f"safely (as torchvision)")
        eps = 1e-3  # torchvision's: maps [0, 1] onto every integer level, 1.0 onto the top one
        return image.mul(float(_max_value(dtype)) + 1.0 - eps).to(dtype)
    if dtype.is_floating_point:
        return image.to(dtype).mul_(1.0 / _max_value(image.dtype))
    bits_in, bits_out = _VALUE_BITS.get(image.dtype), _VALUE_BITS.get(dtype)
    if bits_in is None or bits_out is None:
        raise ValueError(f"ToDtype: scaling between {image.dtype} and {dtype} is not defined "
                         f"(integer dtypes with a value range, or floats)")
    if bits_in > bits_out:
        if image.dtype == torch.uint16:  # torchvision's form: uint16 has no shift kernels
            return (image / 2 ** (bits_in - bits_out)).to(dtype)
        return image.bitwise_right_shift(bits_in - bits_out).to(dtype)
    if dtype == torch.uint16:
        return image.to(dtype) * 2 ** (bits_out - bits_in)
    return image.to(dtype).bitwise_left_shift_(bits_out - bits_in)


class ToDtype(nn.Module):
    """Cast an image to `dtype`; with scale=True the value range is converted as torchvision v2's
    ``ToDtype(dtype, scale=True)`` does, bit for bit (see :func:`to_dtype_image`): uint8 -> float
    is ``x * (1 / 255)``, float -> uint8 is ``x * (256 - 1e-3)`` truncated.

    Example:
        >>> ToDtype(torch.uint8, scale=True)(torch.full((1, 1, 1), 0.5))
        tensor([[[127]]], dtype=torch.uint8)
    """

    def __init__(self, dtype: torch.dtype = torch.float32, scale: bool = False, layout: str = "CHW"):
        super().__init__()
        if not isinstance(dtype, torch.dtype):
            raise ValueError(f"ToDtype: expected dtype to be a torch.dtype, got {dtype!r}")
        self.dtype = dtype
        self.scale = check_bool("ToDtype", "scale", scale)
        self.layout = _check_layout("ToDtype", layout)

    def forward(self, img: Any) -> torch.Tensor:
        t, layout = as_image(img, self.layout)
        return to_dtype_image(_chw(t, layout), self.dtype, self.scale)


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
        if not isinstance(transforms, (list, tuple, nn.ModuleList)) or not all(
                isinstance(t, nn.Module) for t in transforms):
            raise ValueError(f"Compose: expected transforms to be a list of nn.Modules (fastprep's or "
                             f"torchvision's transforms), got {transforms!r}")
        self.transforms = nn.ModuleList(transforms)
        self.fuse = check_bool("Compose", "fuse", fuse)

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
        self.seed = draw_seed() if seed is None else seed_argument("SeedByIndex", "seed", seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = check_epoch("SeedByIndex", epoch)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int) -> Any:
        with seeded(item_seed(self.seed, i, self.epoch)):
            return self.dataset[i]
