"""crop_mask_ycbcr: the target pipeline's per-sample work in one pass. Schema, fake kernel and
the torch-ops composition (the definition, and what non-CPU devices run). Kernels:
csrc/kernels/crop_mask_ycbcr.cpp (native), numba_kernels/crop_mask_ycbcr.py (Numba)."""

from __future__ import annotations

import torch

from fastprep import counter_rng
from fastprep.ops import checks
from fastprep.ops._library import define, impl_any_device

__all__ = ["crop_mask_ycbcr", "mask_ycbcr"]

define("crop_mask_ycbcr(Tensor img, int height, int width, float p, int seed, str layout='HWC', "
       "str structure='cross', ScalarType? out_dtype=None, float scale=1.0, bool apply_mask=True, "
       "bool return_mask=False, int? mask_seed=None) -> (Tensor, Tensor)")

OUT_DTYPES = (torch.uint8, torch.float32, torch.float16, torch.bfloat16)


def crop_mask_ycbcr(img: torch.Tensor, height: int, width: int, p: float, seed: int,
                    layout: str = "HWC", structure: str = "cross",
                    out_dtype: torch.dtype | None = None, scale: float = 1.0, *,
                    apply_mask: bool = True, return_mask: bool = False, mask_seed: int | None = None):
    """Random crop, dilated Bernoulli(p) mask zeroing all channels, RGB -> YCbCr: one pass that
    reads only the crop window of a uint8 RGB image (``[H, W, 3]``, or ``[3, H, W]`` with
    layout="CHW") and writes YCbCr CHW planes of `out_dtype` (uint8 by default) times `scale`.

    Bit-identical to::

        c = random_crop(img, height, width, seed, layout)
        m = random_dilated_mask([height, width], p, mask_seed, structure, packed=True)
        rgb_to_ycbcr(mask_fill(c, m, 0), "CHW", out_dtype, scale)

    with ``mask_seed = derive_seed(seed, 1)`` when not given: the crop uses `seed` itself (so
    random_crop with the same seed picks the same window) and the mask an independent stream.
    Args:
        apply_mask: zero the masked pixels (before the colour conversion). With
            ``apply_mask=False`` the mask is still drawn, only not applied.
        return_mask: return ``(image, packed_mask)``, the mask as bits (``[height,
            ceil(width / 8)]`` uint8, little bit order). ``apply_mask=False, return_mask=True``
            ships the unmasked uint8 image plus the bits, and the masked pixels are set on the
            device instead, to YCbCr black ``(0, 128, 128) * scale``.

    Example:
        >>> img = torch.randint(0, 256, (512, 512, 3), dtype=torch.uint8)
        >>> crop_mask_ycbcr(img, 256, 256, 0.25, seed=0).shape
        torch.Size([3, 256, 256])
    """
    image, mask = torch.ops.fastprep.crop_mask_ycbcr(img, height, width, p, seed, layout, structure,
                                                     out_dtype, scale, apply_mask, return_mask,
                                                     mask_seed)
    return (image, mask) if return_mask else image


def mask_ycbcr(images: torch.Tensor, masks: torch.Tensor, out_dtype: torch.dtype | None = None,
               scale: float = 1.0) -> torch.Tensor:
    """The mask and colour steps of :func:`crop_mask_ycbcr` on crops made elsewhere, on the device
    the batch is on: ``rgb_to_ycbcr(mask_fill(images, masks, 0), "CHW", out_dtype, scale)``.

    When CPUs are short, ship uint8 crops and packed masks (a quarter of the float bytes, the
    mask 1/24 of the image) and run this on the GPU: the result has the CPU's bits (integer
    arithmetic for uint8 output, the kernels' float32 operations otherwise), so sample i equals
    ``crop_mask_ycbcr(img_i, h, w, p, seed_i, ..., mask_seed=mask_seed_i)`` when crop i is
    ``random_crop(img_i, h, w, seed_i)`` and mask i is
    ``random_dilated_mask([h, w], p, mask_seed_i, packed=True)``.

    Args:
        images: uint8 RGB ``[N, 3, H, W]`` (or one ``[3, H, W]`` image).
        masks: bool ``[N, H, W]`` / ``[H, W]``, or the same packed by :func:`pack_bits`.
        out_dtype: uint8 (default), float32, float16 or bfloat16.
        scale: multiplies float outputs (1/255 for [0, 1] values).

    Example:
        >>> crops = torch.randint(0, 256, (4, 3, 8, 8), dtype=torch.uint8)
        >>> masks = torch.zeros(4, 8, 1, dtype=torch.uint8)  # packed, nothing masked
        >>> mask_ycbcr(crops, masks, torch.float32, 1 / 255).shape
        torch.Size([4, 3, 8, 8])
    """
    ops = torch.ops.fastprep
    odt = torch.uint8 if out_dtype is None else out_dtype
    return ops.rgb_to_ycbcr(ops.mask_fill(images, masks, 0.0, "CHW"), "CHW", odt, scale)


def check_crop_mask_ycbcr(img, height, width, p, layout, structure, out_dtype, scale):
    """Returns (ImageView, output dtype)."""
    op = "crop_mask_ycbcr"
    checks.check_dtype(op, "img", img, torch.uint8)
    hwc = checks.parse_layout(op, layout)
    if img.dim() != 3:
        checks.fail(op, ": expected img to be a 3-D ", "[H, W, C]" if hwc else "[C, H, W]",
                     " image, got a ", img.dim(), "-D tensor")
    v = checks.image_view(op, "img", img, hwc)
    if v.c != 3:
        checks.fail(op, ": expected img to have 3 channels, got ", v.c)
    if height <= 0 or width <= 0:
        checks.fail(op, ": expected a positive crop size, got height=", height, " width=", width)
    if height > v.h or width > v.w:
        checks.fail(op, ": crop ", height, "x", width, " is larger than the image ", v.h, "x", v.w)
    if not 0.0 <= p <= 1.0:  # also rejects NaN
        checks.fail(op, ": expected 0 <= p <= 1, got p=", p)
    if structure not in ("cross", "square"):
        checks.fail(op, ": expected structure to be 'cross' or 'square', got '", structure, "'")
    odt = torch.uint8 if out_dtype is None else out_dtype
    if odt not in OUT_DTYPES:
        checks.fail(op, ": expected out_dtype to be torch.uint8, torch.float32, torch.float16 or "
                     "torch.bfloat16, got ", odt)
    if odt == torch.uint8 and scale != 1.0:
        checks.fail(op, ": expected scale=1 for a torch.uint8 output, got scale=", f"{scale:g}")
    checks.check_output_bytes(op, [3, height, width], odt, lambda: f"height={height}, width={width}")
    return v, odt


def mask_seed_of(seed: int, mask_seed: int | None) -> int:
    return counter_rng.derive_seed(seed, 1) if mask_seed is None else mask_seed


@torch.library.register_fake("fastprep::crop_mask_ycbcr")
def _crop_mask_ycbcr_fake(img, height, width, p, seed, layout="HWC", structure="cross",
                          out_dtype=None, scale=1.0, apply_mask=True, return_mask=False, mask_seed=None):
    _, odt = check_crop_mask_ycbcr(img, height, width, p, layout, structure, out_dtype, scale)
    mask_shape = [height, (width + 7) // 8] if return_mask else [0]
    return img.new_empty([3, height, width], dtype=odt), img.new_empty(mask_shape, dtype=torch.uint8)


def crop_mask_ycbcr_torch(img, height, width, p, seed, layout="HWC", structure="cross",
                          out_dtype=None, scale=1.0, apply_mask=True, return_mask=False, mask_seed=None):
    """The composition that defines the op, on any device."""
    _, odt = check_crop_mask_ycbcr(img, height, width, p, layout, structure, out_dtype, scale)
    ops = torch.ops.fastprep
    crop = ops.random_crop(img, height, width, seed, layout, False, 0.0)
    mask = ops.random_dilated_mask([height, width], p, mask_seed_of(seed, mask_seed), structure, 1,
                                   True).to(img.device)
    if apply_mask:
        crop = ops.mask_fill(crop, mask, 0.0, "CHW")
    image = ops.rgb_to_ycbcr(crop, "CHW", odt, scale)
    return image, (mask if return_mask else img.new_empty([0], dtype=torch.uint8))


impl_any_device("crop_mask_ycbcr", crop_mask_ycbcr_torch)
