"""crop 256x256 out of a 1024x1024x3 uint8 HWC image, to CHW: fastprep native and Numba against
torch slicing and a memcpy of the same bytes (the floor). Single-threaded, same input for all.

Run: python -m pytest benchmarks/bench_crop.py --benchmark-only -p no:logging
"""

import pytest
import torch

import fastprep
import fastprep.numba_kernels._crop as numba_crop

from conftest import bench_warm, run_floor

GROUP = "crop 256x256 from 1024x1024x3 uint8 HWC -> CHW"
TOP, LEFT, SIZE = 300, 411, 256


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def image():
    return torch.randint(0, 256, (1024, 1024, 3), dtype=torch.uint8)


@pytest.mark.benchmark(group=GROUP)
def test_fastprep_native(benchmark, image):
    if fastprep.backend() != "native":
        pytest.skip("native backend not loaded")
    out = benchmark(fastprep.crop, image, TOP, LEFT, SIZE, SIZE, "HWC")
    assert out.shape == (3, SIZE, SIZE)


@pytest.mark.benchmark(group=GROUP)
def test_fastprep_numba(benchmark, image):
    out = bench_warm(benchmark, numba_crop.crop, image, TOP, LEFT, SIZE, SIZE, "HWC")
    assert out.shape == (3, SIZE, SIZE)


@pytest.mark.benchmark(group=GROUP)
def test_torch_slice_permute_contiguous(benchmark, image):
    def run():
        return image[TOP:TOP + SIZE, LEFT:LEFT + SIZE].permute(2, 0, 1).contiguous()

    expected = run()
    assert torch.equal(benchmark(run), expected)


@pytest.mark.benchmark(group=GROUP)
def test_memcpy_floor(benchmark, image):
    run_floor(benchmark, 3 * SIZE * SIZE, 3 * SIZE * SIZE)  # the window's bytes in, as many out
