"""The target pipeline per sample, one thread: the usual way vs fastprep (fused native, fused
Numba, the unfused fastprep chain), on the same 1024x1024x3 uint8 source; memcpy of the fused
output's bytes as the floor."""

import numpy as np
import pytest
import torch

import fastprep.tools.bench._pipelines as pipelines

from conftest import bench_warm, requires_native, run_floor

GROUP = "pipeline per sample (1024^2 -> 256^2, mask, YCbCr)"


pytestmark = pytest.mark.usefixtures("one_thread")


def _source():
    return pipelines.make_source(0)


def test_usual_pipeline(benchmark):
    pytest.importorskip("scipy")
    PIL = pytest.importorskip("PIL.Image")
    benchmark.group = GROUP
    benchmark(pipelines.usual_transform, PIL.fromarray(_source()), np.random.default_rng(0))


@requires_native
def test_fastprep_fused_native(benchmark):
    benchmark.group = GROUP
    benchmark(pipelines.fastprep_transform, _source())


def test_fastprep_fused_numba(benchmark):
    benchmark.group = GROUP
    bench_warm(benchmark, pipelines.fastprep_numba_transform, _source())


def test_fastprep_unfused_chain(benchmark):
    benchmark.group = GROUP
    benchmark(pipelines.fastprep_unfused_transform, _source())


def test_fastprep_fused_native_float32(benchmark):
    """The same with float32 output scaled by 1/255 on the CPU, as the usual pipeline ships."""
    import fastprep

    benchmark.group = GROUP
    src = torch.from_numpy(_source())
    benchmark(lambda: fastprep.crop_mask_ycbcr(src, 256, 256, 0.25, fastprep.draw_seed(),
                                               out_dtype=torch.float32, scale=1 / 255))


def test_memcpy_output_bytes(benchmark):
    benchmark.group = GROUP
    run_floor(benchmark, 3 * 256 * 256, 3 * 256 * 256)  # the crop window in, uint8 YCbCr out


FLIP_GROUP = "flip + pipeline per sample (RandomHorizontalFlip(p=0.5) in front, Compose)"


def _compose_timing(benchmark, fuse: bool) -> None:
    from fastprep import transforms as T

    benchmark.group = FLIP_GROUP
    tf = T.seed_workload(layout="HWC", hflip=True, fuse=fuse)
    src = torch.from_numpy(_source())
    benchmark(tf, src)


def test_compose_flip_unfused_chain(benchmark):
    """The baseline: the same Compose step by step (crop of the mirrored window, reversed; mask; colour)."""
    _compose_timing(benchmark, fuse=False)


@requires_native
def test_fastprep_compose_flip_fused_native(benchmark):
    """The fused op with hflip for the drawn half: the flip rides along in the crop's read."""
    _compose_timing(benchmark, fuse=True)


@requires_native
@pytest.mark.parametrize("hflip", [False, True])
def test_fastprep_fused_native_hflip(benchmark, hflip):
    import fastprep

    benchmark.group = FLIP_GROUP
    src = torch.from_numpy(_source())
    benchmark(lambda: fastprep.crop_mask_ycbcr(src, 256, 256, 0.25, 7, hflip=hflip))
