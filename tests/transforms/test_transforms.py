"""Transforms: inputs they take, seeds they draw, and the fused Compose path."""

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import fastprep
from fastprep import transforms as T

PIL = pytest.importorskip("PIL.Image")


def _hwc(h=40, w=50, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8)


@pytest.mark.parametrize("kind", ["pil", "numpy", "tensor_hwc", "tensor_chw"])
def test_inputs_all_give_the_same_chw_output(kind):
    arr = _hwc()
    img, layout = {"pil": (PIL.fromarray(arr), "CHW"), "numpy": (arr, "CHW"),
                   "tensor_hwc": (torch.from_numpy(arr), "HWC"),
                   "tensor_chw": (torch.from_numpy(arr).permute(2, 0, 1).contiguous(), "CHW")}[kind]
    torch.manual_seed(3)
    out = T.seed_workload(16, layout=layout, fuse=False)(img)
    torch.manual_seed(3)
    ref = T.seed_workload(16, layout="HWC", fuse=False)(torch.from_numpy(arr))
    assert out.shape == (3, 16, 16) and out.dtype == torch.uint8
    assert torch.equal(out, ref)


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("out_dtype,scale", [(None, 1.0), (torch.float32, 1 / 255), (torch.bfloat16, 1.0)])
def test_fused_compose_equals_the_unfused_chain(seed, out_dtype, scale):
    arr = _hwc(37, 61, seed)
    steps = [T.RandomCrop((20, 24), layout="HWC"), T.RandomDilatedMask(0.3, structure="square"),
             T.RGBToYCbCr(out_dtype=out_dtype, scale=scale)]
    torch.manual_seed(seed)
    fused = T.Compose(steps)(torch.from_numpy(arr))
    after_fused = torch.randint(0, 2**30, ())
    torch.manual_seed(seed)
    unfused = T.Compose(steps, fuse=False)(torch.from_numpy(arr))
    assert torch.equal(torch.randint(0, 2**30, ()), after_fused)  # same draws from the generator
    assert T.fusable(steps) and torch.equal(fused, unfused)


def test_compose_fuses_only_what_the_fused_op_covers():
    assert not T.fusable([T.RandomCrop(4, pad_if_needed=True), T.RandomDilatedMask(0.1), T.RGBToYCbCr()])
    assert not T.fusable([T.RandomCrop(4), T.RandomDilatedMask(0.1, iterations=2), T.RGBToYCbCr()])
    assert not T.fusable([T.RandomCrop(4), T.RandomDilatedMask(0.1, value=3), T.RGBToYCbCr()])
    x = torch.rand(3, 20, 20)  # float input: the fused op takes uint8, so the steps run one by one
    torch.manual_seed(0)
    out = T.seed_workload(16)(x)
    torch.manual_seed(0)
    assert out.dtype == torch.float32 and torch.equal(out, T.seed_workload(16, fuse=False)(x))


def test_generator_argument_and_manual_seed_reproduce():
    arr = _hwc()
    a = T.RandomCrop(8, generator=torch.Generator().manual_seed(1))(arr)
    b = T.RandomCrop(8, generator=torch.Generator().manual_seed(1))(arr)
    assert torch.equal(a, b)
    torch.manual_seed(0)
    c = T.RandomDilatedMask(0.5)(arr)
    torch.manual_seed(0)
    assert torch.equal(T.RandomDilatedMask(0.5)(arr), c)


def test_to_dtype_and_grayscale():
    gray = np.arange(12, dtype=np.uint8).reshape(3, 4)
    out = T.ToDtype(torch.float32, scale=True)(gray)
    assert out.shape == (1, 3, 4) and torch.allclose(out[0], torch.from_numpy(gray).float() / 255)
    assert T.RandomCrop(2)(PIL.fromarray(gray)).shape == (1, 2, 2)
    with pytest.raises(ValueError, match=r"^RGBToYCbCr\(\): expected an RGB image with 3 channels, got 1 channels; "
                       r"a grey image: convert it first: img.convert\('RGB'\)"):
        T.RGBToYCbCr()(gray)


def test_rgba_and_bad_inputs():
    rgba = PIL.fromarray(np.zeros((4, 4, 4), np.uint8), "RGBA")
    assert T.RandomCrop(2)(rgba).shape == (4, 2, 2)
    with pytest.raises(TypeError, match=r"^RandomCrop\(size=\(2, 2\)\): expected a PIL image, a numpy array, a tensor, or a tuple, "
                       r"list or dict holding them, got str"):
        T.RandomCrop(2)("image.png")
    with pytest.raises(ValueError, match="expected an HWC image array, got 4-D"):
        T.RandomCrop(2)(np.zeros((1, 2, 3, 4), np.uint8))


@pytest.mark.parametrize("mode,channels,dtype", [
    ("L", 1, torch.uint8), ("LA", 2, torch.uint8), ("RGB", 3, torch.uint8), ("RGBA", 4, torch.uint8),
    ("CMYK", 4, torch.uint8), ("YCbCr", 3, torch.uint8), ("HSV", 3, torch.uint8), ("F", 1, torch.float32),
])
def test_pil_modes_with_intensity_pixels_crop_and_mask(mode, channels, dtype):
    img = PIL.new(mode, (6, 5))
    assert T.RandomCrop(4)(img).shape == (channels, 4, 4) and T.RandomCrop(4)(img).dtype == dtype
    assert T.RandomDilatedMask(0.5)(img).shape == (channels, 5, 6)


@pytest.mark.parametrize("mode,match", [
    ("P", r"mode 'P' holds palette indices, not colours; convert it first: img.convert\('RGB'\)"),
    ("PA", "mode 'PA' holds palette indices"),
    ("1", "mode '1' holds 1-bit pixels"),
    ("I", "mode 'I' holds int32 pixels"),
    ("I;16", "mode 'I;16' holds 16-bit pixels"),
])
def test_pil_modes_without_intensity_pixels_are_named(mode, match):
    img = PIL.new(mode, (6, 5))
    for transform in (T.RandomCrop(4), T.RGBToYCbCr(), T.ToDtype(), T.seed_workload(16, layout="HWC")):
        with pytest.raises(ValueError, match=match):
            transform(img)


@pytest.mark.parametrize("mode", ["YCbCr", "HSV", "LAB"])
def test_colour_conversion_refuses_pil_images_that_are_not_rgb(mode):
    img = PIL.new(mode, (40, 40))
    with pytest.raises(ValueError, match=f"RGBToYCbCr expects RGB pixels, got a PIL image in mode '{mode}'"):
        T.RGBToYCbCr()(img)
    for fuse in (True, False):  # the crop in front would hide the mode from RGBToYCbCr
        with pytest.raises(ValueError, match=f"Compose .* expects RGB pixels, got a PIL image in mode '{mode}'"):
            T.seed_workload(16, layout="HWC", fuse=fuse)(img)


class _Images(Dataset):
    def __len__(self):
        return 12

    def __getitem__(self, i):
        return T.seed_workload(16, layout="HWC")(torch.from_numpy(_hwc(30, 30, i))), i


@pytest.mark.parametrize("workers", [0, 2])
def test_same_samples_whatever_num_workers(workers):
    torch.manual_seed(7)
    ds = T.SeedByIndex(_Images())
    batches = list(DataLoader(ds, batch_size=4, num_workers=workers, collate_fn=fastprep.compact_collate))
    torch.manual_seed(7)
    ref = T.SeedByIndex(_Images())
    for b, batch in enumerate(batches):
        for j in range(4):
            assert torch.equal(batch.data[0][j], ref[4 * b + j][0])
