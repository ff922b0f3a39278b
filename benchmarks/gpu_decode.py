"""gpu_check.sh stage: the device JPEG decoders on window cuts against the CPU's decode of the same windows.

The cuts are what the split's threads make (PackedJpeg.cut: the restart intervals covering a
window, byte copies) from the packed photos, for two kinds of window: the seed pipeline's crop
(crop^2 at a random place) and RandomResizedCrop's (scale 0.08-1 of the area, aspect 3/4-4/3, as
torchvision draws them). Per kind: each device decoder (``jpeg_decoder`` "torchvision": nvJPEG;
"nvimagecodec": the JPEG engines where the device has them, else nvImageCodec's nvJPEG; the row
names the decoders that ran and what they passed on) decoding the cuts in batches (fastprep.io.
decode_window_batch on CUDA), libjpeg-turbo decoding them one after another on one core (the same
function on "cpu"), and how far each decoder's pixels are from libjpeg-turbo's (max and mean
absolute difference over the first 16 windows: their IDCTs differ). A dry run times nvImageCodec's
CPU backend where it is installed. Run by gpu_check.sh; alone:
``GPU_CHECK_DIR=/tmp/x python benchmarks/gpu_decode.py``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np
import torch
from gpu_common import Stage, device, no_device, photos, sizes, sync

import fastprep.io as fio
from fastprep.io.jpeg._device_decoders import choose_decoders, nvimagecodec_module

DECODERS = ("torchvision", "nvimagecodec")


def seed_window(rng: np.random.Generator, height: int, width: int) -> tuple[int, int, int, int]:
    c = min(sizes().crop, height, width)
    return int(rng.integers(height - c + 1)), int(rng.integers(width - c + 1)), c, c


def resized_crop_window(rng: np.random.Generator, height: int, width: int) -> tuple[int, int, int, int]:
    """A RandomResizedCrop window (scale (0.08, 1), ratio (3/4, 4/3)), drawn as torchvision draws it."""
    for _ in range(10):
        area = height * width * rng.uniform(0.08, 1.0)
        ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        w, h = round(math.sqrt(area * ratio)), round(math.sqrt(area / ratio))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(height - h + 1)), int(rng.integers(width - w + 1)), h, w
    return 0, 0, height, width


WINDOWS: dict[str, Callable] = {"crop": seed_window, "RandomResizedCrop": resized_crop_window}


def cuts(packed, draw: Callable, n: int, seed: int) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        item = packed.load_raw(int(rng.integers(len(packed))))[0]
        out.append(item.cut(draw(rng, item.height, item.width)))
    return out


def per_second(fn: Callable[[], None], count: int, seconds: float) -> float:
    """`count` per call of `fn` / its time, over as many calls as fit `seconds` (at least 2, after one)."""
    fn()
    sync()
    calls, t0 = 0, time.perf_counter()
    while calls < 2 or time.perf_counter() - t0 < seconds:
        fn()
        calls += 1
    sync()
    return calls * count / (time.perf_counter() - t0)


def decoder_missing(choice: str, dev: torch.device) -> str | None:
    """Why the `choice` decoder's rows cannot run here (None: they can)."""
    if choice == "nvimagecodec":
        return None if nvimagecodec_module() is not None else "nvImageCodec is not installed (carry its wheels in .whl/: gpu_check.sh installs them)"
    return None if dev.type == "cuda" else "dry run: torchvision's nvJPEG needs a CUDA device"


def main() -> None:
    s = sizes()
    stage = Stage("decode", what=f"window cuts of {s.files} packed {s.side}^2 q90 4:2:0 photos, device decoder "
                                 f"batches of {s.cuts} against libjpeg-turbo on one core")
    packed = photos()
    dev = device()
    for seed, (kind, draw) in enumerate(WINDOWS.items()):
        batch = cuts(packed, draw, s.cuts, seed)
        kb = float(np.mean([len(c.data) for c in batch])) / 1e3
        px = float(np.mean([c.height * c.width for c in batch]))
        info = {"window": kind, "mean_cut_kB": round(kb, 1), "mean_window_px": round(px)}
        few = batch[:min(64, len(batch))]
        cpu = stage.row(f"{kind} windows, libjpeg-turbo 1 core", lambda few=few: {
            "samples_per_s": per_second(lambda: fio.decode_window_batch(few, device="cpu"), len(few), s.seconds / 2)},
            **info)

        for choice in DECODERS:
            def on_device(batch=batch, cpu=cpu, choice=choice) -> dict:
                chain = choose_decoders(choice, dev, "gpu_decode")
                rate = per_second(lambda: fio.decode_window_batch(batch, device=dev, jpeg_decoder=chain), len(batch),
                                  s.seconds / 2)
                got = fio.decode_window_batch(batch[:16], device=dev, jpeg_decoder=chain)
                want = fio.decode_window_batch(batch[:16], device="cpu")
                diff = [(g.cpu().int() - w.int()).abs() for g, w in zip(got, want, strict=True)]
                row = {"samples_per_s": rate, "max_abs_diff_vs_cpu": int(max(d.max() for d in diff)),
                       "mean_abs_diff_vs_cpu": round(float(torch.cat([d.flatten() for d in diff]).float().mean()), 3),
                       "decoders": chain.describe()}
                if cpu.get("samples_per_s"):
                    row.update(ratio=rate / cpu["samples_per_s"], ratio_of="one CPU core")
                return row

            skip = no_device() or decoder_missing(choice, dev)
            stage.row(f"{kind} windows, jpeg_decoder={choice!r} batch {s.cuts}", on_device, skip=skip,
                      jpeg_decoder=choice, **info)


if __name__ == "__main__":
    main()
