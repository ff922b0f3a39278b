"""rgb_to_ycbcr on a 256x256x3 uint8 HWC image (CHW planes out) against OpenCV, PIL and torch;
uint8 -> float32 with scale 1/255 against torch's matmul; memcpy floors (conftest.run_floor).
Single-threaded (torch and OpenCV pinned to one thread), same input for all.

Run: python -m pytest benchmarks/bench_color.py --benchmark-only -p no:logging
"""

import pytest
import torch

import fastprep
import fastprep.numba_kernels._color as numba_color
import fastprep.tools.bench._pipelines as pipelines

from conftest import bench_warm, run_floor

U8 = "rgb_to_ycbcr 256x256x3 uint8 HWC -> uint8"
F32 = "rgb_to_ycbcr 256x256x3 uint8 HWC -> float32 * 1/255"
# The usual float32 way, as the target pipeline's baseline writes it.
MATRIX, OFFSET = pipelines.YCBCR, pipelines.YCBCR_OFFSET


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def image():
    return torch.randint(0, 256, (256, 256, 3), dtype=torch.uint8)


def _native():
    if fastprep.backend() != "native":
        pytest.skip("native backend not loaded")


@pytest.mark.benchmark(group=U8)
def test_u8_fastprep_native(benchmark, image):
    _native()
    benchmark(fastprep.rgb_to_ycbcr, image, "HWC", None, 1.0)


@pytest.mark.benchmark(group=U8)
def test_u8_fastprep_numba(benchmark, image):
    bench_warm(benchmark, numba_color.rgb_to_ycbcr, image, "HWC")


@pytest.mark.benchmark(group=U8)
def test_u8_opencv(benchmark, image):
    cv2 = pytest.importorskip("cv2")
    cv2.setNumThreads(1)
    a = image.numpy()
    benchmark(cv2.cvtColor, a, cv2.COLOR_RGB2YCrCb)


@pytest.mark.benchmark(group=U8)
def test_u8_pil(benchmark, image):
    pil = pytest.importorskip("PIL.Image")
    im = pil.fromarray(image.numpy(), "RGB")
    benchmark(im.convert, "YCbCr")


@pytest.mark.benchmark(group=U8)
def test_u8_torch_matmul(benchmark, image):
    def run():
        y = image.float() @ MATRIX.T + OFFSET
        return torch.floor(y + 0.5).clamp_(0, 255).to(torch.uint8).permute(2, 0, 1).contiguous()

    benchmark(run)


@pytest.mark.benchmark(group=U8)
def test_u8_memcpy_floor(benchmark, image):
    run_floor(benchmark, image.numel(), image.numel())


@pytest.mark.benchmark(group=F32)
def test_f32_fastprep_native(benchmark, image):
    _native()
    benchmark(fastprep.rgb_to_ycbcr, image, "HWC", torch.float32, 1 / 255)


@pytest.mark.benchmark(group=F32)
def test_f32_fastprep_numba(benchmark, image):
    bench_warm(benchmark, numba_color.rgb_to_ycbcr, image, "HWC", torch.float32, 1 / 255)


@pytest.mark.benchmark(group=F32)
def test_f32_torch_matmul(benchmark, image):
    def run():
        return ((image.float() @ MATRIX.T + OFFSET) / 255).permute(2, 0, 1).contiguous()

    benchmark(run)


@pytest.mark.benchmark(group=F32)
def test_f32_memcpy_floor(benchmark, image):
    run_floor(benchmark, image.numel(), 4 * image.numel())
