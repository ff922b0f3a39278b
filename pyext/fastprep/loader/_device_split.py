"""The GPU decode split, ``Loader(..., decode_on=device)``: the threads cut, the device decodes.

Decoding is most of a real sample's CPU cost (~97% for the seed's crop + mask + YCbCr, ~80% for a
RandomResizedCrop). With `decode_on`, the threads run the transform's fused row's batch path with
the same seeds and draws as without it, but where that path would decode each sample's window
they cut its small JPEG out of the shard (:meth:`PackedJpeg.cut`: byte copies, no entropy
decoding; a :class:`JpegFile` hands its whole bytes) and make what the row's device half asks of
them (``DeviceSplit.host``: the seed row's packed masks; nothing for a resized crop). The batch (a
:class:`~fastprep.batch._window_batch.WindowBatch`) holds the cuts, each window's place in its cut, the
flips and placement, those host tensors and the labels. The device stage (DevicePrefetcher with
``streams`` threads, each on its own CUDA stream: batch/_stream_pool.py) decodes each batch's cuts
there (the JPEG decoder chain: nvImageCodec's hardware engines, its nvJPEG or torchvision's, the
host for what they refuse; io/jpeg/_device_decoders.py), crops each window and runs the row's
device half (``DeviceSplit.finish``: mask + colour, or the resize + dtype + normalize).

Every row of the fusion table that declares a ``split`` (transforms/_fused.py) runs split; nothing
here names a row. Refused, when the Loader is made (and again when an epoch starts), naming the
part: a transform that is not one fused op of such a row (a step outside it would need the
decoded pixels on the CPU), a step with its own generator; per sample, in the threads: an item
that cannot cut a window (raw pixels, a decoded image, a dict sample), or one the fused op does
not take. Nothing falls back to decoding in the threads: that would hide the very cost the split
exists to move.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from fastprep.batch._device_prefetcher import check_device
from fastprep.batch._slots import ring_slots
from fastprep.core._args import check_int
from fastprep.core._bad_samples import SampleError
from fastprep.io._windowed import WindowedImage
from fastprep.io.jpeg._device_decoders import DecoderChain, choose_decoders
from fastprep.io.jpeg._file import JpegFile
from fastprep.io.jpeg._oriented import OrientedImage
from fastprep.io.jpeg._window_cut import WindowCut
from fastprep.loader._apply import ChunkRunner
from fastprep.loader._device_slots import WindowJob, WindowSlotRing
from fastprep.transforms import FusionPlan

STAGE = "the decode_on split"
PACK = "pack the images (python -m fastprep pack SRC DEST) and read them with fastprep.io.PackedDataset"


def check_decode_on(decode_on: Any, device: torch.device | None, jpeg_decoder: Any = "auto"
                    ) -> tuple[torch.device, DecoderChain]:
    """(`decode_on` as a device where the windows can be decoded: CUDA with nvImageCodec or
    torchvision, or "cpu", the CPU decoder standing in for a device, matching `device` when one
    was given; the JPEG decoder chain for `jpeg_decoder` there)."""
    dev = _resolved(check_device(f"Loader: decode_on={decode_on!r}:", decode_on))
    if dev.type not in ("cuda", "cpu"):
        raise ValueError(f"Loader: decode_on={decode_on!r}: the windows decode on a CUDA device (nvImageCodec or "
                         f"torchvision's nvJPEG) or on 'cpu' (libjpeg-turbo standing in for a device); "
                         f"got {dev.type!r}")
    if device is not None and _resolved(device) != dev:
        raise ValueError(f"Loader: decode_on={decode_on!r} decodes the batches on {dev}, so they are made there; "
                         f"device={str(device)!r} differs: pass device=None or the same device")
    return dev, choose_decoders(jpeg_decoder, dev, f"Loader: decode_on={decode_on!r}")


def check_streams(streams: Any, device: torch.device | None, decode_on: torch.device | None) -> int | None:
    """The device stage's threads (each on its own stream): `streams`, else 4 for the split on CUDA
    and 1 on its CPU stand-in, else None (batches copied in the consumer's thread)."""
    if streams is None:
        return None if decode_on is None else 4 if decode_on.type == "cuda" else 1
    if device is None:
        raise ValueError(f"Loader: streams={streams!r} sets the device stage's threads; pass device= or decode_on= "
                         f"(on the CPU the batches are made by threads=)")
    return check_int("Loader", "streams", streams, 1)


def device_lines(settings: Any, jpeg_decoders: DecoderChain | None, stage: Any) -> list[str]:
    """Loader.describe()'s lines on its device (`stage`: the device stage's StageStats, or None
    before a pass): none without one."""
    if settings.device is None:
        return []
    split = settings.decode_on is not None
    lines = [f"device: {settings.device}" + (", the GPU decode split (decode_on)" if split else
                                             ", batches copied there")]
    if split:
        lines.append(f"JPEG decoders: {jpeg_decoders.describe()}")
    if settings.streams is not None:
        lines.append(f"device stage: {stage.describe()}" if stage is not None else
                     f"device stage: {settings.streams} stream{'s' * (settings.streams != 1)}, no pass yet")
    return lines


def _resolved(dev: torch.device) -> torch.device:
    if dev.type == "cuda" and dev.index is None:
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu") if dev.type == "cpu" else dev


def _pipelines() -> str:
    return "; ".join(f"({k}) {p}" for k, p in enumerate(FusionPlan.split_pipelines(), 1))


def split_problem(plan: FusionPlan | None) -> str | None:
    """Why `plan` cannot run split (None: it can)."""
    if plan is None:
        return f"there is no transform; the split runs one fused op: transform=Compose([...]) of {_pipelines()}"
    group = plan.fused
    if group is not None and group.fusion.split is not None:
        own = [s for s in group.random if s.generator is not None]
        if own:
            return (f"{own[0]!r} has its own generator=; the split draws every sample's parameters from the "
                    f"sample's stream: drop generator=")
        # nvJPEG decodes at full scale only: the device would read other pixels than jpeg_scale='reduced' does
        # in the threads, and decode_on='cpu' would not give the ordinary Loader's bits.
        reduced = [s for s in group.steps if getattr(s, "jpeg_scale", "exact") == "reduced"]
        return None if not reduced else (f"{reduced[0]!r} reads JPEG windows at a reduced DCT scale "
                                         f"(jpeg_scale='reduced'), which the device's decoder does not: pass "
                                         f"jpeg_scale='exact' (the device decodes whole windows fast)")
    if group is not None:
        return f"the transform runs as the fused op {group.fusion.op}, which has no device split ({_pipelines()})"
    fused = [seg for seg in plan.segments if getattr(seg, "fusion", None) is not None]
    outside = [(k, s) for k, s in enumerate(plan.steps) if not any(s in seg.steps for seg in fused)]
    shown = "; ".join(f"step {k}, {s!r}" + ("" if getattr(s, "fusion_role", None) else
                                             " (no part in a fused op: not fastprep's, padded, or other options)")
                      for k, s in outside)
    where = "run outside the fused op" if fused else "make no fused op"
    other = [f"{', '.join(repr(s) for s in seg.steps)} fused as {seg.fusion.op}, which has no device split"
             for seg in fused if seg.fusion.split is None]
    where += "".join(f" ({o})" for o in other)
    return (f"{shown} {where}: they would need the decoded pixels on the CPU; the split runs one fused op: "
            f"{_pipelines()} (expand= makes float images on the device)")


def check_splittable(plan: FusionPlan | None, decode_on: Any) -> None:
    problem = split_problem(plan)
    if problem is not None:
        raise ValueError(f"Loader: decode_on={str(decode_on)!r} cannot split this transform: {problem}; or pass "
                         f"decode_on=None to decode in the threads")


class _CutInsteadOfDecode(WindowedImage):
    """A cuttable image (PackedJpeg, JpegFile) as the fused batch path sees it: the path reads each
    sample's window with ``decode(crop)``, which here returns the window's cut instead of pixels
    (the device decodes it). Only ever handed to FusionPlan's batch path by SplitRunner."""

    __slots__ = ("image",)

    def __init__(self, image: Any):
        self.image = image

    height = property(lambda self: self.image.height)
    width = property(lambda self: self.image.width)
    mode = property(lambda self: self.image.mode)
    layout = property(lambda self: self.image.layout)
    name = property(lambda self: self.image.name)

    def decode(self, crop: tuple[int, int, int, int] | None = None, *, layout: str | None = None,
               out: torch.Tensor | None = None) -> WindowCut:
        return self.image.cut(crop)


class SplitRunner(ChunkRunner):
    """ChunkRunner whose fused path cuts windows instead of decoding them (see the module)."""

    job_type = WindowJob

    def _staged(self, indices: list[int], raws: list[Any], drawn: list[int]) -> list[Any]:
        staged = super()._staged(indices, raws, drawn)
        return [self._cuttable(r, k) if r is raw else r for r, raw, k in zip(staged, raws, indices)]

    def _cuttable(self, raw: Any, index: int) -> Any:
        """The item with its image behind a _CutInsteadOfDecode, or a SampleError naming what to do."""
        seq = isinstance(raw, (tuple, list))
        image = raw[0] if seq and raw else raw
        if not (isinstance(image, WindowedImage) and callable(getattr(image, "cut", None))) or _turned(image):
            raise SampleError(index, STAGE, self.index_kind) from ValueError(_not_cuttable(raw, image))
        if not seq:
            return _CutInsteadOfDecode(image)
        items = [_CutInsteadOfDecode(image), *raw[1:]]
        return type(raw)(*items) if hasattr(raw, "_fields") else type(raw)(items)

    def _write_run(self, job: WindowJob, j: int, index: int, run: Any) -> None:
        job.write_run(j, index, run)

    def _produce(self, raw: Any, index: int, drawn: int, row: list[int]) -> Any:
        """One item the chunk's fused path left (a bad sample's substitute, a run whose op raised, or
        an item the op does not take): the fused path on it alone, its window cut (a run of one)."""
        if drawn:
            why = ("its loading drew seeds from the sample's stream (a fastprep transform inside load_raw), so "
                   "its draws cannot be made ahead for the batch")
        else:
            runs = self.chunk_runs([self._cuttable(raw, index)], np.asarray([row], dtype=np.int64).reshape(1, -1))
            if runs:
                return runs[0]
            self.plan.apply_item(raw)  # the steps' own error (an image smaller than the crop, ...)
            why = "the fused op does not take its image (not RGB, or a structure other than the first sample's)"
        raise SampleError(index, STAGE, self.index_kind) from ValueError(
            f"Loader(decode_on=...): {why}; the split decodes nothing in the threads: pass decode_on=None")

    def _put(self, job: WindowJob, j: int, index: int, run: Any) -> None:
        self._write_run(job, j, index, run)
        job.write_rest(j, [index], run.raws)


def _turned(image: Any) -> bool:
    """An image read upright by its EXIF orientation (an OrientedImage, a JpegFile read with exif=True)."""
    return isinstance(image, OrientedImage) or (isinstance(image, JpegFile) and image.orientation != 1)


def _not_cuttable(raw: Any, image: Any) -> str:
    if isinstance(raw, dict):
        return ("Loader(decode_on=...): the item is a dict; the split takes an image or an (image, label, ...) "
                "tuple whose image cuts JPEG windows")
    if _turned(image):
        named = f" {image.name}" if image.name else ""
        return (f"Loader(decode_on=...): its image ({type(image).__name__}{named}) is stored turned (EXIF "
                f"orientation {image.orientation}) and read upright (exif=True): the split cannot turn windows on the "
                f"device (it decodes each window as stored); read it with decode_on=None, or with exif=False")
    if isinstance(image, WindowedImage):
        return (f"Loader(decode_on=...): its image is {image.describe()}, which has no JPEG to cut; read it with "
                f"decode_on=None (raw pixels need no decoding), or {PACK} (mode 'jpeg', with "
                f"--non-jpeg encode so that PNGs become JPEG records too: lossy)")
    return (f"Loader(decode_on=...): its image is a {type(image).__name__}, not a JPEG that cuts windows (a "
            f"PackedDataset's JPEG record, or an ImageFolder(roi=True) JpegFile, decoded whole on the device); {PACK}")


def split_parts(settings: Any, dataset: Any, plan: FusionPlan | None, iterable: bool,
                jpeg_decoders: DecoderChain, epoch: int, seed: int, hooks: Any = None
                ) -> tuple[WindowSlotRing, SplitRunner]:
    """The slot ring and chunk runner of one pass with decode_on (`settings`: the Loader's
    LoaderSettings; `iterable`: the dataset is read in order), over epoch `epoch` under `seed` (the
    pass's own: fixed when it began)."""
    check_splittable(plan, settings.decode_on)  # again: a transform may have changed since the Loader was made
    # Host batches are small (cuts and host tensors): the device stage's slots cost little.
    ring = WindowSlotRing(ring_slots(settings.depth, settings.streams), settings.batch_size,
                          settings.decode_on.type == "cuda", settings.fields, plan.fused, settings.decode_on,
                          jpeg_decoders)
    runner = SplitRunner(dataset, plan, seed, epoch, settings.deterministic, iterable, settings.on_error, hooks)
    return ring, runner
