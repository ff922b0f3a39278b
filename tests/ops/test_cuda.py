"""Every op on CUDA tensors gives the CPU kernel's bits (run whenever CUDA is available;
benchmarks/gpu_check.sh runs them on a GPU machine). The arithmetic of these compositions is
checked on the CPU by tests/ops/test_torch_compositions.py on every run."""

import pytest
import torch

import fastprep
import fastprep.io
from fastprep.ops._registry import OPS

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _cuda(x):
    if isinstance(x, (list, tuple)):  # the batch ops take lists of images
        return type(x)(_cuda(v) for v in x)
    return x.cuda() if isinstance(x, torch.Tensor) else x


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.view({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()])


def _same(gpu, cpu) -> bool:
    if isinstance(cpu, (tuple, list)):
        return all(_same(g, c) for g, c in zip(gpu, cpu, strict=True))
    if cpu is None:
        return gpu is None
    return gpu.device.type == "cuda" and torch.equal(_bits(gpu.cpu()), _bits(cpu))


@pytest.mark.parametrize("row", [r for r in OPS if r.takes_tensor], ids=lambda r: r.name)
def test_every_tensor_op_runs_on_cuda_with_the_cpu_bits(row):
    cpu_args = row.sample()
    gpu_args = [_cuda(a) for a in cpu_args]
    op = getattr(torch.ops.fastprep, row.name)
    out_cpu, out_gpu = op(*cpu_args), op(*gpu_args)
    assert _same(out_gpu, out_cpu)
    assert _same(gpu_args[0], cpu_args[0])  # in-place ops change the input alike


def test_colour_on_cuda_is_exact_for_every_uint8_colour():
    v = torch.arange(256, dtype=torch.uint8)
    x = torch.stack(torch.meshgrid(v, v, v, indexing="ij")).reshape(3, 4096, 4096)
    for op in (fastprep.rgb_to_ycbcr, fastprep.ycbcr_to_rgb):
        assert torch.equal(op(x.cuda()).cpu(), op(x))
        for out_dtype, scale in [(torch.float32, 1 / 255), (torch.float16, 1.0), (torch.bfloat16, 0.5)]:
            assert torch.equal(_bits(op(x.cuda(), "CHW", out_dtype, scale).cpu()), _bits(op(x, "CHW", out_dtype, scale)))


@pytest.mark.parametrize("out_dtype,scale", [(None, 1.0), (torch.float32, 1 / 255), (torch.bfloat16, 1.0)])
def test_fused_op_on_a_cuda_image(out_dtype, scale):
    img = torch.randint(0, 256, (300, 280, 3), dtype=torch.uint8)
    for seed in range(3):
        for apply_mask, return_mask in [(True, False), (True, True), (False, True)]:
            kw = dict(out_dtype=out_dtype, scale=scale, apply_mask=apply_mask, return_mask=return_mask)
            cpu = fastprep.crop_mask_ycbcr(img, 256, 256, 0.25, seed, **kw)
            assert _same(fastprep.crop_mask_ycbcr(img.cuda(), 256, 256, 0.25, seed, **kw), cpu)


def test_hflip_on_cuda_gives_the_cpu_bits():
    img = torch.randint(0, 256, (300, 280, 3), dtype=torch.uint8)
    for seed in range(3):
        cpu = fastprep.crop_mask_ycbcr(img, 256, 200, 0.25, seed, return_mask=True, hflip=True)
        assert _same(fastprep.crop_mask_ycbcr(img.cuda(), 256, 200, 0.25, seed, return_mask=True, hflip=True), cpu)
        for x, layout in [(img, "HWC"), (img.permute(2, 0, 1).float(), "CHW")]:
            cpu = fastprep.random_crop(x, 290, 300, seed, layout, True, 5.0, hflip=True)
            assert _same(fastprep.random_crop(x.cuda(), 290, 300, seed, layout, True, 5.0, hflip=True), cpu)


def test_mask_ycbcr_batch_on_cuda_equals_the_cpu_fused_op():
    g = torch.Generator().manual_seed(0)
    images = [torch.randint(0, 256, (300, 280, 3), dtype=torch.uint8, generator=g) for _ in range(8)]
    seeds = list(range(8))
    crops = torch.stack([fastprep.random_crop(im, 256, 256, s, "HWC") for im, s in zip(images, seeds, strict=True)])
    masks = torch.stack([fastprep.random_dilated_mask([256, 256], 0.25, fastprep.derive_seed(s, 1), packed=True)
                         for s in seeds])
    got = fastprep.mask_ycbcr(crops.cuda(), masks.cuda(), torch.float32, 1 / 255)
    want = torch.stack([fastprep.crop_mask_ycbcr(im, 256, 256, 0.25, s, out_dtype=torch.float32, scale=1 / 255)
                        for im, s in zip(images, seeds, strict=True)])
    assert _same(got, want)


def test_large_dilations_and_fills_on_cuda():
    m = torch.rand(4, 256, 256) < 0.01
    for structure in ("cross", "square"):
        assert _same(fastprep.dilate(m.cuda(), structure, 5), fastprep.dilate(m, structure, 5))
        p = fastprep.pack_bits(m)
        assert _same(fastprep.dilate_packed(p.cuda(), 256, structure, 2), fastprep.dilate_packed(p, 256, structure, 2))
    img = torch.rand(4, 3, 256, 256, dtype=torch.float16)
    assert _same(fastprep.mask_fill(img.cuda(), fastprep.pack_bits(m).cuda(), 0.5),
                 fastprep.mask_fill(img, fastprep.pack_bits(m), 0.5))


def test_prefetcher_expands_compact_batches_on_cuda():
    samples = [(torch.randint(0, 256, (3, 8, 8), dtype=torch.uint8), torch.rand(8, 8) < 0.5, i) for i in range(4)]
    batch = fastprep.compact_collate(samples)
    (expanded,) = list(fastprep.DevicePrefetcher([batch], "cuda", expand=True))
    cpu = batch.expand()
    assert _same(list(expanded), list(cpu))


def test_nvjpeg_images_are_ready_for_another_stream():
    """The images are written when decode_jpeg_batch returns (torchvision 0.26 synchronizes its
    decoder's stream with the host), so work on a side stream (a DevicePrefetcher's) may read them."""
    pytest.importorskip("torchvision.io")
    from helpers.jpeg_photos import photo_jpeg  # noqa: PLC0415 (tests/ helper)

    datas = [photo_jpeg(name, "4:2:0", False, (1024, 1024)) for name in ("coffee", "chelsea", "astronaut", "rocket")]
    want = [im.cpu() for im in fastprep.io.decode_jpeg_batch(datas * 8)]
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    for _ in range(3):
        with torch.cuda.stream(side):
            got = [im.clone() for im in fastprep.io.decode_jpeg_batch(datas * 8)]  # read on the side stream
        side.synchronize()
        assert all(torch.equal(g.cpu(), w) for g, w in zip(got, want, strict=True))
