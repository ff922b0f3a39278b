"""crop_mask_ycbcr_batch's vflips and transposes (a quarter turn folded into the read, transforms/
_fold.py): each sample the window flipped and transposed, then masked (the mask drawn on the output)
and converted, on the native op, the Numba kernel and the torch definition alike; bad arguments."""

import itertools

import numpy as np
import pytest
import torch

import fastprep
from fastprep import numba_kernels
from fastprep.ops._crop_mask_ycbcr import crop_mask_ycbcr_batch_torch

from helpers.op_calls import bad_input_tests, call

pytestmark = pytest.mark.kernel

OUT = [(torch.uint8, 1.0), (torch.float32, 1 / 255), (torch.float16, 1.0), (torch.bfloat16, 0.5)]
RUNS = {"op": torch.ops.fastprep.crop_mask_ycbcr_batch.default, "numba": numba_kernels.kernel("crop_mask_ycbcr_batch"),
        "torch": crop_mask_ycbcr_batch_torch}


def _image(h=50, w=70, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8))


def _views():
    img = _image()
    return {"HWC": (img, "HWC"), "CHW": (img.permute(2, 0, 1).contiguous(), "CHW"),
            "CHW view of HWC": (img.permute(2, 0, 1), "CHW"), "strided": (_image(100, 70)[::2], "HWC")}


def _expected(img, layout, top, left, h, w, p, mask_seed, hflip, vflip, transpose, odt, scale):
    """The sample as the steps make it: the window (w x h when transposed), flipped, transposed, then
    the output's mask and the colour conversion."""
    chw = img if layout == "CHW" else img.permute(2, 0, 1)
    rh, rw = (w, h) if transpose else (h, w)
    x = chw[:, top:top + rh, left:left + rw]
    x = x.flip(-1) if hflip else x
    x = x.flip(-2) if vflip else x
    x = x.transpose(-2, -1) if transpose else x
    mask = fastprep.random_dilated_mask([h, w], p, mask_seed)
    return fastprep.rgb_to_ycbcr(x.masked_fill(mask, 0).contiguous(), "CHW", odt, scale)


@pytest.mark.parametrize("run", list(RUNS))
@pytest.mark.parametrize("view", list(_views()))
@pytest.mark.parametrize("out_dtype,scale", OUT)
def test_flipped_and_transposed_reads_are_the_window_turned_then_masked(run, view, out_dtype, scale):
    x, layout = _views()[view]
    h, w = 17, 29  # not square: a transposed sample reads 29 x 17
    for hflip, vflip, transpose in itertools.product([False, True], repeat=3):
        flags = [[hflip, not hflip], [vflip, vflip], [transpose, not transpose]]
        tops, lefts, seeds = [3, 5], [7, 2], [11, -12]
        out = torch.full((2, 3, h, w), 7).to(out_dtype)
        RUNS[run]([x, x], tops, lefts, h, w, 0.3, seeds, out, layout, "cross", scale, True, None, *flags)
        for i in range(2):
            want = _expected(x, layout, tops[i], lefts[i], h, w, 0.3, seeds[i], *(f[i] for f in flags), out_dtype, scale)
            assert torch.equal(out[i], want), (hflip, vflip, transpose, i)


def test_a_quarter_turn_is_torch_rot90_of_the_window():
    """rot90 k = the fold's flips and transpose (k=1: hflip, transpose; 2: both flips; 3: vflip,
    transpose) with p=0: the op's output is torch.rot90 of the unturned output, for every k."""
    img = _image()
    plain = torch.empty(1, 3, 20, 20, dtype=torch.uint8)
    fastprep.crop_mask_ycbcr_batch([img], [4], [9], 20, 20, 0.0, [1], plain)
    for k, (hflip, vflip, transpose) in enumerate([(False, False, False), (True, False, True), (True, True, False),
                                                    (False, True, True)]):
        turned = torch.empty_like(plain)
        fastprep.crop_mask_ycbcr_batch([img], [4], [9], 20, 20, 0.0, [1], turned, hflips=[hflip], vflips=[vflip],
                                       transposes=[transpose])
        assert torch.equal(turned[0], torch.rot90(plain[0], k, dims=(-2, -1))), k


def test_the_mask_is_drawn_on_the_output_and_returned_as_drawn():
    img = _image()
    for transpose in (False, True):
        out, masks = torch.empty(1, 3, 12, 30, dtype=torch.uint8), torch.empty(1, 12, 4, dtype=torch.uint8)
        fastprep.crop_mask_ycbcr_batch([img], [0], [0], 12, 30, 0.3, [8], out, masks=masks, transposes=[transpose])
        assert torch.equal(masks[0], fastprep.random_dilated_mask([12, 30], 0.3, 8, packed=True))
        black = fastprep.unpack_bits(masks[0], 30)
        assert (out[0, 0][black] == 0).all() and (out[0, 1:, black] == 128).all()


def test_batch_opcheck_with_turns():
    imgs = [_image(40, 30), _image(35, 33, seed=1)]
    torch.library.opcheck(torch.ops.fastprep.crop_mask_ycbcr_batch.default,
                          (imgs, [3, 10], [1, 0], 12, 20, 0.25, [1, 2], torch.empty(2, 3, 12, 20), "HWC", "cross",
                           1.0, True, torch.empty(2, 12, 3, dtype=torch.uint8), [True, False], [False, True],
                           [False, True]))


_IMGS = [torch.zeros(8, 5, 3, dtype=torch.uint8)] * 2
_OUT = torch.zeros(2, 3, 4, 6, dtype=torch.uint8)  # 4 x 6: a transposed sample reads 6 x 4


def _batch(tops=(0, 0), lefts=(0, 0), **kw):
    return call("crop_mask_ycbcr_batch", _IMGS, list(tops), list(lefts), 4, 6, 0.25, [1, 2], _OUT, **kw)


BAD_BATCH = [
    (_batch(vflips=[True]), r"crop_mask_ycbcr_batch: expected one vflip per image \(2\), got 1 vflips"),
    (_batch(transposes=[True, False, True]),
     r"crop_mask_ycbcr_batch: expected one transpose per image \(2\), got 3 transposes"),
    # untransposed, the 4 x 6 window does not fit the 8 x 5 image; transposed, it reads 6 x 4, which does
    (_batch(transposes=[True, False]), r"crop_mask_ycbcr_batch: crop 4x6 is larger than the image 8x5"),
    (_batch(tops=[3, 0], transposes=[True, True]),
     r"crop_mask_ycbcr_batch: expected tops\[0\] in \[0, 2\] \(imgs\[0\] is 8x5, the crop 6x4\), got 3"),
    (_batch(lefts=[0, 2], transposes=[True, True]),
     r"crop_mask_ycbcr_batch: expected lefts\[1\] in \[0, 1\] \(imgs\[1\] is 8x5, the crop 6x4\), got 2"),
]
test_bad_batch_op, test_bad_batch_numba, test_bad_batch_fake = bad_input_tests(BAD_BATCH)


def test_transposed_windows_read_width_x_height_of_the_image():
    """The counterpart of the bad cases: 6 x 4 windows anywhere inside the 8 x 5 images run."""
    out, want = torch.empty_like(_OUT), torch.empty_like(_OUT)
    fastprep.crop_mask_ycbcr_batch(_IMGS, [2, 0], [1, 0], 4, 6, 0.25, [1, 2], out, transposes=[True, True])
    crop_mask_ycbcr_batch_torch(_IMGS, [2, 0], [1, 0], 4, 6, 0.25, [1, 2], want, transposes=[True, True])
    assert torch.equal(out, want)
