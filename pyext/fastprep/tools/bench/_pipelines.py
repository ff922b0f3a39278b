"""The target workload of the benchmark and the diagnosis demo, written two ways.

Each sample is a decoded 1024x1024 RGB uint8 image; crop 256x256 at random; draw a
Bernoulli(0.25) mask, dilate it to the 4 neighbours and zero all channels there; convert RGB to
YCbCr; divide by 255; batch with an integer class label; copy to the device.

- `usual_transform`: how it is commonly written (PIL -> tensor, slicing, numpy uniform + scipy
  convolve2d, float matmul), batched by default_collate as float32.
- `fastprep_transform`: the fused crop_mask_ycbcr op on the HWC array (of a PIL image, on its crop
  window only, as fastprep's Compose reads it), batched by CompactCollate as uint8 and scaled by
  1/255 on the device (CompactBatch.expand).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset

from fastprep.ops._crop import crop_window
from fastprep.transforms import as_image
from fastprep.transforms._inputs import is_pil
from fastprep.transforms._workloads import CROP, P  # the crop and mask probability, defined once

SOURCE_SIZE = 1024
NUM_CLASSES = 1000

# Rows: Y, Cb, Cr from R, G, B (JFIF / BT.601 full range).
YCBCR = torch.tensor([[0.299, 0.587, 0.114],
                      [-0.168736, -0.331264, 0.5],
                      [0.5, -0.418688, -0.081312]], dtype=torch.float32)
YCBCR_OFFSET = torch.tensor([0.0, 128.0, 128.0], dtype=torch.float32)
CROSS = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], dtype=np.float32)


def make_source(index: int, seed: int = 0, size: int = SOURCE_SIZE) -> np.ndarray:
    """A synthetic decoded image, HWC uint8, the same for the same (seed, index)."""
    return np.random.default_rng((seed, index)).integers(0, 256, (size, size, 3), dtype=np.uint8)


def usual_transform(image: Any, rng: np.random.Generator | None = None,
                    top: int | None = None, left: int | None = None,
                    mask: np.ndarray | None = None) -> torch.Tensor:
    """The common float pipeline; crop offsets and the mask can be given, for comparisons."""
    from scipy.signal import convolve2d  # noqa: PLC0415 (scipy is a bench/test extra)

    rng = rng or np.random.default_rng()
    img = torch.from_numpy(np.array(image)).permute(2, 0, 1)  # PILToTensor: copies the whole image
    _, h, w = img.shape
    top = int(rng.integers(0, h - CROP + 1)) if top is None else top
    left = int(rng.integers(0, w - CROP + 1)) if left is None else left
    img = img[:, top:top + CROP, left:left + CROP].float()
    if mask is None:
        mask = convolve2d(rng.uniform(size=(CROP, CROP)) < P, CROSS, mode="same") > 0
    img[:, torch.from_numpy(np.ascontiguousarray(mask))] = 0
    ycbcr = torch.einsum("chw,dc->dhw", img, YCBCR) + YCBCR_OFFSET.view(3, 1, 1)
    return ycbcr / 255


def _fused_source(image: Any, seed: int) -> torch.Tensor:
    """What the fused op reads for crop seed `seed`: a numpy image as it is (a zero-copy HWC view);
    of a PIL image only the crop window, as fastprep's Compose reads it (converting the whole
    image would copy 1024^2 x 3 bytes to use 256^2 x 3). The op then draws the same window again
    from the same seed: on a window-sized source it is the whole source, and the mask is the same."""
    if is_pil(image):
        top, left = crop_window(image.height, image.width, CROP, CROP, seed)
        image = image.crop((left, top, left + CROP, top + CROP))
    return as_image(image)[0]


def fastprep_transform(image: Any, generator: torch.Generator | None = None) -> torch.Tensor:
    """The same work in one fastprep op: uint8 YCbCr CHW out, scaled by 1/255 on the device."""
    import fastprep  # noqa: PLC0415

    seed = fastprep.draw_seed(generator)
    return fastprep.crop_mask_ycbcr(_fused_source(image, seed), CROP, CROP, P, seed, layout="HWC")


def fastprep_batch_op_one(image: np.ndarray) -> torch.Tensor:
    """What a fused Compose does for one numpy image, written out by hand: the crop and mask seeds
    drawn, the window computed, crop_mask_ycbcr_batch called for one sample into a fresh output
    (below autograd, as the plan calls it). The floor of the plan's per-sample path."""
    import fastprep  # noqa: PLC0415
    import fastprep.core._counter_rng as counter_rng  # noqa: PLC0415

    src, crop_seed, mask_seed = torch.from_numpy(image), fastprep.draw_seed(), fastprep.draw_seed()
    top = counter_rng.uniform_below(counter_rng.random_word(crop_seed, 0), image.shape[0] - CROP + 1)
    left = counter_rng.uniform_below(counter_rng.random_word(crop_seed, 1), image.shape[1] - CROP + 1)
    out = torch.empty(1, 3, CROP, CROP, dtype=torch.uint8)
    with torch._C._AutoDispatchBelowAutograd():
        torch.ops.fastprep.crop_mask_ycbcr_batch.default([src], [top], [left], CROP, CROP, P, [mask_seed], out, "HWC",
                                                         "cross", 1.0, True, None, None)
    return out[0]


def fastprep_numba_transform(image: Any, generator: torch.Generator | None = None) -> torch.Tensor:
    """fastprep_transform on the Numba backend's kernel (whatever backend is loaded)."""
    from fastprep import draw_seed  # noqa: PLC0415
    from fastprep.numba_kernels._crop_mask_ycbcr import crop_mask_ycbcr  # noqa: PLC0415

    seed = draw_seed(generator)
    return crop_mask_ycbcr(_fused_source(image, seed), CROP, CROP, P, seed, layout="HWC")[0]


def fastprep_unfused_transform(image: Any, generator: torch.Generator | None = None) -> torch.Tensor:
    """The same result as the fused op from the four separate fastprep ops."""
    import fastprep  # noqa: PLC0415

    seed = fastprep.draw_seed(generator)
    crop = fastprep.random_crop(_fused_source(image, seed), CROP, CROP, seed, "HWC")
    mask = fastprep.random_dilated_mask([CROP, CROP], P, fastprep.derive_seed(seed, 1), packed=True)
    fastprep.mask_fill_(crop, mask, 0)
    return fastprep.rgb_to_ycbcr(crop)


class SyntheticImages(Dataset):
    """Map-style dataset of synthetic sources with a label, split for diagnose as
    load_raw(i) -> (image, label) and apply_transform(raw) -> (tensor, label).

    Sources come from a pre-generated pool of `pool` images (so the transforms are what is
    measured), or are generated for every item with generate_per_item=True.
    """

    def __init__(self, length: int, transform: Callable[[Any], torch.Tensor], pool: int = 8,
                 as_pil: bool = False, generate_per_item: bool = False, seed: int = 0,
                 size: int = SOURCE_SIZE):
        self.length, self.transform, self.as_pil = length, transform, as_pil
        self.generate_per_item, self.seed, self.size = generate_per_item, seed, size
        self.pool = [] if generate_per_item else [self._make(i) for i in range(pool)]

    def _make(self, i: int) -> Any:
        src = make_source(i, self.seed, self.size)
        if self.as_pil:
            from PIL import Image  # noqa: PLC0415 (pillow is a bench extra)
            return Image.fromarray(src)
        return src

    def __len__(self) -> int:
        return self.length

    def load_raw(self, i: int) -> tuple[Any, int]:
        image = self._make(i) if self.generate_per_item else self.pool[i % len(self.pool)]
        return image, i % NUM_CLASSES

    def apply_transform(self, raw: tuple[Any, int]) -> tuple[torch.Tensor, int]:
        image, label = raw
        return self.transform(image), label

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        return self.apply_transform(self.load_raw(i))
