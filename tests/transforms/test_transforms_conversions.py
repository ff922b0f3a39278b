"""ToImage, PILToTensor, ToPILImage (torchvision v2's conversions): plain references, torchvision's own
results where it imports, and a ported pipeline that still fuses (issue 34: literal ports run)."""

import io

import numpy as np
import pytest
import torch

import fastprep
import fastprep.io as fio
from fastprep import transforms as T

Image = pytest.importorskip("PIL.Image")

RNG = np.random.default_rng(0)
RGB = RNG.integers(0, 256, (5, 7, 3), dtype=np.uint8)


def pil(mode):
    base = Image.fromarray(RGB)
    return {"I;16": lambda: Image.fromarray(RGB[:, :, 0].astype(np.uint16) * 200)}.get(mode, lambda: base.convert(mode))()


PIL_MODES = ["RGB", "L", "RGBA", "LA", "P", "I", "F", "1", "I;16", "CMYK"]


@pytest.mark.one_backend  # conversions only: no kernel
@pytest.mark.parametrize("mode", PIL_MODES)
@pytest.mark.parametrize("step", [T.ToImage, T.PILToTensor])
def test_pil_images_become_chw_tensors_of_their_pixels(step, mode):
    img = pil(mode)
    want = np.array(img).reshape(img.size[1], img.size[0], len(img.getbands())).transpose(2, 0, 1)
    got = step()(img)
    assert type(got) is torch.Tensor and got.shape == want.shape and np.array_equal(got.numpy(), want)


ARRAYS = [("HWC uint8", RGB, RGB.transpose(2, 0, 1)), ("HW uint8", RGB[:, :, 0], RGB[None, :, :, 0]),
          ("HWC float32", RGB.astype(np.float32) / 255, RGB.transpose(2, 0, 1).astype(np.float32) / 255),
          ("HWC uint16", RGB.astype(np.uint16), RGB.transpose(2, 0, 1).astype(np.uint16))]


@pytest.mark.one_backend  # conversions only: no kernel
@pytest.mark.parametrize(("arr", "want"), [a[1:] for a in ARRAYS], ids=[a[0] for a in ARRAYS])
def test_to_image_turns_arrays_chw_and_pil_to_tensor_leaves_them(arr, want):
    got = T.ToImage()(arr)
    assert got.is_contiguous() and got.dtype == torch.from_numpy(want).dtype and np.array_equal(got.numpy(), want)
    assert T.PILToTensor()(arr) is arr  # torchvision's PILToTensor converts PIL images only


@pytest.mark.one_backend  # conversions only: no kernel
def test_tensors_and_windowed_images_pass_through(tmp_path):
    t = torch.zeros(3, 4, 5, dtype=torch.uint8)
    buf = io.BytesIO()
    Image.fromarray(RGB).save(buf, format="JPEG")
    jpeg = fio.JpegFile(buf.getvalue())
    for step in (T.ToImage(), T.PILToTensor()):
        assert step(t) is t and step(jpeg) is jpeg  # read by window by what follows, never decoded here
    out = T.ToImage()((Image.fromarray(RGB), 3, {"name": "x"}))
    assert isinstance(out, tuple) and out[1:] == (3, {"name": "x"}) and np.array_equal(out[0].numpy(),
                                                                                     RGB.transpose(2, 0, 1))
    img = T.ToPILImage()(jpeg)  # a real conversion: decoded whole
    assert img.mode == "RGB" and np.array_equal(np.asarray(img), fio.decode_jpeg(buf.getvalue(), layout="HWC").numpy())


U8 = torch.from_numpy(RNG.integers(0, 256, (3, 5, 7), dtype=np.uint8))
F32 = torch.from_numpy(RNG.random((3, 5, 7), dtype=np.float32))
TO_PIL = [  # (input, mode asked, PIL mode expected, HWC pixels expected)
    ("uint8 CHW 3", U8, None, "RGB", U8.permute(1, 2, 0).numpy()),
    ("uint8 CHW 3 YCbCr", U8, "YCbCr", "YCbCr", U8.permute(1, 2, 0).numpy()),
    ("uint8 CHW 1", U8[:1], None, "L", U8[0].numpy()),
    ("uint8 HW", U8[0], None, "L", U8[0].numpy()),
    ("uint8 CHW 2", U8[:2], None, "LA", U8[:2].permute(1, 2, 0).numpy()),
    ("uint8 CHW 4", torch.cat([U8, U8[:1]]), None, "RGBA", torch.cat([U8, U8[:1]]).permute(1, 2, 0).numpy()),
    ("float32 CHW 3: * 255 truncated", F32, None, "RGB", (F32.permute(1, 2, 0).numpy() * 255).astype(np.uint8)),
    ("float32 CHW 1 F", F32[:1], "F", "F", F32[0].numpy()),
    ("int32 HW", U8[0].to(torch.int32) * 1000, None, "I", U8[0].numpy().astype(np.int32) * 1000),
    ("numpy HWC", RGB, None, "RGB", RGB),
    # Float arrays are scaled as float tensors are (torchvision 0.29.1, checked in .ci/torchvision).
    ("float32 HW array: * 255", F32[0].numpy(), None, "L", (F32[0].numpy() * 255).astype(np.uint8)),
    ("float32 HWC array: * 255", F32.permute(1, 2, 0).numpy(), None, "RGB",
     (F32.permute(1, 2, 0).numpy() * 255).astype(np.uint8)),
    ("float64 HW array: * 255", F32[0].double().numpy(), None, "L", (F32[0].double().numpy() * 255).astype(np.uint8)),
    ("float32 HW array F: values kept", F32[0].numpy(), "F", "F", F32[0].numpy()),
]


@pytest.mark.one_backend  # conversions only: no kernel
@pytest.mark.parametrize(("x", "mode", "want_mode", "want"), [c[1:] for c in TO_PIL], ids=[c[0] for c in TO_PIL])
def test_to_pil_image_modes_and_pixels(x, mode, want_mode, want):
    img = T.ToPILImage(mode)(x)
    assert img.mode == want_mode and img.size == (want.shape[1], want.shape[0])
    assert np.array_equal(np.asarray(img) if want_mode != "YCbCr" else np.frombuffer(img.tobytes(), np.uint8).reshape(
        want.shape), want)


BAD_PIL = [
    ("5 channels", torch.zeros(5, 2, 2, dtype=torch.uint8), None, ValueError, r"expected at most 4 channels, got 5"),
    ("4-D", torch.zeros(1, 3, 2, 2, dtype=torch.uint8), None, ValueError, r"expected a 2-D or 3-D image, got 4 dims"),
    ("mode for 3 channels", U8, "RGBA", ValueError, r"expected mode to be one of \['RGB', 'YCbCr', 'HSV'\]"),
    ("mode for 1 channel", U8[:1], "RGB", ValueError, r"mode 'RGB' does not fit a one-channel uint8 image, which is 'L'"),
    ("int64 3 channels", U8.long(), None, TypeError, r"a 3-channel int64 image has no PIL mode"),
    ("a list", [1, 2], None, TypeError, r"expected a tensor or a numpy array, got list"),
    ("float64 HW array, F", F32[0].double().numpy(), "F", ValueError,
     r"mode 'F' does not fit a one-channel float64 image, which has no PIL mode"),
]


@pytest.mark.one_backend  # conversions only: no kernel
@pytest.mark.parametrize(("x", "mode", "error", "match"), [c[1:] for c in BAD_PIL], ids=[c[0] for c in BAD_PIL])
def test_to_pil_image_errors_name_the_value(x, mode, error, match):
    with pytest.raises(error, match=match):
        T.ToPILImage(mode)(x) if not isinstance(x, list) else fastprep.transforms._conversions.to_pil_image(x)


@pytest.mark.one_backend  # conversions only: no kernel
def test_to_image_makes_a_plain_hw_tensor_one_channel_as_tv_tensors_image():
    hw = U8[0]
    for sample, want in ((hw, hw[None]), ((hw, 3), (hw[None], 3)), ({"image": hw}, {"image": hw[None]})):
        got = T.ToImage()(sample)
        got, want = (got, want) if type(got) is tuple else ((got,), (want,)) if type(got) is torch.Tensor \
            else ((got["image"],), (want["image"],))
        assert got[0].shape == (1, 5, 7) and torch.equal(got[0], want[0]) and got[1:] == want[1:]
    beside = T.ToImage()((Image.fromarray(RGB), hw))  # a plain tensor beside an image is not the image: left as is
    assert beside[1] is hw and beside[0].shape == (3, 5, 7)
    assert T.PILToTensor()(hw) is hw  # PILToTensor converts PIL images only
    with pytest.raises(ValueError, match=r"ToImage: expected an image tensor of 2 .* got shape \(7,\)"):
        T.ToImage()(U8[0, 0])


@pytest.mark.one_backend  # conversions only: no kernel
def test_the_same_as_torchvision_where_it_imports():
    try:
        from torchvision.transforms import v2
    except Exception:  # not installed, or built for another torch (the CPU torch of .venv)
        pytest.skip("needs torchvision (.ci/torchvision runs it)")
    for mode in PIL_MODES:
        for ours, theirs in ((T.ToImage(), v2.ToImage()), (T.PILToTensor(), v2.PILToTensor())):
            assert torch.equal(ours(pil(mode)), theirs(pil(mode)).as_subclass(torch.Tensor)), (ours, mode)
    for _, arr, _ in ARRAYS:
        assert torch.equal(T.ToImage()(arr), v2.ToImage()(arr).as_subclass(torch.Tensor))
    assert torch.equal(T.ToImage()(U8[0]), v2.ToImage()(U8[0]).as_subclass(torch.Tensor))
    for _, x, mode, error, _ in BAD_PIL[-1:]:
        with pytest.raises(error):
            v2.ToPILImage(mode)(x)
    for _, x, mode, _, _ in TO_PIL:
        a, b = T.ToPILImage(mode)(x), v2.ToPILImage(mode)(x)
        assert (a.mode, a.size, a.tobytes()) == (b.mode, b.size, b.tobytes()), mode


MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def imagenet(where=None, step=T.ToImage):
    steps = [T.RandomResizedCrop(32), T.RandomHorizontalFlip(), T.ToDtype(torch.float32, scale=True),
             T.Normalize(MEAN, STD)]
    if where is not None:
        steps.insert(where, step())
    return T.Compose(steps)


@pytest.mark.parametrize("where", [0, 1, 2, 4])
@pytest.mark.parametrize("step", [T.ToImage, T.PILToTensor])
def test_a_ported_pipeline_still_fuses_with_the_same_bits(where, step):
    """torchvision's ImageNet training pipeline as written (ToImage anywhere) is the one resized_crop call."""
    tf, ref = imagenet(where, step), imagenet()
    assert tf.plan.fused is not None and len(tf.plan.segments) == 1 and T.fusable(list(tf.transforms))
    for x in (Image.fromarray(RGB).resize((70, 50)), np.ascontiguousarray(RGB.repeat(9, 0).repeat(9, 1)),
              torch.from_numpy(RGB.repeat(9, 0).repeat(9, 1)).permute(2, 0, 1)):
        torch.manual_seed(3)
        want = ref(x)
        torch.manual_seed(3)
        assert torch.equal(tf(x), want)
        torch.manual_seed(3)
        tf.fuse = False
        assert torch.equal(tf(x), want)  # the steps one by one: the same bits
        tf.fuse = True


def test_seed_pipeline_fuses_and_to_pil_image_ends_fusion():
    seed = T.Compose([T.ToImage(), T.RandomCrop(16), T.RandomDilatedMask(0.25), T.RGBToYCbCr(), T.ToImage()])
    assert seed.plan.fused is not None
    split = T.Compose([T.RandomResizedCrop(32), T.ToPILImage(), T.ToImage(), T.ToDtype(torch.float32, scale=True)])
    assert split.plan.fused is None and len(split.plan.segments) == 4
    x = Image.fromarray(RGB).resize((70, 50))
    torch.manual_seed(1)
    got = split(x)
    torch.manual_seed(1)
    want = T.RandomResizedCrop(32)(x).to(torch.float32) * (1 / 255)
    assert torch.equal(got, want)


def test_the_loader_runs_a_literal_port_on_windows(tmp_path):
    (tmp_path / "k").mkdir()
    for i in range(4):
        Image.fromarray(np.roll(RGB.repeat(12, 0).repeat(12, 1), 7 * i, axis=1)).save(tmp_path / "k" / f"{i}.jpg")
    runs = []
    for tf in (imagenet(0), imagenet()):
        runs.append([(b.data[0].clone(), b.data[1].clone()) for b in
                     fastprep.Loader(fio.ImageFolder(tmp_path, roi=True), 2, transform=tf, seed=5)])
    assert len(runs[0]) == 2
    for (a, la), (b, lb) in zip(*runs, strict=True):
        assert a.shape == (2, 3, 32, 32) and a.dtype == torch.float32 and torch.equal(a, b) and torch.equal(la, lb)


# PIL modes a fused run refuses (its pixels are not uint8 or float32): an absorbed ToImage / PILToTensor
# and the run's steps go one by one, giving torchvision's tensor of the image's own dtype (fuse=False's)
REFUSED = [("I", torch.int32), ("1", torch.bool), ("P", torch.uint8), ("I;16", torch.uint16)]
RUNS = {"RRC+flip": lambda: [T.RandomResizedCrop(16), T.RandomHorizontalFlip()],
        "flip+RRC+ToDtype": lambda: [T.RandomHorizontalFlip(), T.RandomResizedCrop(16), T.ToDtype(torch.float32)]}


def _outcome(fn, x):
    torch.manual_seed(4)
    try:
        return fn(x)
    except Exception as exc:  # noqa: BLE001 (compared: the same error either way)
        return f"{type(exc).__name__}: {exc}"


def _one_by_one(steps):
    def run(x):
        for s in steps:
            x = s(x)
        return x
    return run


@pytest.mark.parametrize("run", list(RUNS))
@pytest.mark.parametrize(("mode", "dtype"), REFUSED)
@pytest.mark.parametrize("step", [T.ToImage, T.PILToTensor])
def test_an_absorbed_conversion_runs_unfused_on_a_pil_mode_the_fused_run_refuses(step, mode, dtype, run):
    img = pil(mode).resize((30, 20)) if mode != "I;16" else pil(mode)
    tf = T.Compose([step(), *RUNS[run]()])
    assert tf.plan.fused is not None  # the conversion is absorbed: the uint8 path stays one op call
    for sample in (img, (img, 7)):
        want = _outcome(_one_by_one([step(), *RUNS[run]()]), sample)
        got = _outcome(tf, sample)
        if isinstance(want, str):  # torch's steps may refuse it too (a 16-bit flip): the same error
            assert got == want and mode == "I;16"
            continue
        got, want = (got[0], want[0]) if type(sample) is tuple else (got, want)
        assert got.shape == want.shape == (1, 16, 16) and got.dtype == want.dtype and torch.equal(got, want)
        assert run != "RRC+flip" or got.dtype == dtype  # torchvision's dtype for the mode


class _IntImages(torch.utils.data.Dataset):
    def __len__(self):
        return 5

    def __getitem__(self, i):
        return Image.fromarray(np.random.default_rng(i).integers(0, 10 ** 6, (20 + i, 30), dtype=np.int32)), i


def test_the_loader_runs_an_absorbed_conversion_unfused_on_a_refused_mode():
    runs = [[b.expand() for b in fastprep.Loader(_IntImages(), 2, transform=T.Compose(
        [T.ToImage(), T.RandomResizedCrop(16), T.RandomHorizontalFlip()], fuse=fuse), seed=2, threads=2)]
        for fuse in (True, False)]
    for (a, la), (b, lb) in zip(*runs, strict=True):
        assert a.dtype == torch.int32 and a.shape[1:] == (1, 16, 16) and torch.equal(a, b) and torch.equal(la, lb)
