"""crop_mask_ycbcr: the target pipeline's per-sample work in one pass. Schema, fake kernel and
the torch-ops composition (the definition, and what non-CPU devices run). Kernels:
csrc/kernels/crop_mask_ycbcr.cpp (native), numba_kernels/_crop_mask_ycbcr.py (Numba)."""

from __future__ import annotations

import torch

import fastprep.core._counter_rng as counter_rng
import fastprep.ops._checks as checks
from fastprep.ops._library import define, impl_any_device, writes_buffers
from fastprep.ops._output_checks import check_out_dtype, check_output

__all__ = ["crop_mask_ycbcr", "crop_mask_ycbcr_batch", "mask_ycbcr"]

define("crop_mask_ycbcr(Tensor img, int height, int width, float p, int seed, str layout='HWC', "
       "str structure='cross', ScalarType? out_dtype=None, float scale=1.0, bool apply_mask=True, "
       "bool return_mask=False, int? mask_seed=None, bool hflip=False) -> (Tensor, Tensor)")
# The batched form writes into buffers the caller owns (a loader's batch slots): no per-sample
# output tensor and no stack copy.
define("crop_mask_ycbcr_batch(Tensor[] imgs, int[] tops, int[] lefts, int height, int width, float p, "
       "int[] mask_seeds, Tensor(a!) out, str layout='HWC', str structure='cross', float scale=1.0, "
       "bool apply_mask=True, Tensor(b!)? masks=None, bool[]? hflips=None, bool[]? vflips=None, "
       "bool[]? transposes=None) -> ()")

def crop_mask_ycbcr(img: torch.Tensor, height: int, width: int, p: float, seed: int,
                    layout: str = "HWC", structure: str = "cross",
                    out_dtype: torch.dtype | None = None, scale: float = 1.0, *,
                    apply_mask: bool = True, return_mask: bool = False, mask_seed: int | None = None,
                    hflip: bool = False):
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
        hflip: cut the crop from the image flipped left-right, as ``random_crop(..., hflip=True)``
            (torchvision's RandomHorizontalFlip before the crop) without flipping the image; the
            mask is drawn on the output, so it is the same mask as without the flip.

    Example:
        >>> img = torch.randint(0, 256, (512, 512, 3), dtype=torch.uint8)
        >>> crop_mask_ycbcr(img, 256, 256, 0.25, seed=0).shape
        torch.Size([3, 256, 256])
    """
    check_out_dtype("crop_mask_ycbcr", out_dtype)
    seed = checks.op_seed("crop_mask_ycbcr", "seed", seed)
    height, width = checks.op_int("crop_mask_ycbcr", "height", height), checks.op_int("crop_mask_ycbcr", "width", width)
    if mask_seed is not None:
        mask_seed = checks.op_seed("crop_mask_ycbcr", "mask_seed", mask_seed)
    image, mask = torch.ops.fastprep.crop_mask_ycbcr.default(img, height, width, p, seed, layout, structure,
                                                             out_dtype, scale, apply_mask, return_mask,
                                                             mask_seed, hflip)
    return (image, mask) if return_mask else image


def crop_mask_ycbcr_batch(imgs: list[torch.Tensor], tops: list[int], lefts: list[int], height: int, width: int,
                          p: float, mask_seeds: list[int], out: torch.Tensor, *, layout: str = "HWC",
                          structure: str = "cross", scale: float = 1.0, apply_mask: bool = True,
                          masks: torch.Tensor | None = None, hflips: list[bool] | None = None,
                          vflips: list[bool] | None = None, transposes: list[bool] | None = None) -> torch.Tensor:
    """:func:`crop_mask_ycbcr` on samples whose parameters were drawn already, into a buffer you
    own: ``out[i]`` gets the window at ``(tops[i], lefts[i])`` of ``imgs[i]`` (read right to left
    when ``hflips[i]``), masked by the mask of ``mask_seeds[i]``, as YCbCr of ``out``'s dtype, and
    ``masks[i]`` its packed mask. One call runs a chunk without the GIL and allocates nothing (the
    Loader, the fused Compose). With ``random_crop_params``' window of a seed (at ``W - left -
    width`` when flipped) and ``derive_seed(seed, 1)``, sample i is ``crop_mask_ycbcr``'s output.

    Args:
        imgs: uint8 RGB images (sizes may differ), ``[H, W, 3]`` or ``[3, H, W]`` per `layout`.
        tops, lefts: each window's first row and column in its image (inside it).
        mask_seeds: one seed per image for its mask; hflips: optional, one bool per image.
        vflips, transposes: optional, one bool per image: the window's rows read bottom-up, and
            its rows written as the output's columns (the window is then ``width x height`` of
            the image: a quarter turn is a horizontal flip then a transpose). The mask is drawn
            on the output (``[height, width]``), as without them.
        out: contiguous ``[len(imgs), 3, height, width]``, uint8 / float32 / float16 / bfloat16.
        masks: optional contiguous uint8 ``[len(imgs), height, ceil(width / 8)]`` for the bits.

    Example:
        >>> imgs = [torch.zeros(40, 50, 3, dtype=torch.uint8) for _ in range(4)]
        >>> out = torch.empty(4, 3, 32, 32, dtype=torch.uint8)
        >>> crop_mask_ycbcr_batch(imgs, [0, 8, 8, 0], [0, 18, 0, 9], 32, 32, 0.25, [0, 1, 2, 3], out).shape
        torch.Size([4, 3, 32, 32])
    """
    op = "crop_mask_ycbcr_batch"
    height, width = checks.op_int(op, "height", height), checks.op_int(op, "width", width)
    mask_seeds = [checks.op_seed(op, f"mask_seeds[{i}]", s) for i, s in enumerate(mask_seeds)]
    torch.ops.fastprep.crop_mask_ycbcr_batch.default(list(imgs), list(tops), list(lefts), height, width, p, mask_seeds,
                                                     out, layout, structure, scale, apply_mask, masks,
                                                     *(None if f is None else [bool(v) for v in f]
                                                       for f in (hflips, vflips, transposes)))
    return out


def oriented_window(window: torch.Tensor, hflip: bool, vflip: bool, transpose: bool) -> torch.Tensor:
    """A ``[..., h, w]`` window as crop_mask_ycbcr_batch reads it: right to left (hflip), bottom-up
    (vflip), then transposed (a view when only transposed)."""
    dims = [d for d, f in ((-1, hflip), (-2, vflip)) if f]
    window = window.flip(dims) if dims else window
    return window.transpose(-2, -1) if transpose else window


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


def check_image(op: str, arg: str, img: torch.Tensor, hwc: bool) -> checks.ImageView:
    """One source image (`arg` names it): uint8, 3-D, 3 channels (csrc/ops/crop_mask_ycbcr.cpp)."""
    checks.check_tensor(op, arg, img)
    checks.check_dtype(op, arg, img, torch.uint8)
    if img.dim() != 3:
        checks.fail(op, ": expected ", arg, " to be a 3-D ", "[H, W, C]" if hwc else "[C, H, W]",
                    " image, got a ", img.dim(), "-D tensor")
    v = checks.image_view(op, arg, img, hwc)
    if v.c != 3:
        checks.fail(op, ": expected ", arg, " to have 3 channels, got ", v.c)
    return v


def check_crop_size(op: str, height: int, width: int) -> None:
    if height <= 0 or width <= 0:
        checks.fail(op, ": expected a positive crop size, got height=", height, " width=", width)


def check_fits(op: str, v: checks.ImageView, height: int, width: int) -> None:
    if height > v.h or width > v.w:
        checks.fail(op, ": crop ", height, "x", width, " is larger than the image ", v.h, "x", v.w)


def check_shared(op: str, p: float, structure: str, odt: torch.dtype, scale: float) -> None:
    """The arguments every sample shares but the crop size."""
    if not 0.0 <= p <= 1.0:  # also rejects NaN
        checks.fail(op, ": expected 0 <= p <= 1, got p=", checks.fmt_float(p))
    checks.parse_structure(op, structure)
    check_output(op, odt, scale)


def check_crop_mask_ycbcr(img, height, width, p, layout, structure, out_dtype, scale):
    """Returns (ImageView, output dtype)."""
    op = "crop_mask_ycbcr"
    checks.check_tensor(op, "img", img)
    checks.check_dtype(op, "img", img, torch.uint8)
    v = check_image(op, "img", img, checks.parse_layout(op, layout))
    check_crop_size(op, height, width)
    check_fits(op, v, height, width)
    odt = torch.uint8 if out_dtype is None else out_dtype
    check_shared(op, p, structure, odt, scale)
    checks.check_output_bytes(op, [3, height, width], odt, lambda: f"height={height}, width={width}")
    return v, odt


def _check_out(op: str, arg: str, t: torch.Tensor, want: list[int]) -> None:
    if not t.is_contiguous() or list(t.shape) != want:
        checks.fail(op, ": expected ", arg, " to be a contiguous ", want, " tensor, got ", list(t.shape),
                    "" if t.is_contiguous() else " (not contiguous)")


def check_window_at(op: str, i: int, v: checks.ImageView, top: int, left: int, height: int, width: int) -> None:
    """Where crop_mask_ycbcr_batch reads sample i: inside imgs[i] (the binding's check_window_at)."""
    for arg, at, room in (("tops", top, v.h - height), ("lefts", left, v.w - width)):
        if not 0 <= at <= room:
            checks.fail(op, ": expected ", arg, "[", i, "] in [0, ", room, "] (imgs[", i, "] is ", v.h, "x", v.w,
                        ", the crop ", height, "x", width, "), got ", at)


def check_crop_mask_ycbcr_batch(imgs, tops, lefts, height, width, p, mask_seeds, out, layout, structure, scale,
                                masks, hflips=None, vflips=None, transposes=None) -> list[checks.ImageView]:
    """Mirror of crop_mask_ycbcr_batch's checks in the C++ binding; returns each image's view."""
    op = "crop_mask_ycbcr_batch"
    checks.check_tensor(op, "out", out)
    hwc = checks.parse_layout(op, layout)
    checks.check_image_dtype(op, "out", out)
    check_crop_size(op, height, width)
    check_shared(op, p, structure, out.dtype, scale)
    n = len(imgs)
    for values, one, arg in ((tops, "top", "tops"), (lefts, "left", "lefts"), (mask_seeds, "mask seed", "mask_seeds"),
                             (hflips, "hflip", "hflips"), (vflips, "vflip", "vflips"),
                             (transposes, "transpose", "transposes")):
        if values is not None and len(values) != n:
            checks.fail(op, ": expected one ", one, " per image (", n, "), got ", len(values), " ", arg)
    _check_out(op, "out", out, [n, 3, height, width])
    if masks is not None:
        checks.check_same_device(op, "masks", masks, "out", out)
        checks.check_dtype(op, "masks", masks, torch.uint8)
        _check_out(op, "masks", masks, [n, height, (width + 7) // 8])
    views = []
    for i, img in enumerate(imgs):  # nothing read may share memory with what is written
        if img is not None:
            checks.check_same_device(op, f"imgs[{i}]", img, "out", out)
        views.append(check_image(op, f"imgs[{i}]", img, hwc))
        rh, rw = (width, height) if transposes and transposes[i] else (height, width)  # the window it reads
        check_fits(op, views[-1], rh, rw)
        check_window_at(op, i, views[-1], tops[i], lefts[i], rh, rw)
        checks.check_no_overlap(op, "out", out, f"imgs[{i}]", img)
        if masks is not None:
            checks.check_no_overlap(op, "masks", masks, f"imgs[{i}]", img)
    if masks is not None:
        checks.check_outputs_apart(op, "out", out, "masks", masks)
    return views


def mask_seed_of(seed: int, mask_seed: int | None) -> int:
    return counter_rng.derive_seed(seed, 1) if mask_seed is None else mask_seed


@torch.library.register_fake("fastprep::crop_mask_ycbcr")
def _crop_mask_ycbcr_fake(img, height, width, p, seed, layout="HWC", structure="cross",
                          out_dtype=None, scale=1.0, apply_mask=True, return_mask=False, mask_seed=None,
                          hflip=False):
    _, odt = check_crop_mask_ycbcr(img, height, width, p, layout, structure, out_dtype, scale)
    mask_shape = [height, (width + 7) // 8] if return_mask else [0]
    return img.new_empty([3, height, width], dtype=odt), img.new_empty(mask_shape, dtype=torch.uint8)


def crop_mask_ycbcr_torch(img, height, width, p, seed, layout="HWC", structure="cross",
                          out_dtype=None, scale=1.0, apply_mask=True, return_mask=False, mask_seed=None,
                          hflip=False):
    """The composition that defines the op, on any device."""
    _, odt = check_crop_mask_ycbcr(img, height, width, p, layout, structure, out_dtype, scale)
    ops = torch.ops.fastprep
    crop = ops.random_crop(img, height, width, seed, layout, False, 0.0, hflip)
    mask = ops.random_dilated_mask([height, width], p, mask_seed_of(seed, mask_seed), structure, 1,
                                   True).to(img.device)
    if apply_mask:
        crop = ops.mask_fill(crop, mask, 0.0, "CHW")
    image = ops.rgb_to_ycbcr(crop, "CHW", odt, scale)
    return image, (mask if return_mask else img.new_empty([0], dtype=torch.uint8))


impl_any_device("crop_mask_ycbcr", crop_mask_ycbcr_torch)


@torch.library.register_fake("fastprep::crop_mask_ycbcr_batch")
def _crop_mask_ycbcr_batch_fake(imgs, tops, lefts, height, width, p, mask_seeds, out, layout="HWC", structure="cross",
                                scale=1.0, apply_mask=True, masks=None, hflips=None, vflips=None, transposes=None):
    check_crop_mask_ycbcr_batch(imgs, tops, lefts, height, width, p, mask_seeds, out, layout, structure, scale, masks,
                                hflips, vflips, transposes)


def crop_mask_ycbcr_batch_torch(imgs, tops, lefts, height, width, p, mask_seeds, out, layout="HWC", structure="cross",
                                scale=1.0, apply_mask=True, masks=None, hflips=None, vflips=None, transposes=None):
    """The batch as its definition, on out's device: each window (``crop``, reversed when flipped,
    upside down when vflipped, transposed when transposed), its seed's mask applied, the colour
    conversion."""
    check_crop_mask_ycbcr_batch(imgs, tops, lefts, height, width, p, mask_seeds, out, layout, structure, scale, masks,
                                hflips, vflips, transposes)
    ops = torch.ops.fastprep
    for i, img in enumerate(imgs):
        turn = bool(transposes and transposes[i])
        crop = ops.crop(img.to(out.device), tops[i], lefts[i], *((width, height) if turn else (height, width)), layout)
        crop = oriented_window(crop, bool(hflips and hflips[i]), bool(vflips and vflips[i]), turn)
        if turn:
            crop = crop.contiguous()
        mask = ops.random_dilated_mask([height, width], p, mask_seeds[i], structure, 1, True).to(out.device)
        if apply_mask:
            crop = ops.mask_fill(crop, mask, 0.0, "CHW")
        out[i].copy_(ops.rgb_to_ycbcr(crop, "CHW", out.dtype, scale))
        if masks is not None:
            masks[i].copy_(mask)


impl_any_device("crop_mask_ycbcr_batch", crop_mask_ycbcr_batch_torch)


# Nothing in the batch op is differentiable: buffers taking part in autograd are refused, and both
# get their versions bumped by the write.
writes_buffers("crop_mask_ycbcr_batch", ("out", "masks"), "uint8 images' crops")
