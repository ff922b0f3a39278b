"""The JPEG decoders of the GPU decode split, tried in order, each image going to the next one when
a decoder refuses it; which one decoded how many images is counted (``Loader.describe()``).

- ``nvImageCodec hardware``: NVIDIA's nvImageCodec (the ``nvidia-nvimgcodec-cu13`` / ``-cu12``
  wheels; ``pip install fastprep[gpu]``) on the JPEG engines of an A100 / H100 / H200 (and other
  chips that have them), beside the SMs that train. Used when installed and a probe decode on the
  device succeeds with the hardware backend alone.
- ``nvImageCodec CUDA``: nvImageCodec's nvJPEG on the SMs (hybrid CPU + GPU Huffman decoding).
- ``torchvision nvJPEG``: ``torchvision.io.decode_jpeg`` on the device (serial: one decoder behind
  a lock), when nvImageCodec is missing.
- ``nvImageCodec CPU`` (``jpeg_decoder="nvimagecodec"`` on the CPU stand-in): its libjpeg-turbo.
- ``libjpeg-turbo (host)``: fastprep's own decoder on the host (the window only), uploaded: the
  last resort, which reads every JPEG fastprep reads, and the only one for 4-component (CMYK /
  YCCK) JPEGs, whose colour conversion the others do not do as Pillow does.

Each decoder is handed a whole batch with each image's window and returns, per image, the window
as a uint8 ``[C, h, w]`` tensor on the device (nvImageCodec decodes only the window's region where
the window is at most half the image: a JpegFile's whole file; the others decode the image and
take a view) or None where it refused the image (a progressive or
arithmetic-coded JPEG the engine does not take, an odd subsampling, a stream it cannot parse).
Decoders run on the calling thread's current CUDA stream: the device stage gives each of its
threads its own (loader/device_stage.py).
"""

from __future__ import annotations

import base64
import queue
import threading
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

import torch

from fastprep.io.jpeg import decode_jpeg
from fastprep.ops._color import rgb_to_ycbcr

JPEG_DECODERS = ("auto", "nvimagecodec", "torchvision", "host")
"""The choices of ``Loader(jpeg_decoder=...)``: "auto" (the fastest installed for the device),
"nvimagecodec", "torchvision", "host" (fastprep's libjpeg-turbo, uploaded). "host" is always
appended last, for what the others refuse."""

HOST = "libjpeg-turbo (host)"


class JpegDecoder(Protocol):
    """One decoder of the chain: `name` says it in counts and messages."""

    name: str

    def decode(self, buffers: Sequence[Any], crops: Sequence[Crop | None], mode: str,
               dev: torch.device) -> list[torch.Tensor | None]:
        """Each buffer's window `crops[i]` (None: the whole image), ``[C, h, w]`` uint8 on `dev`, or
        None where refused."""
        ...


Crop = tuple[int, int, int, int]


def crop_window(image: torch.Tensor, crop: Crop | None, name: str) -> torch.Tensor:
    """The view of window `crop` = (top, left, height, width) of a decoded ``[C, H, W]`` `image`, or a
    ValueError naming the window, the image's size and the decoder `name` when it is not inside."""
    if crop is None:
        return image
    top, left, h, w = crop
    if top < 0 or left < 0 or top + h > image.shape[-2] or left + w > image.shape[-1]:
        raise ValueError(f"decode_window_batch: window (top={top}, left={left}, height={h}, width={w}) is not inside "
                         f"the {image.shape[-2]}x{image.shape[-1]} image {name} decoded")
    return image[:, top:top + h, left:left + w]


def nvimagecodec_module() -> Any:
    """nvImageCodec's module, or None where it is not installed (or cannot load)."""
    try:
        from nvidia import nvimgcodec  # noqa: PLC0415 (optional: the [gpu] extra)
    except (ImportError, OSError, RuntimeError):
        return None
    return nvimgcodec


class NvImageCodecDecoder:
    """nvImageCodec with one backend `kind` ("hardware", "cuda" or "cpu"): one nvImageCodec decoder
    per call in flight (the device-stage threads decode at once, each on its own stream), kept for
    the next calls and passes, planar RGB or grey, no EXIF turn (a cut is decoded as stored)."""

    KINDS = {"hardware": "HW_GPU_ONLY", "cuda": "GPU_ONLY", "cpu": "CPU_ONLY"}

    def __init__(self, kind: str, dev: torch.device, nv: Any = None):
        if kind not in self.KINDS:
            raise ValueError(f"NvImageCodecDecoder: expected kind to be one of {tuple(self.KINDS)}, got {kind!r}")
        self.nv = nv or nvimagecodec_module()
        if self.nv is None:
            raise RuntimeError("nvImageCodec is not installed: pip install 'fastprep[gpu]' (nvidia-nvimgcodec-cu13 "
                               "and nvJPEG; nvidia-nvimgcodec-cu12 for a CUDA 12 torch)")
        self.kind, self.dev, self.name = kind, dev, f"nvImageCodec {kind}"
        self._idle: queue.SimpleQueue = queue.SimpleQueue()  # decoders made and not in use
        self._made = 0  # decoders made, in use or idle
        self._lock = threading.Lock()
        self.unavailable: str | None = None  # why the last decoder could not be made, if one could not

    def _acquire(self) -> Any:
        """An idle decoder, a new one, or (when no more can be made: the engines' decoders are a
        per-device resource shared with other processes) one of those made, once it is back; None
        when not one can be made here (this call's images then go to the chain's next decoder)."""
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        try:
            decoder = self._new_decoder()
        except RuntimeError as e:  # nvImageCodec's "Could not create decoder. Code: N"
            with self._lock:
                self.unavailable, made = str(e), self._made
            return self._idle.get() if made else None
        with self._lock:
            self._made += 1
        return decoder

    def _new_decoder(self) -> Any:
        nv = self.nv
        device_id = nv.NVIMGCODEC_DEVICE_CPU_ONLY if self.kind == "cpu" else self.dev.index or 0
        backend = nv.Backend(getattr(nv, self.KINDS[self.kind]))
        return nv.Decoder(device_id=device_id, max_num_cpu_threads=1, backends=[backend])

    def decode(self, buffers: Sequence[Any], crops: Sequence[Crop | None], mode: str,
               dev: torch.device) -> list[torch.Tensor | None]:
        decoder = self._acquire()
        if decoder is None:  # none could be made: the chain's next decoder takes them
            return [None] * len(buffers)
        try:
            images, regions = self._decode(decoder, buffers, crops, mode, dev)
        finally:
            self._idle.put(decoder)
        cuda = self.kind != "cpu"
        return [None if im is None else self._tensor(im, cuda) if region else crop_window(self._tensor(im, cuda), crop,
                                                                                            self.name)
                for im, crop, region in zip(images, crops, regions, strict=True)]

    def _decode(self, decoder: Any, buffers: Sequence[Any], crops: Sequence[Crop | None], mode: str,
                dev: torch.device) -> tuple[list[Any], list[bool]]:
        """nvImageCodec's images of `buffers` (a window of at most half its image as a region) and
        which of them are regions."""
        nv = self.nv
        gray = mode == "GRAY"
        params = nv.DecodeParams(apply_exif_orientation=False,
                                 color_spec=nv.ColorSpec.GRAY if gray else nv.ColorSpec.SRGB,
                                 sample_format=nv.SampleFormat.P_Y if gray else nv.SampleFormat.P_RGB)
        streams, regions = [], []
        for b, crop in zip(buffers, crops, strict=True):
            stream = nv.CodeStream(bytes(b))
            region = crop is not None and 2 * crop[2] * crop[3] <= stream.height * stream.width
            if region:  # only the window's pixels are decoded and written
                top, left, h, w = crop
                if top < 0 or left < 0 or top + h > stream.height or left + w > stream.width:
                    crop_window(torch.empty(0, stream.height, stream.width), crop, self.name)  # the error
                stream = stream.get_sub_code_stream(region=nv.Region(top, left, top + h, left + w))
            streams.append(stream)
            regions.append(region)
        stream = torch.cuda.current_stream(dev).cuda_stream if self.kind != "cpu" else 0
        return decoder.decode(streams, params=params, cuda_stream=stream), regions

    @staticmethod
    def _tensor(image: Any, cuda: bool) -> torch.Tensor:
        if cuda:
            # DLPack with the consumer's stream: the image's decode is ordered before what reads it.
            try:
                return torch.from_dlpack(image)
            except (TypeError, BufferError):  # a __dlpack__ without the stream argument: the CUDA array
                return torch.as_tensor(image)  # interface, on its own device (decoded on this stream already)
        import numpy as np  # noqa: PLC0415

        return torch.from_numpy(np.asarray(image))


def has_jpeg_engine(dev: torch.device, nv: Any = None) -> bool:
    """Whether nvImageCodec's hardware backend decodes on `dev`: a probe decode of a tiny JPEG,
    made once per device."""
    key = (dev.index or 0, id(nv))
    if key not in _ENGINES:
        try:
            probe = NvImageCodecDecoder("hardware", dev, nv)
            _ENGINES[key] = probe.decode([_probe_jpeg()], [None], "RGB", dev)[0] is not None
        except Exception:  # noqa: BLE001 (no engine, no driver support: the answer is no)
            _ENGINES[key] = False
    return _ENGINES[key]


_ENGINES: dict[tuple[int, int], bool] = {}


def _probe_jpeg() -> bytes:
    """A 16 x 16 baseline 4:2:0 JPEG (Pillow, quality 50): what every JPEG engine decodes."""
    return base64.b64decode(_PROBE)


_PROBE = ("/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDABALDA4MChAODQ4SERATGCgaGBYWGDEjJR0oOjM9PDkzODdASFxOQERXRTc4UG1RV19iZ2hnPk1x"
          "eXBkeFxlZ2P/2wBDARESEhgVGC8aGi9jQjhCY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2NjY2P/wAAR"
          "CAAQABADASIAAhEBAxEB/8QAFQABAQAAAAAAAAAAAAAAAAAABQb/xAAYEAACAwAAAAAAAAAAAAAAAAAABAUhMf/EABQBAQAAAAAAAAAAAAAA"
          "AAAAAAD/xAAYEQADAQEAAAAAAAAAAAAAAAAAAgQhMf/aAAwDAQACEQMRAD8Am1o/KF1o/KElo/KF1o/KCOIL+af/2Q==")


class TorchvisionDecoder:
    """``torchvision.io.decode_jpeg`` on a CUDA device (nvJPEG on the SMs)."""

    name = "torchvision nvJPEG"

    def __init__(self, who: str):
        from fastprep.core._devices import nvjpeg_decoder  # noqa: PLC0415

        self._decode, self._modes = nvjpeg_decoder(who)

    def decode(self, buffers: Sequence[Any], crops: Sequence[Crop | None], mode: str,
               dev: torch.device) -> list[torch.Tensor | None]:
        # torchvision's nvJPEG decoder allocates its outputs on this stream but writes them on a
        # stream of its own that does not wait for this one (pytorch/vision#9606): memory freed here
        # while kernels queued on it still read it could be overwritten. Let this stream's queued work
        # finish first (a device-stage thread's own stream: the consumer does not wait).
        torch.cuda.current_stream(dev).synchronize()
        tensors = [torch.frombuffer(bytearray(b), dtype=torch.uint8) for b in buffers]
        read = self._modes.GRAY if mode == "GRAY" else self._modes.RGB
        try:
            images = self._decode(tensors, mode=read, device=dev)
        except RuntimeError:  # one image it cannot decode fails the batch: the host says which and why
            return [None] * len(buffers)
        return [crop_window(im, crop, self.name) for im, crop in zip(images, crops, strict=True)]


_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}  # frame headers (not DHT, JPG, DAC)


def frame_components(data: Any) -> int:
    """The component count of a JPEG's frame header (SOFn), read from its markers alone; 0 when the
    header ends, or is not a JPEG's, before one (the decoder that gets it then says why)."""
    data = memoryview(data).cast("B")
    pos = 2 if data[:2] == b"\xff\xd8" else len(data)
    while pos + 4 <= len(data) and data[pos] == 0xFF:
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in _SOF:
            return data[pos + 9] if pos + 10 <= len(data) else 0
        if marker == 0xDA:
            return 0
        pos += 2 + int.from_bytes(data[pos + 2:pos + 4], "big")
    return 0


class DecoderChain:
    """The decoders tried in order (see the module); `counts` maps each name to the images it
    decoded, `refused` each name to the images it passed on."""

    def __init__(self, decoders: Sequence[JpegDecoder]):
        self.decoders = list(decoders)
        self.counts: Counter[str] = Counter()
        self.refused: Counter[str] = Counter()
        self._lock = threading.Lock()

    @property
    def names(self) -> list[str]:
        return [d.name for d in self.decoders] + [HOST]

    def decode(self, buffers: Sequence[Any], crops: Sequence[tuple[int, int, int, int]] | None, mode: str,
               dev: torch.device) -> list[torch.Tensor]:
        """Every buffer decoded (cropped to its `crops` window, when given) on `dev`, in `mode`
        ("RGB", "GRAY" or "YCbCr": the device decoders' RGB converted there by fastprep.rgb_to_ycbcr)."""
        out: list[torch.Tensor | None] = [None] * len(buffers)
        todo = [i for i, b in enumerate(buffers) if frame_components(b) != 4]
        counts, refused = Counter(), Counter()
        refused["4-component (CMYK / YCCK)"] = len(buffers) - len(todo)
        read = "GRAY" if mode == "GRAY" else "RGB"
        for decoder in self.decoders:
            if not todo:
                break
            images = decoder.decode([buffers[i] for i in todo], [None if crops is None else crops[i] for i in todo],
                                    read, dev)
            left = []
            for i, window in zip(todo, images, strict=True):
                if window is None:
                    left.append(i)
                else:
                    out[i] = rgb_to_ycbcr(window, "CHW") if mode == "YCbCr" else window
            counts[decoder.name] += len(todo) - len(left)
            refused[decoder.name] += len(left)
            todo = left
        host = [i for i in range(len(buffers)) if out[i] is None]
        counts[HOST] += len(host)
        with self._lock:  # counted before the host decodes: an image it fails on still says who refused it
            self.counts.update(counts)
            self.refused.update({k: v for k, v in refused.items() if v})
        for i in host:
            out[i] = decode_jpeg(buffers[i], crop=None if crops is None else crops[i], mode=mode).to(dev)
        return out  # type: ignore[return-value]

    def describe(self) -> str:
        """What decoded the images so far, e.g. "nvImageCodec hardware 12800, libjpeg-turbo (host) 3
        (passed on: 4-component (CMYK / YCCK) 3)"."""
        with self._lock:
            counts, refused = dict(self.counts), dict(self.refused)
        done = ", ".join(f"{n} {counts.get(n, 0)}" for n in self.names)
        passed = ", ".join(f"{n} {c}" for n, c in refused.items())
        why = "; ".join(f"{d.name} could not be made: {d.unavailable}" for d in self.decoders
                        if getattr(d, "unavailable", None))
        return done + (f" (passed on: {passed})" if passed else "") + (f" ({why})" if why else "")


def check_jpeg_decoder(who: str, choice: Any) -> str:
    """`choice` if it is one of JPEG_DECODERS, else a ValueError naming `who` and the value."""
    if not isinstance(choice, str) or choice not in JPEG_DECODERS:
        raise ValueError(f"{who}: expected jpeg_decoder to be one of {JPEG_DECODERS}, got {choice!r}")
    return choice


def shared_decoders(choice: Any, dev: torch.device, who: str) -> DecoderChain:
    """`choice` itself when it is a DecoderChain (a Loader's own, which counts its images), else the
    chain for it on `dev` made once per process (decode_window_batch's, decode_jpeg_batch's)."""
    if isinstance(choice, DecoderChain):
        return choice
    check_jpeg_decoder(who, choice)
    key = (choice, str(dev))
    chain = _SHARED.get(key)
    if chain is None:
        chain = _SHARED.setdefault(key, choose_decoders(choice, dev, who))
    return chain


_SHARED: dict[tuple[Any, str], DecoderChain] = {}


def choose_decoders(choice: str, dev: torch.device, who: str, nv: Any = None) -> DecoderChain:
    """The chain for `choice` (one of JPEG_DECODERS) on `dev`, or a ValueError / RuntimeError
    naming `who`, the choice and what is missing. "auto" on a CUDA device: nvImageCodec's hardware
    backend where the device has JPEG engines, then its CUDA backend, else torchvision's nvJPEG; on
    the CPU: fastprep's own decoder alone (the bits of the threads' decode)."""
    check_jpeg_decoder(who, choice)
    if choice == "host" or (choice == "auto" and dev.type == "cpu"):
        return DecoderChain([])
    nv = nv or nvimagecodec_module()
    if choice == "nvimagecodec" or (choice == "auto" and nv is not None):
        if nv is None:
            raise RuntimeError(f"{who}: jpeg_decoder='nvimagecodec' but nvImageCodec is not installed: pip install "
                               f"'fastprep[gpu]' (nvidia-nvimgcodec-cu13 and nvJPEG; -cu12 for a CUDA 12 torch)")
        if dev.type == "cpu":
            return DecoderChain([NvImageCodecDecoder("cpu", dev, nv)])
        engine = [NvImageCodecDecoder("hardware", dev, nv)] if has_jpeg_engine(dev, nv) else []
        return DecoderChain([*engine, NvImageCodecDecoder("cuda", dev, nv)])
    if dev.type == "cpu":
        raise ValueError(f"{who}: jpeg_decoder='torchvision' decodes on a CUDA device; decode_on='cpu' runs "
                         f"jpeg_decoder='host' (or 'nvimagecodec', its CPU backend)")
    try:
        return DecoderChain([TorchvisionDecoder(who)])
    except RuntimeError as exc:
        if choice != "auto":
            raise
        raise RuntimeError(f"{who}: no JPEG decoder for {dev}: pip install 'fastprep[gpu]' (nvImageCodec), or "
                           f"torchvision built for torch {torch.__version__} ({exc})") from exc
