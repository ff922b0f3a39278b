"""The torchvision ImageNet training pipeline per sample, one thread: RandomResizedCrop(224),
RandomHorizontalFlip, ToDtype(float32, scale=True), Normalize, on the same decoded images (uint8
HWC memory, as decoders give it; torchvision's decode_jpeg returns a CHW view of such memory),
the same windows and flips, float32 out.

Baselines: torchvision v2's functional kernels on those windows (resized_crop, horizontal_flip,
to_dtype, normalize; when torchvision imports) and v2's Compose of the four transforms (its own
draws), and torch's own calls of those kernels (interpolate on the uint8 window, flip,
to(float32).mul_, sub, div_), which run wherever torch does. fastprep: ``resized_crop`` per sample
and ``resized_crop_batch`` into a preallocated batch buffer (a loader's slot), native and Numba.
Each call runs the whole pool of images; the summary's ratios are per sample as well.

Run: python -m pytest benchmarks/bench_resize.py --benchmark-only -p no:logging
(torchvision does not import beside .venv's CPU torch: run it from build/tv-venv for the
torchvision rows, see .ci/torchvision.)
"""

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import fastprep
import fastprep.numba_kernels._resize as numba_resize

from conftest import bench_warm, requires_native, run_floor

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
SIZE = 224
POOLS = {  # (height, width) of the decoded images: ImageNet's typical sizes, and large photos
    "imagenet": [(375, 500), (500, 375), (333, 500), (500, 400), (375, 500), (281, 500), (500, 500), (366, 500)],
    "large": [(768, 1024), (1024, 768), (683, 1024), (1024, 1024)],
}

pytestmark = [pytest.mark.usefixtures("one_thread"), pytest.mark.parametrize("pool", list(POOLS))]


def _window(H, W, rng, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)):
    """torchvision's RandomResizedCrop.get_params on numpy's generator: 10 tries of area and
    log-ratio, then the central crop."""
    for _ in range(10):
        area = H * W * rng.uniform(*scale)
        aspect = math.exp(rng.uniform(math.log(ratio[0]), math.log(ratio[1])))
        w, h = round(math.sqrt(area * aspect)), round(math.sqrt(area / aspect))
        if 0 < w <= W and 0 < h <= H:
            return int(rng.integers(0, H - h + 1)), int(rng.integers(0, W - w + 1)), h, w
    return 0, 0, H, W


@pytest.fixture(scope="module")
def samples():
    """Per pool: [(HWC image, (top, left, height, width), hflip)], the same for every entry."""
    rng = np.random.default_rng(0)
    return {name: [(torch.from_numpy(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)), _window(h, w, rng),
                    bool(rng.integers(0, 2))) for h, w in sizes] for name, sizes in POOLS.items()}


def _group(benchmark, pool, n):
    benchmark.group = f"ImageNet pipeline, {n} {pool} images per call -> float32 [3, {SIZE}, {SIZE}]"


def _torch_calls(samples):
    """torchvision v2's kernels' torch calls: its resized_crop is a slice and interpolate on the
    uint8 window (CPUs with AVX2 keep uint8), then flip, to_dtype(scale=True), normalize."""
    mean, std = torch.tensor(MEAN).view(-1, 1, 1), torch.tensor(STD).view(-1, 1, 1)
    out = []
    for img, (top, left, h, w), flip in samples:
        chw = img.permute(2, 0, 1)[:, top:top + h, left:left + w]
        x = F.interpolate(chw[None], size=[SIZE, SIZE], mode="bilinear", align_corners=False, antialias=True)[0]
        x = x.flip(-1) if flip else x
        out.append(x.to(torch.float32).mul_(1 / 255).sub(mean).div_(std))
    return out


def _fastprep(samples, impl=fastprep.resized_crop):
    return [impl(img, *window, SIZE, SIZE, "HWC", flip, True, torch.float32, 1 / 255, MEAN, STD)
            for img, window, flip in samples]


def test_torch_calls(benchmark, samples, pool):
    _group(benchmark, pool, len(samples[pool]))
    benchmark(_torch_calls, samples[pool])


def test_torchvision_v2_functional(benchmark, samples, pool):
    TF = pytest.importorskip("torchvision.transforms.v2.functional")
    from torchvision import tv_tensors

    _group(benchmark, pool, len(samples[pool]))
    imgs = [(tv_tensors.Image(img.permute(2, 0, 1)), w, f) for img, w, f in samples[pool]]

    def run():
        out = []
        for img, (top, left, h, w), flip in imgs:
            x = TF.resized_crop(img, top, left, h, w, [SIZE, SIZE], antialias=True)
            x = TF.horizontal_flip(x) if flip else x
            out.append(TF.normalize(TF.to_dtype(x, torch.float32, scale=True), MEAN, STD))
        return out

    got = run()
    want = _torch_calls(samples[pool])
    assert all(torch.equal(a, b) for a, b in zip(got, want))  # the torch calls are torchvision's
    benchmark(run)


def test_torchvision_v2_compose(benchmark, samples, pool):
    """The transforms as users write them (their own window and flip draws)."""
    T = pytest.importorskip("torchvision.transforms.v2")
    from torchvision import tv_tensors

    _group(benchmark, pool, len(samples[pool]))
    pipeline = T.Compose([T.RandomResizedCrop(SIZE), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True),
                          T.Normalize(MEAN, STD)])
    imgs = [tv_tensors.Image(img.permute(2, 0, 1)) for img, _, _ in samples[pool]]
    benchmark(lambda: [pipeline(img) for img in imgs])


@requires_native
def test_fastprep_native(benchmark, samples, pool):
    _group(benchmark, pool, len(samples[pool]))
    got = benchmark(_fastprep, samples[pool])
    assert all(torch.equal(a, b) for a, b in zip(got, _torch_calls(samples[pool])))


def _batch_into_a_slot(benchmark, samples, impl):
    """impl (a resized_crop_batch) on the pool into one preallocated [N, 3, 224, 224] buffer."""
    imgs, windows, flips = zip(*samples)
    tops, lefts, heights, widths = (list(v) for v in zip(*windows))
    out = torch.empty(len(imgs), 3, SIZE, SIZE)
    table = fastprep.geometry_table(len(imgs), top=tops, left=lefts, height=heights, width=widths, hflip=list(flips))
    bench_warm(benchmark, impl, list(imgs), table, out, "HWC", True, 1 / 255, MEAN, STD)
    assert torch.equal(out, torch.stack(_torch_calls(samples)))


@requires_native
def test_fastprep_native_batch_into_a_slot(benchmark, samples, pool):
    _group(benchmark, pool, len(samples[pool]))
    _batch_into_a_slot(benchmark, samples[pool], fastprep.resized_crop_batch)


def test_fastprep_numba(benchmark, samples, pool):
    _group(benchmark, pool, len(samples[pool]))
    bench_warm(benchmark, _fastprep, samples[pool], numba_resize.resized_crop)


def test_fastprep_numba_batch_into_a_slot(benchmark, samples, pool):
    _group(benchmark, pool, len(samples[pool]))
    _batch_into_a_slot(benchmark, samples[pool], numba_resize.resized_crop_batch)


def test_memcpy_floor(benchmark, samples, pool):
    _group(benchmark, pool, len(samples[pool]))
    read = sum(3 * h * w for _, (_, _, h, w), _ in samples[pool])  # the windows' bytes
    run_floor(benchmark, read, len(samples[pool]) * 3 * SIZE * SIZE * 4)
