"""Structured samples without torchvision: tuples, lists and dicts of plain values, torchvision v2's
rule for plain tensors (the first is the image, the rest pass through), PIL images read by window,
the fused Compose on structured samples, error messages that name the transform and the image."""

import numpy as np
import pytest
import torch

from fastprep import transforms as T

from helpers.fused_spies import fused_and_unfused, fused_calls

PIL = pytest.importorskip("PIL.Image")


def _hwc(h=40, w=50, seed=0, c=3):
    return np.random.default_rng(seed).integers(0, 256, (h, w, c), dtype=np.uint8)


@pytest.mark.parametrize("make", [
    lambda img, extra: (img, 7, extra),
    lambda img, extra: [img, "name", extra],
    lambda img, extra: {"image": img, "label": 7, "extra": extra, "nested": {"x": extra}},
])
def test_the_first_plain_array_is_the_image_and_the_rest_pass_through(make):
    img, extra = torch.from_numpy(_hwc()).permute(2, 0, 1), torch.rand(40, 50)
    sample = make(img, extra)
    torch.manual_seed(1)
    out = T.RandomCrop(16)(sample)
    torch.manual_seed(1)
    ref = T.RandomCrop(16)(img)
    assert type(out) is type(sample)
    flat_out = list(out.values()) if isinstance(out, dict) else list(out)
    assert torch.equal(flat_out[0], ref)
    assert flat_out[2] is extra and flat_out[1] == sample[1 if not isinstance(sample, dict) else "label"]


def test_several_positional_inputs_are_one_tuple_sample_as_in_torchvision():
    img = torch.from_numpy(_hwc()).permute(2, 0, 1)
    torch.manual_seed(0)
    a, label = T.RandomCrop(8)(img, 3)
    torch.manual_seed(0)
    assert label == 3 and torch.equal(a, T.RandomCrop(8)(img))


def test_a_pil_image_is_the_image_even_after_plain_arrays():
    arr = _hwc()
    extra = np.zeros((40, 50, 3), np.uint8)
    torch.manual_seed(0)
    kept, crop = T.RandomCrop(8)((extra, PIL.fromarray(arr)))
    torch.manual_seed(0)
    assert kept is extra and torch.equal(crop, T.RandomCrop(8)(arr))


def test_pil_images_are_read_by_window_only(monkeypatch):
    """Only the crop window of a PIL image is turned into pixels: no full-image array."""
    img = PIL.fromarray(_hwc(200, 300))
    sizes = []
    real = PIL.Image.tobytes

    def spy(self, *args, **kwargs):
        sizes.append(self.size)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(PIL.Image, "tobytes", spy)
    torch.manual_seed(0)
    T.RandomCrop(32)(img)
    T.seed_workload(16)(img)
    T.RandomCrop(32, padding=4, padding_mode="reflect")(img)
    T.RandomResizedCrop(16, scale=(0.01, 0.02))(img)
    assert sizes and max(w * h for w, h in sizes) <= 40 * 40, sizes


@pytest.mark.parametrize("kind", ["pil", "numpy", "tensor"])
def test_pil_numpy_and_tensor_give_the_same_crops(kind):
    arr = _hwc(37, 61, 2)
    img = {"pil": PIL.fromarray(arr), "numpy": arr, "tensor": torch.from_numpy(arr)}[kind]
    for t in (T.RandomCrop(20, layout="HWC"), T.RandomCrop(20, padding=(3, 5), padding_mode="symmetric", layout="HWC"),
              T.RandomResizedCrop(12, layout="HWC"), T.seed_workload(16, layout="HWC"),
              T.Compose([T.RandomHorizontalFlip(), T.RandomCrop(20, layout="HWC")])):
        torch.manual_seed(5)
        out = t(img)
        torch.manual_seed(5)
        assert torch.equal(out, t(torch.from_numpy(arr))), t


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("flip", [None, "before", "after"])
def test_fused_compose_on_structured_samples_equals_the_unfused_chain(seed, flip, monkeypatch):
    arr = _hwc(37, 61, seed)
    sample = {"image": torch.from_numpy(arr), "label": seed, "meta": torch.arange(3)}
    steps = [T.RandomCrop((20, 24), layout="HWC"), T.RandomDilatedMask(0.3), T.RGBToYCbCr()]
    if flip == "before":
        steps.insert(0, T.RandomHorizontalFlip(layout="HWC"))
    elif flip == "after":  # torchvision's usual order; the crop's output is CHW
        steps.insert(1, T.RandomHorizontalFlip())
    calls = fused_calls(monkeypatch)
    fused, unfused = fused_and_unfused(steps, sample, seed)
    assert torch.equal(fused["image"], unfused["image"]) and fused["label"] == seed
    assert fused["meta"] is sample["meta"]
    assert len(calls) == 1 and len(calls[0]) == 1  # the fused op runs, a flip drawn in front or not (it rides along)


def test_flip_then_crop_reads_the_mirrored_window():
    x = torch.randint(0, 256, (3, 30, 41), dtype=torch.uint8)
    for crop in (T.RandomCrop(13), T.RandomCrop(13, padding=(2, 1, 7, 3), padding_mode="reflect", fill=9),
                 T.RandomCrop(50, pad_if_needed=True, padding_mode="edge"), T.RandomResizedCrop(9)):
        flip = T.RandomHorizontalFlip(p=1.0)
        for seed in range(6):
            torch.manual_seed(seed)
            composed = T.Compose([flip, crop])(x)
            torch.manual_seed(seed)
            stepwise = crop(flip(x))  # the flip made on the whole image, then the crop
            assert torch.equal(composed, stepwise), (crop, seed)


def test_flip_p_and_types():
    x = torch.arange(12, dtype=torch.uint8).view(1, 3, 4)
    assert torch.equal(T.RandomHorizontalFlip(1.0)(x), x.flip(-1))
    assert T.RandomHorizontalFlip(0.0)(x) is x
    torch.manual_seed(0)
    flips = [bool(torch.equal(T.RandomHorizontalFlip()(x), x.flip(-1))) for _ in range(400)]
    assert 150 < sum(flips) < 250
    arr = _hwc(5, 6)
    assert torch.equal(T.RandomHorizontalFlip(0.0)(arr), torch.from_numpy(arr).permute(2, 0, 1))  # CHW always
    with pytest.raises(ValueError, match=r"RandomHorizontalFlip: expected p to be in \[0, 1\], got 2"):
        T.RandomHorizontalFlip(2)


def test_errors_name_the_transform_the_shape_and_the_layout():
    chw = torch.zeros(3, 512, 512, dtype=torch.uint8)
    with pytest.raises(ValueError, match=r"^RGBToYCbCr\(layout='HWC'\): expected an RGB image with 3 channels, got 512 "
                                         r"channels; is it CHW\? pass layout='CHW' \(the image: a torch.uint8 Tensor of "
                                         r"shape \[3, 512, 512\] \(read as HWC\)\)"):
        T.RGBToYCbCr(layout="HWC")(chw)
    small = torch.zeros(256, 256, 3, dtype=torch.uint8)
    for t in (T.seed_workload(300, layout="HWC"),
              T.RandomCrop(300, layout="HWC")):
        with pytest.raises(ValueError, match=r"^RandomCrop\(size=\(300, 300\), layout='HWC'\): crop 300x300 is larger "
                                             r"than the image 256x256; pass pad_if_needed=True to pad \(the image: a "
                                             r"torch.uint8 Tensor of shape \[256, 256, 3\] \(read as HWC\)\)"):
            t(small)
    # An image in the other layout: the error names the layout argument (issue 27), both ways.
    for t, x, hint in ((T.RandomCrop(64, layout="HWC"), chw[:, :100, :100], "is it CHW\\? pass layout='CHW'"),
                       (T.RandomCrop(64), torch.zeros(100, 100, 3, dtype=torch.uint8), "is it HWC\\? pass layout='HWC'")):
        with pytest.raises(ValueError, match=r"pass pad_if_needed=True to pad \(the image: .*\(read as (HWC|CHW); "
                                             + hint + r"\)\)$"):
            t(x)
    with pytest.raises(ValueError, match=r"^RandomCrop\(size=\(4, 4\)\): the sample's items have different sizes"):
        T.RandomCrop(4)((PIL.fromarray(_hwc(10, 10)), PIL.fromarray(_hwc(10, 12))))
    with pytest.raises(ValueError, match=r"^RandomCrop\(size=\(8, 8\), pad_if_needed=True, fill=300, "
                                         r"padding_mode='constant'\): expected fill to be an integer in \[0, 255\]"):
        T.RandomCrop(8, pad_if_needed=True, fill=300)(torch.zeros(3, 4, 4, dtype=torch.uint8))


@pytest.mark.parametrize("mode", ["RGBA", "LA", "L"])
def test_alpha_and_grey_get_a_clear_choice(mode):
    img = PIL.new(mode, (20, 20), color=(10,) * len(mode))
    assert T.RandomCrop(8)(img).shape == (len(mode), 8, 8)
    if mode == "RGBA":
        with pytest.raises(ValueError, match=r"an RGBA image: pass alpha='drop', or convert it first: img.convert\('RGB'\)"):
            T.RGBToYCbCr()(img)
        out = T.RGBToYCbCr(alpha="drop")(img)
        assert torch.equal(out, T.RGBToYCbCr()(img.convert("RGB")))
        for fuse in (True, False):
            torch.manual_seed(0)
            got = T.Compose([T.RandomCrop(8), T.RandomDilatedMask(0.25), T.RGBToYCbCr(alpha="drop")], fuse=fuse)(img)
            torch.manual_seed(0)
            ref = T.seed_workload(8, fuse=False)(img.convert("RGB"))
            assert torch.equal(got, ref)
    else:
        with pytest.raises(ValueError, match=r"convert it first: img.convert\('RGB'\)"):
            T.RGBToYCbCr()(img)
    with pytest.raises(ValueError, match="expected alpha to be 'error' or 'drop', got 'keep'"):
        T.RGBToYCbCr(alpha="keep")


def test_resized_crop_draws_torchvisions_window_rules():
    t = T.RandomResizedCrop(10, scale=(0.2, 0.5), ratio=(0.5, 2.0))
    for seed in range(200):
        win = t.window(60, 80, seed)
        assert 0 <= win.top <= 60 - win.height and 0 <= win.left <= 80 - win.width
        assert 0.5 / 1.2 <= win.width / win.height <= 2.0 * 1.2  # rounding of small windows
        assert 0.2 * 0.9 <= win.width * win.height / 4800 <= 0.5 * 1.1
    # No try fits (a very wide image, square ratios only): the central crop of the nearest ratio.
    central = T.RandomResizedCrop(4, scale=(1.0, 1.0), ratio=(1.0, 1.0)).window(10, 100, 0)
    assert (central.top, central.left, central.height, central.width) == (0, 45, 10, 10)
    with pytest.raises(ValueError, match=r"expected scale to be \(min, max\) with 0 < min <= max, got \(0.5, 0.1\)"):
        T.RandomResizedCrop(4, scale=(0.5, 0.1))


def test_resized_crop_is_interpolate_on_the_window():
    x = torch.randint(0, 256, (3, 50, 70), dtype=torch.uint8)
    t = T.RandomResizedCrop((17, 23))
    for seed in range(5):
        torch.manual_seed(seed)
        out = t(x)
        torch.manual_seed(seed)
        win = t.window(50, 70, T.RandomResizedCrop(4).draw())
        ref = torch.nn.functional.interpolate(
            x[None, :, win.top:win.top + win.height, win.left:win.left + win.width].float(), size=[17, 23],
            mode="bilinear", align_corners=False, antialias=True)[0]
        assert out.shape == (3, 17, 23) and out.dtype == torch.uint8
        assert (out.float() - ref.round()).abs().max() <= 1
        hwc = T.RandomResizedCrop((17, 23), layout="HWC")
        torch.manual_seed(seed)
        assert (hwc(x.permute(1, 2, 0)).int() - out.int()).abs().max() <= 1


@pytest.mark.parametrize("flip", ["before", "after"])
@pytest.mark.parametrize("source", ["tensor", "numpy", "pil"])
def test_a_fused_flip_before_or_after_the_crop_gives_the_chains_bits(flip, source, monkeypatch):
    """The fused op runs for every sample, flipped or not, and equals the step-by-step chain."""
    arr = _hwc(40, 52, 1)
    image = {"tensor": torch.from_numpy(arr).permute(2, 0, 1), "numpy": arr,
             "pil": pytest.importorskip("PIL.Image").fromarray(arr)}[source]
    steps = [T.RandomCrop((16, 21)), T.RandomDilatedMask(0.3), T.RGBToYCbCr()]
    steps.insert(0 if flip == "before" else 1, T.RandomHorizontalFlip())
    calls = fused_calls(monkeypatch)
    for seed in range(12):
        out = []
        for fuse in (True, False):
            torch.manual_seed(seed)
            out.append(T.Compose(steps, fuse=fuse)(image))
        assert torch.equal(out[0], out[1]), seed
    flips = [c[0] for c in calls]
    assert len(calls) == 12 and 0 < sum(flips) < 12  # fused every time (the op took the flip); some flipped
