"""rgb_to_ycbcr / ycbcr_to_rgb: exact uint8 for all 2^24 colours, float paths against float64,
fp16/bf16 rounding, every layout and stride, both backends."""

import numpy as np
import pytest
import torch
from numba import njit

import fastprep
import fastprep.numba_kernels._color as numba_color
from fastprep.ops._color import rgb_to_ycbcr_torch, ycbcr_to_rgb_torch

from helpers.color_refs import ref_u8
from helpers.op_calls import bad_input_tests, call, requires_native

pytestmark = pytest.mark.kernel

DTYPES = [torch.uint8, torch.float32, torch.float16, torch.bfloat16]
FLOAT_DTYPES = DTYPES[1:]
OPS = {"rgb_to_ycbcr": (fastprep.rgb_to_ycbcr, numba_color.rgb_to_ycbcr, rgb_to_ycbcr_torch),
       "ycbcr_to_rgb": (fastprep.ycbcr_to_rgb, numba_color.ycbcr_to_rgb, ycbcr_to_rgb_torch)}
def ref_f64(a, b, c, forward, delta):
    a, b, c = (np.asarray(t, dtype=np.float64) for t in (a, b, c))
    if forward:
        return (0.299 * a + 0.587 * b + 0.114 * c, -0.168736 * a - 0.331264 * b + 0.5 * c + delta,
                0.5 * a - 0.418688 * b - 0.081312 * c + delta)
    return (a + 1.402 * (c - delta), a - 0.344136 * (b - delta) - 0.714136 * (c - delta),
            a + 1.772 * (b - delta))


def ref_f32(a, b, c, forward, delta, scale):
    """The kernels' float32 operations, in their order, in numpy float32."""
    f = np.float32
    a, b, c = (np.asarray(t, dtype=np.float32) for t in (a, b, c))
    d = f(delta)
    if forward:
        out = (f(0.299) * a + f(0.587) * b + f(0.114) * c,
               f(-0.168736) * a - f(0.331264) * b + f(0.5) * c + d,
               f(0.5) * a - f(0.418688) * b - f(0.081312) * c + d)
    else:
        out = (a + f(1.402) * (c - d), a - f(0.344136) * (b - d) - f(0.714136) * (c - d),
               a + f(1.772) * (b - d))
    return tuple(o * f(scale) for o in out)


@pytest.fixture(scope="module")
def all_colours():
    v = np.arange(1 << 24, dtype=np.int32)
    planes = np.stack([v >> 16, (v >> 8) & 255, v & 255]).astype(np.uint8)
    return torch.from_numpy(planes.reshape(3, 4096, 4096))


@pytest.mark.slow  # exhaustive (2^24 colours): .ci/isa runs it per ISA level, .ci/slow on the one selected
@pytest.mark.parametrize("layout", ["CHW", "HWC"])
@pytest.mark.parametrize("op", list(OPS))
def test_uint8_exact_for_all_2_24_colours(all_colours, op, layout):
    # Planar and packed rows take different SIMD code (csrc/kernels/color_simd.cpp); .ci/isa runs
    # this on every ISA level.
    planes = all_colours.reshape(3, -1).numpy()
    expected = np.stack(ref_u8(*planes, op == "rgb_to_ycbcr"))
    img = all_colours if layout == "CHW" else all_colours.permute(1, 2, 0).contiguous()
    for impl in OPS[op][:2]:
        out = impl(img, layout).reshape(3, -1).numpy()
        mismatches = np.flatnonzero((out != expected).any(0))
        assert mismatches.size == 0, f"{impl}: {mismatches.size} colours differ, first {mismatches[:5]}"


@pytest.mark.parametrize("d,shift", numba_color.DIVISIONS)
def test_backward_divisions_are_exact_for_every_clamped_numerator(d, shift):
    # ycbcr_to_rgb's division (color_pixel.h's div_clamped): n clamped to [0, 256 d), then
    # trunc(float32(n >> shift) * float32(1 / (d >> shift))). Every c = n >> shift is below 2^24
    # (exact in float32), and floor(floor(n / 2^shift) / (d / 2^shift)) = floor(n / d).
    assert d % (1 << shift) == 0 and (256 * d) >> shift <= 1 << 24
    c = np.arange((256 * d) >> shift, dtype=np.int64)
    inv = np.float32(1) / np.float32(d >> shift)
    assert np.array_equal((c.astype(np.float32) * inv).astype(np.int64), c // (d >> shift))
    n = np.arange(0, 256 * d, 997, dtype=np.int64)  # and the shift's identity, on a sample of n
    assert np.array_equal((n >> shift) // (d >> shift), n // d)


def test_forward_divisions_are_exact_over_their_ranges():
    # rgb_to_ycbcr's one-step divisions (csrc/kernels/color_pixel.h, color_simd.h; the Numba mirror's
    # constants): N_Y in [0, 255500], N_Cb and N_Cr in [31250, 8000000].
    n = np.arange(8_000_001, dtype=np.int64)
    assert np.array_equal(n.astype(np.float32).astype(np.int64), n)  # every N is exact in float32
    assert numba_color.INV_31250 == np.float32(1) / np.float32(31250)
    assert np.array_equal((n.astype(np.float32) * numba_color.INV_31250).astype(np.int64), n // 31250)
    y = n[:255501]
    assert float(numba_color.INV_1000).hex() == "0x1.0624e00000000p-10"  # color_pixel.h's kInv1000
    assert np.array_equal((y.astype(np.float32) * numba_color.INV_1000).astype(np.int64), y // 1000)
    t = np.arange(59074, dtype=np.int64)  # color_simd.h's Y: floor(floor(N / 8) * 33555 / 2^22)
    assert np.array_equal((t * 33555) >> 22, t // 125) and 255500 // 8 < 59074


def _views(dtype, seed=0):
    """(name, tensor, layout, its [N, 3, H, W] equivalent)."""
    rng = np.random.default_rng(seed)

    def img(*shape):
        x = torch.from_numpy(rng.integers(0, 256, shape, dtype=np.uint8))
        return x if dtype == torch.uint8 else (x.float() / 255).to(dtype)

    chw, hwc, batch, big = img(3, 9, 13), img(9, 13, 3), img(2, 3, 6, 7), img(4, 15, 17)
    return [
        ("chw", chw, "CHW", chw[None]),
        ("hwc", hwc, "HWC", hwc.permute(2, 0, 1)[None]),
        ("hwc_from_permuted_chw", chw.permute(1, 2, 0), "HWC", chw[None]),
        ("batch_chw", batch, "CHW", batch),
        ("batch_hwc", batch.permute(0, 2, 3, 1), "HWC", batch),
        ("stepped", big[1:, ::2, 1::3], "CHW", big[None, 1:, ::2, 1::3]),
        ("stepped_hwc", big.permute(1, 2, 0)[::2, 3:, :3], "HWC", big[None, :3, ::2, 3:]),
        ("grey_broadcast", big[1][None].expand(3, 15, 17), "CHW", big[1][None, None].expand(1, 3, 15, 17)),
    ]


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("out_dtype", [None] + FLOAT_DTYPES)
def test_float_paths_match_float32_emulation_and_float64(op, dtype, out_dtype):
    if dtype != torch.uint8 and out_dtype is None:
        out_dtype = dtype
    scale = 1 / 255 if dtype == torch.uint8 and out_dtype is not None else 1.0
    delta = 128.0 if dtype == torch.uint8 else 0.5
    forward = op == "rgb_to_ycbcr"
    for name, x, layout, nchw in _views(dtype):
        planes = [nchw[:, i].float().numpy() for i in range(3)]
        if out_dtype is None:
            expected = np.stack(ref_u8(*planes, forward), axis=1)
        else:
            f32 = torch.from_numpy(np.stack(ref_f32(*planes, forward, delta, scale), axis=1))
            expected = f32.to(out_dtype).float().numpy()  # torch rounds to nearest even too
            f64 = np.stack(ref_f64(*planes, forward, delta), axis=1) * scale
            np.testing.assert_allclose(f32.numpy(), f64, rtol=1e-5, atol=1e-5 * np.abs(f64).max())
        if x.dim() == 3:
            expected = expected[0]
        for impl in OPS[op][:2]:
            out = impl(x, layout, out_dtype, scale)
            assert out.dtype == (out_dtype or dtype) and out.is_contiguous()
            np.testing.assert_array_equal(out.float().numpy(), expected, err_msg=f"{name} {impl}")
        tout = OPS[op][2](x, layout, out_dtype, scale)  # float64 torch fallback
        tol = {torch.uint8: 0, torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1e-2}
        np.testing.assert_allclose(tout.float().numpy(), expected, rtol=tol[out_dtype or dtype],
                                   atol=tol[out_dtype or dtype] * 255 * scale)


def test_float32_relative_error_vs_float64():
    rng = np.random.default_rng(5)
    x = torch.from_numpy(rng.random((3, 64, 64), dtype=np.float32))
    for op, forward in (("rgb_to_ycbcr", True), ("ycbcr_to_rgb", False)):
        ref = np.stack(ref_f64(*x.double().numpy(), forward, 0.5))
        for impl in OPS[op][:2]:
            out = impl(x).double().numpy()
            assert np.abs(out - ref).max() <= 1e-5 * np.abs(ref).max()


def test_round_trip_uint8_within_one():
    x = torch.randint(0, 256, (3, 50, 50), dtype=torch.uint8)
    back = fastprep.ycbcr_to_rgb(fastprep.rgb_to_ycbcr(x))
    assert (back.int() - x.int()).abs().max() <= 2


@njit
def _convert_all(floats, out16, bf16):
    for i in range(floats.size):
        f = floats[i]
        out16[i] = numba_color.float_to_bf16_bits(f) if bf16 else numba_color.float_to_half_bits(f)


@njit
def _back_all(bits16, out, bf16):
    for i in range(bits16.size):
        out[i] = numba_color.bf16_bits_to_float(bits16[i]) if bf16 else numba_color.half_bits_to_float(bits16[i])


def test_fp16_bf16_bit_conversions_match_numpy_and_torch():
    rng = np.random.default_rng(1)
    specials = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x477FF000, 0x477FEFFF, 0x47800000,
                         0x33000000, 0x33000001, 0x387FE000, 0x38800000, 0x3F800000, 0x3F801000,
                         0x3F803000, 0x3F808000, 0x3F818000, 0x00000001], dtype=np.uint32)
    bits = np.concatenate([specials, rng.integers(0, 2**32, 1 << 20, dtype=np.uint32),
                           rng.integers(0x30000000, 0x48000000, 1 << 20, dtype=np.uint32)])
    f = bits.view(np.float32)
    out = np.empty(bits.size, np.uint16)
    _convert_all(f, out, False)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(out, f.astype(np.float16).view(np.uint16))
    finite = ~np.isnan(f)
    _convert_all(f, out, True)
    torch_bf16 = torch.from_numpy(f).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(out[finite], torch_bf16[finite])
    assert np.isnan(np.asarray(out[~finite], np.uint32).__lshift__(16).view(np.float32)).all()
    every_half = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    back = np.empty(every_half.size, np.float32)
    _back_all(every_half, back, False)
    np.testing.assert_array_equal(back.view(np.uint32), every_half.view(np.float16).astype(np.float32).view(np.uint32))


@requires_native
@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("dtype", DTYPES)
def test_native_and_numba_give_the_same_bits(op, dtype):
    outs = [None, torch.float32, torch.float16, torch.bfloat16] + ([torch.uint8] if dtype == torch.uint8 else [])
    native_op = getattr(torch.ops.fastprep, op)
    for _, x, layout, _ in _views(dtype, seed=9):
        for out_dtype in outs:
            for scale in ((1.0,) if out_dtype == torch.uint8 or (out_dtype is None and dtype == torch.uint8)
                          else (1.0, 1 / 255, 3.7)):
                a = native_op(x, layout, out_dtype, scale)
                b = OPS[op][1](x, layout, out_dtype, scale)
                assert torch.equal(a.view(torch.uint8), b.view(torch.uint8)), (layout, out_dtype, scale)


@pytest.mark.parametrize("op", list(OPS))
@pytest.mark.parametrize("args", [(torch.randint(0, 256, (3, 5, 6), dtype=torch.uint8), "CHW", None, 1.0),
                                  (torch.randint(0, 256, (2, 5, 6, 3), dtype=torch.uint8), "HWC",
                                   torch.float32, 1 / 255),
                                  (torch.rand(2, 3, 4, 4).half(), "CHW", torch.bfloat16, 2.0)])
def test_opcheck(op, args):
    torch.library.opcheck(getattr(torch.ops.fastprep, op).default, args)


def test_torch_compile_fullgraph():
    def f(x):
        ycc = torch.ops.fastprep.rgb_to_ycbcr(x, "HWC", torch.float32, 1 / 255)
        return torch.ops.fastprep.ycbcr_to_rgb(ycc, "CHW", None, 255.0)

    x = torch.randint(0, 256, (8, 9, 3), dtype=torch.uint8)
    compiled = torch.compile(f, fullgraph=True, backend="inductor")
    assert torch.equal(compiled(x), f(x))


def _img(*shape, dtype=torch.uint8):
    return torch.zeros(*shape, dtype=dtype)


BAD_INPUTS = [
    (call("rgb_to_ycbcr", _img(3, 4, 4, dtype=torch.int16)),
     r"rgb_to_ycbcr: expected img to be a torch.uint8, torch.float32, torch.float16 or torch.bfloat16 tensor, got torch.int16"),
    (call("rgb_to_ycbcr", _img(4, 4, 4)), r"rgb_to_ycbcr: expected img to have 3 channels, got 4"),
    (call("ycbcr_to_rgb", _img(4, 4, 1), "HWC"), r"ycbcr_to_rgb: expected img to have 3 channels, got 1"),
    (call("rgb_to_ycbcr", _img(4, 4)),
     r"rgb_to_ycbcr: expected img to be a 3-D \[C, H, W\] image or a 4-D batch of them, got a 2-D tensor"),
    (call("rgb_to_ycbcr", _img(3, 4, 4), "chw"),
     r"rgb_to_ycbcr: expected layout to be 'CHW' or 'HWC', got 'chw'"),
    (call("rgb_to_ycbcr", _img(3, 4, 4), "CHW", torch.float64),
     r"rgb_to_ycbcr: expected out_dtype to be torch.uint8, torch.float32, torch.float16 or torch.bfloat16, got torch.float64"),
    (call("ycbcr_to_rgb", _img(3, 4, 4), "CHW", torch.int32),
     r"ycbcr_to_rgb: expected out_dtype to be .* got torch.int32"),
    (call("rgb_to_ycbcr", _img(3, 4, 4, dtype=torch.float32), "CHW", torch.uint8),
     r"rgb_to_ycbcr: out_dtype=torch.uint8 needs a torch.uint8 img, got torch.float32"),
    (call("ycbcr_to_rgb", _img(3, 4, 4), "CHW", None, 0.5),
     r"ycbcr_to_rgb: expected scale=1 for a torch.uint8 output, got scale=0.5"),
]


test_bad_input_op, test_bad_input_numba, test_bad_input_fake = bad_input_tests(BAD_INPUTS)
