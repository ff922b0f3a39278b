"""No silent wrong gradient: every op either gives the gradient torch's own ops give (crop and
random_crop scatter it back into the window, mask_fill zeroes it at masked pixels as
torch.masked_fill, the float colour conversions are affine: scale * M^T grad), or refuses an input
that requires grad with a clear error. gradcheck on the float32 ops through float64 (linear ops:
the finite differences are exact up to float32 rounding), the torch reference's gradient compared
exactly where both are exact, opcheck for the autograd registration. Both backends."""

import importlib

import pytest
import torch
from torch.utils._pytree import tree_flatten

import fastprep
from fastprep.ops._color import rgb_to_ycbcr_torch, ycbcr_to_rgb_torch
from fastprep.ops._crop import random_crop_torch
from fastprep.ops._registry import OPS

pytestmark = pytest.mark.op_layer

FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def _gradcheck(fn, x):
    """gradcheck of a float32 op through float64 inputs and outputs."""
    x64 = x.detach().double().requires_grad_()
    assert torch.autograd.gradcheck(lambda t: fn(t.float()).double(), (x64,), eps=1e-2, atol=1e-4, rtol=1e-3)


def _grad(fn, x, g):
    x = x.detach().clone().requires_grad_()
    fn(x).backward(g)
    return x.grad


@pytest.mark.parametrize("layout,shape", [("CHW", (3, 7, 9)), ("HWC", (7, 9, 3)), ("CHW", (2, 3, 7, 9)),
                                          ("HWC", (2, 7, 9, 3))])
def test_crop_gradient_is_the_window(layout, shape):
    x = torch.rand(shape)
    _gradcheck(lambda t: fastprep.crop(t, 2, 3, 4, 5, layout), x)
    g = torch.randn(fastprep.crop(x, 2, 3, 4, 5, layout).shape)
    chw = (lambda t: t) if layout == "CHW" else (lambda t: t.movedim(-1, -3))
    want = _grad(lambda t: chw(t)[..., 2:6, 3:8], x, g)  # slicing: torch's own gradient
    assert torch.equal(_grad(lambda t: fastprep.crop(t, 2, 3, 4, 5, layout), x, g), want)


@pytest.mark.parametrize("pad", [False, True])
@pytest.mark.parametrize("layout,shape", [("CHW", (3, 7, 9)), ("HWC", (2, 7, 9, 3))])
@pytest.mark.parametrize("dtype", FLOATS)
def test_random_crop_gradient_is_each_samples_window(pad, layout, shape, dtype):
    x = torch.rand(shape).to(dtype)
    size = (9, 4) if pad else (5, 4)  # padded: rows outside the image are fill, no gradient
    op = lambda t: fastprep.random_crop(t, *size, 11, layout, pad, 0.5)  # noqa: E731
    g = torch.randn(op(x).shape).to(dtype)
    got = _grad(op, x, g)
    assert got.dtype == dtype
    assert torch.equal(got, _grad(lambda t: random_crop_torch(t, *size, 11, layout, pad, 0.5), x, g))
    if dtype == torch.float32:
        _gradcheck(op, x)


def _mask(shape, seed=0):
    return torch.rand(shape, generator=torch.Generator().manual_seed(seed)) < 0.3


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("layout,shape,mshape", [("CHW", (3, 6, 10), (6, 10)), ("HWC", (2, 6, 10, 3), (2, 6, 10))])
def test_mask_fill_gradient_is_zero_at_masked_pixels(packed, layout, shape, mshape):
    x, m = torch.rand(shape), _mask(mshape)
    mask = fastprep.pack_bits(m) if packed else m
    bm = m.unsqueeze(-1) if layout == "HWC" else m.unsqueeze(-3)
    g = torch.randn(shape)
    want = _grad(lambda t: t.masked_fill(bm, 0.25), x, g)
    assert torch.equal(_grad(lambda t: fastprep.mask_fill(t, mask, 0.25, layout), x, g), want)
    _gradcheck(lambda t: fastprep.mask_fill(t, mask, 0.25, layout), x)

    # mask_fill_ on a non-leaf: torch's masked_fill_ gradient (the example gave 2 there)
    def in_place(t, fill_):
        y = t * 2
        fill_(y, bm, mask)
        return y

    want = _grad(lambda t: in_place(t, lambda y, b, _: y.masked_fill_(b, 0.0)), x, g)
    got = _grad(lambda t: in_place(t, lambda y, _, mk: fastprep.mask_fill_(y, mk, 0.0, layout)), x, g)
    assert torch.equal(got, want) and not got[bm.expand_as(got)].any()


def test_mask_fill_in_place_refuses_what_torch_refuses():
    m = _mask((8, 8))
    leaf = torch.rand(3, 8, 8, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad .* in-place operation"):
        fastprep.mask_fill_(leaf, m, 0.0)
    with pytest.raises(RuntimeError, match="a view of a leaf Variable that requires grad .* in-place"):
        fastprep.mask_fill_(leaf[:2], m, 0.0)
    y = leaf.exp()  # exp saves its output for backward: writing it must be noticed
    fastprep.mask_fill_(y, m, 0.0)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    with torch.no_grad():  # no autograd: a plain in-place fill, as torch's
        fastprep.mask_fill_(leaf, m, 0.0)
    assert not leaf[:, m].any()


def _fill_under_no_grad(img, m):
    with torch.no_grad():  # torch's in-place ops bump the version under no_grad too
        fastprep.mask_fill_(img, m, 0.0)


_SRC = [torch.zeros(8, 8, 3, dtype=torch.uint8)]

IN_PLACE_FILLS = {  # each writes into the saved tensor (or a view of it), a different way
    "plain": lambda img, m: fastprep.mask_fill_(img, m, 0.0),
    "crop_mask_ycbcr_batch(out=)": lambda img, m: fastprep.crop_mask_ycbcr_batch(
        _SRC, [0], [0], 8, 8, 0.5, [1], img.view(1, 3, 8, 8), scale=1 / 255),
    "resized_crop_batch(out=)": lambda img, m: fastprep.resized_crop_batch(
        _SRC, fastprep.geometry_table(1, top=[0], left=[0], height=[8], width=[8]), img.view(1, 3, 8, 8), "HWC",
        scale=1 / 255),
    "under no_grad": _fill_under_no_grad,
    "through a view": lambda img, m: fastprep.mask_fill_(img[:, :4], m[:4], 0.0),  # the base's version
    "packed mask": lambda img, m: fastprep.mask_fill_(img, fastprep.pack_bits(m, -1, "little"), 0.0),
}


@pytest.mark.parametrize("fill", list(IN_PLACE_FILLS))
def test_an_in_place_write_to_a_saved_tensor_is_noticed(fill):
    """An in-place write to a tensor autograd saved (one that needs no gradient itself) bumps its
    version, so backward raises as torch's in-place ops make it, never using the new values."""
    w = torch.rand(3, 8, 8, requires_grad=True)
    img = torch.rand(3, 8, 8)  # w's gradient is img: mul saves it
    out = (w * img).sum()
    IN_PLACE_FILLS[fill](img, _mask((8, 8)))
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.backward()


@pytest.mark.parametrize("forward", [True, False])
@pytest.mark.parametrize("layout", ["CHW", "HWC"])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("out_dtype,scale", [(None, 1.0), (torch.float32, 0.5), (torch.bfloat16, 2.0)])
def test_colour_gradient_is_the_transposed_matrix(forward, layout, dtype, out_dtype, scale):
    shape = (2, 3, 5, 6) if layout == "CHW" else (5, 6, 3)
    x = torch.rand(shape).to(dtype)
    op, ref = (fastprep.rgb_to_ycbcr, rgb_to_ycbcr_torch) if forward else (fastprep.ycbcr_to_rgb, ycbcr_to_rgb_torch)
    y = op(x, layout, out_dtype, scale)
    g = torch.randn(y.shape).to(y.dtype)
    got = _grad(lambda t: op(t, layout, out_dtype, scale), x, g)
    want = _grad(lambda t: ref(t, layout, out_dtype, scale), x, g)  # autograd through plain torch ops
    assert got.dtype == dtype
    tol = {torch.float32: 1e-6, torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]
    torch.testing.assert_close(got.float(), want.float(), atol=tol, rtol=tol)
    if dtype == torch.float32 and out_dtype in (None, torch.float32):
        _gradcheck(lambda t: op(t, layout, out_dtype, scale), x)


def test_batch_op_refuses_buffers_that_require_grad():
    imgs = [torch.zeros(8, 8, 3, dtype=torch.uint8)]
    out = torch.zeros(1, 3, 4, 4, requires_grad=True)
    with pytest.raises(RuntimeError, match="crop_mask_ycbcr_batch: out requires grad, but the op is not "
                                           "differentiable"):
        fastprep.crop_mask_ycbcr_batch(imgs, [2], [1], 4, 4, 0.5, [1], out, scale=1 / 255)
    assert not out.detach().any()
    with torch.no_grad():
        fastprep.crop_mask_ycbcr_batch(imgs, [2], [1], 4, 4, 0.5, [1], out, scale=1 / 255)


@pytest.mark.parametrize("name,args", [
    ("crop", lambda: (torch.rand(3, 6, 7, requires_grad=True), 1, 2, 3, 4, "CHW")),
    ("random_crop", lambda: (torch.rand(2, 6, 7, 3, requires_grad=True), 8, 4, 5, "HWC", True, 1.5)),
    ("mask_fill", lambda: (torch.rand(3, 6, 7, requires_grad=True), _mask((6, 7)), 2.0, "CHW")),
    ("rgb_to_ycbcr", lambda: (torch.rand(3, 4, 5, requires_grad=True), "CHW", torch.float32, 0.5)),
    ("ycbcr_to_rgb", lambda: (torch.rand(4, 5, 3, requires_grad=True), "HWC", None, 1.0)),
])
def test_opcheck_with_inputs_that_require_grad(name, args):
    torch.library.opcheck(getattr(torch.ops.fastprep, name).default, args())


def _float_variants(row):
    """The op's sample with each tensor argument turned float32 and requiring grad."""
    sample = row.sample()
    for i, a in enumerate(sample):
        if isinstance(a, torch.Tensor):
            args = list(row.sample())
            args[i] = torch.rand(a.shape, requires_grad=True)
            yield i, tuple(args)


@pytest.mark.parametrize("row", OPS, ids=lambda r: r.name)
def test_every_op_either_differentiates_or_refuses(row):
    """Each tensor argument of every op, float and requiring grad: either a clear RuntimeError, or
    every float output takes part in autograd (a gradient formula exists for it)."""
    for i, args in _float_variants(row):
        try:
            result = getattr(torch.ops.fastprep, row.name)(*args)
        except RuntimeError as exc:  # named by the op, or torch's own in-place refusal
            assert str(exc).startswith(row.name + ":") or "a leaf Variable that requires grad" in str(exc), exc
            continue
        outs = [t for t in tree_flatten(result)[0] if isinstance(t, torch.Tensor) and t.is_floating_point()]
        assert outs and all(t.requires_grad for t in outs), (row.name, i)
        for t in outs:  # and backward runs (formulas exist; their values are checked above)
            (g,) = torch.autograd.grad(t.sum(), args[i], allow_unused=False)
            assert g.shape == args[i].shape


def test_every_differentiable_op_has_an_autograd_kernel():
    """register_autograd (or, for the in-place ops, an Autograd kernel of fastprep's) for each op
    that takes a float tensor; torch's fallback would silently pass wrong gradients through."""
    for name in ("crop", "random_crop", "mask_fill", "mask_fill_", "rgb_to_ycbcr", "ycbcr_to_rgb",
                 "crop_mask_ycbcr_batch"):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(f"fastprep::{name}", "Autograd"), name
    importlib.import_module("fastprep.ops._mask_fill")


def _differentiable_calls(x, m):
    """The wrappers of the ops whose Autograd kernel is Python (register_autograd), on float x."""
    return [lambda t: fastprep.crop(t, 1, 2, 3, 4), lambda t: fastprep.random_crop(t, 3, 4, 7),
            lambda t: fastprep.rgb_to_ycbcr(t), lambda t: fastprep.ycbcr_to_rgb(t),
            lambda t: fastprep.mask_fill(t, m, 0.5)]


class _CountingGuard:
    entered = 0

    def __init__(self):
        self.guard = torch._C._AutoDispatchBelowAutograd()

    def __enter__(self):
        _CountingGuard.entered += 1
        return self.guard.__enter__()

    def __exit__(self, *exc):
        return self.guard.__exit__(*exc)


def test_wrappers_go_below_autograd_only_when_no_gradient_is_needed(monkeypatch):
    """ops/_library.call_differentiable: straight below autograd (what the Python Autograd kernel's
    own no-grad branch does, without its Python) when img needs no gradient, through it when it does;
    the same values either way."""
    monkeypatch.setattr("fastprep.ops._library.BELOW_AUTOGRAD", _CountingGuard)
    x, m = torch.rand(3, 6, 8), torch.rand(6, 8) < 0.5
    for call_op in _differentiable_calls(x, m):
        for needs_grad, grad_mode, below in [(False, True, 1), (True, False, 1), (True, True, 0)]:
            _CountingGuard.entered = 0
            xi = x.clone().requires_grad_(needs_grad)
            with torch.set_grad_enabled(grad_mode):
                out = call_op(xi)
            assert _CountingGuard.entered == below
            assert out.requires_grad == (needs_grad and grad_mode)
            assert torch.equal(out.detach(), call_op(x))
    monkeypatch.undo()
    with pytest.raises(RuntimeError, match="crop: expected img to be a tensor, got None"):
        fastprep.crop(None, 0, 0, 1, 1)  # not a tensor: the op itself names the argument


def test_wrappers_compile_without_graph_breaks():
    x, m = torch.rand(3, 6, 8), torch.rand(6, 8) < 0.5
    calls = _differentiable_calls(x, m)

    def f(t):
        return [c(t) for c in calls]

    for got, want in zip(torch.compile(f, fullgraph=True, backend="eager")(x), f(x)):
        assert torch.equal(got, want)
