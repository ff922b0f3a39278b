"""RandomRotate90: k quarter turns drawn per sample, each result torch.rot90 of its input; fused
after a resize (the op writes transposed) with crops and flips before and after it, the same bits
as the steps one by one and as torch.rot90 of the fused output without the turn, on the active
backend (FASTPREP_BACKEND) and the Numba kernel; a turn before the resize runs unfused."""

import numpy as np
import pytest
import torch

import fastprep.numba_kernels._resize as numba_resize
from fastprep import transforms as T
from fastprep.core._rng import draw_seed
from fastprep.ops._resize import geometry_table
from fastprep.transforms._plan import FusionPlan

from helpers.fused_spies import fused_and_unfused, resized_crop_calls


def _image(shape=(3, 50, 64), seed=0):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8))


def _turns(rot: T.RandomRotate90, seeds) -> list[int]:
    return [int(rot.make_params(s)) for s in seeds]


def test_make_params_draws_every_k_and_takes_arrays():
    rot = T.RandomRotate90(p=1.0)
    seeds = list(range(200))
    ks = _turns(rot, seeds)
    assert set(ks) == {0, 1, 2, 3}
    assert rot.make_params(np.array(seeds, dtype=np.uint64)).tolist() == ks  # a chunk's draws: the same k
    assert set(_turns(T.RandomRotate90(p=0.0), seeds)) == {0}


@pytest.mark.parametrize("shape", [(3, 5, 7), (2, 3, 5, 7), (5, 7)], ids=["image", "video", "plain"])
def test_the_unfused_turn_is_rot90(shape):
    rot = T.RandomRotate90(p=1.0)
    x = _image(shape)
    seen = set()
    for seed in range(12):
        torch.manual_seed(seed)
        k = int(rot.make_params(draw_seed()))
        torch.manual_seed(seed)
        got = rot(x)
        # a 2-D image is one channel: turned, it comes back [1, H, W], as the flips give it
        want = torch.rot90(x if x.dim() > 2 or not k else x[None], k, dims=(-2, -1))
        assert torch.equal(got, want), k
        seen.add(k)
    assert seen == {0, 1, 2, 3}


def test_numpy_and_hwc_images_turn_as_their_chw_tensor():
    hwc = _image((5, 7, 3))
    for seed in range(6):
        torch.manual_seed(seed)
        k = int(T.RandomRotate90(p=1.0).make_params(draw_seed()))
        want = torch.rot90(hwc.permute(2, 0, 1), k, dims=(-2, -1))
        for layout, x in (("CHW", hwc.numpy()), ("HWC", hwc)):
            torch.manual_seed(seed)
            assert torch.equal(T.RandomRotate90(p=1.0, layout=layout)(x), want)


@pytest.mark.parametrize("p", [-0.1, 1.5, float("nan"), "half"])
def test_bad_p_is_refused_naming_it(p):
    with pytest.raises(ValueError, match=r"RandomRotate90: expected p"):
        T.RandomRotate90(p=p)


def test_a_bad_layout_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"RandomRotate90: expected layout to be 'CHW' or 'HWC', got 'WHC'"):
        T.RandomRotate90(layout="WHC")


# Steps around a quarter turn the resized-crop row fuses: crops, flips and resizes before it,
# crops and flips after it (every k drawn across the seeds).
FUSED = {
    "rrc": lambda: [T.RandomResizedCrop(24), T.RandomRotate90(p=1.0)],
    "flips and crops around": lambda: [T.RandomHorizontalFlip(), T.RandomCrop(44), T.Resize((30, 36)),
                                       T.RandomVerticalFlip(), T.RandomRotate90(), T.RandomHorizontalFlip(),
                                       T.CenterCrop((22, 26)), T.RandomRotate90(p=0.9)],
    "not square, float": lambda: [T.RandomResizedCrop((20, 28)), T.RandomRotate90(p=1.0),
                                  T.ToDtype(torch.float32, scale=True), T.Normalize([0.5], [0.25])],
    "bfloat16": lambda: [T.Resize(33), T.RandomRotate90(), T.CenterCrop(30), T.ToDtype(torch.bfloat16, scale=True)],
}


@pytest.mark.parametrize("name", list(FUSED))
def test_the_fused_turn_is_the_steps_one_by_one(name, monkeypatch):
    assert FusionPlan(FUSED[name]()).fused is not None  # one op call
    calls = resized_crop_calls(monkeypatch)
    for seed in range(16):
        fused, unfused = fused_and_unfused(FUSED[name](), _image(seed=seed), seed)
        assert fused.dtype == unfused.dtype and torch.equal(fused, unfused), (name, seed)
    assert calls == [1] * 16


@pytest.mark.parametrize("after", [[], [T.RandomHorizontalFlip(p=1.0), T.CenterCrop(18)]], ids=["last", "crop after"])
def test_the_fused_turn_is_rot90_of_the_fused_output_without_it(after):
    """A quarter turn k of what RandomResizedCrop made: torch.rot90 of the fused resize (same window)."""
    before = [T.RandomVerticalFlip(), T.RandomResizedCrop(22)]
    rot = T.RandomRotate90(p=1.0)
    seen = set()
    for seed in range(16):
        torch.manual_seed(seed)
        seeds = [draw_seed() for _ in range(3)]
        k = int(rot.make_params(seeds[2]))
        torch.manual_seed(seed)
        got = T.Compose([*before, rot, *after])(_image(seed=seed))
        torch.manual_seed(seed)
        resized = T.Compose(before)(_image(seed=seed))
        want = torch.rot90(resized, k, dims=(-2, -1))
        want = T.Compose(after, fuse=False)(want) if after else want
        assert torch.equal(got, want), (seed, k)
        seen.add(k)
    assert seen == {0, 1, 2, 3}


def test_a_turn_before_the_resize_runs_unfused():
    """torch resamples columns, then rows, each rounded to uint8: a turn does not commute with a resize."""
    steps = [T.RandomRotate90(p=1.0), T.RandomResizedCrop(24)]
    plan = FusionPlan(steps)
    assert plan.fused is None
    for seed in range(4):
        fused, unfused = fused_and_unfused(steps, _image(seed=seed), seed)
        assert torch.equal(fused, unfused)


IMPLS = ["op", "numba"]


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32, torch.float16, torch.bfloat16])
def test_the_transpose_column_writes_the_per_sample_output_transposed(impl, dtype):
    """Row i transposed: out[i] is the per-sample op's out_width x out_height output, transposed."""
    import fastprep
    run = fastprep.resized_crop_batch if impl == "op" else numba_resize.resized_crop_batch
    imgs = [_image((40, 50, 3), 1), _image((33, 45, 3), 2), _image((60, 41, 3), 3)]
    table = geometry_table(3, top=[0, 2, 5], left=[1, 0, 3], height=[40, 30, 50], width=[49, 40, 38],
                           hflip=[1, 0, 1], vflip=[0, 1, 1], transpose=[1, 0, 1], resized_height=[0, 0, 30],
                           resized_width=[0, 0, 25], out_top=[0, 0, 4], out_left=[0, 0, 1])
    scale, mean, std = (1.0, None, None) if dtype == torch.uint8 else (1 / 255, [0.5, 0.4, 0.3], [0.2, 0.3, 0.25])
    out = torch.full((3, 3, 16, 22), 7, dtype=dtype)
    run(imgs, table, out, "HWC", True, scale, mean, std)
    rows = table.tolist()
    for i, (img, r) in enumerate(zip(imgs, rows)):
        top, left, h, w, hf, vf, rh, rw, ot, ol, t = r
        size = (22, 16) if t else (16, 22)
        want = fastprep.resized_crop(img, top, left, h, w, *size, "HWC", bool(hf), True, dtype, scale, mean, std,
                                     bool(vf), rh, rw, ot, ol)
        assert torch.equal(out[i], want.transpose(-2, -1) if t else want), i


@pytest.mark.parametrize("impl", IMPLS)
def test_bad_transpose_rows_name_the_column_and_value(impl):
    import fastprep
    run = fastprep.resized_crop_batch if impl == "op" else numba_resize.resized_crop_batch
    img, out = _image((8, 8, 3)), torch.empty(1, 3, 4, 6, dtype=torch.uint8)
    with pytest.raises(RuntimeError, match=r"expected geometry\[0\].transpose to be 0 or 1, got "
                                           r"geometry\[0\].transpose=3"):
        run([img], geometry_table(1, height=[8], width=[8], transpose=[3]), out, "HWC")
    # transposed, the 4 x 6 output is placed as 6 x 4: out_left + 4 <= 5 is the check
    table = geometry_table(1, height=[8], width=[8], transpose=[1], resized_width=[5], out_left=[2])
    with pytest.raises(RuntimeError, match=r"expected geometry\[0\].out_left \+ out's height \(transposed\) <= "
                                           r"geometry\[0\].resized_width \(5\), got geometry\[0\].out_left=2, "
                                           r"out's height \(transposed\)=4"):
        run([img], table, out, "HWC")
