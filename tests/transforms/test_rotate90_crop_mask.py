"""RandomRotate90 in the crop + mask + YCbCr row: quarter turns (and vertical flips) before or after
the crop fold into the op's read (a transposed write), the mask drawn on the output as the steps
draw it: the same bits as the steps one by one for every k, on the active backend
(FASTPREP_BACKEND), in Compose and through the Loader; a turn between the mask and YCbCr runs
unfused (the mask would be in the turn's source's coordinates)."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

import fastprep
from fastprep import transforms as T
from fastprep.transforms._plan import FusionPlan

from helpers.fused_spies import fused_and_unfused, fused_calls, per_sample_items
from helpers.mixed_photos import SIZES, Photos


def _image(shape=(3, 50, 64), seed=0):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8))


def _tail(out_dtype=None, scale=1.0):
    return [T.RandomDilatedMask(0.3), T.RGBToYCbCr(out_dtype, scale)]


PIPELINES = {
    "turn before a crop not square": lambda: [T.RandomRotate90(p=1.0), T.RandomCrop((20, 28)), *_tail()],
    "turn after the crop": lambda: [T.RandomCrop(24), T.RandomRotate90(p=1.0), *_tail()],
    "turn after a crop not square": lambda: [T.RandomCrop((20, 28)), T.RandomRotate90(p=1.0), *_tail()],
    "flips and turns around, float": lambda: [T.RandomHorizontalFlip(), T.RandomRotate90(), T.RandomVerticalFlip(),
                                              T.RandomCrop((22, 30)), T.RandomHorizontalFlip(), T.RandomRotate90(p=0.9),
                                              T.RandomVerticalFlip(), *_tail(torch.float32, 1 / 255)],
    "bfloat16, square mask": lambda: [T.RandomRotate90(), T.RandomCrop(26), T.RandomRotate90(),
                                      T.RandomDilatedMask(0.4, structure="square"),
                                      T.RGBToYCbCr(torch.bfloat16, 0.5)],
}


@pytest.mark.parametrize("name", list(PIPELINES))
@pytest.mark.parametrize("layout", ["CHW", "numpy HWC"])
def test_the_fused_turn_is_the_steps_one_by_one(name, layout, monkeypatch):
    assert FusionPlan(PIPELINES[name]()).fused.fusion.op == "crop_mask_ycbcr_batch"
    calls = fused_calls(monkeypatch)
    for seed in range(16):
        x = _image(seed=seed)
        x = x if layout == "CHW" else x.permute(1, 2, 0).contiguous().numpy()
        fused, unfused = fused_and_unfused(PIPELINES[name](), x, seed)
        assert fused.dtype == unfused.dtype and torch.equal(fused, unfused), (name, seed)
    assert len(calls) == 16  # each sample one op call


@pytest.mark.parametrize("k", [0, 1, 2, 3])
@pytest.mark.parametrize("before", [True, False], ids=["before the crop", "after the crop"])
def test_each_k_is_torch_rot90_then_the_mask_on_the_output(k, before, monkeypatch):
    monkeypatch.setattr(T.RandomRotate90, "make_params", lambda self, seed: k)
    crop, rot = T.CenterCrop((20, 28)), T.RandomRotate90(p=1.0)
    x = _image(seed=k)
    turned = torch.rot90(crop(x) if not before else x, k, dims=(-2, -1))
    turned = crop(turned) if before else turned
    got = T.Compose([rot, crop, T.RandomDilatedMask(0.0), T.RGBToYCbCr()] if before else
                    [crop, rot, T.RandomDilatedMask(0.0), T.RGBToYCbCr()])(x)
    assert torch.equal(got, fastprep.rgb_to_ycbcr(turned.contiguous(), "CHW"))
    # with a mask: masked where the mask drawn on the turned output says (the steps' draw)
    steps = [crop, rot, *_tail()]
    fused, unfused = fused_and_unfused(steps, x, k)
    assert torch.equal(fused, unfused)


def test_a_turn_between_the_mask_and_ycbcr_runs_unfused():
    steps = [T.RandomCrop(24), T.RandomDilatedMask(0.3), T.RandomRotate90(p=1.0), T.RGBToYCbCr()]
    assert FusionPlan(steps).fused is None
    for seed in range(4):
        fused, unfused = fused_and_unfused(steps, _image(seed=seed), seed)
        assert torch.equal(fused, unfused)


def test_an_hwc_turn_keeps_the_row_unfused():
    """A turn of an HWC image gives CHW: the row fuses turns only when every geometric step is CHW."""
    steps = [T.RandomCrop(24, layout="HWC"), T.RandomRotate90(p=1.0, layout="HWC"), *_tail()]
    assert FusionPlan(steps).fused is None


@pytest.mark.parametrize("name", ["turn before a crop not square", "bfloat16, square mask"])  # one size a batch
def test_the_loader_writes_each_chunk_with_one_op_call(name, monkeypatch):
    want = [(img.clone(), int(label)) for b in DataLoader(
        T.SeedByIndex(Photos(T.Compose(PIPELINES[name](), fuse=False), sizes=SIZES[:3]), seed=3), batch_size=8,
        collate_fn=fastprep.compact_collate) for img, label in zip(*b.data)]
    calls, one_by_one = fused_calls(monkeypatch), per_sample_items(monkeypatch)
    for threads in (1, 2):
        calls.clear()
        got = [(img.clone(), int(label)) for b in fastprep.Loader(Photos(sizes=SIZES[:3]), 8, transform=T.Compose(PIPELINES[name]()),
                                                                  seed=3, threads=threads) for img, label in zip(*b.data)]
        assert len(got) == len(want) == 20
        assert all(torch.equal(a, b) and la == lb for (a, la), (b, lb) in zip(got, want))
        assert sum(map(len, calls)) == 20 and max(map(len, calls)) > 1 and not one_by_one
