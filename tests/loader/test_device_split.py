"""Loader(decode_on=...), the GPU decode split: the threads cut windows, the device decodes. For every
row of the fusion table (the seed's crop + mask + YCbCr; RandomResizedCrop / Resize + CenterCrop
with flips, ToDtype, Normalize), with the CPU decoder standing in for the device ("cpu"), the
batches are the ordinary Loader's bit for bit (flips, chunk sizes, threads, dtypes, packed shards
and JpegFiles), the threads decode nothing, and what the split cannot take is refused by name. On
a CUDA machine (benchmarks/gpu_check.sh) nvJPEG's batches are compared with the CPU's within
nvJPEG's IDCT differences."""

import threading

import numpy as np
import pytest
import torch

import fastprep
import fastprep.io as fio
import fastprep.io.jpeg._device_decoders as dd
import fastprep.loader._iteration as iteration
from fastprep import transforms as T
from fastprep.batch._window_batch import WindowBatch

from helpers.decode_split import FILES, STD, batches, pipeline, resized
from helpers.jpeg_photos import needs_decoder, photo, photo_jpeg, write_tree

pytestmark = needs_decoder

@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("split")
    write_tree(root, FILES)
    return root


@pytest.fixture(scope="module")
def packed(folder, tmp_path_factory):
    dest = tmp_path_factory.mktemp("split-pack") / "jpeg"
    fio.pack(folder, dest, progress=False, threads=1)
    return fio.PackedDataset(dest)


def test_the_cpu_stand_in_gives_the_cpu_paths_batches_bit_for_bit(packed, folder):
    roi = fio.ImageFolder(folder, roi=True)  # JpegFiles: the whole file goes to the device
    cases = [(packed, dict(batch_size=4, threads=1, transform=pipeline("before"))),
             (packed, dict(batch_size=5, threads=2, transform=pipeline("after"), shuffle=True, expand=True)),
             (packed, dict(batch_size=3, threads=3, transform=pipeline("none", torch.float32, 1 / 255), depth=1)),
             (roi, dict(batch_size=2, threads=2, transform=pipeline("before"), sampler=[4, 1, 1, 0, 3, 2, 2])),
             (packed, dict(batch_size=4, threads=2, transform=pipeline("turns"))),
             (roi, dict(batch_size=3, threads=2, transform=pipeline("turn, crop not square", torch.float32, 1 / 255),
                        shuffle=True))]
    for dataset, kw in cases:
        assert kw["transform"].plan.fused.fusion.op == "crop_mask_ycbcr_batch"  # one fused op: the row under test
        for seed in (0, 5):
            want = batches(dataset, seed=seed, **kw)
            got = batches(dataset, seed=seed, decode_on="cpu", **kw)
            assert len(got) == len(want) and all(
                len(g) == len(w) and all(torch.equal(a, b) for a, b in zip(g, w, strict=True))
                for g, w in zip(got, want, strict=True)), (type(dataset).__name__, kw, seed)
            assert not torch.equal(want[0][0][0], want[0][0][1])  # not one sample over and over


def test_the_resized_crop_row_splits_bit_for_bit(packed, folder):
    roi = fio.ImageFolder(folder, roi=True)
    cases = [(packed, dict(batch_size=4, threads=1, transform=resized("rrc", "before"))),
             (packed, dict(batch_size=3, threads=2, transform=resized("resize", "after", False), shuffle=True)),
             (packed, dict(batch_size=5, threads=2, transform=resized("resize", "none"), expand=True)),
             (roi, dict(batch_size=2, threads=2, transform=resized("rrc", "after"), sampler=[4, 1, 1, 0, 3, 2, 2])),
             (roi, dict(batch_size=3, threads=1, transform=resized("resize", "before", False))),
             (packed, dict(batch_size=4, threads=2, transform=resized("rrc", "turns"))),
             (roi, dict(batch_size=3, threads=2, transform=resized("resize", "turns", False), shuffle=True))]
    for dataset, kw in cases:
        assert kw["transform"].plan.fused.fusion.op == "resized_crop_batch"  # one fused op: the row under test
        for seed in (0, 7):
            want = batches(dataset, seed=seed, **kw)
            got = batches(dataset, seed=seed, decode_on="cpu", **kw)
            assert len(got) == len(want) and all(
                len(g) == len(w) and all(a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(g, w, strict=True))
                for g, w in zip(got, want, strict=True)), (type(dataset).__name__, kw, seed)
            assert not torch.equal(want[0][0][0], want[0][0][1])


@pytest.mark.one_backend
@pytest.mark.parametrize("transform", [pipeline(), resized("rrc", "after")], ids=["crop-mask-ycbcr", "resized-crop"])
def test_the_threads_cut_and_never_decode(packed, monkeypatch, transform):
    native = fio.jpeg.native("test")
    calls: dict[tuple[str, str], int] = {}
    lock = threading.Lock()

    def count(name):
        real = getattr(native, name)

        def spy(*args, **kwargs):
            where = "loader thread" if threading.current_thread().name.startswith("fastprep-loader") else "consumer"
            with lock:
                calls[(name, where)] = calls.get((name, where), 0) + 1
            return real(*args, **kwargs)
        monkeypatch.setattr(native, name, spy)

    for name in ("decode_record_into", "decode_into", "cut_record"):  # every entropy decoder entry, and the cut
        count(name)
    kw = dict(batch_size=4, transform=transform, threads=2, seed=1)
    n = len(packed)
    batches(packed, decode_on="cpu", **kw)
    assert calls == {("cut_record", "loader thread"): n, ("decode_into", "consumer"): n}
    calls.clear()
    batches(packed, **kw)  # the ordinary path decodes each window in the threads
    assert calls == {("decode_record_into", "loader thread"): n}


@pytest.mark.one_backend
def test_the_host_batch_is_the_cuts_and_masks_and_decodes_anywhere(packed, monkeypatch):
    kw = dict(batch_size=2, transform=pipeline(), seed=2, threads=1)
    want = batches(packed, **kw)
    monkeypatch.setattr(iteration, "DevicePrefetcher", lambda host, *args, **kwargs: host)  # the host batches
    loader = fastprep.Loader(packed, decode_on="cpu", **kw)
    it = iter(loader)
    host = next(it)
    assert isinstance(host, WindowBatch) and len(host.windows) == 2 and host.windows.extras["masks"].shape == (2, 48, 6)
    assert host.nbytes < want[0][0].numel() * 3 // 4  # small cuts and bits, not pixels
    assert host.nbytes_expanded == 2 * 3 * 48 * 48 * 4 + 2 * 8
    kept = host.clone()
    moved = host.to("cpu")
    assert all(torch.equal(a, b) for a, b in zip(moved.data, want[0], strict=True))
    host.release()  # (DevicePrefetcher's part) its slot may now take another batch
    assert moved.released  # moved holds host's labels itself (a CPU "copy"): released with it
    next(it)
    with pytest.raises(RuntimeError, match="released"):
        host.to("cpu")
    expanded = kept.expand()  # a clone owns its masks: still the first batch
    assert torch.equal(expanded[0], T.to_dtype_image(want[0][0], torch.float32, scale=True))
    assert torch.equal(expanded[1], want[0][1].long())
    it.close()


@pytest.mark.one_backend
def test_what_cannot_split_is_refused_by_name(packed, folder, tmp_path):
    def refused(match, dataset=packed, **kw):
        kw = {"batch_size": 2, "transform": pipeline(), **kw}
        with pytest.raises(ValueError, match=match):
            batches(dataset, decode_on=kw.pop("decode_on", "cpu"), **kw)

    refused(r"decode_on='cpu' cannot split this transform: step 4, ToDtype.* run outside the fused op",
            transform=T.Compose([*pipeline().transforms, T.ToDtype(torch.float32)]))
    refused(r"step 0, RandomCrop\(size=\(48, 48\), padding=.*no part in a fused op",
            transform=T.Compose([T.RandomCrop(48, padding=2), T.RandomDilatedMask(0.25), T.RGBToYCbCr()]))
    refused(r"step 1, RandomDilatedMask\(p=0.25\); step 2, RGBToYCbCr\(\) run outside the fused op: .*the split "
            r"runs one fused op: \(1\) RandomCrop\(size\) -> .*; \(2\) RandomResizedCrop\(size\) or Resize",
            transform=T.Compose([T.RandomResizedCrop(48), T.RandomDilatedMask(0.25), T.RGBToYCbCr()]))
    refused(r"step 2, Identity\(\) \(no part in a fused op.* run outside the fused op",  # a foreign step after it
            transform=T.Compose([T.RandomResizedCrop(48), T.ToDtype(torch.float32, scale=True), torch.nn.Identity()]))
    refused(r"sample \d's image is 64x\d+, but the batches are laid out from 64x\d+ images; batch equal shapes",
            transform=T.Compose([T.Resize(64)]))  # images of other aspects: no crop after the resize
    refused(r"RandomCrop.* has its own generator=", transform=T.Compose(
        [T.RandomCrop(48, generator=torch.Generator()), T.RandomDilatedMask(0.25), T.RGBToYCbCr()]))
    refused(r"RandomResizedCrop.* reads JPEG windows at a reduced DCT scale \(jpeg_scale='reduced'\).* pass jpeg_scale='exact'",
            transform=T.Compose([T.RandomResizedCrop(48, jpeg_scale="reduced"), T.RandomHorizontalFlip()]))
    refused(r"there is no transform", transform=None)
    refused(r"decode_on='meta': the windows decode on a CUDA device .* got 'meta'", decode_on="meta")
    refused(r"decode_on='cpu' decodes the batches on cpu.*device='meta' differs", device="meta")
    if not torch.cuda.is_available():
        refused(r"decode_on='cuda':.*CUDA is not available", decode_on="cuda")
    # Items: per sample, in the threads, naming it and what to do.
    fio.pack(folder, tmp_path / "raw", mode="raw", progress=False, threads=1)
    with pytest.raises(ValueError, match=r"PackedRaw.*no JPEG to cut; read it with decode_on=None") as info:
        batches(fio.PackedDataset(tmp_path / "raw"), batch_size=2, transform=pipeline(), decode_on="cpu", threads=1)
    assert "raised by sample 0 (dataset index) in the decode_on split" in str(info.value.__notes__)
    arrays = [(photo("coffee")[:60, :70], 0)] * 3
    refused(r"its image is a ndarray, not a JPEG that cuts windows .*python -m fastprep pack SRC DEST", arrays)
    small = [(fio.JpegFile(photo_jpeg("coffee", "4:2:0", False, (40, 40))), 0)]
    refused(r"crop.*48.*larger|larger.*crop", small)  # the crop's own error, as without the split


# -- on a CUDA device (benchmarks/gpu_check.sh runs these on a GPU machine) -------------------------

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def _host_batches(dataset, monkeypatch, **kw):
    """The threads' WindowBatches (cuts, flips, placement, host tensors), each kept by a clone."""
    with monkeypatch.context() as m:
        m.setattr(iteration, "DevicePrefetcher", lambda host, *args, **kwargs: host)
        out = []
        for b in fastprep.Loader(dataset, decode_on="cpu", **kw):
            out.append(b.clone())
            b.release()
        return out


@needs_cuda
@pytest.mark.parametrize("transform", [pipeline("before", torch.float32, 1 / 255), pipeline("turns"),
                                       resized("rrc", "after"), resized("resize", "before", False),
                                       resized("resize", "turns")],
                         ids=["crop-mask-ycbcr", "crop-mask-ycbcr turns", "rrc", "resize", "turns"])
def test_the_device_half_on_cuda_gives_the_cpu_bits(packed, monkeypatch, transform):
    """Everything the device does but nvJPEG (the crop of each window, the row's device half: mask +
    YCbCr, or the resize's torch-ops form with flips, dtype, normalize) has the CPU's bits."""
    for host in _host_batches(packed, monkeypatch, batch_size=4, transform=transform, seed=4, threads=2):
        w = host.windows
        windows = fio.decode_window_batch(w.cuts, device="cpu")  # the CPU decoder's pixels, both sides
        cpu = w.group.finish_on_device(windows, w.geometry, w.out_size, dict(w.extras))
        gpu = w.group.finish_on_device([x.cuda() for x in windows], w.geometry, w.out_size,
                                       {k: v.cuda() for k, v in w.extras.items()})
        assert gpu.device.type == "cuda" and gpu.dtype == cpu.dtype and torch.equal(gpu.cpu(), cpu)


def _close_to_libjpeg(got, want, max_abs: float, mean_abs: float, unit: float = 1.0) -> None:
    for g, w in zip(got, want, strict=True):
        assert g[0].device.type == "cuda" and torch.equal(g[1].cpu(), w[1])
        diff = (g[0].cpu().double() - w[0].double()).abs() / unit  # in uint8 steps
        assert diff.max() <= max_abs and diff.mean() <= mean_abs, (float(diff.max()), float(diff.mean()))


def _needs(jpeg_decoder):
    if jpeg_decoder == "torchvision":
        pytest.importorskip("torchvision.io")
    elif dd.nvimagecodec_module() is None:
        pytest.skip("nvImageCodec is not installed (pip install 'fastprep[gpu]')")


DECODERS = pytest.mark.parametrize("jpeg_decoder", ["torchvision", "nvimagecodec"])


@needs_cuda
@DECODERS
def test_nvjpeg_batches_are_close_to_the_cpu_ones(packed, jpeg_decoder):
    _needs(jpeg_decoder)
    kw = dict(batch_size=4, transform=pipeline("before"), seed=3, threads=2)
    want = batches(packed, **kw)
    got = batches(packed, decode_on="cuda", jpeg_decoder=jpeg_decoder, **kw)
    for g, w in zip(got, want, strict=True):
        assert g[0].device.type == "cuda" and torch.equal(g[1].cpu(), w[1])
        diff = (g[0].cpu().int() - w[0].int()).abs()
        # nvJPEG's IDCT and upsampling are not libjpeg-turbo's: close, not equal (the masks are equal).
        assert diff.float().mean() < 1.5 and (diff > 12).float().mean() < 0.01, diff.float().mean()
    assert np.isfinite(float(got[0][0].float().mean()))


@needs_cuda
@DECODERS
@pytest.mark.parametrize("source", ["packed", "roi"])
def test_nvjpeg_resized_batches_are_within_the_stated_tolerance(packed, folder, source, jpeg_decoder):
    """docs/real-files.md's tolerance: nvJPEG's IDCT and chroma upsampling differ from libjpeg-turbo's
    (a few steps at sharp colour edges, at most 59 and on average 0.66 on RandomResizedCrop windows in
    benchmarks/gpu_check.sh's H200 run); the antialiased resize's non-negative weights cannot widen
    them: per uint8 value at most 64 steps apart, on average at most 1.0 (float outputs: the same in
    units of 1/255/std). Each device decoder: torchvision's nvJPEG, nvImageCodec's (its hardware
    engines where the device has them)."""
    _needs(jpeg_decoder)
    dataset = packed if source == "packed" else fio.ImageFolder(folder, roi=True)
    for transform, unit in [(T.Compose([T.RandomHorizontalFlip(), T.RandomResizedCrop(40)]), 1.0),
                            (resized("resize", "after", False), 1.0),  # no ToDtype: uint8
                            (resized("rrc", "before"), torch.tensor([1 / 255 / s for s in STD]).view(1, 3, 1, 1))]:
        kw = dict(batch_size=3, transform=transform, seed=6, threads=2)
        got = batches(dataset, decode_on="cuda", jpeg_decoder=jpeg_decoder, **kw)
        _close_to_libjpeg(got, batches(dataset, **kw), 64, 1.0, unit)


def test_a_turned_image_is_refused_with_its_own_advice(tmp_path):
    """An image read upright by its EXIF orientation (a JpegFile with exif=True, an OrientedImage) cannot
    be split (the device decodes windows as stored): the refusal says so, not 'raw pixels need no decoding'."""
    Image = pytest.importorskip("PIL.Image")
    exif = Image.Exif()
    exif[0x0112] = 6
    (tmp_path / "a").mkdir()
    Image.fromarray(photo("coffee")[:100, :120]).save(tmp_path / "a" / "phone.jpg", "JPEG", exif=exif)
    stored = fio.JpegFile(tmp_path / "a" / "phone.jpg")
    for dataset in (fio.ImageFolder(tmp_path, roi=True, exif=True), [(fio.OrientedImage(stored, 6), 0)]):
        with pytest.raises(ValueError, match=r"stored turned \(EXIF orientation 6\) and read upright \(exif=True\): "
                                             r"the split cannot turn windows .* decode_on=None, or with exif=False"
                           ) as info:
            batches(dataset, batch_size=1, transform=resized("rrc", "none"), decode_on="cpu", threads=1)
        assert "raw pixels" not in str(info.value)
        assert "in the decode_on split" in str(info.value.__notes__)
    # Read as stored (exif=False), the same file splits.
    assert len(batches(fio.ImageFolder(tmp_path, roi=True), batch_size=1, transform=resized("rrc", "none"),
                       decode_on="cpu", threads=1)) == 1


@pytest.mark.parametrize(("depth", "streams"), [(1, 3), (3, 1), (2, 2)])
def test_the_split_ring_follows_the_one_ring_rule(packed, depth, streams):
    from fastprep.batch._slots import ring_slots
    from fastprep.loader._device_split import split_parts

    loader = fastprep.Loader(packed, 2, transform=pipeline(), decode_on="cpu", depth=depth, streams=streams)
    ring, _ = split_parts(loader.settings, packed, loader.plan, False, loader.jpeg_decoders, 0, 0)
    assert ring.count == ring_slots(depth, streams) == 2 * max(depth, streams) + 2
    assert ring_slots(depth) == depth + 1  # no device stage: the batches made ahead and the consumer's
