"""RandomResizedCrop, Resize, CenterCrop, flips, ToDtype and Normalize fused into one resized_crop
call (Compose): the unfused steps' bits and draws, one op call per sample, on every kind of source;
the drawn and computed geometry the same for ints and arrays; error texts that name the transform
and the argument. (Against torchvision: tests/helpers/torchvision_resize_checks.py; the Loader:
tests/loader/test_loader_resize.py.)"""

import math

import numpy as np
import pytest
import torch

import fastprep.core._counter_rng as counter_rng
from fastprep import transforms as T

from helpers.fused_spies import MEAN, PIPELINES, STD, fused_and_unfused, resized_crop_calls

PIL = pytest.importorskip("PIL.Image")

pytestmark = pytest.mark.one_backend  # the op's bits are tests/test_resize*.py's, on both backends

def _hwc(h=45, w=61, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


def _sources(arr):
    chw = torch.from_numpy(arr).permute(2, 0, 1)
    return {"numpy": arr, "chw tensor": chw.contiguous(), "chw view of hwc": chw, "pil": PIL.fromarray(arr)}


@pytest.mark.parametrize("name", list(PIPELINES))
def test_fused_is_the_unfused_chain_with_one_op_call_a_sample(name, monkeypatch):
    steps = PIPELINES[name]()
    calls = resized_crop_calls(monkeypatch)
    assert T.fusable(steps)
    n = 0
    for seed in range(6):
        for source, img in _sources(_hwc(45 + 3 * seed, 61 - 2 * seed, seed)).items():
            fused, unfused = fused_and_unfused(steps, img, seed)
            assert fused.dtype == unfused.dtype and torch.equal(fused, unfused), (source, seed)
            n += 1
    assert calls == [1] * n


def test_hwc_tensors_jpeg_files_and_structured_samples(monkeypatch, tmp_path):
    import fastprep.io as fio

    from helpers.jpeg_photos import encode

    arr = _hwc(50, 70, 3)
    path = tmp_path / "a.jpg"
    path.write_bytes(encode(arr))
    hwc = [T.RandomResizedCrop(24, layout="HWC"), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True)]
    cases = [(hwc, torch.from_numpy(arr)), (PIPELINES["imagenet"](), fio.JpegFile(path)),
             (PIPELINES["validation"](), {"image": arr, "label": 4, "meta": torch.arange(3)})]
    calls = resized_crop_calls(monkeypatch)
    for steps, img in cases:
        for seed in range(3):
            fused, unfused = fused_and_unfused(steps, img, seed)
            if isinstance(img, dict):
                assert fused["label"] == 4 and fused["meta"] is img["meta"]
                fused, unfused = fused["image"], unfused["image"]
            assert torch.equal(fused, unfused), (steps, seed)
    assert calls == [1] * 9


def test_what_does_not_fuse_runs_step_by_step_with_the_same_bits(monkeypatch):
    calls = resized_crop_calls(monkeypatch)
    arr = _hwc()
    norm16 = [T.RandomResizedCrop(20), T.ToDtype(torch.float16, scale=True), T.Normalize(MEAN, STD)]
    nearest = [T.RandomResizedCrop(20, interpolation="nearest"), T.RandomVerticalFlip()]
    assert not T.fusable(norm16) and not T.fusable(nearest)  # float16 Normalize rounds twice in torchvision
    for steps, img in [(norm16, arr), (nearest, arr), (PIPELINES["imagenet"](), arr.astype(np.float32)),
                       (PIPELINES["validation"](), arr[:, :, :1]),
                       ([T.Resize((30, 34)), T.CenterCrop(32), T.ToDtype(torch.float32)], arr)]:
        assert torch.equal(*fused_and_unfused(steps, img, 0))
    assert calls == []  # float, grey images and a center crop larger than the resize: the steps one by one


def test_center_crop_larger_than_the_image_pads_with_zeros():
    img = torch.from_numpy(_hwc(5, 8)).permute(2, 0, 1)
    out = T.CenterCrop((9, 6))(img)
    want = torch.zeros(3, 9, 6, dtype=torch.uint8)
    want[:, 2:7] = img[:, :, 1:7]  # 2 rows above, 2 below; columns round((8 - 6) / 2) = 1 on
    assert torch.equal(out, want)


def test_drawn_windows_and_sizes_are_the_same_for_ints_and_arrays():
    rng = np.random.default_rng(3)
    seeds = rng.integers(-2**63, 2**63 - 1, 300, dtype=np.int64)
    H, W = rng.integers(1, 700, 300), rng.integers(1, 700, 300)
    W[:20] = H[:20] * 9  # very wide: no try fits, the central crop
    t = T.RandomResizedCrop(10, scale=(0.5, 1.0))
    arrays = t.make_params(seeds.view(np.uint64), H, W)
    for i in range(300):
        assert tuple(int(a[i]) for a in arrays) == t.make_params(int(seeds[i]), int(H[i]), int(W[i]))
    for r in (T.Resize(37), T.Resize(30, max_size=40), T.Resize(None, max_size=50), T.Resize((5, 9))):
        hs, ws = (np.broadcast_to(v, 300) for v in r.make_params(None, H, W))
        assert [r.make_params(None, int(h), int(w)) for h, w in zip(H, W)] == list(zip(hs.tolist(), ws.tolist()))
    c = T.CenterCrop((7, 4))
    tops, lefts = c.make_params(None, H + 7, W + 4)
    assert tops.tolist() == [int(round(h / 2.0)) for h in H] and lefts.tolist() == [int(round(w / 2.0)) for w in W]


def test_the_window_draw_is_torchvisions_algorithm_on_the_counter_generator():
    """RandomResizedCrop.make_params: torchvision's get_params, math for math, on the seed's words."""
    t = T.RandomResizedCrop(8)
    for seed in range(40):
        H, W = 30 + seed, 90 - seed
        for k in range(10):
            u = [(counter_rng.random_word(seed, 4 * k + j) >> 11) * 2.0**-53 for j in range(2)]
            area = H * W * (0.08 + u[0] * 0.92)
            aspect = math.exp(math.log(3 / 4) + u[1] * (math.log(4 / 3) - math.log(3 / 4)))
            w, h = int(round(math.sqrt(area * aspect))), int(round(math.sqrt(area / aspect)))
            if 0 < w <= W and 0 < h <= H:
                top = counter_rng.uniform_below(counter_rng.random_word(seed, 4 * k + 2), H - h + 1)
                left = counter_rng.uniform_below(counter_rng.random_word(seed, 4 * k + 3), W - w + 1)
                assert t.make_params(seed, H, W) == (top, left, h, w)
                break


@pytest.mark.parametrize("make,match", [
    (lambda: T.Resize(0), r"^Resize: expected size to be an int >= 1 or a pair of them \(h, w\), got 0"),
    (lambda: T.Resize((3, 4), max_size=9), r"^Resize: max_size is for an int size .*got size=\(3, 4\) and max_size=9"),
    (lambda: T.Resize(30, max_size=30), r"^Resize: expected max_size to be greater than size, got max_size=30"),
    (lambda: T.Resize(None), r"^Resize: expected max_size to be an int when size is None, got None"),
    (lambda: T.Resize(8, interpolation="lanczos"), r"^Resize: interpolation 'lanczos' is not supported: fastprep "
                                                   r"resizes with \['bilinear', 'nearest', 'nearest-exact', 'bicubic'\]"),
    (lambda: T.RandomResizedCrop(8, interpolation=4), r"^RandomResizedCrop: interpolation 'box' is not supported"),
    (lambda: T.Resize(8, interpolation="linear"), r"^Resize: expected interpolation to be one of \['bilinear', "
                                                  r".*got 'linear'"),
    (lambda: T.CenterCrop((0, 3)), r"^CenterCrop: expected size to be an int >= 1 or a pair"),
    (lambda: T.Normalize(MEAN, [0.2, 0.0, 0.2]), r"^Normalize: expected std to hold no 0 \(it divides by it\), "
                                                 r"got std=\[0.2, 0.0, 0.2\]"),
    (lambda: T.Normalize("abc", STD), r"^Normalize: expected mean to be a number, got 'abc'"),
    (lambda: T.RandomVerticalFlip(1.5), r"^RandomVerticalFlip: expected p to be in \[0, 1\], got 1.5"),
])
def test_bad_arguments_name_the_transform_and_the_argument(make, match):
    with pytest.raises(ValueError, match=match):
        make()


def test_bad_inputs_name_the_transform_and_the_image():
    with pytest.raises(TypeError, match=r"^Normalize\(mean=\[0.5\], std=\[0.5\]\): expected a float image, got "
                                        r"torch.uint8; convert it first: ToDtype\(torch.float32, scale=True\) "
                                        r"\(the image: a uint8 numpy array of shape \(45, 61, 3\)"):
        T.Normalize([0.5], [0.5])(_hwc())
    with pytest.raises(RuntimeError, match=r"^Normalize\(mean=\[0.5, 0.5\], std=\[1.0\]\): .*size of tensor"):
        T.Normalize([0.5, 0.5], [1.0])(torch.rand(3, 4, 4))
    with pytest.raises(ValueError, match=r"^RandomCrop\(size=\(50, 50\)\): crop 50x50 is larger than the image 40x54"):
        T.Compose([T.Resize(40), T.RandomCrop(50), T.ToDtype(torch.float32)])(_hwc())
