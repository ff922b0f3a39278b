"""RandomCrop's padding and padding modes, bit for bit against padding the whole image
(torch.nn.functional.pad, numpy.pad for symmetric and for paddings past the image) and cropping."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fastprep import transforms as T

PIL = pytest.importorskip("PIL.Image")

TORCH_MODE = {"constant": "constant", "edge": "replicate", "reflect": "reflect"}
NUMPY_MODE = {"constant": "constant", "edge": "edge", "reflect": "reflect", "symmetric": "symmetric"}


def _padded(x, pad, mode, fill, via):
    """x [C, H, W] padded whole by (left, top, right, bottom)."""
    left, top, right, bottom = pad
    if via == "torch":
        y = x.double()[None]
        kw = {"value": float(fill)} if mode == "constant" else {}
        return F.pad(y, (left, right, top, bottom), mode=TORCH_MODE[mode], **kw)[0].to(x.dtype)
    kw = {"constant_values": fill} if mode == "constant" else {}
    return torch.from_numpy(np.pad(x.numpy(), ((0, 0), (top, bottom), (left, right)), mode=NUMPY_MODE[mode], **kw))


def _reference(t, x, seed, flip=False):
    win = t.window(x.shape[-2], x.shape[-1], seed, flip)
    src = x.flip(-1) if flip else x
    big = any(p >= min(x.shape[-2:]) for p in win.pad)
    via = "numpy" if t.padding_mode == "symmetric" or big else "torch"
    fill = t.fill if not isinstance(t.fill, dict) else t.fill.get(torch.Tensor, t.fill.get("others", 0))
    padded = _padded(src, win.pad, t.padding_mode, fill, via)
    return padded[:, win.top:win.top + win.height, win.left:win.left + win.width]


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
@pytest.mark.parametrize("padding", [3, (2, 5), (1, 0, 4, 6), 0])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32, torch.int64])
def test_padding_modes_equal_padding_the_image_then_cropping(mode, padding, dtype):
    x = torch.randint(0, 200, (2, 9, 11)).to(dtype)
    for size, pad_if_needed in (((7, 8), False), ((14, 17), True), ((9, 11), False)):
        t = T.RandomCrop(size, padding=padding, pad_if_needed=pad_if_needed, fill=7, padding_mode=mode)
        try:
            t.window(9, 11, 0)
        except ValueError:
            continue  # larger than the padded image: tested below
        for seed in range(8):
            torch.manual_seed(seed)
            out = t(x)
            torch.manual_seed(seed)
            ref = _reference(t, x, T.RandomCrop(1).draw())
            assert out.dtype == dtype and out.is_contiguous() and torch.equal(out, ref), (size, seed)


@pytest.mark.parametrize("mode", ["reflect", "symmetric", "edge", "constant"])
def test_padding_past_the_image_keeps_reflecting_as_numpy_pad(mode):
    x = torch.randint(0, 256, (1, 3, 4), dtype=torch.uint8)
    t = T.RandomCrop((12, 15), padding=(9, 7, 8, 6), padding_mode=mode, fill=3)
    for seed in range(10):
        torch.manual_seed(seed)
        out = t(x)
        torch.manual_seed(seed)
        win = t.window(3, 4, T.RandomCrop(1).draw())
        ref = _padded(x, win.pad, mode, 3, "numpy")[:, win.top:win.top + 12, win.left:win.left + 15]
        assert torch.equal(out, ref)


@pytest.mark.parametrize("mode", ["constant", "edge", "reflect", "symmetric"])
def test_flip_before_a_padded_crop_equals_flipping_the_image(mode):
    x = torch.randint(0, 256, (3, 10, 13), dtype=torch.uint8)
    crop = T.RandomCrop((9, 12), padding=(1, 2, 5, 3), padding_mode=mode, fill=11)
    for seed in range(8):
        torch.manual_seed(seed)
        out = T.Compose([T.RandomHorizontalFlip(1.0), crop])(x)
        torch.manual_seed(seed)
        T.RandomHorizontalFlip(1.0).draw()
        ref = _reference(crop, x, crop.draw(), flip=True)
        assert torch.equal(out, ref), seed


@pytest.mark.parametrize("mode", ["constant", "reflect"])
def test_pil_numpy_and_hwc_tensors_pad_alike(mode):
    arr = np.random.default_rng(0).integers(0, 256, (9, 11, 3), dtype=np.uint8)
    t = T.RandomCrop(12, padding=2, padding_mode=mode, fill=(1, 2, 3), layout="HWC")
    outs = []
    for img in (PIL.fromarray(arr), arr, torch.from_numpy(arr)):
        torch.manual_seed(4)
        outs.append(t(img))
    chw = torch.from_numpy(arr).permute(2, 0, 1).contiguous()
    torch.manual_seed(4)
    ref = T.RandomCrop(12, padding=2, padding_mode=mode, fill=(1, 2, 3))(chw)
    assert all(torch.equal(o, ref) for o in outs)
    if mode == "constant":  # per-channel fill in the padding
        torch.manual_seed(4)
        win = t.window(9, 11, T.RandomCrop(1).draw())
        corner = (win.top < 2) and (win.left < 2)
        if corner:
            assert ref[:, 0, 0].tolist() == [1, 2, 3]


def test_fill_by_type_and_bad_padding_arguments():
    x = torch.zeros(1, 2, 2, dtype=torch.uint8)
    out = T.RandomCrop(6, padding=2, fill={torch.Tensor: 5, "others": 9})(x)
    assert out[0, 0, 0] == 5
    assert T.RandomCrop(6, padding=2, fill={"others": 9})(x)[0, 0, 0] == 9
    assert T.RandomCrop(6, padding=2, fill={np.ndarray: 1})(x)[0, 0, 0] == 0  # no key for it: 0, as torchvision
    for bad, match in (((1, 2, 3), "expected padding to be an int >= 0 or a sequence of 1, 2 or 4"),
                       (-1, "expected padding to be an int >= 0"), (1.5, "got 1.5")):
        with pytest.raises(ValueError, match=match):
            T.RandomCrop(4, padding=bad)
    with pytest.raises(ValueError, match=r"expected padding_mode to be one of \['constant', 'edge', 'reflect', "
                                         r"'symmetric'\], got 'wrap'"):
        T.RandomCrop(4, padding_mode="wrap")
    with pytest.raises(ValueError, match=r"expected the keys of fill to be types .* or 'others', got 'image'"):
        T.RandomCrop(4, fill={"image": 3})
    with pytest.raises(ValueError, match=r"^RandomCrop\(.*\): expected fill to be an integer in \[0, 255\] for a "
                                         r"torch.uint8 image or mask, got fill=2.5"):
        T.RandomCrop(4, padding=3, fill=2.5, padding_mode="constant")(torch.zeros(1, 1, 1, dtype=torch.uint8))
    with pytest.raises(ValueError, match=r"crop 9x9 is larger than the padded image 6x6"):
        T.RandomCrop(9, padding=1)(torch.zeros(1, 4, 4))
