"""Mask op benchmarks: python -m pytest benchmarks/bench_masks.py --benchmark-only -p no:logging

Each group compares fastprep (native when loaded, and the Numba kernels called directly) with the
usual numpy / torch / scipy / OpenCV way of doing the same thing, beside memcpy floors moving the
bytes each op must read and write (packed forms have their own, marked [packed]).
"""

import numpy as np
import pytest
import torch

import fastprep
import fastprep.numba_kernels._dilate as numba_dilate
import fastprep.numba_kernels._mask_fill as numba_mf
import fastprep.numba_kernels._random_mask as numba_rm

from conftest import bench_warm, run_floor, use_floor

# fastprep's kernels are single-threaded: one thread for torch and OpenCV too (conftest's
# one_thread) keeps the comparison per core and the timings stable on a shared machine.
pytestmark = pytest.mark.usefixtures("one_thread")

SIZES = [256, 1024]
P = 0.25
NATIVE = fastprep.backend() == "native"
needs_native = pytest.mark.skipif(not NATIVE, reason="native backend not loaded")
CROSS = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], dtype=np.uint8)


def _mask(n, p=0.05):
    return torch.from_numpy(np.random.default_rng(0).random((n, n)) < p)


# --- random_mask -------------------------------------------------------------------------------

@needs_native
@pytest.mark.parametrize("n", SIZES)
def test_random_mask_native(benchmark, n):
    benchmark.group = f"random_mask-{n}"
    benchmark(fastprep.random_mask, [n, n], P, 1, False)


@needs_native
@pytest.mark.parametrize("n", SIZES)
def test_random_mask_native_packed(benchmark, n):
    benchmark.group = f"random_mask-{n}"
    use_floor(benchmark, "packed")
    benchmark(fastprep.random_mask, [n, n], P, 1, True)


@pytest.mark.parametrize("n", SIZES)
def test_random_mask_memcpy_floor(benchmark, n):
    benchmark.group = f"random_mask-{n}"
    run_floor(benchmark, 0, n * n)


@pytest.mark.parametrize("n", SIZES)
def test_random_mask_packed_memcpy_floor(benchmark, n):
    benchmark.group = f"random_mask-{n}"
    run_floor(benchmark, 0, n * n // 8, "packed")


@pytest.mark.parametrize("n", SIZES)
def test_random_mask_numba(benchmark, n):
    benchmark.group = f"random_mask-{n}"
    bench_warm(benchmark, numba_rm.random_mask, [n, n], P, 1, False)


@pytest.mark.parametrize("n", SIZES)
def test_random_mask_numpy(benchmark, n):
    benchmark.group = f"random_mask-{n}"
    rng = np.random.default_rng(0)
    benchmark(lambda: rng.random((n, n)) < P)


@pytest.mark.parametrize("n", SIZES)
def test_random_mask_torch_rand(benchmark, n):
    benchmark.group = f"random_mask-{n}"
    benchmark(lambda: torch.rand(n, n) < P)


# --- dilate (bool and packed) ------------------------------------------------------------------

@needs_native
@pytest.mark.parametrize("n", SIZES)
def test_dilate_native(benchmark, n):
    benchmark.group = f"dilate-{n}"
    benchmark(fastprep.dilate, _mask(n), "cross", 1)


@needs_native
@pytest.mark.parametrize("n", SIZES)
def test_dilate_packed_native(benchmark, n):
    benchmark.group = f"dilate-{n}"
    use_floor(benchmark, "packed")
    benchmark(fastprep.dilate_packed, fastprep.pack_bits(_mask(n)), n, "cross", 1)


@pytest.mark.parametrize("n", SIZES)
def test_dilate_numba(benchmark, n):
    benchmark.group = f"dilate-{n}"
    bench_warm(benchmark, numba_dilate.dilate, _mask(n), "cross", 1)


@pytest.mark.parametrize("n", SIZES)
def test_dilate_packed_numba(benchmark, n):
    benchmark.group = f"dilate-{n}"
    use_floor(benchmark, "packed")
    bench_warm(benchmark, numba_dilate.dilate_packed, fastprep.pack_bits(_mask(n)), n, "cross", 1)


@pytest.mark.parametrize("n", SIZES)
def test_dilate_memcpy_floor(benchmark, n):
    benchmark.group = f"dilate-{n}"
    run_floor(benchmark, n * n, n * n)


@pytest.mark.parametrize("n", SIZES)
def test_dilate_packed_memcpy_floor(benchmark, n):
    benchmark.group = f"dilate-{n}"
    run_floor(benchmark, n * n // 8, n * n // 8, "packed")


@pytest.mark.parametrize("n", SIZES)
def test_dilate_opencv(benchmark, n):
    cv2 = pytest.importorskip("cv2")
    benchmark.group = f"dilate-{n}"
    m = _mask(n).numpy().view(np.uint8)
    benchmark(cv2.dilate, m, CROSS)


@pytest.mark.parametrize("n", SIZES)
def test_dilate_scipy_binary_dilation(benchmark, n):
    ndimage = pytest.importorskip("scipy.ndimage")
    benchmark.group = f"dilate-{n}"
    benchmark(ndimage.binary_dilation, _mask(n).numpy(), CROSS.astype(bool))


@pytest.mark.parametrize("n", SIZES)
def test_dilate_scipy_convolve2d(benchmark, n):
    signal = pytest.importorskip("scipy.signal")
    benchmark.group = f"dilate-{n}"
    m = _mask(n).numpy().view(np.uint8)
    benchmark(lambda: signal.convolve2d(m, CROSS, mode="same") > 0)


# --- dilate, a batch of masks in one call ------------------------------------------------------
# A single call's fixed cost (~2.5 us through torch.ops, ~1.3 us for cv2.dilate) is a third of a
# 256^2 dilation; a batch [B, H, W] pays it once. OpenCV has no batch form: a loop of cv2.dilate is
# what users write.

BATCH = 32


def _masks(b, n, p=0.05):
    return torch.from_numpy(np.random.default_rng(0).random((b, n, n)) < p)


@needs_native
def test_dilate_batch_native(benchmark):
    benchmark.group = f"dilate-{BATCH}x256"
    benchmark(fastprep.dilate, _masks(BATCH, 256), "cross", 1)


@needs_native
def test_dilate_packed_batch_native(benchmark):
    benchmark.group = f"dilate-{BATCH}x256"
    use_floor(benchmark, "packed")
    benchmark(fastprep.dilate_packed, fastprep.pack_bits(_masks(BATCH, 256)), 256, "cross", 1)


def test_dilate_batch_numba(benchmark):
    benchmark.group = f"dilate-{BATCH}x256"
    bench_warm(benchmark, numba_dilate.dilate, _masks(BATCH, 256), "cross", 1)


def test_dilate_batch_memcpy_floor(benchmark):
    benchmark.group = f"dilate-{BATCH}x256"
    run_floor(benchmark, BATCH * 256 * 256, BATCH * 256 * 256)


def test_dilate_packed_batch_memcpy_floor(benchmark):
    benchmark.group = f"dilate-{BATCH}x256"
    run_floor(benchmark, BATCH * 256 * 32, BATCH * 256 * 32, "packed")


def test_dilate_batch_opencv_loop(benchmark):
    cv2 = pytest.importorskip("cv2")
    benchmark.group = f"dilate-{BATCH}x256"
    ms = list(_masks(BATCH, 256).numpy().view(np.uint8))
    benchmark(lambda: [cv2.dilate(m, CROSS) for m in ms])


# --- random_dilated_mask -----------------------------------------------------------------------

@needs_native
@pytest.mark.parametrize("n", SIZES)
def test_random_dilated_mask_native(benchmark, n):
    benchmark.group = f"random_dilated_mask-{n}"
    benchmark(fastprep.random_dilated_mask, [n, n], 0.05, 1, "cross", 1, False)


@needs_native
@pytest.mark.parametrize("n", SIZES)
def test_random_dilated_mask_native_unfused(benchmark, n):
    benchmark.group = f"random_dilated_mask-{n}"
    benchmark(lambda: fastprep.dilate(fastprep.random_mask([n, n], 0.05, 1, False), "cross", 1))


@pytest.mark.parametrize("n", SIZES)
def test_random_dilated_mask_numba(benchmark, n):
    benchmark.group = f"random_dilated_mask-{n}"
    bench_warm(benchmark, numba_rm.random_dilated_mask, [n, n], 0.05, 1, "cross", 1, False)


@pytest.mark.parametrize("n", SIZES)
def test_random_dilated_mask_memcpy_floor(benchmark, n):
    benchmark.group = f"random_dilated_mask-{n}"
    run_floor(benchmark, 0, n * n)


# --- mask_fill ---------------------------------------------------------------------------------

def _img(n):
    return torch.rand(3, n, n), _mask(n, 0.3)


@needs_native
@pytest.mark.parametrize("n", SIZES)
def test_mask_fill_native(benchmark, n):
    benchmark.group = f"mask_fill-{n}"
    img, m = _img(n)
    benchmark(fastprep.mask_fill, img, m, 0.0, "CHW")


@needs_native
@pytest.mark.parametrize("n", SIZES)
def test_mask_fill_inplace_native(benchmark, n):
    benchmark.group = f"mask_fill-{n}"
    use_floor(benchmark, "in place")
    img, m = _img(n)
    benchmark(fastprep.mask_fill_, img, m, 0.0, "CHW")


@needs_native
@pytest.mark.parametrize("n", SIZES)
def test_mask_fill_packed_native(benchmark, n):
    benchmark.group = f"mask_fill-{n}"
    use_floor(benchmark, "packed")
    img, m = _img(n)
    benchmark(fastprep.mask_fill, img, fastprep.pack_bits(m), 0.0, "CHW")


@pytest.mark.parametrize("n", SIZES)
def test_mask_fill_numba(benchmark, n):
    benchmark.group = f"mask_fill-{n}"
    img, m = _img(n)
    bench_warm(benchmark, numba_mf.mask_fill, img, m, 0.0, "CHW")


@pytest.mark.parametrize("n", SIZES)
def test_mask_fill_memcpy_floor(benchmark, n):
    benchmark.group = f"mask_fill-{n}"
    run_floor(benchmark, 3 * 4 * n * n + n * n, 3 * 4 * n * n)  # float32 image + bool mask in, image out


@pytest.mark.parametrize("n", SIZES)
def test_mask_fill_packed_memcpy_floor(benchmark, n):
    benchmark.group = f"mask_fill-{n}"
    run_floor(benchmark, 3 * 4 * n * n + n * n // 8, 3 * 4 * n * n, "packed")


@pytest.mark.parametrize("n", SIZES)
def test_mask_fill_inplace_memcpy_floor(benchmark, n):
    benchmark.group = f"mask_fill-{n}"
    run_floor(benchmark, n * n, int(0.3 * 3 * 4 * n * n), "in place")  # the mask in, the masked 30% out


@pytest.mark.parametrize("n", SIZES)
def test_mask_fill_torch_masked_fill(benchmark, n):
    benchmark.group = f"mask_fill-{n}"
    img, m = _img(n)
    benchmark(img.masked_fill, m, 0.0)


@pytest.mark.parametrize("n", SIZES)
def test_mask_fill_torch_bool_indexing_inplace(benchmark, n):
    benchmark.group = f"mask_fill-{n}"
    img, m = _img(n)

    def fill():
        img[:, m] = 0.0

    benchmark(fill)
