"""The ops on every layout and read direction users feed them: CHW and HWC uint8 sources, read
left to right and flipped (hflip). Native and Numba side by side (the summary prints each Numba
entry against its native twin), with the torch way where there is one and a memcpy floor.
The other benchmark files time one layout each; a slow path on another layout shows here.

Run: python -m pytest benchmarks/bench_layouts.py --benchmark-only -p no:logging
"""

import pytest
import torch

import fastprep
import fastprep.numba_kernels._color as numba_color
import fastprep.numba_kernels._crop as numba_crop
import fastprep.numba_kernels._crop_mask_ycbcr as numba_fused
import fastprep.numba_kernels._mask_fill as numba_mf

from conftest import bench_warm, requires_native, run_floor

SOURCE, CROP, SEED, P = 1024, 256, 7, 0.25
LAYOUTS = ["CHW", "HWC"]
FLIPS = [False, True]

pytestmark = pytest.mark.usefixtures("one_thread")


def _image(size: int, layout: str) -> torch.Tensor:
    hwc = torch.randint(0, 256, (size, size, 3), dtype=torch.uint8, generator=torch.Generator().manual_seed(0))
    return hwc if layout == "HWC" else hwc.permute(2, 0, 1).contiguous()


@pytest.fixture(scope="module", params=LAYOUTS)
def source(request):
    return request.param, _image(SOURCE, request.param)


@pytest.fixture(scope="module", params=LAYOUTS)
def small(request):
    return request.param, _image(CROP, request.param)


def _group(benchmark, op: str, layout: str, hflip: bool | None = None) -> None:
    flip = "" if hflip is None else (", hflip" if hflip else ", no flip")
    benchmark.group = f"layouts: {op}, {layout} uint8{flip}"


# random_crop: a 256^2 window of a 1024^2 image -> CHW.
@requires_native
@pytest.mark.parametrize("hflip", FLIPS)
def test_random_crop_native(benchmark, source, hflip):
    layout, img = source
    _group(benchmark, "random_crop 256^2 of 1024^2", layout, hflip)
    benchmark(fastprep.random_crop, img, CROP, CROP, SEED, layout, hflip=hflip)


@pytest.mark.parametrize("hflip", FLIPS)
def test_random_crop_numba(benchmark, source, hflip):
    layout, img = source
    _group(benchmark, "random_crop 256^2 of 1024^2", layout, hflip)
    bench_warm(benchmark, lambda: numba_crop.random_crop(img, CROP, CROP, SEED, layout, hflip=hflip))


@pytest.mark.parametrize("hflip", FLIPS)
def test_random_crop_torch_slice(benchmark, source, hflip):
    layout, img = source
    _group(benchmark, "random_crop 256^2 of 1024^2", layout, hflip)
    chw = img if layout == "CHW" else img.permute(2, 0, 1)

    def run():
        window = chw[:, 300:300 + CROP, 411:411 + CROP]
        return (window.flip(-1) if hflip else window).contiguous()

    benchmark(run)


@pytest.mark.parametrize("hflip", FLIPS)
def test_random_crop_memcpy_floor(benchmark, source, hflip):
    _group(benchmark, "random_crop 256^2 of 1024^2", source[0], hflip)
    run_floor(benchmark, 3 * CROP * CROP, 3 * CROP * CROP)


# The fused op: crop + mask + exact YCbCr, uint8 CHW out.
@requires_native
@pytest.mark.parametrize("hflip", FLIPS)
def test_crop_mask_ycbcr_native(benchmark, source, hflip):
    layout, img = source
    _group(benchmark, "crop_mask_ycbcr 256^2 of 1024^2", layout, hflip)
    benchmark(fastprep.crop_mask_ycbcr, img, CROP, CROP, P, SEED, layout=layout, hflip=hflip)


@pytest.mark.parametrize("hflip", FLIPS)
def test_crop_mask_ycbcr_numba(benchmark, source, hflip):
    layout, img = source
    _group(benchmark, "crop_mask_ycbcr 256^2 of 1024^2", layout, hflip)
    bench_warm(benchmark, lambda: numba_fused.crop_mask_ycbcr(img, CROP, CROP, P, SEED, layout=layout, hflip=hflip))


@pytest.mark.parametrize("hflip", FLIPS)
def test_crop_mask_ycbcr_memcpy_floor(benchmark, source, hflip):
    _group(benchmark, "crop_mask_ycbcr 256^2 of 1024^2", source[0], hflip)
    run_floor(benchmark, 3 * CROP * CROP, 3 * CROP * CROP)


# Exact uint8 colour, both directions, on a 256^2 image.
@requires_native
@pytest.mark.parametrize("op", ["rgb_to_ycbcr", "ycbcr_to_rgb"])
def test_color_native(benchmark, small, op):
    layout, img = small
    _group(benchmark, f"{op} 256^2", layout)
    benchmark(getattr(fastprep, op), img, layout)


@pytest.mark.parametrize("op", ["rgb_to_ycbcr", "ycbcr_to_rgb"])
def test_color_numba(benchmark, small, op):
    layout, img = small
    _group(benchmark, f"{op} 256^2", layout)
    bench_warm(benchmark, getattr(numba_color, op), img, layout)


@pytest.mark.parametrize("op", ["rgb_to_ycbcr", "ycbcr_to_rgb"])
def test_color_opencv(benchmark, small, op):
    layout, img = small
    if layout != "HWC":
        pytest.skip("OpenCV converts packed HWC images")
    cv2 = pytest.importorskip("cv2")
    _group(benchmark, f"{op} 256^2", layout)
    code = cv2.COLOR_RGB2YCrCb if op == "rgb_to_ycbcr" else cv2.COLOR_YCrCb2RGB
    benchmark(cv2.cvtColor, img.numpy(), code)


@pytest.mark.parametrize("op", ["rgb_to_ycbcr", "ycbcr_to_rgb"])
def test_color_memcpy_floor(benchmark, small, op):
    _group(benchmark, f"{op} 256^2", small[0])
    run_floor(benchmark, small[1].numel(), small[1].numel())


# mask_fill with a bool mask, out of place, on a 256^2 uint8 image.
def _mask() -> torch.Tensor:
    return torch.rand(CROP, CROP, generator=torch.Generator().manual_seed(1)) < 0.3


@requires_native
def test_mask_fill_native(benchmark, small):
    layout, img = small
    _group(benchmark, "mask_fill 256^2", layout)
    benchmark(fastprep.mask_fill, img, _mask(), 0.0, layout)


def test_mask_fill_numba(benchmark, small):
    layout, img = small
    _group(benchmark, "mask_fill 256^2", layout)
    bench_warm(benchmark, numba_mf.mask_fill, img, _mask(), 0.0, layout)


def test_mask_fill_torch_masked_fill(benchmark, small):
    layout, img = small
    _group(benchmark, "mask_fill 256^2", layout)
    m = _mask().unsqueeze(-1) if layout == "HWC" else _mask()
    benchmark(img.masked_fill, m, 0)


def test_mask_fill_memcpy_floor(benchmark, small):
    _group(benchmark, "mask_fill 256^2", small[0])
    run_floor(benchmark, small[1].numel() + CROP * CROP, small[1].numel())
