"""fastprep's Resize, CenterCrop, Normalize, RandomVerticalFlip and the fused resized-crop pipelines
against torchvision v2 on the same samples and draws: images, masks, boxes and key points.
Collected through tests/transforms/test_torchvision_interop.py (which skips where torchvision does not import),
so that `bash .ci/torchvision` runs them."""

import numpy as np
import pytest
import torch
from torchvision import tv_tensors
from torchvision.transforms import v2
from torchvision.transforms.v2 import functional as F

from fastprep import transforms as T
from fastprep.core._rng import draw_seed

MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def _sample(h=45, w=61, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {"image": tv_tensors.Image(torch.randint(0, 256, (3, h, w), generator=g, dtype=torch.uint8)),
            "mask": tv_tensors.Mask(torch.randint(0, 5, (h, w), generator=g, dtype=torch.uint8)),
            "boxes": tv_tensors.BoundingBoxes(torch.tensor([[2, 3, 20, 30], [25, 1, w - 1, h - 2]]), format="XYXY",
                                              canvas_size=(h, w)),
            "points": tv_tensors.KeyPoints(torch.tensor([[1.0, 2.0], [30.0, 20.0]]), canvas_size=(h, w)), "label": 3}


def _same(out, ref):
    assert out.keys() == ref.keys()
    for key, want in ref.items():
        got = out[key]
        assert type(got) is type(want), key
        if isinstance(want, torch.Tensor):
            assert got.dtype == want.dtype and torch.equal(got, want), key
            if isinstance(want, (tv_tensors.BoundingBoxes, tv_tensors.KeyPoints)):
                assert tuple(got.canvas_size) == tuple(want.canvas_size), key
        else:
            assert got == want, key


@pytest.mark.parametrize("args", [dict(size=40), dict(size=(30, 50)), dict(size=[33], max_size=40),
                                  dict(size=None, max_size=50), dict(size=70, antialias=False),
                                  dict(size=40, interpolation=v2.InterpolationMode.NEAREST),
                                  dict(size=(20, 90), interpolation="bicubic")])
def test_resize_is_torchvisions(args):
    for h, w in ((45, 61), (61, 45)):
        sample = _sample(h, w)
        _same(T.Resize(**args)(sample), v2.Resize(**args)(sample))


@pytest.mark.parametrize("size", [32, (21, 40), (50, 30), (60, 70)])  # odd margins, padding on one or both axes
def test_center_crop_is_torchvisions(size):
    sample = _sample()
    _same(T.CenterCrop(size)(sample), v2.CenterCrop(size)(sample))


def test_vertical_flip_and_normalize_are_torchvisions():
    sample = _sample()
    _same(T.RandomVerticalFlip(1.0)(sample), v2.RandomVerticalFlip(1.0)(sample))
    assert all(T.RandomVerticalFlip(0.0)(sample)[k] is sample[k] for k in sample)
    for dtype in (torch.float32, torch.float64):
        image = tv_tensors.Image(torch.rand(3, 9, 11, dtype=dtype))
        for mean, std in ((MEAN, STD), ([0.5], [0.2])):
            _same({"x": T.Normalize(mean, std)(image)}, {"x": v2.Normalize(mean, std)(image)})
        want = v2.Normalize(MEAN, STD)(image.clone())
        got = image.clone()
        assert torch.equal(T.Normalize(MEAN, STD, inplace=True)(got), want) and torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_validation_pipeline_fused_is_torchvisions(dtype):
    """Resize + CenterCrop + ToDtype (+ Normalize, float32) as one op call: torchvision's bits."""
    steps = [(T.Resize(40), v2.Resize(40)), (T.CenterCrop(32), v2.CenterCrop(32)),
             (T.ToDtype(dtype, scale=True), v2.ToDtype(dtype, scale=True))]
    if dtype == torch.float32:
        steps.append((T.Normalize(MEAN, STD), v2.Normalize(MEAN, STD)))
    ours, theirs = T.Compose([a for a, _ in steps]), v2.Compose([b for _, b in steps])
    assert ours.plan.fused is not None
    for h, w in ((45, 61), (61, 45), (40, 40), (39, 77)):
        sample = _sample(h, w, seed=h)
        _same(ours(sample), theirs(sample))
        arr = sample["image"].permute(1, 2, 0).numpy()
        assert torch.equal(ours(arr), theirs(sample["image"]))  # numpy HWC: the same pixels


@pytest.mark.parametrize("order", ["flips after", "flips before"])
def test_imagenet_pipeline_fused_is_torchvisions_on_the_same_draws(order):
    """RandomResizedCrop, both flips, ToDtype, Normalize, fused: torchvision's kernels on the window
    and flips fastprep drew (masks nearest, boxes and key points by torchvision's kernels)."""
    rrc, hflip, vflip = T.RandomResizedCrop((24, 20)), T.RandomHorizontalFlip(), T.RandomVerticalFlip()
    flips = [hflip, vflip]
    geometric = [rrc, *flips] if order == "flips after" else [*flips, rrc]
    pipeline = T.Compose([*geometric, T.ToDtype(torch.float32, scale=True), T.Normalize(MEAN, STD)])
    assert pipeline.plan.fused is not None
    for seed in range(8):
        sample = _sample(seed=seed)
        torch.manual_seed(seed)
        out = pipeline(sample)
        torch.manual_seed(seed)
        seeds = {id(step): draw_seed() for step in geometric}
        ref = dict(sample)
        for step in geometric:
            if step is rrc:
                window = rrc.make_params(seeds[id(rrc)], 45, 61)
                apply = lambda x, win=window: F.resized_crop(x, *win, [24, 20], antialias=True)  # noqa: E731
            elif step.make_params(seeds[id(step)]):
                apply = F.horizontal_flip if step is hflip else F.vertical_flip
            else:
                continue
            ref = {k: apply(x) if k != "label" else x for k, x in ref.items()}
        ref["image"] = F.normalize(F.to_dtype(ref["image"], torch.float32, scale=True), MEAN, STD)
        _same(out, ref)


def test_random_resized_crop_alone_is_torchvisions_resized_crop():
    t = T.RandomResizedCrop((17, 23), scale=(0.3, 1.0))
    for seed in range(6):
        sample = _sample(seed=seed)
        torch.manual_seed(seed)
        out = t(sample)
        torch.manual_seed(seed)
        top, left, h, w = t.make_params(draw_seed(), 45, 61)
        _same(out, {k: F.resized_crop(x, top, left, h, w, [17, 23]) if k != "label" else x
                    for k, x in sample.items()})


def test_resize_of_videos_and_float_images_is_torchvisions():
    video = tv_tensors.Video(torch.randint(0, 256, (2, 3, 20, 30), dtype=torch.uint8))
    assert torch.equal(T.Resize(13)(video), v2.Resize(13)(video))
    image = tv_tensors.Image(torch.from_numpy(np.random.default_rng(0).random((3, 20, 30), dtype=np.float32)))
    assert torch.equal(T.Resize(13)(image), v2.Resize(13)(image))
