"""crop_mask_ycbcr: equal to the composed ops, both backends, and to the usual float pipeline."""

import numpy as np
import pytest
import torch

import fastprep
from fastprep import numba_kernels
from fastprep.numba_kernels._crop_mask_ycbcr import crop_mask_ycbcr as numba_fused
from fastprep.ops._crop_mask_ycbcr import crop_mask_ycbcr_batch_torch, crop_mask_ycbcr_torch

from helpers.color_refs import ref_u8
from helpers.crop_draws import drawn
from helpers.op_calls import bad_input_tests, call, requires_native

pytestmark = pytest.mark.kernel

OUT = [(None, 1.0), (torch.float32, 1 / 255), (torch.float16, 1.0), (torch.bfloat16, 0.5)]
# (apply_mask, return_mask): every combination the schema allows.
MASK_CHOICES = [(True, False), (True, True), (False, True), (False, False)]


def _image(h=120, w=97, seed=0):
    return torch.from_numpy(np.random.default_rng(seed).integers(0, 256, (h, w, 3), dtype=np.uint8))


def _views():
    img = _image()
    return {"HWC": (img, "HWC"), "CHW": (img.permute(2, 0, 1).contiguous(), "CHW"),
            "CHW view of HWC": (img.permute(2, 0, 1), "CHW"), "strided": (img[3:, ::2], "HWC")}


def _composed(x, h, w, p, seed, layout, structure, out_dtype, scale):
    c = fastprep.random_crop(x, h, w, seed, layout)
    m = fastprep.random_dilated_mask([h, w], p, fastprep.derive_seed(seed, 1), structure, packed=True)
    return fastprep.rgb_to_ycbcr(fastprep.mask_fill(c, m, 0), "CHW", out_dtype, scale)


@pytest.mark.parametrize("view", list(_views()))
@pytest.mark.parametrize("out_dtype,scale", OUT)
@pytest.mark.parametrize("structure", ["cross", "square"])
def test_fused_equals_the_composed_ops(view, out_dtype, scale, structure):
    x, layout = _views()[view]
    for seed in (0, 1, -5, 2**62):
        for p in (0.0, 0.25, 0.37, 1.0):
            fused = fastprep.crop_mask_ycbcr(x, 31, 45, p, seed, layout, structure, out_dtype, scale)
            ref = _composed(x, 31, 45, p, seed, layout, structure, out_dtype, scale)
            assert fused.dtype == ref.dtype and torch.equal(fused, ref)


@pytest.fixture(scope="module")
def all_colours_hwc():
    v = np.arange(1 << 24, dtype=np.int32)
    return torch.from_numpy(np.stack([v >> 16, (v >> 8) & 255, v & 255], -1).astype(np.uint8).reshape(4096, 4096, 3))


@pytest.mark.parametrize("layout", ["HWC", "CHW"])
def test_uint8_output_is_exact_for_all_2_24_colours_masked_or_not(all_colours_hwc, layout):
    # Every colour through the fused op (whole rows of 64-pixel blocks on every ISA level, .ci/isa):
    # unmasked pixels are the exact rounded JFIF formula, masked ones what RGB (0, 0, 0) gives.

    img = all_colours_hwc if layout == "HWC" else all_colours_hwc.permute(2, 0, 1).contiguous()
    out, bits = fastprep.crop_mask_ycbcr(img, 4096, 4096, 0.25, 3, layout, return_mask=True)
    masked = fastprep.unpack_bits(bits, 4096).reshape(-1).numpy()
    expected = np.stack(ref_u8(*all_colours_hwc.reshape(-1, 3).numpy().T, True))
    expected[:, masked] = np.array([[0], [128], [128]], dtype=np.uint8)
    assert 0.3 < masked.mean() < 0.9
    diff = np.flatnonzero((out.reshape(3, -1).numpy() != expected).any(0))
    assert diff.size == 0, f"{diff.size} pixels differ, first {diff[:5]}"


@pytest.mark.parametrize("out_dtype,scale", OUT)
def test_return_mask_gives_the_bits_and_apply_mask_chooses_the_image(out_dtype, scale):
    x = _image()
    image, mask = fastprep.crop_mask_ycbcr(x, 40, 33, 0.25, 9, out_dtype=out_dtype, scale=scale,
                                           apply_mask=False, return_mask=True, mask_seed=77)
    assert torch.equal(mask, fastprep.random_dilated_mask([40, 33], 0.25, 77, packed=True))
    assert torch.equal(image, fastprep.rgb_to_ycbcr(fastprep.random_crop(x, 40, 33, 9, "HWC"), "CHW",
                                                    out_dtype, scale))
    masked = fastprep.crop_mask_ycbcr(x, 40, 33, 0.25, 9, out_dtype=out_dtype, scale=scale, mask_seed=77)
    masked2, mask2 = fastprep.crop_mask_ycbcr(x, 40, 33, 0.25, 9, out_dtype=out_dtype, scale=scale,
                                              return_mask=True, mask_seed=77)
    assert torch.equal(masked2, masked) and torch.equal(mask2, mask)  # both: masked image + bits
    assert torch.equal(fastprep.crop_mask_ycbcr(x, 40, 33, 0.25, 9, out_dtype=out_dtype, scale=scale,
                                                apply_mask=False, mask_seed=77), image)
    bits = fastprep.unpack_bits(mask, 33)
    black = torch.tensor([0.0, 128.0, 128.0]).mul(scale).to(image.dtype).view(3, 1)
    assert torch.equal(masked[:, bits], black.expand(3, int(bits.sum())))  # YCbCr of black
    assert torch.equal(masked[:, ~bits], image[:, ~bits])


def test_torch_ops_implementation_is_the_composition():
    x, layout = _views()["strided"]
    for am, rm in MASK_CHOICES:
        a = torch.ops.fastprep.crop_mask_ycbcr(x, 20, 21, 0.3, 4, layout, "cross", None, 1.0, am, rm, None)
        b = crop_mask_ycbcr_torch(x, 20, 21, 0.3, 4, layout, "cross", None, 1.0, am, rm, None)
        assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


@requires_native
@pytest.mark.parametrize("out_dtype,scale", OUT)
def test_native_and_numba_give_the_same_bits(out_dtype, scale):
    for name, (x, layout) in _views().items():
        for seed in range(3):
            for am, rm in MASK_CHOICES:
                a = torch.ops.fastprep.crop_mask_ycbcr(x, 50, 47, 0.25, seed, layout, "cross", out_dtype,
                                                       scale, am, rm, None)
                b = numba_fused(x, 50, 47, 0.25, seed, layout, "cross", out_dtype, scale, am, rm, None)
                assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]), name


def test_float_output_matches_the_usual_float_pipeline():
    scipy = pytest.importorskip("scipy")  # noqa: F841  (the usual pipeline dilates with scipy)
    from fastprep.tools.bench._pipelines import usual_transform

    src = np.random.default_rng(1).integers(0, 256, (300, 280, 3), dtype=np.uint8)
    for seed in range(3):
        top, left = fastprep.random_crop_params(300, 280, 256, 256, seed)
        mask = fastprep.random_dilated_mask([256, 256], 0.25, fastprep.derive_seed(seed, 1)).numpy()
        ref = usual_transform(src, top=top, left=left, mask=mask)
        fused = fastprep.crop_mask_ycbcr(torch.from_numpy(src), 256, 256, 0.25, seed,
                                         out_dtype=torch.float32, scale=1 / 255)
        torch.testing.assert_close(fused, ref, atol=1e-5, rtol=0)


def test_opcheck_and_compile():
    x = _image()
    for args in [(x, 16, 20, 0.25, 3, "HWC", "cross", None, 1.0, False, None),
                 (x.permute(2, 0, 1), 16, 20, 0.5, 3, "CHW", "square", torch.float32, 0.5, True, 11)]:
        torch.library.opcheck(torch.ops.fastprep.crop_mask_ycbcr.default, args)
    f = torch.compile(lambda t: fastprep.crop_mask_ycbcr(t, 16, 16, 0.25, 1).float().mean(),
                      fullgraph=True, backend="inductor")
    assert torch.equal(f(x), fastprep.crop_mask_ycbcr(x, 16, 16, 0.25, 1).float().mean())


def _fused(**kw):
    """A crop_mask_ycbcr call on valid arguments but for those in kw."""
    args = dict(img=torch.zeros(8, 8, 3, dtype=torch.uint8), height=4, width=4, p=0.25, seed=0)
    return call("crop_mask_ycbcr", **{**args, **kw})


BAD_INPUTS = [
    (_fused(img=torch.zeros(8, 8, 3)), "crop_mask_ycbcr: expected img to be a torch.uint8 tensor, got torch.float32"),
    (_fused(img=torch.zeros(2, 8, 8, 3, dtype=torch.uint8)), r"crop_mask_ycbcr: expected img to be a 3-D \[H, W, C\] image, got a 4-D"),
    (_fused(img=torch.zeros(8, 8, 4, dtype=torch.uint8)), "crop_mask_ycbcr: expected img to have 3 channels, got 4"),
    (_fused(layout="WHC"), "crop_mask_ycbcr: expected layout to be 'CHW' or 'HWC', got 'WHC'"),
    (_fused(height=0), "crop_mask_ycbcr: expected a positive crop size, got height=0 width=4"),
    (_fused(width=9), "crop_mask_ycbcr: crop 4x9 is larger than the image 8x8"),
    (_fused(p=1.5), "crop_mask_ycbcr: expected 0 <= p <= 1, got p=1.5"),
    (_fused(p=float("nan")), "crop_mask_ycbcr: expected 0 <= p <= 1, got p=nan"),
    (_fused(structure="disk"), "crop_mask_ycbcr: expected structure to be 'cross' or 'square', got 'disk'"),
    (_fused(out_dtype=torch.int32), "crop_mask_ycbcr: expected out_dtype to be .* got torch.int32"),
    (_fused(scale=2.0), "crop_mask_ycbcr: expected scale=1 for a torch.uint8 output, got scale=2"),
]
test_bad_input_op, test_bad_input_numba, test_bad_input_fake = bad_input_tests(BAD_INPUTS)


@pytest.mark.parametrize("out_dtype,scale", [(torch.uint8, 1.0), *OUT[1:]])
@pytest.mark.parametrize("with_masks", [False, True])
def test_batch_writes_the_per_sample_bits_into_the_callers_buffers(out_dtype, scale, with_masks):
    views = list(_views().values())
    imgs = [x for x, _ in views if _ == "HWC"] + [_image(60, 50, seed=3), _image(31, 45, seed=4)]
    seeds, mask_seeds = [0, -7, 2**62, 11], [None, [5, 6, 7, 8]]
    tops, lefts = drawn(imgs, 31, 45, seeds)
    for ms in mask_seeds:
        out = torch.full((len(imgs), 3, 31, 45), 7).to(out_dtype)
        masks = torch.zeros(len(imgs), 31, 6, dtype=torch.uint8) if with_masks else None
        mseeds = [fastprep.derive_seed(s, 1) for s in seeds] if ms is None else ms
        got = fastprep.crop_mask_ycbcr_batch(imgs, tops, lefts, 31, 45, 0.25, mseeds, out, scale=scale, masks=masks)
        assert got is out
        for i, img in enumerate(imgs):
            image, mask = fastprep.crop_mask_ycbcr(img, 31, 45, 0.25, seeds[i], out_dtype=out_dtype, scale=scale,
                                                   return_mask=True, mask_seed=None if ms is None else ms[i])
            assert torch.equal(out[i], image)
            if with_masks:
                assert torch.equal(masks[i], mask)
        out_nb = torch.empty_like(out)
        masks_nb = torch.empty_like(masks) if with_masks else None
        call("crop_mask_ycbcr_batch", imgs, tops, lefts, 31, 45, 0.25, mseeds, out_nb, scale=scale,
             masks=masks_nb).numba()
        assert torch.equal(out_nb, out) and (not with_masks or torch.equal(masks_nb, masks))


def test_batch_windows_anywhere_in_the_image_equal_the_window_cut_first():
    """The batch op reads the window it is given: the same as the whole window handed over as the
    image (tops = lefts = 0), flipped or not, on both backends and the torch definition."""
    img = _image(50, 61, seed=9)
    chw = img.permute(2, 0, 1)
    for top, left, flip, layout, x in ((0, 0, False, "HWC", img), (19, 30, True, "HWC", img), (7, 1, False, "CHW", chw),
                                       (19, 30, True, "CHW", chw), (0, 30, True, "HWC", img.flip(0))):
        window = x[top:top + 31, left:left + 31] if layout == "HWC" else x[:, top:top + 31, left:left + 31]
        want = torch.empty(1, 3, 31, 31, dtype=torch.uint8)
        fastprep.crop_mask_ycbcr_batch([window], [0], [0], 31, 31, 0.3, [5], want, layout=layout, hflips=[flip])
        for run in (torch.ops.fastprep.crop_mask_ycbcr_batch.default, numba_kernels.kernel("crop_mask_ycbcr_batch"),
                    crop_mask_ycbcr_batch_torch):
            got = torch.empty_like(want)
            run([x], [top], [left], 31, 31, 0.3, [5], got, layout, "cross", 1.0, True, None, [flip])
            assert torch.equal(got, want), (top, left, flip, layout)
    flipped = torch.empty(1, 3, 31, 31, dtype=torch.uint8)
    fastprep.crop_mask_ycbcr_batch([img], [19], [30], 31, 31, 0.0, [5], flipped, hflips=[True])
    assert torch.equal(flipped[0], fastprep.rgb_to_ycbcr(img[19:50, 30:61].flip(1), "HWC"))


def test_batch_opcheck():
    imgs = [_image(40, 30), _image(35, 33, seed=1)]
    torch.library.opcheck(torch.ops.fastprep.crop_mask_ycbcr_batch.default,
                          (imgs, [3, 19], [14, 0], 16, 16, 0.25, [1, 2], torch.empty(2, 3, 16, 16), "HWC", "cross",
                           1.0, True, torch.empty(2, 16, 2, dtype=torch.uint8), [True, False]))


_IMGS = [torch.zeros(8, 8, 3, dtype=torch.uint8)] * 2
_OUT = torch.zeros(2, 3, 4, 4, dtype=torch.uint8)


def _batch(imgs=_IMGS, tops=(1, 2), lefts=(0, 4), height=4, p=0.25, mask_seeds=(1, 2), out=_OUT, **kw):
    return call("crop_mask_ycbcr_batch", imgs, list(tops), list(lefts), height, 4, p, list(mask_seeds), out, **kw)


BAD_BATCH = [
    (_batch(tops=[1]), r"crop_mask_ycbcr_batch: expected one top per image \(2\), got 1 tops"),
    (_batch(lefts=[1, 2, 3]), r"crop_mask_ycbcr_batch: expected one left per image \(2\), got 3 lefts"),
    (_batch(mask_seeds=[3]), r"crop_mask_ycbcr_batch: expected one mask seed per image \(2\), got 1 mask_seeds"),
    (_batch(out=_OUT[:, :, :3]),
     r"crop_mask_ycbcr_batch: expected out to be a contiguous \[2, 3, 4, 4\] tensor, got \[2, 3, 3, 4\] "
     r"\(not contiguous\)"),
    (_batch(out=_OUT.int()), r"crop_mask_ycbcr_batch: expected out to be a torch.uint8, .* tensor, got torch.int32"),
    (_batch(scale=0.5), r"crop_mask_ycbcr_batch: expected scale=1 for a torch.uint8 output, got scale=0.5"),
    (_batch(height=0), r"crop_mask_ycbcr_batch: expected a positive crop size, got height=0 width=4"),
    (_batch(imgs=[_IMGS[0], torch.zeros(8, 3, 3, dtype=torch.uint8)]),
     r"crop_mask_ycbcr_batch: crop 4x4 is larger than the image 8x3"),
    (_batch(imgs=[_IMGS[0], torch.zeros(8, 8, 3)]),
     r"crop_mask_ycbcr_batch: expected imgs\[1\] to be a torch.uint8 tensor, got torch.float32"),
    (_batch(masks=torch.zeros(2, 4, 2, dtype=torch.uint8)),
     r"crop_mask_ycbcr_batch: expected masks to be a contiguous \[2, 4, 1\] tensor, got \[2, 4, 2\]"),
    (_batch(p=1.5), r"crop_mask_ycbcr_batch: expected 0 <= p <= 1, got p=1.5"),
    (_batch(hflips=[True]), r"crop_mask_ycbcr_batch: expected one hflip per image \(2\), got 1 hflips"),
    (_batch(tops=[1, 5]), r"crop_mask_ycbcr_batch: expected tops\[1\] in \[0, 4\] \(imgs\[1\] is 8x8, the crop "
                          r"4x4\), got 5"),
    (_batch(tops=[-1, 0]), r"crop_mask_ycbcr_batch: expected tops\[0\] in \[0, 4\] .* got -1"),
    (_batch(lefts=[0, 5]), r"crop_mask_ycbcr_batch: expected lefts\[1\] in \[0, 4\] \(imgs\[1\] is 8x8, the crop "
                           r"4x4\), got 5"),
    (_batch(lefts=[-2**63, 0]), r"crop_mask_ycbcr_batch: expected lefts\[0\] in \[0, 4\] .* got -9223372036854775808"),
    # Mixed devices: the meta argument's kernel (the fake) would run and write nothing into out.
    (_batch(imgs=[_IMGS[0], _IMGS[1].to("meta")]),
     r"crop_mask_ycbcr_batch: expected imgs\[1\] on out's device \(cpu\), got meta"),
    (_batch(masks=torch.zeros(2, 4, 1, dtype=torch.uint8, device="meta")),
     r"crop_mask_ycbcr_batch: expected masks on out's device \(cpu\), got meta"),
]
test_bad_batch_op, test_bad_batch_numba, test_bad_batch_fake = bad_input_tests(BAD_BATCH)
