"""JPEG decoding on one core: Pillow and OpenCV (both libjpeg-turbo) against fastprep.io's full
decode, its ROI decode of a 256x256 window, and its YCbCr-direct decode; then decode + the fused
crop/mask/YCbCr op per sample, as a training pipeline runs it.

Images: mosaics of scikit-image's photos (512x512 tiles of astronaut, coffee, chelsea, rocket,
hubble_deep_field, immunohistochemistry), so every size has real photos' detail per pixel rather
than an upscale's, written by Pillow at quality 90, 4:2:0 (its default): 512, 1024 and 2048 px
baseline, and 1024 px progressive (whose scans are all read before any row comes out, so its ROI
decode saves less). Windows are random_crop's for a fresh seed each call.

Run: python -m pytest benchmarks/bench_decode.py --benchmark-only -p no:logging
"""

import io
import itertools

import numpy as np
import pytest
import torch

import fastprep
import fastprep.io as fio
from fastprep.tools import photos
from fastprep.transforms import as_image  # what fastprep's transforms do with a PIL image

pytestmark = [pytest.mark.usefixtures("one_thread"),
              pytest.mark.skipif(not fio.available(), reason="fastprep._jpeg not built (no libjpeg-turbo)")]

SIZES = (512, 1024, 2048)
CROP = 256


def mosaic(size: int) -> np.ndarray:
    pytest.importorskip("skimage.data", reason="the photos come from scikit-image")
    return photos.mosaic(size)


@pytest.fixture(scope="module", params=[(s, False) for s in SIZES] + [(1024, True)],
                ids=lambda p: f"{p[0]}px{'-progressive' if p[1] else ''}")
def jpeg(request):
    from PIL import Image

    size, progressive = request.param
    buf = io.BytesIO()
    Image.fromarray(mosaic(size)).save(buf, format="JPEG", quality=90, progressive=progressive)
    return f"{size}x{size}{' progressive' if progressive else ''}", size, buf.getvalue()


def group(kind: str, name: str) -> str:
    return f"{kind} {name} q90 4:2:0 photo mosaic, 1 core"


def windows(size: int):
    seeds = itertools.count()
    return lambda: fastprep.random_crop_params(size, size, CROP, CROP, next(seeds))


# -- decode ----------------------------------------------------------------------------------


def test_decode_pil(benchmark, jpeg):
    from PIL import Image

    name, size, data = jpeg
    benchmark.group = group("decode", name)

    def run():
        with Image.open(io.BytesIO(data)) as im:
            im.load()

    benchmark(run)


def test_decode_pil_to_tensor(benchmark, jpeg):
    from PIL import Image

    name, size, data = jpeg
    benchmark.group = group("decode", name)
    benchmark(lambda: as_image(Image.open(io.BytesIO(data)).convert("RGB"), "HWC")[0])


def test_decode_opencv(benchmark, jpeg):
    cv2 = pytest.importorskip("cv2")
    name, size, data = jpeg
    benchmark.group = group("decode", name)
    buf = np.frombuffer(data, np.uint8)
    benchmark(cv2.imdecode, buf, cv2.IMREAD_COLOR)


# One function per variant (no parametrize): conftest's ratio summary keys entries by function name.


def test_decode_fastprep_full_hwc(benchmark, jpeg):
    name, size, data = jpeg
    benchmark.group = group("decode", name)
    benchmark(fio.decode_jpeg, data, layout="HWC")


def test_decode_fastprep_full_chw(benchmark, jpeg):
    name, size, data = jpeg
    benchmark.group = group("decode", name)
    benchmark(fio.decode_jpeg, data, layout="CHW")


def test_decode_fastprep_roi256_hwc(benchmark, jpeg):
    name, size, data = jpeg
    benchmark.group = group("decode", name)
    window = windows(size)
    benchmark(lambda: fio.decode_jpeg(data, crop=(*window(), CROP, CROP), layout="HWC"))


def test_decode_fastprep_roi256_chw(benchmark, jpeg):
    name, size, data = jpeg
    benchmark.group = group("decode", name)
    window = windows(size)
    benchmark(lambda: fio.decode_jpeg(data, crop=(*window(), CROP, CROP), layout="CHW"))


def test_decode_fastprep_ycbcr_direct_hwc(benchmark, jpeg):
    name, size, data = jpeg
    benchmark.group = group("decode", name)
    benchmark(fio.decode_jpeg, data, mode="YCbCr", layout="HWC")


def test_decode_fastprep_ycbcr_direct_chw(benchmark, jpeg):
    name, size, data = jpeg
    benchmark.group = group("decode", name)
    benchmark(fio.decode_jpeg, data, mode="YCbCr", layout="CHW")


def test_decode_fastprep_rgb_then_rgb_to_ycbcr_chw(benchmark, jpeg):
    """The round trip YCbCr-direct skips: decode to RGB, then fastprep's conversion (CHW out)."""
    name, size, data = jpeg
    benchmark.group = group("decode", name)
    benchmark(lambda: fastprep.rgb_to_ycbcr(fio.decode_jpeg(data, layout="HWC"), "HWC"))


def test_decode_fastprep_ycbcr_direct_roi256_chw(benchmark, jpeg):
    name, size, data = jpeg
    benchmark.group = group("decode", name)
    window = windows(size)
    benchmark(lambda: fio.decode_jpeg(data, crop=(*window(), CROP, CROP), mode="YCbCr"))


# -- decode + the fused transform, per sample ------------------------------------------------


def fused(img: torch.Tensor, seed: int) -> torch.Tensor:
    return torch.ops.fastprep.crop_mask_ycbcr(img, CROP, CROP, 0.25, seed, "HWC", "cross", torch.uint8, 1.0,
                                              True, False, seed + 1)[0]


def test_pipeline_pil_decode_then_fused(benchmark, jpeg):
    from PIL import Image

    name, size, data = jpeg
    benchmark.group = group("decode + crop 256 + mask + YCbCr", name)
    seeds = itertools.count()
    benchmark(lambda: fused(as_image(Image.open(io.BytesIO(data)).convert("RGB"), "HWC")[0], next(seeds)))


def test_pipeline_fastprep_full_decode_then_fused(benchmark, jpeg):
    name, size, data = jpeg
    benchmark.group = group("decode + crop 256 + mask + YCbCr", name)
    seeds = itertools.count()
    benchmark(lambda: fused(fio.decode_jpeg(data, layout="HWC"), next(seeds)))


def test_pipeline_fastprep_roi_decode_then_fused(benchmark, jpeg):
    """The ROI hook: decode random_crop's window only, then the fused op on it (same bits)."""
    name, size, data = jpeg
    benchmark.group = group("decode + crop 256 + mask + YCbCr", name)
    f = fio.JpegFile(data, layout="HWC")
    seeds = itertools.count()

    def run():
        s = next(seeds)
        return fused(f.random_crop(CROP, CROP, s), s)

    benchmark(run)
