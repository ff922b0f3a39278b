"""hflip on random_crop, crop_mask_ycbcr and crop_mask_ycbcr_batch: the crop of the image flipped
left-right (torchvision's RandomHorizontalFlip before the crop), read from the unflipped image.
Reference: the op on ``img.flip(W)``; every backend (native, Numba, the torch composition other
devices run) gives its bits, and the gradient is the reference's."""

import numpy as np
import pytest
import torch

import fastprep
import fastprep.numba_kernels._crop as numba_crop
import fastprep.numba_kernels._crop_mask_ycbcr as numba_fused
from fastprep.ops._crop import random_crop_torch
from fastprep.ops._crop_mask_ycbcr import crop_mask_ycbcr_torch

from helpers.crop_draws import drawn
from helpers.op_calls import call

pytestmark = pytest.mark.kernel

DTYPES = [torch.uint8, torch.float32, torch.float16, torch.bfloat16]


def _image(shape, dtype, seed=0):
    x = torch.from_numpy(np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8))
    return x if dtype == torch.uint8 else (x.to(torch.float32) / 7).to(dtype)


def _w_dim(layout):
    return -1 if layout == "CHW" else -2


def _views(dtype):
    chw = _image((3, 21, 34), dtype)
    hwc = chw.permute(1, 2, 0)
    return [(chw, "CHW"), (hwc.contiguous(), "HWC"), (hwc, "HWC"), (chw[:, 2:, ::3], "CHW"),
            (torch.stack([chw, chw.flip(0)]), "CHW"), (torch.stack([hwc, hwc.flip(1)]).contiguous(), "HWC")]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("pad,size", [(False, (9, 11)), (False, (19, 12)), (True, (30, 40)), (True, (5, 50))])
def test_random_crop_hflip_is_the_crop_of_the_flipped_image(dtype, pad, size):
    for x, layout in _views(dtype):
        for seed in (0, 5, -3, 2**62):
            want = fastprep.random_crop(x.flip(_w_dim(layout)), *size, seed, layout, pad, 3.0)
            for got in (fastprep.random_crop(x, *size, seed, layout, pad, 3.0, hflip=True),
                        numba_crop.random_crop(x, *size, seed, layout, pad, 3.0, hflip=True),
                        random_crop_torch(x, *size, seed, layout, pad, 3.0, hflip=True)):
                assert torch.equal(got.view(torch.uint8) if dtype != torch.uint8 else got,
                                   want.view(torch.uint8) if dtype != torch.uint8 else want), (layout, seed)


def test_random_crop_hflip_of_a_zero_width_image_is_all_fill():
    x = torch.zeros(3, 4, 0, dtype=torch.uint8)
    for fn in (fastprep.random_crop, numba_crop.random_crop):
        assert torch.equal(fn(x, 2, 3, 1, "CHW", True, 9.0, hflip=True), torch.full((3, 2, 3), 9, dtype=torch.uint8))


@pytest.mark.parametrize("layout", ["CHW", "HWC"])
def test_random_crop_hflip_gradient_is_the_flipped_images(layout):
    base = _image((2, 3, 12, 15) if layout == "CHW" else (2, 12, 15, 3), torch.float32)
    weights = torch.randn(2, 3, 14, 9)
    grads = []
    for flip_first in (True, False):
        x = base.clone().requires_grad_()
        if flip_first:
            out = fastprep.random_crop(x.flip(_w_dim(layout)), 14, 9, 4, layout, True, 0.0)
        else:
            out = fastprep.random_crop(x, 14, 9, 4, layout, True, 0.0, hflip=True)
        (out * weights).sum().backward()
        grads.append(x.grad)
    assert torch.equal(grads[0], grads[1])


def test_random_crop_hflip_opcheck():
    torch.library.opcheck(torch.ops.fastprep.random_crop.default,
                          (_image((3, 9, 8), torch.float32), 5, 6, 3, "CHW", True, 1.0, True))


@pytest.mark.parametrize("out_dtype,scale", [(None, 1.0), (torch.float32, 1 / 255), (torch.bfloat16, 0.5)])
@pytest.mark.parametrize("apply_mask,return_mask", [(True, True), (False, True), (True, False)])
def test_crop_mask_ycbcr_hflip_is_the_fused_op_on_the_flipped_image(out_dtype, scale, apply_mask, return_mask):
    hwc = _image((40, 57, 3), torch.uint8, seed=2)
    for x, layout in [(hwc, "HWC"), (hwc.permute(2, 0, 1), "CHW"), (hwc.permute(2, 0, 1).contiguous(), "CHW"),
                      (hwc[1:, ::2], "HWC")]:
        for seed in (1, -9, 2**61):
            kw = dict(out_dtype=out_dtype, scale=scale, apply_mask=apply_mask, return_mask=return_mask)
            want = fastprep.crop_mask_ycbcr(x.flip(_w_dim(layout)), 17, 23, 0.3, seed, layout, **kw)
            got = fastprep.crop_mask_ycbcr(x, 17, 23, 0.3, seed, layout, **kw, hflip=True)
            got_nb = numba_fused.crop_mask_ycbcr(x, 17, 23, 0.3, seed, layout, "cross", out_dtype, scale,
                                                 apply_mask, return_mask, None, True)
            got_torch = crop_mask_ycbcr_torch(x, 17, 23, 0.3, seed, layout, "cross", out_dtype, scale, apply_mask,
                                              return_mask, None, True)
            want = want if return_mask else (want,)
            got = got if return_mask else (got,)
            for g in (got, got_nb[:len(want)], got_torch[:len(want)]):
                assert all(torch.equal(a, b) for a, b in zip(g, want, strict=True)), (layout, seed)


@pytest.mark.parametrize("width", [1, 2, 15, 16, 17, 47, 48, 63, 64, 65, 100, 129, 200])
def test_crop_mask_ycbcr_hflip_uint8_every_row_tail(width):
    """uint8 out of a flipped packed read runs its own SIMD rows on some levels (x86-64-v4-icl reads
    the window right to left in 16-pixel groups): every tail length of a group and of a 64-pixel
    block, masked and not, gives the bits of the op on the flipped image."""
    x = _image((9, 230, 3), torch.uint8, seed=width)
    for apply_mask in (True, False):
        want = fastprep.crop_mask_ycbcr(x.flip(1), 5, width, 0.3, width, apply_mask=apply_mask)
        got = fastprep.crop_mask_ycbcr(x, 5, width, 0.3, width, apply_mask=apply_mask, hflip=True)
        assert torch.equal(got, want), apply_mask


def test_crop_mask_ycbcr_hflip_mask_is_drawn_on_the_output():
    """The mask does not depend on the flip: it is in output coordinates."""
    x = _image((30, 30, 3), torch.uint8)
    _, m0 = fastprep.crop_mask_ycbcr(x, 16, 16, 0.5, 3, return_mask=True)
    _, m1 = fastprep.crop_mask_ycbcr(x, 16, 16, 0.5, 3, return_mask=True, hflip=True)
    assert torch.equal(m0, m1)


@pytest.mark.parametrize("with_masks", [False, True])
def test_batch_hflips_give_each_samples_per_sample_bits(with_masks):
    imgs = [_image((31 + k, 45 + 2 * k, 3), torch.uint8, seed=k) for k in range(5)]
    seeds, flips = [3, -1, 7, 2**40, 0], [True, False, True, True, False]
    out = torch.empty(5, 3, 20, 30)
    masks = torch.empty(5, 20, 4, dtype=torch.uint8) if with_masks else None
    tops, lefts = drawn(imgs, 20, 30, seeds, flips)
    mask_seeds = [fastprep.derive_seed(s, 1) for s in seeds]
    fastprep.crop_mask_ycbcr_batch(imgs, tops, lefts, 20, 30, 0.25, mask_seeds, out, scale=1 / 255, masks=masks,
                                   hflips=flips)
    for i, img in enumerate(imgs):
        image, mask = fastprep.crop_mask_ycbcr(img, 20, 30, 0.25, seeds[i], out_dtype=torch.float32, scale=1 / 255,
                                               return_mask=True, hflip=flips[i])
        assert torch.equal(out[i], image) and (not with_masks or torch.equal(masks[i], mask))
    out_nb = torch.empty_like(out)
    masks_nb = torch.empty_like(masks) if with_masks else None
    call("crop_mask_ycbcr_batch", imgs, tops, lefts, 20, 30, 0.25, mask_seeds, out_nb, scale=1 / 255, masks=masks_nb,
         hflips=flips).numba()
    assert torch.equal(out_nb, out) and (not with_masks or torch.equal(masks_nb, masks))


def test_batch_hflips_opcheck():
    imgs = [_image((40, 30, 3), torch.uint8), _image((35, 33, 3), torch.uint8, seed=1)]
    torch.library.opcheck(torch.ops.fastprep.crop_mask_ycbcr_batch.default,
                          (imgs, [1, 19], [14, 17], 16, 16, 0.25, [1, 2], torch.empty(2, 3, 16, 16), "HWC", "cross",
                           1.0, True, torch.empty(2, 16, 2, dtype=torch.uint8), [True, False]))


def test_hflip_that_is_not_a_bool_names_the_argument():
    x = torch.zeros(3, 8, 8, dtype=torch.uint8)
    with pytest.raises(RuntimeError, match=r"(?s)Expected a value of type 'bool' for argument 'hflip'.*Value: 'yes'"):
        torch.ops.fastprep.random_crop(x, 4, 4, 0, "CHW", False, 0.0, "yes")
