"""fastprep's transforms against torchvision v2 on the same samples: the same window through
torchvision's functional crop, padding modes, RandomResizedCrop, flips, box shifting and
clipping, type preservation, mixing the two libraries' Compose, collate by tv_tensors roles.

Needs a torchvision that loads (`bash .ci/torchvision` makes a venv with one); skipped elsewhere."""

import pytest
import torch

import fastprep
from fastprep import transforms as T

try:
    from torchvision import tv_tensors
    from torchvision.transforms import v2
    from torchvision.transforms.v2 import functional as F
except Exception as exc:  # noqa: BLE001 (not installed, or built for another torch: its ops fail to load)
    pytest.skip(f"torchvision does not import here: {exc}", allow_module_level=True)

H, W = 37, 53


def _sample(seed=0, dtype=torch.uint8):
    g = torch.Generator().manual_seed(seed)
    image = tv_tensors.Image(torch.randint(0, 256, (3, H, W), generator=g).to(dtype))
    mask = tv_tensors.Mask(torch.randint(0, 5, (H, W), generator=g, dtype=torch.uint8))
    boxes = tv_tensors.BoundingBoxes(torch.tensor([[2, 3, 20, 30], [25, 1, 52, 36], [40, 30, 50, 36]]),
                                     format="XYXY", canvas_size=(H, W))
    points = tv_tensors.KeyPoints(torch.tensor([[1.0, 2.0], [30.0, 20.0], [52.0, 36.0]]), canvas_size=(H, W))
    return {"image": image, "mask": mask, "boxes": boxes, "points": points, "label": 3}


def _window(t, seed, flip=False):
    torch.manual_seed(seed)
    return t.window(H, W, T.RandomCrop(1).draw(), flip)


def _tv_reference(sample, win, mode, fill, resize=None):
    out = {}
    for key, x in sample.items():
        if key == "label":
            out[key] = x
            continue
        if win.flip:
            x = F.horizontal_flip(x)
        if any(win.pad):
            x = F.pad(x, list(win.pad), fill=fill, padding_mode=mode)
        if resize is not None:
            x = F.resized_crop(x, win.top, win.left, win.height, win.width, list(resize), antialias=True)
        else:
            x = F.crop(x, win.top, win.left, win.height, win.width)
        out[key] = x
    return out


def _assert_same(out, ref, atol=0):
    for key in ref:
        assert type(out[key]) is type(ref[key]), key
        if key == "label":
            assert out[key] == ref[key]
            continue
        assert out[key].shape == ref[key].shape, key
        diff = (out[key].double() - ref[key].double()).abs().max() if out[key].numel() else 0
        assert diff <= atol, (key, diff)
        if isinstance(ref[key], (tv_tensors.BoundingBoxes, tv_tensors.KeyPoints)):
            assert tuple(out[key].canvas_size) == tuple(ref[key].canvas_size)
        if isinstance(ref[key], tv_tensors.BoundingBoxes):
            assert out[key].format == ref[key].format


@pytest.mark.parametrize("size,pad_if_needed", [(16, False), ((37, 53), False), ((45, 60), True)])
def test_random_crop_equals_torchvisions_crop_at_the_same_window(size, pad_if_needed):
    t = T.RandomCrop(size, pad_if_needed=pad_if_needed, fill=7)
    for seed in range(6):
        sample = _sample(seed)
        torch.manual_seed(seed)
        out = t(sample)
        _assert_same(out, _tv_reference(sample, _window(t, seed), "constant", 7))


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_padding_modes_equal_torchvisions_pad_then_crop(mode, dtype):
    t = T.RandomCrop((30, 50), padding=(3, 6, 9, 2), padding_mode=mode,
                     fill={tv_tensors.Image: 9, tv_tensors.Mask: 4})
    for seed in range(6):
        sample = _sample(seed, dtype)
        if mode != "constant":  # torchvision pads boxes and key points in constant mode only
            sample = {k: v for k, v in sample.items() if k in ("image", "mask", "label")}
        torch.manual_seed(seed)
        out = t(sample)
        win = _window(t, seed)
        ref = _tv_reference({"image": sample["image"]}, win, mode, 9)
        ref.update(_tv_reference({k: v for k, v in sample.items() if k != "image"}, win, mode, 4))
        _assert_same(out, ref)


def test_boxes_with_another_padding_mode_raise_torchvisions_error_named():
    with pytest.raises(ValueError, match=r"^RandomCrop\(.*padding_mode='reflect'\): Padding mode 'reflect' is "
                                         r"not supported with bounding boxes"):
        T.RandomCrop(20, padding=2, padding_mode="reflect")(_sample())


def test_random_resized_crop_equals_torchvision():
    t = T.RandomResizedCrop((24, 20))
    for seed in range(8):
        sample = _sample(seed)
        torch.manual_seed(seed)
        out = t(sample)
        _assert_same(out, _tv_reference(sample, _window(t, seed), "constant", 0, resize=(24, 20)))


@pytest.mark.parametrize("crop", [T.RandomCrop(20), T.RandomCrop(30, padding=4), T.RandomResizedCrop(16)])
def test_flip_then_crop_in_compose_equals_torchvisions_flip_then_crop(crop):
    for seed in range(6):
        sample = _sample(seed)
        torch.manual_seed(seed)
        out = T.Compose([T.RandomHorizontalFlip(1.0), crop])(sample)
        torch.manual_seed(seed)
        T.RandomHorizontalFlip(1.0).draw()
        win = crop.window(H, W, crop.draw(), True)
        resize = crop.size if isinstance(crop, T.RandomResizedCrop) else None
        _assert_same(out, _tv_reference(sample, win, "constant", 0, resize))


def test_flip_alone_equals_torchvisions():
    sample = _sample(1)
    out = T.RandomHorizontalFlip(1.0)(sample)
    _assert_same(out, {k: (F.horizontal_flip(v) if k != "label" else v) for k, v in sample.items()})
    kept = T.RandomHorizontalFlip(0.0)(sample)
    assert all(kept[k] is sample[k] for k in sample)


def test_types_are_kept_and_videos_are_cut_like_images():
    video = tv_tensors.Video(torch.randint(0, 256, (4, 3, H, W), dtype=torch.uint8))
    torch.manual_seed(0)
    out = T.RandomCrop(16)(video)
    win = _window(T.RandomCrop(16), 0)
    assert type(out) is tv_tensors.Video and torch.equal(out, F.crop(video, win.top, win.left, 16, 16))
    image = _sample()["image"]
    for t in (T.RandomCrop(8), T.RandomResizedCrop(8), T.RandomHorizontalFlip(1.0), T.RGBToYCbCr(),
              T.RandomDilatedMask(0.2), T.ToDtype(torch.float32, scale=True),
              T.Compose([T.RandomCrop(8), T.RandomDilatedMask(0.2), T.RGBToYCbCr()])):
        assert type(t(image)) is tv_tensors.Image, t
    mask = _sample()["mask"]
    assert T.RGBToYCbCr()(mask) is mask and T.ToDtype(torch.float32)(mask) is mask  # pixels only


def test_fused_compose_on_tv_samples_equals_the_unfused_chain():
    steps = [T.RandomCrop(20), T.RandomDilatedMask(0.25), T.RGBToYCbCr()]
    for seed in range(5):
        sample = _sample(seed)
        torch.manual_seed(seed)
        fused = T.Compose(steps)(sample)
        torch.manual_seed(seed)
        unfused = T.Compose(steps, fuse=False)(sample)
        _assert_same(fused, unfused)
        win = _window(steps[0], seed)
        _assert_same({k: fused[k] for k in ("mask", "boxes", "points")},
                     _tv_reference({k: sample[k] for k in ("mask", "boxes", "points")}, win, "constant", 0))


def test_fastprep_transforms_in_v2_compose_and_v2_transforms_in_fastprep_compose():
    sample = _sample(2)
    torch.manual_seed(0)
    a = v2.Compose([T.RandomCrop(24), v2.RandomHorizontalFlip(p=1.0), T.RGBToYCbCr()])(sample)
    torch.manual_seed(0)
    b = T.Compose([T.RandomCrop(24), v2.RandomHorizontalFlip(p=1.0), T.RGBToYCbCr()])(sample)
    win = _window(T.RandomCrop(24), 0)
    ref = _tv_reference(sample, win, "constant", 0)
    ref = {k: (F.horizontal_flip(v) if k != "label" else v) for k, v in ref.items()}
    ref["image"] = T.RGBToYCbCr()(ref["image"])
    _assert_same(a, ref)
    _assert_same(b, ref)
    img, mask = sample["image"], sample["mask"]
    torch.manual_seed(0)
    c_img, c_mask = v2.Compose([T.RandomCrop(24), v2.ToDtype(torch.float32, scale=True)])(img, mask)
    assert type(c_img) is tv_tensors.Image and type(c_mask) is tv_tensors.Mask and c_img.dtype == torch.float32
    assert torch.equal(c_mask, F.crop(mask, win.top, win.left, 24, 24))


def test_collate_takes_roles_from_tv_tensors_and_expand_restores_them():
    samples = []
    for seed in range(3):
        s = _sample(seed)
        s["mask"] = tv_tensors.Mask(s["mask"] > 2)  # bool: packed into bits
        s["class_mask"] = tv_tensors.Mask(torch.full((H, W), seed, dtype=torch.uint8))  # class ids: as they are
        s["boxes"] = tv_tensors.wrap(s["boxes"][: seed + 1], like=s["boxes"])  # counts differ
        samples.append(s)
    batch = fastprep.compact_collate(samples)
    assert batch.roles == {"image": "image", "mask": "mask", "boxes": "boxes", "points": "boxes", "label": "label",
                           "class_mask": "tensor"}
    assert batch.data["mask"].shape == (3, H, (W + 7) // 8)
    out = batch.expand()
    assert type(out["image"]) is tv_tensors.Image and out["image"].dtype == torch.float32
    assert type(out["mask"]) is tv_tensors.Mask and torch.equal(out["mask"], torch.stack([s["mask"] for s in samples]))
    assert type(out["class_mask"]) is tv_tensors.Mask and out["class_mask"].dtype == torch.uint8
    for b, s in zip(out["boxes"], samples):
        assert type(b) is tv_tensors.BoundingBoxes and b.format == s["boxes"].format and torch.equal(b, s["boxes"])
        assert tuple(b.canvas_size) == (H, W)


class _Dataset(torch.utils.data.Dataset):
    def __len__(self):
        return 6

    def __getitem__(self, i):
        s = _sample(i)
        return s["image"], tv_tensors.Mask(s["mask"] > 1), s["boxes"], i


def test_loader_cuts_structured_samples_like_the_dataloader_path():
    tf = T.seed_workload(20)
    loader = fastprep.Loader(_Dataset(), 3, transform=tf, threads=2, seed=5)
    got = [b.clone() for b in loader]

    class Transformed(_Dataset):
        def __getitem__(self, i):
            return tf(super().__getitem__(i))

    ref = list(torch.utils.data.DataLoader(T.SeedByIndex(Transformed(), seed=5), batch_size=3,
                                           collate_fn=fastprep.compact_collate))
    for a, b in zip(got, ref):
        assert a.roles == b.roles == ("image", "mask", "boxes", "label")
        assert torch.equal(a.data[0], b.data[0]) and torch.equal(a.data[1], b.data[1])
        assert all(torch.equal(x, y) for x, y in zip(a.data[2], b.data[2]))
        assert type(a.expand()[0]) is tv_tensors.Image


def test_image_folder_hands_v1_transforms_pil_images_as_torchvision_does(tmp_path):
    """fastprep.io.ImageFolder with torchvision's v1 transforms (ToTensor() takes PIL images, not
    tensors): the same samples as torchvision.datasets.ImageFolder, for the same seeds."""
    import numpy as np
    from torchvision import datasets
    from torchvision import transforms as v1

    import fastprep.io as fio

    from helpers.jpeg_photos import encode

    for k, cls in enumerate(["a", "a", "b"]):
        (tmp_path / cls).mkdir(exist_ok=True)
        pixels = np.random.default_rng(k).integers(0, 256, (40 + 4 * k, 52, 3), dtype=np.uint8)
        (tmp_path / cls / f"{k}.jpg").write_bytes(encode(pixels))
    tf = v1.Compose([v1.RandomResizedCrop(24), v1.RandomHorizontalFlip(), v1.ToTensor()])
    for roi in (False, True):
        ours, theirs = fio.ImageFolder(tmp_path, transform=tf, roi=roi), datasets.ImageFolder(tmp_path, transform=tf)
        for i in range(3):
            torch.manual_seed(i)
            a = ours[i]
            torch.manual_seed(i)
            b = theirs[i]
            assert torch.equal(a[0], b[0]) and a[1] == b[1]


def test_loader_hands_v1_transforms_pil_images(tmp_path):
    """fastprep.Loader with a torchvision v1 transform over ImageFolder(roi=True): the JpegFile is
    decoded into the PIL image v1's ToTensor takes; with deterministic=True the samples are
    SeedByIndex + DataLoader's over torchvision's own ImageFolder."""
    import numpy as np
    from torch.utils.data import DataLoader
    from torchvision import datasets
    from torchvision import transforms as v1

    import fastprep.io as fio

    from helpers.jpeg_photos import encode

    for k in range(4):
        (tmp_path / "c").mkdir(exist_ok=True)
        pixels = np.random.default_rng(k).integers(0, 256, (40, 44 + 4 * k, 3), dtype=np.uint8)
        (tmp_path / "c" / f"{k}.jpg").write_bytes(encode(pixels))
    tf = v1.Compose([v1.RandomResizedCrop(16), v1.ToTensor()])
    got = list(fastprep.Loader(fio.ImageFolder(tmp_path, roi=True), 4, transform=tf, seed=5, threads=2,
                               deterministic=True))[0]
    want = list(DataLoader(T.SeedByIndex(datasets.ImageFolder(tmp_path, transform=tf), seed=5), batch_size=4))[0]
    assert torch.equal(got.data[0], want[0]) and got.data[1].tolist() == want[1].tolist()


# Resize, CenterCrop, Normalize, RandomVerticalFlip and the fused resized-crop pipelines: their own
# module (this one's length), collected here where torchvision imports.
from helpers.torchvision_resize_checks import (  # noqa: E402, F401
    test_center_crop_is_torchvisions,
    test_imagenet_pipeline_fused_is_torchvisions_on_the_same_draws,
    test_random_resized_crop_alone_is_torchvisions_resized_crop,
    test_resize_is_torchvisions,
    test_resize_of_videos_and_float_images_is_torchvisions,
    test_validation_pipeline_fused_is_torchvisions,
    test_vertical_flip_and_normalize_are_torchvisions,
)


@pytest.mark.parametrize("k", [0, 1, 2, 3])
def test_rotate90_turns_boxes_and_points_with_the_image(k, monkeypatch):
    """A box drawn around a marked region stays around it after k quarter turns (the image and
    mask by torch.rot90, boxes and points by torchvision's rotate with expand), and a point moves
    as a counter-clockwise turn of the canvas moves it."""
    monkeypatch.setattr(T.RandomRotate90, "make_params", lambda self, seed: k)
    sample = _sample()
    marked = torch.zeros(H, W, dtype=torch.uint8)
    marked[3:30, 2:20] = 1  # boxes[0], XYXY [2, 3, 20, 30]
    sample["mask"] = tv_tensors.Mask(marked)
    out = T.RandomRotate90(p=1.0)(sample)
    assert torch.equal(out["image"], torch.rot90(sample["image"], k, dims=(-2, -1)))
    assert torch.equal(out["mask"], torch.rot90(marked, k, dims=(-2, -1)))
    rows, cols = torch.nonzero(out["mask"], as_tuple=True)
    around = [cols.min().item(), rows.min().item(), cols.max().item() + 1, rows.max().item() + 1]
    assert out["boxes"][0].tolist() == around, (k, out["boxes"].tolist())
    assert tuple(out["boxes"].canvas_size) == tuple(out["mask"].shape)
    x, y = sample["points"][:, 0], sample["points"][:, 1]
    turns = {0: (x, y), 1: (y, W - x), 2: (W - x, H - y), 3: (H - y, x)}
    torch.testing.assert_close(out["points"].as_subclass(torch.Tensor),
                               torch.stack(turns[k], dim=1), atol=1e-4, rtol=0)
