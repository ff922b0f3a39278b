"""The remedies for a slow input pipeline, keyed by what the pipeline is (PipelineFacts): each names
the stage it speeds up, when it applies, and when it is taken already. ``fastprep.monitor`` and
``python -m fastprep diagnose`` both advise from this one table: what applies and is not taken is
suggested, what is taken is said to be in place. The rows' words, and those of each stage's advice
(`stage_advice`, diagnose's verdict), come from the advice catalogue (fastprep.monitoring._advice).

=============  ======================================  =========================================
remedy         applies to                              taken when
=============  ======================================  =========================================
reader         Pillow-decoded files                    (fastprep reads them)
rrc-reduced    RandomResizedCrop on JPEG sources       RandomResizedCrop(jpeg_scale="reduced")
roi            RandomCrop pipelines on files           ImageFolder(roi=True) + fastprep's crop
pack           files, WebDataset / LMDB / HDF5, packs  the source is a pack
shrink         RandomResizedCrop on a pack             pack(max_side=...) (FFCV's recipe)
raw-mode       packs of JPEG records (not ImageNet)    pack(mode="raw")
gpu-split      JPEG packs, steps on a GPU, a transform  Loader(decode_on="cuda")
               the split runs (not exif=True)
remote         a pack at a URL                         (advice on its cache)
verify         packs                                   PackedDataset(verify=False)
storage        raw packs                               (nothing is decoded: storage is left)
decode-less    other datasets                          (general)
rrc-port       RandomResizedCrop                       fastprep's, fused into resized_crop
resize-port    Resize / CenterCrop                     fastprep's, fused into resized_crop
seed-compose   RandomCrop + RandomDilatedMask / YCbCr  fused into crop_mask_ycbcr
port           other steps                             every step fastprep's
loader         a DataLoader                            a fastprep.Loader
compact        a DataLoader                            compact batches (CompactCollate)
uint8-device   steps on a GPU                          a fastprep.Loader with its device set
=============  ======================================  =========================================
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from dataclasses import dataclass

import fastprep.monitoring._advice as say
from fastprep.monitoring._advice import COLLATE, RAW, TRANSFORMS, more_threads
from fastprep.monitoring._pipeline import FILES, PACKS, PipelineFacts

__all__ = ["COLLATE", "RAW", "TRANSFORMS", "TABLE", "Remedy", "gpu_split", "more_threads", "plan", "remedies",
           "stage_advice"]
PACKING = ("a few large shard files instead of one small file per sample, and a crop window decodes from only "
           "the restart intervals that cover it (docs/real-files.md)")
REDUCED = 'jpeg_scale="reduced"'
JPEG_SOURCES = ("pil-files", "files", "jpeg-files", "packed-jpeg", "remote-pack")


@dataclass(frozen=True)
class Remedy:
    """One row of the table: `text(facts)` says what to do, `done(facts)` that it is in place."""
    key: str
    stage: str
    applies: Callable[[PipelineFacts], bool]
    taken: Callable[[PipelineFacts], bool]
    text: Callable[[PipelineFacts], str]
    done: Callable[[PipelineFacts], str] = lambda f: ""


def _root(f: PipelineFacts) -> str:
    return repr(f.root) if f.root and f.source in FILES else "root"


def _pack_cmd(f: PipelineFacts, extra: str = "") -> str:
    src = os.path.normpath(f.root) if f.root and f.source in FILES else "ROOT"
    dest = src + ".packed" if src != "ROOT" else "DEST"
    return f"`python -m fastprep pack {src} {dest}{extra}` and read it with fastprep.io.PackedDataset({dest!r})"


def _pack(f: PipelineFacts) -> str:
    if f.kind == "resized-crop":
        return (f"pack them, FFCV's recipe for RandomResizedCrop(224): {_pack_cmd(f, ' --max-side 256')} (each "
                f"image shrunk once to a longer side of 256 and stored as restart-indexed JPEG: a 224 crop needs "
                f"nothing finer and decoding costs what is stored, about a tenth of 1024^2 originals; lossy: validate "
                f"on the originals), or losslessly without --max-side, with jpeg_scale=\"reduced\" "
                f"(docs/performance.md, Recipe)")
    if f.source == "windowed":
        return f"pack the dataset, fastprep.io.pack(dataset, dest) (it reads {f.dataset or 'it'} too): {PACKING}"
    return f"pack the files, {_pack_cmd(f)}: {PACKING}"


def gpu_split() -> str:
    """The GPU decode split, as this version offers it."""
    from fastprep.loader import Loader  # noqa: PLC0415 (the Loader pulls in the slots machinery)

    if "decode_on" in inspect.signature(Loader).parameters:
        return ('decode on the GPU: fastprep.Loader(..., decode_on="cuda") leaves the loader threads only the '
                "byte copies of each window's restart intervals, and nvJPEG decodes the batch")
    return ("decode on the GPU: cut each window's restart intervals in the loader threads (PackedJpeg.cut / "
            'PackedDataset.cut_window: byte copies, no entropy decoding) and decode the batch of cuts with '
            'fastprep.io.decode_window_batch(cuts, device="cuda") (nvJPEG)')


def _call(f: PipelineFacts, name: str, extra: str = "") -> str:
    """`name`(its size as the pipeline's step of that name has it[, extra]): the user's own numbers."""
    step = f.step(name)
    size = "size" if step is None or step.size is None else repr(step.size)
    return f"{name}({size}{', ' + extra if extra else ''})"


def _crop_first(f: PipelineFacts) -> str:
    return "" if f.crops_by_window else (" with fastprep's RandomCrop as the first step (a crop that is not "
                                         "fastprep's decodes the whole file first)")


TABLE: tuple[Remedy, ...] = (
    Remedy("reader", RAW, lambda f: f.source == "pil-files", lambda f: False,
           lambda f: f"read the files with fastprep.io.ImageFolder({_root(f)}"
                     f"{', roi=True' if f.kind in ('resized-crop', 'seed', 'crop', 'resize') else ''}) in a "
                     f"fastprep.Loader (libjpeg-turbo in its threads, without the GIL) with fastprep's port of "
                     f"your steps"),
    Remedy("rrc-reduced", RAW, lambda f: f.kind in ("resized-crop", "resize") and f.source in JPEG_SOURCES,
           lambda f: f.reduced_decode,
           lambda f: f"{_call(f, 'RandomResizedCrop' if f.kind == 'resized-crop' else 'Resize', REDUCED)}: "
                     f"the window decoded at 1/8, 2/8 or 4/8 scale where that still covers the output (1.4-1.6x the "
                     f"exact rate on 1024^2 photos; not torchvision's bits, docs/resize.md)"
                     + ("; it reads JPEG windows: a pack or fastprep.io.ImageFolder(root, roi=True)"
                        if f.source in ("pil-files", "files") else ""),
           lambda f: 'jpeg_scale="reduced" (JPEG windows decoded at a reduced scale)'),
    Remedy("roi", RAW, lambda f: f.kind in ("seed", "crop") and f.source in FILES,
           lambda f: f.source == "jpeg-files" and f.crops_by_window,
           lambda f: f"pass roi=True to {f.dataset if f.source == 'files' else 'fastprep.io.ImageFolder'}"
                     f"{_crop_first(f)}, so that only the crop's window is decoded",
           lambda f: "roi=True: fastprep's crop decodes only its window of each file"),
    Remedy("pack", RAW, lambda f: f.source in FILES + PACKS + ("windowed",), lambda f: f.source in PACKS,
           _pack, lambda f: "packed shards (a few large files" + (
               ")" if f.source == "packed-raw" else ", windows decoded from their restart intervals)")),
    Remedy("shrink", RAW, lambda f: f.kind == "resized-crop" and f.source in ("packed-jpeg", "remote-pack"),
           lambda f: bool(f.pack.get("max_side")),
           lambda f: "re-pack a shrunk copy, FFCV's recipe: fastprep.io.pack(folder, dest, max_side=256, quality=90) "
                     "(lossy: validate on the originals; docs/performance.md, Recipe)",
           lambda f: f"the pack is shrunk (max_side={f.pack.get('max_side')})"),
    Remedy("raw-mode", RAW, lambda f: f.source in ("packed-jpeg", "packed-raw") and f.kind != "resized-crop",
           lambda f: f.source == "packed-raw",
           lambda f: "pack with `--mode raw` (uint8 pixels through a memory map: no decode at all, larger shards)",
           lambda f: "raw shards: nothing is decoded"),
    Remedy("gpu-split", RAW, lambda f: f.source in ("packed-jpeg", "remote-pack") and f.device != "cpu"
           and (f.split_refused is None or f.decode_on is not None),
           lambda f: f.decode_on is not None, lambda f: gpu_split(),
           lambda f: f"the GPU decode split (decode_on={f.decode_on!r})"),
    Remedy("remote", RAW, lambda f: f.source == "remote-pack", lambda f: False,
           lambda f: "keep the shards near: a cache_dir on local disk with cache_limit of at least three shards (the "
                     "whole pack if it fits), shuffle=\"shards\" so that an epoch reads the cached shards in turn, and "
                     "prefetch (docs/remote.md)"),
    Remedy("verify", RAW, lambda f: f.source in PACKS, lambda f: f.verify is False,
           lambda f: "PackedDataset(..., verify=False) skips the CRC pass over each record",
           lambda f: "verify=False"),
    Remedy("storage", RAW, lambda f: f.source == "packed-raw", lambda f: False,
           lambda f: "nothing is decoded any more: raw loading is reading the memory-mapped shards; faster storage "
                     "or enough RAM for the page cache to hold them"),
    Remedy("decode-less", RAW, lambda f: f.source in ("other", "tensors"), lambda f: False,
           lambda f: "nothing is decoded here: raw loading is the dataset's own __getitem__ (indexing, copies, "
                     "conversions): make it cheaper or cache what it makes" if f.source == "tensors" else
                     f"{say.DECODE_LESS}; image files read by fastprep.io (ImageFolder, PackedDataset) decode in the "
                     "Loader's threads"),
    Remedy("rrc-port", TRANSFORMS, lambda f: f.kind == "resized-crop",
           lambda f: "resized_crop" in f.fused,
           lambda f: f"fastprep's port of your steps: fastprep.transforms.Compose([{_call(f, 'RandomResizedCrop')}, "
                     "RandomHorizontalFlip(), ToDtype(torch.float32, scale=True), Normalize(mean, std)]) runs as one "
                     "resized_crop op (torchvision's bits), reading only the window",
           lambda f: "RandomResizedCrop and what follows it run as one resized_crop op"),
    Remedy("resize-port", TRANSFORMS, lambda f: f.kind == "resize", lambda f: "resized_crop" in f.fused,
           lambda f: "fastprep's Resize + CenterCrop (+ ToDtype, Normalize) in a fastprep.transforms.Compose: one "
                     "resized_crop op computing only the kept outputs",
           lambda f: "Resize / CenterCrop run as one resized_crop op"),
    Remedy("seed-compose", TRANSFORMS, lambda f: f.kind == "seed", lambda f: "crop_mask_ycbcr" in f.fused,
           lambda f: "fastprep's fused transforms: a fastprep.transforms.Compose of RandomCrop, flips, "
                     "RandomDilatedMask, RGBToYCbCr runs as one crop_mask_ycbcr op on the crop's window",
           lambda f: "RandomCrop -> RandomDilatedMask -> RGBToYCbCr run as one crop_mask_ycbcr op"),
    Remedy("port", TRANSFORMS, lambda f: f.kind in ("crop", "other"), lambda f: f.fastprep_steps,
           lambda f: say.PORT,
           lambda f: "the steps are fastprep's"),
    Remedy("loader", COLLATE, lambda f: f.loader != "other", lambda f: f.loader == "fastprep",
           lambda f: say.LOADER, lambda f: say.LOADER_DONE),
    Remedy("compact", COLLATE, lambda f: f.loader == "dataloader", lambda f: f.compact,
           lambda f: say.COMPACT, lambda f: "compact batches"),
    Remedy("uint8-device", COLLATE, lambda f: f.device != "cpu", lambda f: f.loader_device is not None,
           lambda f: say.UINT8_DEVICE, lambda f: f"uint8 batches copied to {f.loader_device} and converted there"),
)


def plan(facts: PipelineFacts, stages: tuple[str, ...] = (RAW, TRANSFORMS)) -> list[tuple[Remedy, bool]]:
    """(remedy, taken) for every row of the table that applies to `facts` in `stages`, in order."""
    return [(r, r.taken(facts)) for r in TABLE if r.stage in stages and r.applies(facts)]


def remedies(facts: PipelineFacts, stages: tuple[str, ...] = (RAW, TRANSFORMS)) -> tuple[list[str], list[str]]:
    """(what to do, what is in place) for `stages`, in the table's order (most effective first)."""
    todo, in_place = [], []
    for r, taken in plan(facts, stages):
        if not taken:
            todo.append(r.text(facts))
        elif r.done(facts):
            in_place.append(r.done(facts))
    return todo, in_place


def stage_advice(facts: PipelineFacts, stage: str) -> str | None:
    """The verdict's advice for `stage` made for `facts`' pipeline: the remedies not taken (most
    effective first), those in place, and more threads where cores are free; None where the pipeline
    tells nothing more than the stage's general advice (fastprep.monitoring._advice.GENERAL)."""
    todo, done = remedies(facts, (stage,))
    if stage == RAW:
        text = say.stage_text(RAW, "; then ".join(todo) if todo else "every remedy for it here is in place")
        tail = f"Where cores are free: {more_threads(facts)}."
    elif stage == TRANSFORMS and facts.steps:
        text = (say.stage_text(TRANSFORMS, "; ".join(todo)) if todo else
                f"{say.STAGES[TRANSFORMS].bottleneck}, and they are fastprep's already.")
        tail = f"Then {more_threads(facts)}, or {say.GPU_MOVE}."
    elif stage == COLLATE and facts.loader == "fastprep":
        return say.LOADER_COLLATE.format(workers=facts.workers)
    elif stage == COLLATE and facts.loader == "dataloader":
        text = say.stage_text(COLLATE, "; ".join([*todo, say.PERSISTENT, more_threads(facts)]))
        tail = ""
    else:
        return None
    return " ".join(filter(None, [text, _capital(say.in_place(done)), tail]))


def _capital(text: str) -> str:
    return text[:1].upper() + text[1:]
