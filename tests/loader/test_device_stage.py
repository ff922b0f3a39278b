"""Loader(decode_on=..., streams=k, jpeg_decoder=...): the split's device stage on k threads, each on its
own stream, with the JPEG decoder chain. On the CPU stand-in the batches are the ordinary Loader's bit
for bit whatever the streams and decoder, describe() says which decoder decoded how many images and
where the stage's time went, and bad settings are refused by name."""

import pytest
import torch

import fastprep
import fastprep.io as fio
import fastprep.io.jpeg._device_decoders as dd
from fastprep import transforms as T

from helpers.jpeg_photos import needs_decoder, photo_jpeg, write_tree

pytestmark = needs_decoder

FILES = {f"{c}/{k}.jpg": (lambda k=k, name=name: photo_jpeg(name, "4:2:0", k == 2, (150 + 9 * k, 170 - 5 * k)))
         for c, name in (("a", "coffee"), ("b", "chelsea")) for k in range(4)}


@pytest.fixture(scope="module")
def packed(tmp_path_factory):
    root = tmp_path_factory.mktemp("stage")
    write_tree(root, FILES)
    dest = tmp_path_factory.mktemp("stage-pack") / "jpeg"
    fio.pack(root, dest, progress=False, threads=1)
    return fio.PackedDataset(dest)


def rrc():
    return T.Compose([T.RandomHorizontalFlip(), T.RandomResizedCrop(48), T.ToDtype(torch.float32, scale=True)])


def batches(dataset, **kw):
    return [tuple(x.clone() for x in b.data) for b in fastprep.Loader(dataset, **kw)]


@pytest.mark.parametrize("jpeg_decoder", ["host", "auto", "nvimagecodec"])
@pytest.mark.parametrize("streams", [1, 3])
def test_the_stage_gives_the_threads_bits_whatever_its_streams_and_decoder(packed, streams, jpeg_decoder):
    if jpeg_decoder == "nvimagecodec" and dd.nvimagecodec_module() is None:
        pytest.skip("nvImageCodec is not installed (CI installs nvidia-nvimgcodec-cu13: its CPU backend)")
    kw = dict(batch_size=3, transform=rrc(), seed=5, threads=2, shuffle=True)
    want = batches(packed, **kw)
    loader = fastprep.Loader(packed, decode_on="cpu", streams=streams, jpeg_decoder=jpeg_decoder, **kw)
    assert "no pass yet" in loader.describe()
    got = [tuple(x.clone() for x in b.data) for b in loader]
    assert len(got) == len(want) == 3
    for g, w in zip(got, want, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(g, w, strict=True))
    lines = loader.describe().splitlines()
    name = "nvImageCodec cpu" if jpeg_decoder == "nvimagecodec" else dd.HOST
    assert lines[1] == "device: cpu, the GPU decode split (decode_on)"
    assert f"{name} {len(packed)}" in lines[2] and lines[2].startswith("JPEG decoders: ")
    assert lines[3].startswith(f"device stage: {streams} stream{'s' * (streams > 1)}, 3 batches, busy ")


def test_the_split_runs_on_one_stream_on_the_cpu_and_four_on_cuda_by_default(packed):
    assert fastprep.Loader(packed, 2, transform=rrc(), decode_on="cpu").streams == 1
    assert fastprep.Loader(packed, 2, transform=rrc()).streams is None
    assert fastprep.Loader(packed, 2, transform=rrc(), device="cpu", streams=2).streams == 2
    assert fastprep.Loader(packed, 2, device="cpu").describe().endswith("device: cpu, batches copied there")


@pytest.mark.parametrize(("kw", "message"), [
    (dict(streams=2), r"Loader: streams=2 sets the device stage's threads; pass device= or decode_on="),
    (dict(decode_on="cpu", streams=0), r"Loader: expected streams to be an int >= 1, got 0"),
    (dict(decode_on="cpu", streams=2.0), r"Loader: expected streams to be an int >= 1, got 2.0"),
    (dict(jpeg_decoder="nvimagecodec"), r"Loader: jpeg_decoder='nvimagecodec' chooses the GPU decode split's JPEG "
                                        r"decoder; pass decode_on= too"),
    (dict(decode_on="cpu", jpeg_decoder="nvjpeg"), r"Loader: decode_on='cpu': expected jpeg_decoder to be one of "
                                                   r"\('auto', 'nvimagecodec', 'torchvision', 'host'\), got 'nvjpeg'"),
    (dict(decode_on="cpu", jpeg_decoder="torchvision"), r"jpeg_decoder='torchvision' decodes on a CUDA device"),
])
def test_bad_stage_settings_are_refused_by_name(packed, kw, message):
    with pytest.raises(ValueError, match=message):
        fastprep.Loader(packed, 2, transform=rrc(), **kw)
