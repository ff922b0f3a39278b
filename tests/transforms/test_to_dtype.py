"""uint8 <-> float conversions: T.ToDtype(scale=True), CompactBatch.expand() and the Loader give
torchvision v2's bits, the same on every fastprep path."""

import numpy as np
import pytest
import torch

import fastprep
from fastprep import compact_collate
from fastprep import transforms as T

pytestmark = pytest.mark.one_backend

ALL_UINT8 = torch.arange(256, dtype=torch.uint8).reshape(1, 16, 16)
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


# torchvision v2's to_dtype_image (torchvision/transforms/v2/functional/_misc.py, scale=True),
# written out because torchvision cannot load its ops against this machine's CPU torch:
#   int -> float:   image.to(dtype).mul_(1.0 / _max_value(image.dtype))
#   float -> int:   eps = 1e-3; image.mul(float(_max_value(dtype)) + 1.0 - eps).to(dtype)
# with _max_value(torch.uint8) == 255 (torchvision/transforms/_functional_tensor.py).
def torchvision_uint8_to_float(image, dtype):
    return image.to(dtype).mul_(1.0 / 255)


def torchvision_float_to_uint8(image):
    return image.mul(float(255) + 1.0 - 1e-3).to(torch.uint8)


def _torchvision():
    try:
        from torchvision.transforms.v2 import functional
        return functional
    except Exception:  # noqa: BLE001 (not installed, or built against another torch)
        return None


@pytest.mark.parametrize("dtype", FLOATS)
def test_uint8_to_float_is_torchvisions_formula_bit_for_bit(dtype):
    got = T.ToDtype(dtype, scale=True)(ALL_UINT8)
    want = torchvision_uint8_to_float(ALL_UINT8, dtype)
    assert got.dtype == dtype and torch.equal(got.view(-1), want.view(-1))
    assert torch.equal(got.to(torch.float64).mul(255).round(), ALL_UINT8.double())  # every level survives
    tv = _torchvision()
    if tv is not None:
        assert torch.equal(got, tv.to_dtype(ALL_UINT8, dtype, scale=True))


def test_the_formula_is_not_a_division():
    """x * (1/255) and x / 255 differ by an ulp on about half the levels: the test can tell them apart."""
    divided = ALL_UINT8.float() / 255
    differs = (T.ToDtype(torch.float32, scale=True)(ALL_UINT8) != divided).sum().item()
    assert differs > 100


def test_float_to_uint8_maps_half_to_127_as_torchvision():
    assert T.ToDtype(torch.uint8, scale=True)(torch.full((1, 1, 1), 0.5)).item() == 127
    x = torch.cat([torch.linspace(0, 1, 100001), torch.rand(10000, generator=torch.Generator().manual_seed(0)),
                   torch.arange(256) / 255]).reshape(1, 1, -1)
    for dtype in FLOATS:
        xi = x.to(dtype)
        got = T.ToDtype(torch.uint8, scale=True)(xi)
        assert torch.equal(got, torchvision_float_to_uint8(xi)), dtype
    round_trip = T.ToDtype(torch.uint8, scale=True)(T.ToDtype(torch.float32, scale=True)(ALL_UINT8))
    assert torch.equal(round_trip, ALL_UINT8)
    tv = _torchvision()
    if tv is not None:
        assert torch.equal(T.ToDtype(torch.uint8, scale=True)(x), tv.to_dtype(x, torch.uint8, scale=True))


@pytest.mark.parametrize("dtype", FLOATS)
def test_expand_and_the_loader_give_the_same_bits_as_to_dtype(dtype):
    want = T.ToDtype(dtype, scale=True)(ALL_UINT8)
    batch = compact_collate([(ALL_UINT8,), (ALL_UINT8,)])
    assert torch.equal(batch.expand(dtype=dtype)[0][1], want)
    if dtype == torch.float32:
        images = next(iter(fastprep.Loader([(ALL_UINT8, 0)] * 2, 2, threads=1, seed=0, expand=True)))[0]
        assert torch.equal(images[1], want)


def test_other_scaled_conversions_follow_torchvision():
    x = torch.tensor([[[0, 1, 127, 128, 255]]], dtype=torch.uint8)
    assert T.ToDtype(torch.int16, scale=True)(x).tolist() == [[[0, 128, 16256, 16384, 32640]]]  # << 7
    assert T.ToDtype(torch.uint8, scale=True)(torch.tensor([[[32767]]], dtype=torch.int16)).item() == 255
    assert torch.equal(T.ToDtype(torch.float64, scale=True)(torch.full((1, 1, 1), 0.25)),
                       torch.full((1, 1, 1), 0.25, dtype=torch.float64))  # float -> float: no scaling
    assert T.ToDtype(torch.float32)(x).tolist() == [[[0.0, 1.0, 127.0, 128.0, 255.0]]]  # scale=False: a cast
    assert torch.equal(T.ToDtype(torch.uint8, scale=True)(x), x)  # same dtype: unchanged
    with pytest.raises(RuntimeError, match="conversion from torch.float32 to torch.int32 cannot be performed"):
        T.ToDtype(torch.int32, scale=True)(torch.zeros(1, 1, 1))


def test_to_dtype_takes_hwc_numpy_as_the_other_transforms():
    arr = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    out = T.ToDtype(torch.float32, scale=True)(arr)
    assert out.shape == (3, 2, 4) and torch.equal(out, torchvision_uint8_to_float(torch.from_numpy(arr).permute(2, 0, 1),
                                                                               torch.float32))
