"""The torch-ops implementations that devices without a fastprep kernel run (CUDA, MPS, ...) give
the CPU kernels' bits. They are plain torch ops, so running them here on the CPU checks the
arithmetic; tests/ops/test_cuda.py runs the same on a GPU when there is one."""

import numpy as np
import pytest
import torch

import fastprep
from fastprep.ops._color import rgb_to_ycbcr_torch, ycbcr_to_rgb_torch
from fastprep.ops._crop import crop_torch, random_crop_torch
from fastprep.ops._crop_mask_ycbcr import crop_mask_ycbcr_torch
from fastprep.ops._dilate import dilate_packed_torch, dilate_torch
from fastprep.ops._mask_fill import mask_fill__torch, mask_fill_torch
from fastprep.ops._pack_bits import pack_bits_torch, unpack_bits_torch

pytestmark = pytest.mark.op_layer

FLOAT_OUT = [(torch.float32, 1 / 255), (torch.float16, 1.0), (torch.bfloat16, 0.5)]


def _bits(t: torch.Tensor) -> torch.Tensor:
    """Compare floats by their bits (NaN payloads and signed zeros included)."""
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32}[t.element_size()])


def all_colours() -> torch.Tensor:
    v = torch.arange(256, dtype=torch.uint8)
    return torch.stack(torch.meshgrid(v, v, v, indexing="ij")).reshape(3, 4096, 4096)


@pytest.mark.parametrize("kernel,composition", [(fastprep.rgb_to_ycbcr, rgb_to_ycbcr_torch),
                                                (fastprep.ycbcr_to_rgb, ycbcr_to_rgb_torch)])
def test_colour_composition_is_exact_for_every_uint8_colour(kernel, composition):
    x = all_colours()
    assert torch.equal(composition(x), kernel(x))


@pytest.mark.parametrize("kernel,composition", [(fastprep.rgb_to_ycbcr, rgb_to_ycbcr_torch),
                                                (fastprep.ycbcr_to_rgb, ycbcr_to_rgb_torch)])
@pytest.mark.parametrize("in_dtype", [torch.uint8, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("out_dtype,scale", FLOAT_OUT)
def test_colour_composition_float_outputs_have_the_kernels_bits(kernel, composition, in_dtype, out_dtype, scale):
    g = torch.Generator().manual_seed(0)
    x = torch.rand(2, 33, 47, 3, generator=g)
    x = (x * 255).to(torch.uint8) if in_dtype == torch.uint8 else x.to(in_dtype)
    assert torch.equal(_bits(composition(x, "HWC", out_dtype, scale)), _bits(kernel(x, "HWC", out_dtype, scale)))


def _masks(shape, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).random(shape) < 0.3)


@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32, torch.float16, torch.bfloat16])
@pytest.mark.parametrize("layout", ["CHW", "HWC"])
@pytest.mark.parametrize("packed", [False, True])
def test_mask_fill_composition(dtype, layout, packed):
    g = torch.Generator().manual_seed(1)
    shape = [2, 3, 7, 70] if layout == "CHW" else [2, 7, 70, 3]
    img = (torch.rand(shape, generator=g) * 200).to(dtype)
    for m in (_masks([7, 70]), _masks([2, 7, 70])):
        mask = fastprep.pack_bits(m) if packed else m
        assert torch.equal(mask_fill_torch(img, mask, 5, layout), fastprep.mask_fill(img, mask, 5, layout))
        a, b = img.clone(), img.clone()
        mask_fill__torch(a, mask, 9, layout)
        fastprep.mask_fill_(b, mask, 9, layout)
        assert torch.equal(a, b)


@pytest.mark.parametrize("shape", [[9, 70], [2, 3, 9, 64], [1, 1], [5, 130]])
@pytest.mark.parametrize("structure", ["cross", "square"])
def test_dilate_compositions(shape, structure):
    m = _masks(shape, seed=2) & _masks(shape, seed=3)
    packed = fastprep.pack_bits(m)
    for iterations in (0, 1, 3, 2**62):
        assert torch.equal(dilate_torch(m, structure, iterations), fastprep.dilate(m, structure, iterations))
        assert torch.equal(dilate_packed_torch(packed, shape[-1], structure, iterations),
                           fastprep.dilate_packed(packed, shape[-1], structure, iterations))


def test_crop_and_bit_compositions():
    x = torch.randint(0, 256, (2, 40, 50, 3), dtype=torch.uint8)
    assert torch.equal(crop_torch(x, 3, 4, 20, 30, "HWC"), fastprep.crop(x, 3, 4, 20, 30, "HWC"))
    for seed in range(4):
        assert torch.equal(random_crop_torch(x, 45, 30, seed, "HWC", True, 7.0),
                           fastprep.random_crop(x, 45, 30, seed, "HWC", True, 7.0))
    m = _masks([3, 21, 19])
    for dim in (0, 1, -1):
        assert torch.equal(pack_bits_torch(m, dim), fastprep.pack_bits(m, dim))
        p = fastprep.pack_bits(m, dim, "big")
        assert torch.equal(unpack_bits_torch(p, m.shape[dim], dim, "big"), m)


@pytest.mark.parametrize("out_dtype,scale", [(None, 1.0), *FLOAT_OUT])
def test_crop_mask_ycbcr_composition(out_dtype, scale):
    x = torch.randint(0, 256, (60, 70, 3), dtype=torch.uint8)
    for apply_mask, return_mask in [(True, False), (True, True), (False, True)]:
        a = crop_mask_ycbcr_torch(x, 31, 45, 0.25, 3, "HWC", "cross", out_dtype, scale, apply_mask, return_mask)
        b = torch.ops.fastprep.crop_mask_ycbcr(x, 31, 45, 0.25, 3, "HWC", "cross", out_dtype, scale, apply_mask,
                                               return_mask, None)
        assert torch.equal(_bits(a[0]), _bits(b[0])) and torch.equal(a[1], b[1])


@pytest.mark.parametrize("out_dtype,scale", [(None, 1.0), *FLOAT_OUT])
def test_mask_ycbcr_on_a_batch_equals_the_fused_op_per_sample(out_dtype, scale):
    g = torch.Generator().manual_seed(4)
    images = [torch.randint(0, 256, (50, 60, 3), dtype=torch.uint8, generator=g) for _ in range(3)]
    seeds = [fastprep.draw_seed(g) for _ in images]
    crops = torch.stack([fastprep.random_crop(im, 32, 40, s, "HWC") for im, s in zip(images, seeds)])
    masks = torch.stack([fastprep.random_dilated_mask([32, 40], 0.25, fastprep.derive_seed(s, 1), packed=True)
                         for s in seeds])
    got = fastprep.mask_ycbcr(crops, masks, out_dtype, scale)
    want = torch.stack([fastprep.crop_mask_ycbcr(im, 32, 40, 0.25, s, "HWC", out_dtype=out_dtype, scale=scale)
                        for im, s in zip(images, seeds)])
    assert torch.equal(_bits(got), _bits(want))
