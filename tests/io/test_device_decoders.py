"""The GPU decode split's JPEG decoders (io/jpeg/_device_decoders.py): the chain passes what a decoder
refuses to the next and counts who decoded what; the choice ("auto", "nvimagecodec", "torchvision",
"host") per device, with stand-ins for the device decoders; nvImageCodec's CPU backend (where
installed: CI installs it) against fastprep's libjpeg-turbo, bit for bit."""

import re
import threading

import pytest
import torch

import fastprep.io as fio
import fastprep.io.jpeg._device_decoders as dd
from fastprep.ops._color import rgb_to_ycbcr

from helpers.jpeg_photos import grey_jpeg, needs_decoder, photo_jpeg

pytestmark = needs_decoder
CPU = torch.device("cpu")
JPEGS = [photo_jpeg("coffee", "4:2:0", False, (181, 203)), photo_jpeg("chelsea", "4:2:2", True, (150, 163)),
         photo_jpeg("astronaut", "4:4:4", False, (131, 157)), grey_jpeg(False, (91, 130))]


class StandIn:
    """A device decoder that refuses the images `refuses` says no to (libjpeg-turbo's pixels)."""

    def __init__(self, name, refuses=lambda data: False):
        self.name, self.refuses, self.seen = name, refuses, 0

    def decode(self, buffers, crops, mode, dev):
        self.seen += len(buffers)
        return [None if self.refuses(b) else dd.crop_window(fio.decode_jpeg(b, mode=mode), c, self.name)
                for b, c in zip(buffers, crops, strict=True)]


def test_what_a_decoder_refuses_goes_to_the_next_and_is_counted():
    progressive = [b"\xff\xc2" in bytes(j) for j in JPEGS]
    first = StandIn("engine", lambda b: b"\xff\xc2" in bytes(b))  # as a JPEG engine refuses progressive ones
    second = StandIn("sms", lambda b: b is JPEGS[3])
    chain = dd.DecoderChain([first, second])
    crops = [(3, 4, 20, 30)] * len(JPEGS)
    got = chain.decode(JPEGS, crops, "RGB", CPU)
    for data, image in zip(JPEGS, got, strict=True):
        assert torch.equal(image, fio.decode_jpeg(data, crop=(3, 4, 20, 30)))
    refused = sum(progressive)
    assert first.seen == 4 and second.seen == refused
    assert chain.counts == {"engine": 4 - refused, "sms": refused, dd.HOST: 0}
    assert chain.refused == {"engine": refused}
    assert chain.describe() == f"engine {4 - refused}, sms {refused}, {dd.HOST} 0 (passed on: engine {refused})"
    nobody = dd.DecoderChain([StandIn("a", lambda b: True), StandIn("b", lambda b: True)])
    got = nobody.decode([JPEGS[3]] * 2, [(1, 1, 5, 5), None], "GRAY", CPU)  # refused by both: the host decodes
    assert torch.equal(got[0], fio.decode_jpeg(JPEGS[3], crop=(1, 1, 5, 5), mode="GRAY")) and got[1].shape == (1, 91, 130)
    assert nobody.counts == {"a": 0, "b": 0, dd.HOST: 2} and nobody.refused == {"a": 2, "b": 2}


def test_ycbcr_is_the_device_rgb_converted_there():
    chain = dd.DecoderChain([StandIn("rgb")])
    got = chain.decode(JPEGS[:1], None, "YCbCr", CPU)[0]
    assert torch.equal(got, rgb_to_ycbcr(fio.decode_jpeg(JPEGS[0]), "CHW"))


def test_a_window_outside_the_decoded_image_is_refused_by_name():
    with pytest.raises(ValueError, match=r"window \(top=170, left=0, height=20, width=10\) is not inside the 181x203"):
        dd.DecoderChain([StandIn("rgb")]).decode(JPEGS[:1], [(170, 0, 20, 10)], "RGB", CPU)


class FakeNv:
    """nvImageCodec's names, enough for the choice (nothing decodes)."""

    NVIMGCODEC_DEVICE_CPU_ONLY = -99
    HW_GPU_ONLY, GPU_ONLY, CPU_ONLY = "hw", "gpu", "cpu"


@pytest.fixture
def fake_devices(monkeypatch):
    engine = {"has": True}
    monkeypatch.setattr(dd, "has_jpeg_engine", lambda dev, nv=None: engine["has"])
    monkeypatch.setattr(dd.TorchvisionDecoder, "__init__", lambda self, who: None)
    return engine


@pytest.mark.parametrize(("choice", "engine", "names"), [
    ("auto", True, ["nvImageCodec hardware", "nvImageCodec cuda"]),
    ("auto", False, ["nvImageCodec cuda"]),
    ("nvimagecodec", True, ["nvImageCodec hardware", "nvImageCodec cuda"]),
    ("torchvision", True, ["torchvision nvJPEG"]),
    ("host", True, []),
])
def test_the_choice_on_a_cuda_device(fake_devices, choice, engine, names):
    fake_devices["has"] = engine
    chain = dd.choose_decoders(choice, torch.device("cuda", 0), "Loader", FakeNv())
    assert chain.names == [*names, dd.HOST]


def test_the_choice_without_nvimagecodec(fake_devices, monkeypatch):
    monkeypatch.setattr(dd, "nvimagecodec_module", lambda: None)
    assert dd.choose_decoders("auto", torch.device("cuda", 0), "Loader").names == ["torchvision nvJPEG", dd.HOST]
    with pytest.raises(RuntimeError, match=r"Loader: jpeg_decoder='nvimagecodec' but nvImageCodec is not installed: "
                                           r"pip install 'fastprep\[gpu\]'"):
        dd.choose_decoders("nvimagecodec", torch.device("cuda", 0), "Loader")


def test_the_choice_on_the_cpu_stand_in(monkeypatch):
    assert dd.choose_decoders("auto", CPU, "Loader", FakeNv()).names == [dd.HOST]  # the threads' bits
    assert dd.choose_decoders("nvimagecodec", CPU, "Loader", FakeNv()).names == ["nvImageCodec cpu", dd.HOST]
    with pytest.raises(ValueError, match="jpeg_decoder='torchvision' decodes on a CUDA device"):
        dd.choose_decoders("torchvision", CPU, "Loader", FakeNv())


@pytest.mark.parametrize("choice", ["nvjpeg", "", None, 3, ["auto"]])
def test_a_bad_choice_is_refused_by_name(choice):
    with pytest.raises(ValueError, match=rf"Loader: expected jpeg_decoder to be one of .*, got {re.escape(repr(choice))}"):
        dd.choose_decoders(choice, CPU, "Loader")
    with pytest.raises(ValueError, match="expected jpeg_decoder"):
        fio.decode_window_batch([], device="cpu", jpeg_decoder=choice)


def test_no_engine_when_the_hardware_backend_cannot_start():
    class Broken(FakeNv):
        def Backend(self, kind):  # noqa: N802 (nvImageCodec's name)
            raise RuntimeError("no hardware decoder on this device")

    assert dd.has_jpeg_engine(torch.device("cuda", 7), Broken()) is False


# -- nvImageCodec's CPU backend, where installed -----------------------------------------------

nvimagecodec = pytest.mark.skipif(dd.nvimagecodec_module() is None,
                                  reason="nvImageCodec is not installed (pip install "
                                  "nvidia-nvimgcodec-cu13: the CPU backend runs without a GPU)")


@nvimagecodec
@pytest.mark.parametrize("mode", ["RGB", "GRAY", "YCbCr"])
def test_nvimagecodec_cpu_gives_libjpeg_turbo_bits(mode):
    """Its CPU backend is libjpeg-turbo with the same settings: tolerance 0 (measured here on 4:2:0,
    4:2:2 progressive, 4:4:4 and grey photos), every window and mode (YCbCr: its RGB converted, as
    every device decoder's, not the JPEG's own samples)."""
    chain = dd.choose_decoders("nvimagecodec", CPU, "t")
    crops = [(0, 0, 91, 130), (5, 7, 60, 41), (130, 156, 1, 1), (1, 2, 89, 127)]
    got = chain.decode(JPEGS, crops, mode, CPU)
    for data, crop, image in zip(JPEGS, crops, got, strict=True):
        want = fio.decode_jpeg(data, crop=crop, mode="RGB" if mode == "YCbCr" else mode)
        assert torch.equal(image, rgb_to_ycbcr(want, "CHW") if mode == "YCbCr" else want), crop
    assert chain.counts["nvImageCodec cpu"] == 4


@nvimagecodec
def test_nvimagecodec_refuses_what_it_cannot_parse_and_the_host_names_it():
    chain = dd.choose_decoders("nvimagecodec", CPU, "t")
    bad = bytes(JPEGS[0])[:200]
    with pytest.raises(ValueError):
        chain.decode([JPEGS[0], bad], None, "RGB", CPU)
    assert chain.refused["nvImageCodec cpu"] == 1


def test_no_device_decoder_at_all_says_what_to_install(monkeypatch):
    monkeypatch.setattr(dd, "nvimagecodec_module", lambda: None)

    def no_torchvision(self, who):
        raise RuntimeError(f"{who} needs torchvision built for torch {torch.__version__}")

    monkeypatch.setattr(dd.TorchvisionDecoder, "__init__", no_torchvision)
    with pytest.raises(RuntimeError, match=r"Loader: no JPEG decoder for cuda:0: pip install 'fastprep\[gpu\]' "
                                           r"\(nvImageCodec\), or torchvision built for torch"):
        dd.choose_decoders("auto", torch.device("cuda", 0), "Loader")
    with pytest.raises(RuntimeError, match=r"^Loader needs torchvision"):
        dd.choose_decoders("torchvision", torch.device("cuda", 0), "Loader")


@nvimagecodec
def test_nvimagecodec_decodes_a_small_window_as_a_region_and_checks_it_first():
    """A window of at most half the image is decoded as nvImageCodec's region (only its pixels:
    the same bits, tested above); one outside the image is refused by name before any decode
    (nvImageCodec would fill the outside with zeros)."""
    chain = dd.choose_decoders("nvimagecodec", CPU, "t")
    with pytest.raises(ValueError, match=r"window \(top=170, left=0, height=20, width=10\) is not inside the "
                                         r"181x203 image nvImageCodec cpu decoded"):
        chain.decode(JPEGS[:1], [(170, 0, 20, 10)], "RGB", CPU)
    with pytest.raises(ValueError, match=r"window \(top=0, left=0, height=182, width=203\) is not inside"):
        chain.decode(JPEGS[:1], [(0, 0, 182, 203)], "RGB", CPU)  # the whole-image path checks too


class LimitedNv(FakeNv):
    """nvImageCodec whose hardware backend makes `limit` decoders, then fails as the engines' does
    when their decoders are used up; each decoder made returns libjpeg-turbo's pixels."""

    def __init__(self, limit):
        self.limit, self.made = limit, 0

    def Backend(self, kind):  # noqa: N802 (nvImageCodec's names)
        return kind

    def Decoder(self, device_id, max_num_cpu_threads, backends):  # noqa: N802
        if self.made == self.limit:
            raise RuntimeError("Internal error - Could not create decoder. Code: 7")
        self.made += 1
        return self


def test_a_decoder_that_cannot_be_made_passes_its_images_on_and_says_why():
    """On a GPU shared by several processes (pytest-xdist's, several Loaders) the engines' decoders
    can run out: the batch goes to the next decoder, counted, and describe() names the failure (it
    raised out of the Loader before)."""
    nv = LimitedNv(0)
    chain = dd.DecoderChain([dd.NvImageCodecDecoder("hardware", CPU, nv), StandIn("next")])
    got = chain.decode(JPEGS[:2], None, "RGB", CPU)
    assert all(torch.equal(g, fio.decode_jpeg(b)) for g, b in zip(got, JPEGS[:2]))
    assert chain.counts["next"] == 2 and chain.refused["nvImageCodec hardware"] == 2
    assert "nvImageCodec hardware could not be made: Internal error - Could not create decoder. Code: 7" \
        in chain.describe()


def test_when_no_more_decoders_can_be_made_a_thread_waits_for_one_made():
    nv = LimitedNv(1)
    decoder = dd.NvImageCodecDecoder("hardware", CPU, nv)
    first = decoder._acquire()  # in use by one thread
    threading.Timer(0.05, decoder._idle.put, (first,)).start()  # ... handed back a moment later
    assert decoder._acquire() is first and nv.made == 1 and decoder.unavailable is not None
