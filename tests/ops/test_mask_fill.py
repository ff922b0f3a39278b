"""mask_fill / mask_fill_ against torch.masked_fill: dtypes, layouts, batches, packed masks."""

import numpy as np
import pytest
import torch

import fastprep
import fastprep.numba_kernels._mask_fill as numba_mf

from helpers.op_calls import bad_input_tests, call, requires_native

pytestmark = pytest.mark.kernel

DTYPES = [torch.uint8, torch.float32, torch.float16, torch.bfloat16]
H, W, C, N = 7, 70, 3, 2


def _img(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, dtype=dtype, generator=g)
    return torch.rand(shape, generator=g).to(dtype)


def _mask(shape, seed=1):
    return torch.from_numpy(np.random.default_rng(seed).random(shape) < 0.3)


def reference(img, mask, value, layout):
    """img.masked_fill with the mask broadcast over channels (and over the batch for [H, W])."""
    m = mask.unsqueeze(-1) if layout == "HWC" else mask.unsqueeze(-3)
    return img.masked_fill(m, value)


def _cases():
    for dtype in DTYPES:
        for layout in ("CHW", "HWC"):
            for batched in (False, True):
                for mask_batched in ((False, True) if batched else (False,)):
                    for packed in (False, True):
                        yield dtype, layout, batched, mask_batched, packed


@pytest.mark.parametrize("dtype,layout,batched,mask_batched,packed", list(_cases()))
def test_matches_masked_fill(dtype, layout, batched, mask_batched, packed):
    shape = (C, H, W) if layout == "CHW" else (H, W, C)
    if batched:
        shape = (N, *shape)
    img = _img(shape, dtype)
    mask = _mask((N, H, W) if mask_batched else (H, W))
    value = 17.0 if dtype == torch.uint8 else 0.1
    expected = reference(img, mask, value, layout)
    m = fastprep.pack_bits(mask) if packed else mask
    for fill, fill_ in ((fastprep.mask_fill, fastprep.mask_fill_), (numba_mf.mask_fill, numba_mf.mask_fill_)):
        before = img.clone()
        out = fill(img, m, value, layout)
        assert out.is_contiguous() and out.dtype == dtype
        assert torch.equal(out, expected)
        assert torch.equal(img, before)  # the input is untouched, not even partly written
        inplace = img.clone()
        fill_(inplace, m, value, layout)
        assert torch.equal(inplace, expected)
    inplace = img.clone()
    assert fastprep.mask_fill_(inplace, m, value, layout) is inplace


@pytest.mark.parametrize("channels", [1, 2, 3, 4])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_pixel_major_rows_any_channel_count(dtype, channels):
    # Dense pixel-major rows (packed HWC, also a window of one) are filled as one run of W * C
    # elements per row; a pixel-major view given as CHW keeps its planar output.
    hwc = _img((2, H, W, channels), dtype, seed=5)
    cases = [(hwc, "HWC", _mask((H, W), 6)), (hwc[:, :, 1:], "HWC", _mask((H, W - 1), 7)),
             (hwc.permute(0, 3, 1, 2), "CHW", _mask((H, W), 8))]
    for img, layout, mask in cases:
        expected = reference(img, mask, 9.0, layout)
        for m in (mask, fastprep.pack_bits(mask)):
            for fill in (fastprep.mask_fill, numba_mf.mask_fill):
                out = fill(img, m, 9.0, layout)
                assert out.is_contiguous() and torch.equal(out, expected), (fill, layout, m.dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_strided_views(dtype):
    base = _img((2, 4, 20, 150), dtype, seed=3)
    mask = _mask((20, 75))
    views = [base[:, :3, :, ::2], base.permute(0, 2, 3, 1)[:, :, ::2, :], base[1, :, :, 1::2]]
    layouts = ["CHW", "HWC", "CHW"]
    for view, layout in zip(views, layouts):
        expected = reference(view, mask, 5, layout)
        for fill, fill_ in ((fastprep.mask_fill, fastprep.mask_fill_), (numba_mf.mask_fill, numba_mf.mask_fill_)):
            assert torch.equal(fill(view, mask, 5, layout), expected)
            target = base.clone()
            view_of_target = target.as_strided(view.shape, view.stride(), view.storage_offset())
            fill_(view_of_target, mask, 5, layout)
            assert torch.equal(view_of_target, expected)
            outside = torch.ones_like(base, dtype=torch.bool)
            outside.as_strided(view.shape, view.stride(), view.storage_offset()).fill_(False)
            assert torch.equal(target[outside], base[outside])  # nothing written outside the view


def test_special_float_values():
    img = _img((C, H, W), torch.float32)
    mask = _mask((H, W))
    # -0.0 keeps its sign on every path: `value` has no schema default, which torch would hand a
    # Python kernel (Numba's, the autograd one) in place of an argument equal to it (-0.0 == 0).
    impls = [fastprep.mask_fill, numba_mf.mask_fill, torch.ops.fastprep.mask_fill]
    for value in (float("nan"), float("inf"), -0.0, 1e30):
        expected = reference(img, mask, value, "CHW")
        for impl in impls:
            out = impl(img, mask, value, "CHW")
            np.testing.assert_array_equal(out.view(torch.int32).numpy(), expected.view(torch.int32).numpy())


@requires_native
@pytest.mark.parametrize("dtype", DTYPES)
def test_native_and_numba_give_the_same_bits(dtype):
    img = _img((N, 40, 33, C), dtype)
    mask = fastprep.pack_bits(_mask((N, 40, 33)))
    assert torch.equal(torch.ops.fastprep.mask_fill(img, mask, 3.0, "HWC"), numba_mf.mask_fill(img, mask, 3.0, "HWC"))


def test_opcheck():
    img = _img((N, C, H, W), torch.float32)
    mask = _mask((N, H, W))
    torch.library.opcheck(torch.ops.fastprep.mask_fill.default, (img, mask, 0.5, "CHW"))
    torch.library.opcheck(torch.ops.fastprep.mask_fill_.default, (img.clone(), fastprep.pack_bits(mask), 2.0, "CHW"))


def test_torch_compile_fullgraph():
    def f(img, mask):
        out = torch.ops.fastprep.mask_fill(img, mask, 1.0, "HWC")
        torch.ops.fastprep.mask_fill_(img, mask, 2.0, "HWC")
        return out * 2, img

    img = _img((H, W, C), torch.float32)
    mask = _mask((H, W))
    out, filled = torch.compile(f, fullgraph=True, backend="inductor")(img.clone(), mask)
    assert torch.equal(out, reference(img, mask, 1.0, "HWC") * 2)
    assert torch.equal(filled, reference(img, mask, 2.0, "HWC"))


_I = torch.zeros(C, H, W, dtype=torch.uint8)
_MK = torch.zeros(H, W, dtype=torch.bool)
BAD_INPUTS = [
    (call("mask_fill", _I, _MK, 0, "WHC"), r"mask_fill: expected layout to be 'CHW' or 'HWC', got 'WHC'"),
    (call("mask_fill", _I.to(torch.int32), _MK), r"mask_fill: expected img to be a torch.uint8, .* tensor, got torch.int32"),
    (call("mask_fill", _I[0], _MK), r"mask_fill: expected img to be a 3-D \[C, H, W\] image or a 4-D batch of them, got a 2-D"),
    (call("mask_fill", _I, _MK.float()), r"mask_fill: expected mask to be a torch.bool tensor or a packed torch.uint8 one, got torch.float32"),
    (call("mask_fill", _I, _MK[:, :5]), r"mask_fill: expected mask to have shape \[7, 70\] to match img, got \[7, 5\]"),
    (call("mask_fill", _I, _MK[0]), r"mask_fill: expected mask to have shape \[7, 70\] to match img, got \[70\]"),
    (call("mask_fill", _I, _MK[None]), r"mask_fill: expected mask to have shape \[7, 70\] to match img, got \[1, 7, 70\]"),
    (call("mask_fill", _I[None].expand(2, -1, -1, -1), _MK[None].expand(3, -1, -1)),
     r"mask_fill: expected mask to have shape \[7, 70\] or \[2, 7, 70\] to match img, got \[3, 7, 70\]"),
    (call("mask_fill", _I, torch.zeros(H, 8, dtype=torch.uint8)),
     r"mask_fill: expected mask to have shape \[7, 9\] to match img \(packed\), got \[7, 8\]"),
    (call("mask_fill", _I, _MK, 256), r"mask_fill: value=256 is not representable in torch.uint8"),
    (call("mask_fill", _I, _MK, 1.5), r"mask_fill: value=1.5 is not representable in torch.uint8"),
    (call("mask_fill", _I, _MK, -1), r"mask_fill: value=-1 is not representable in torch.uint8"),
    (call("mask_fill", _I, _MK, float("nan")), r"mask_fill: value=nan is not representable in torch.uint8"),
    (call("mask_fill", _I.half(), _MK, 1e5), r"mask_fill: value=100000 is not representable in torch.float16"),
    # Mixed devices: the meta one's kernel (the fake) would run, returning uninitialised memory.
    (call("mask_fill", _I, _MK.to("meta")), r"mask_fill: expected mask on img's device \(cpu\), got meta"),
    (call("mask_fill", _I.to("meta"), _MK), r"mask_fill: expected mask on img's device \(meta\), got cpu"),
    (call("mask_fill", _I, _MK.to("meta").view(torch.uint8)[:, :9]),
     r"mask_fill: expected mask on img's device \(cpu\), got meta"),
]
# mask_fill_ checks the same arguments in place, word for word but for its name.
BAD_INPUTS += [(call("mask_fill_", c.args[0].clone(), *c.args[1:]), m.replace("mask_fill:", "mask_fill_:"))
               for c, m in BAD_INPUTS]
test_bad_input_op, test_bad_input_numba, test_bad_input_fake = bad_input_tests(BAD_INPUTS)


def test_fill_values_and_dtypes_in_turn_convert_each_time():
    """The binding keeps the last value's conversion per thread: every change of value (0.0 vs
    -0.0 included) or dtype must give torch's own conversion again."""
    m = _mask((H, W))
    values = [0.0, -0.0, 0.1, 0.1, 65504.0, -0.0, 1e-8, float("nan"), float("-inf"), 0.0, 200.0, 0.1]
    for value in values:
        for dtype in DTYPES:
            if dtype == torch.uint8 and not (0 <= value <= 255 and value == int(value)):
                continue
            img = _img((C, H, W), dtype)
            got = fastprep.mask_fill(img, m, value)
            want = img.masked_fill(m, value)
            assert torch.equal(got.view(torch.uint8), want.view(torch.uint8)), (value, dtype)
