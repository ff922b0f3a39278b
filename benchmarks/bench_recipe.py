"""FFCV's recipe against fastprep's, at equal bytes: ImageNet-style training (RandomResizedCrop(224)
+ horizontal flip, uint8 out, batch 64, 2 threads / workers) from two photo sets, each stored

- as fastprep packs: full resolution (JPEGs transcoded losslessly) and ``pack(max_side=256,
  quality=90)``, read exactly and with ``RandomResizedCrop(224, jpeg_scale="reduced")``;
- as FFCV .beton files: ``RGBImageField(write_mode="jpg", max_resolution=256, jpeg_quality=90)``
  (and full resolution), read by ``RandomResizedCropRGBImageDecoder((224, 224))`` + its flip.

Photo sets (scikit-image's photos, fastprep.tools.photos): "imagenet": 256 JPEGs of 400-500 px
(ImageNet's typical sizes, q90 4:2:0); "large": 64 JPEGs of 1024^2 photo mosaics (q90 4:2:0), one
batch an epoch; "large-long": 512 of them, 8 batches an epoch (the Loader's epoch boundary weighs
less: the rate that decoding sets).
Every run is a fresh process (imports, pack or .beton opened, one warm-up epoch, then `epochs`
epochs timed); the best of `--repeats` runs of each row, rows interleaved. It also prints each
form's bytes on disk and, on fixed windows of the large set, the pixel difference from the exact
result (torchvision's resized crop of the full decode) of fastprep's reduced decode and of FFCV's
decode + resize (PSNR, max |diff|).

FFCV lives in its own venv (it needs numba, OpenCV and libturbojpeg; never in the project's):
  apt-get install -y pkg-config libopencv-dev libturbojpeg0-dev
  python3.11 -m venv /tmp/ffcv-venv && /tmp/ffcv-venv/bin/pip install torch==2.13.0 numba opencv-python-headless ffcv
Without it, the FFCV rows say why and fastprep's rows still run.

Run: .venv/bin/python benchmarks/bench_recipe.py [--ffcv-python /tmp/ffcv-venv/bin/python] [--repeats 3]

``--side-by-side`` instead measures exact against ``jpeg_scale="reduced"`` in ONE process (a child),
rounds interleaved (the order alternating round by round), best of ``--rounds``: through the
Loader over the full-resolution pack (2 threads) and through the transform alone (one sample at a
time), on the "imagenet" and "large" sets; with the scales the windows pick and the per-sample
cost of choosing one. Fresh processes per row (the default run) differ from one another by more
than the decode does on photos where few windows are reduced: this is the comparison to quote.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMAGENET_SIZES = [(375, 500), (500, 375), (333, 500), (500, 400), (375, 500), (281, 500), (500, 500), (366, 500)]
SETS = {"imagenet": 256, "large": 64, "large-long": 512}  # photos; large-long: 8 batches an epoch
SAMPLES_TIMED = int(os.environ.get("RECIPE_SAMPLES", 1024))  # per run: epochs of the set until about this many samples


def write_sets(root: str, names: tuple[str, ...] = tuple(SETS)) -> dict[str, str]:
    """The photo folders `names` of SETS (class subfolders of JPEGs) under root."""
    import numpy as np  # noqa: PLC0415
    from PIL import Image  # noqa: PLC0415

    from fastprep.tools.photos import mosaic, write_mosaic_folder  # noqa: PLC0415

    folders = {name: write_mosaic_folder(os.path.join(root, name), SETS[name])
               for name in ("large", "large-long") if name in names}
    if "imagenet" not in names:
        return folders
    base = mosaic(1024)
    folder = os.path.join(root, "imagenet")
    for i in range(SETS["imagenet"]):
        h, w = IMAGENET_SIZES[i % len(IMAGENET_SIZES)]
        sub = os.path.join(folder, f"class_{i % 4}")
        os.makedirs(sub, exist_ok=True)
        picture = Image.fromarray(np.roll(base, (61 * i, 89 * i), axis=(0, 1))).resize((w, h), Image.LANCZOS)
        picture.save(os.path.join(sub, f"{i}.jpg"), quality=90)
    folders["imagenet"] = folder
    return folders


def folder_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(path) for f in fs)


def fastprep_rate(pack: str, jpeg_scale: str, epochs: int) -> float:
    """Samples/s of fastprep.Loader over the pack (a fresh process: this one)."""
    import torch  # noqa: PLC0415

    import fastprep  # noqa: PLC0415
    import fastprep.io as fio  # noqa: PLC0415
    from fastprep import transforms as T  # noqa: PLC0415

    ds = fio.PackedDataset(pack)
    tf = T.Compose([T.RandomResizedCrop(224, jpeg_scale=jpeg_scale), T.RandomHorizontalFlip()])
    loader = fastprep.Loader(ds, 64, transform=tf, shuffle=True, threads=2, seed=0)
    for b in loader:  # warm-up epoch
        assert b.data[0].dtype == torch.uint8 and tuple(b.data[0].shape[1:]) == (3, 224, 224)
    n, start = 0, time.perf_counter()
    for epoch in range(epochs):
        loader.set_epoch(epoch + 1)
        for b in loader:
            n += len(b.data[0])
    return n / (time.perf_counter() - start)


def side_by_side(packs: list[str], rounds: int) -> list[str]:
    """Exact against jpeg_scale="reduced" on each pack, in this process, best of `rounds` and the
    median of the rounds' ratios. The transform alone: each sample is transformed both ways back to
    back (the order alternating sample by sample), from the same seed (the same window and flip),
    so a busy moment of the box weighs on both; in wall time and in this thread's CPU time. Then
    the Loader: each round runs an epoch or more of each, the order alternating round by round."""
    import statistics  # noqa: PLC0415
    from collections import Counter  # noqa: PLC0415

    import torch  # noqa: PLC0415

    import fastprep  # noqa: PLC0415
    import fastprep.io as fio  # noqa: PLC0415
    from fastprep import transforms as T  # noqa: PLC0415
    from fastprep.io.jpeg._scale import reduced_read  # noqa: PLC0415

    lines, ways = [], ("exact", "reduced")
    for pack in packs:
        name, ds = os.path.basename(pack), fio.PackedDataset(pack)
        items = [ds.load_raw(i)[0] for i in range(min(len(ds), 256))]
        rrc = T.RandomResizedCrop(224)
        wins = [(it, rrc.make_params(seed, it.height, it.width)) for seed, it in enumerate(items)]
        picks = Counter(reduced_read(it, w, (224, 224))[0] for it, w in wins)
        choose = min(_timed(lambda ws=wins: [reduced_read(it, w, (224, 224)) for it, w in ws]) for _ in range(7))
        lines.append(f"  {name}: scales picked " + ", ".join(
            f"{m}/8 {100 * n / len(wins):.0f}%" for m, n in sorted(picks.items())) +
            f"; choosing one: {choose / len(wins) * 1e6:.1f} us a sample")
        tfs = {d: T.Compose([T.RandomResizedCrop(224, jpeg_scale=d), T.RandomHorizontalFlip()]) for d in ways}
        epochs = max(1, 512 // len(ds))
        per_round = {("Loader", d): [] for d in ways} | {(clock, d): [] for clock in ("wall", "cpu") for d in ways}
        for r in range(-1, rounds):  # round -1: warm-up. First the transform alone, no Loader threads about
            spent = {(clock, d): 0.0 for clock in ("wall", "cpu") for d in ways}
            for k, it in enumerate(items):
                for d in ways if (k + r) % 2 else ways[::-1]:
                    torch.manual_seed(1000 * r + k)
                    wall, cpu = time.perf_counter(), time.thread_time()
                    tfs[d](it)
                    spent["cpu", d] += time.thread_time() - cpu
                    spent["wall", d] += time.perf_counter() - wall
            for key, seconds in spent.items():
                per_round[key].append(len(items) / seconds)
        loaders = {d: fastprep.Loader(ds, 64, transform=tfs[d], shuffle=True, threads=2, seed=0) for d in ways}
        for r in range(-1, rounds):
            for d in ways if r % 2 else ways[::-1]:
                start = time.perf_counter()
                n = sum(len(b.data[0]) for _ in range(epochs) for b in loaders[d])
                per_round["Loader", d].append(n / (time.perf_counter() - start))
        for what in ("Loader", "wall", "cpu"):
            e, red = (per_round[what, d][1:] for d in ways)
            label = "Loader (2 threads)" if what == "Loader" else f"transform, {what} time"
            lines.append(f"  {name} {label:22s} exact {max(e):6.0f} samples/s, reduced {max(red):6.0f}: reduced / "
                         f"exact {max(red) / max(e):.2f}x best, {statistics.median(b / a for a, b in zip(e, red)):.2f}x "
                         f"median of the rounds (range {min(b / a for a, b in zip(e, red)):.2f}-"
                         f"{max(b / a for a, b in zip(e, red)):.2f})")
    return lines


def ffcv_rate(beton: str, epochs: int) -> float:
    """Samples/s of FFCV's Loader over the .beton (a fresh process under the FFCV venv's Python)."""
    import numpy as np  # noqa: PLC0415
    from ffcv.fields.basics import IntDecoder  # noqa: PLC0415
    from ffcv.fields.decoders import RandomResizedCropRGBImageDecoder  # noqa: PLC0415
    from ffcv.loader import Loader, OrderOption  # noqa: PLC0415
    from ffcv.transforms import RandomHorizontalFlip  # noqa: PLC0415

    loader = Loader(beton, batch_size=64, num_workers=2, order=OrderOption.RANDOM, seed=0, drop_last=False,
                    os_cache=True, pipelines={"image": [RandomResizedCropRGBImageDecoder((224, 224)),
                                                        RandomHorizontalFlip()], "label": [IntDecoder()]})
    for images, _ in loader:  # warm-up epoch (numba compiles here)
        assert images.dtype == np.uint8 and images.shape[1:] == (224, 224, 3)
    n, start = 0, time.perf_counter()
    for _ in range(epochs):
        for images, _ in loader:
            n += len(images)
    return n / (time.perf_counter() - start)


def write_beton(folder: str, dest: str, max_resolution: int | None) -> None:
    """The folder as an FFCV .beton of JPEGs (FFCV's writer; runs under the FFCV venv)."""
    import numpy as np  # noqa: PLC0415
    from ffcv.fields import IntField, RGBImageField  # noqa: PLC0415
    from ffcv.writer import DatasetWriter  # noqa: PLC0415
    from PIL import Image  # noqa: PLC0415

    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs)

    class Files:
        def __len__(self):
            return len(files)

        def __getitem__(self, i):
            with Image.open(files[i]) as im:
                return np.asarray(im.convert("RGB")), i % 4

    field = RGBImageField(write_mode="jpg", max_resolution=max_resolution, jpeg_quality=90)
    DatasetWriter(dest, {"image": field, "label": IntField()}, num_workers=2).from_indexed_dataset(Files())


def beton_payload(beton: str) -> int:
    """Bytes of the samples' data in a .beton (its JPEGs), without the file's page padding."""
    from ffcv.reader import Reader  # noqa: PLC0415

    return int(Reader(beton).alloc_table["size"].sum())


def psnr_table(folder: str, ffcv: bool) -> dict:
    """PSNR and max |diff| against the exact result on the large set's photos, 6 windows each:
    fastprep's reduced decode, and (under the FFCV venv) FFCV's decode + resize_crop of the window."""
    import numpy as np  # noqa: PLC0415
    import torch  # noqa: PLC0415

    import fastprep.io as fio  # noqa: PLC0415
    from fastprep.io.jpeg._scale import reduced_crop  # noqa: PLC0415
    from fastprep.ops._resize import resized_crop  # noqa: PLC0415

    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs)[:16]
    rng = np.random.default_rng(0)
    errs: dict[str, list] = {"fastprep reduced": [], "exact, snapped window": [], "FFCV": []}
    for path in files:
        data = open(path, "rb").read()
        full = fio.decode_jpeg(data, layout="HWC")
        for _ in range(6):
            side = int(rng.integers(300, 1024))
            t, left = (int(v) for v in rng.integers(0, 1024 - side + 1, 2))
            exact = resized_crop(full, t, left, side, side, 224, 224, "HWC").permute(1, 2, 0)
            m, crop = reduced_crop((t, left, side, side), 1024, 1024, (224, 224))
            region = fio.decode_jpeg(data, crop=crop, scale=m, layout="HWC")
            got = {"fastprep reduced": resized_crop(region, 0, 0, *region.shape[:2], 224, 224, "HWC").permute(1, 2, 0)}
            k = 8 // m  # the snapped window in the image's pixels, decoded exactly: the geometry's share
            snapped = (crop[0] * k, crop[1] * k, min(crop[2] * k, 1024 - crop[0] * k), min(crop[3] * k, 1024 - crop[1] * k))
            got["exact, snapped window"] = resized_crop(full, *snapped, 224, 224, "HWC").permute(1, 2, 0)
            if ffcv:
                from ffcv.libffcv import resize_crop  # noqa: PLC0415

                out = np.empty((224, 224, 3), np.uint8)
                resize_crop(full.numpy(), t, t + side, left, left + side, out)  # FFCV: full decode, cv2 INTER_AREA
                got["FFCV"] = torch.from_numpy(out)
            pairs = [(k, v, exact) for k, v in got.items()]
            pairs.append(("reduced vs exact, both of the snapped window", got["fastprep reduced"],
                          got["exact, snapped window"]))  # the scaled inverse DCT's own share
            for k, v, ref in pairs:
                d = v.double() - ref.double()
                errs.setdefault(k, []).append((d.pow(2).mean().item(), d.abs().max().item()))
    return {k: {"psnr_db": 10 * np.log10(255 ** 2 / np.mean([e[0] for e in v])), "max_abs": max(e[1] for e in v)}
            for k, v in errs.items() if v}


def floor_table(folder: str) -> list[str]:
    """The floor of a reduced decode, one thread: a 700^2 window of each packed 1024^2 photo decoded
    at M/8 (exact: 8/8) and resized to 224^2, best of 7 passes over 16 photos, ms a window; and the
    scales RandomResizedCrop(224) draws pick on 1024^2 photos."""
    from collections import Counter  # noqa: PLC0415

    import torch  # noqa: PLC0415

    import fastprep.io as fio  # noqa: PLC0415
    from fastprep import transforms as T  # noqa: PLC0415
    from fastprep.io.jpeg._scale import reduced_crop, scaled_crop  # noqa: PLC0415
    from fastprep.ops._resize import resized_crop  # noqa: PLC0415

    torch.set_num_threads(1)
    dest = tempfile.mkdtemp(prefix="fastprep-floor-")
    fio.pack(folder, dest, progress=False)
    ds = fio.PackedDataset(dest, layout="HWC")
    items = [ds.load_raw(i)[0] for i in range(min(16, len(ds)))]
    lines, base = [], None
    for m in (8, 4, 2, 1, 3, 6):
        crop = scaled_crop((150, 170, 700, 700), 1024, 1024, m)
        regions = [it.decode(crop, scale=m) for it in items]
        timing = {}
        jobs = {"decode": lambda m=m, crop=crop: [it.decode(crop, scale=m) for it in items],
                "resize": lambda rs=regions: [resized_crop(r, 0, 0, *r.shape[:2], 224, 224, "HWC") for r in rs]}
        for what, fn in jobs.items():
            timing[what] = min(_timed(fn) for _ in range(7)) / len(items) * 1e3
        total = timing["decode"] + timing["resize"] * (crop[2] >= 224)
        base = base or total
        lines.append(f"  {m}/8: window {crop[2]}x{crop[3]}, decode {timing['decode']:.3f} ms, resize to 224 "
                     f"{timing['resize']:.3f} ms" + (f", together {total:.3f} ms ({base / total:.2f}x exact)"
                                                      if crop[2] >= 224 else " (smaller than 224: not chosen)"))
    rrc = T.RandomResizedCrop(224)
    picks = Counter(reduced_crop(rrc.make_params(seed, 1024, 1024), 1024, 1024, (224, 224))[0] for seed in range(4000))
    lines.append("  scales RandomResizedCrop(224) picks on 1024^2: " +
                 ", ".join(f"{m}/8 {100 * n / 4000:.0f}%" for m, n in sorted(picks.items())))
    return lines


def _timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def print_side_by_side(rounds: int) -> None:
    """--side-by-side: the two sets' full-resolution packs, measured by one child process."""
    import fastprep.io as fio  # noqa: PLC0415

    tmp = tempfile.mkdtemp(prefix="fastprep-recipe-")
    folders = write_sets(tmp, ("imagenet", "large"))
    packs = [os.path.join(tmp, f"{name}-pack-full") for name in folders]
    for folder, dest in zip(folders.values(), packs):
        fio.pack(folder, dest, progress=False)
    print(f"machine: {os.cpu_count()} CPUs; RandomResizedCrop(224) + flip, uint8; Loader: batch 64, 2 threads; "
          f"best of {rounds} interleaved rounds, one process")
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "pyext") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", "side-by-side", str(rounds), *packs],
                         capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode:
        raise RuntimeError(out.stderr[-1500:])
    print(out.stdout.rstrip())


def child(python: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.path.join(ROOT, "pyext") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    out = subprocess.run([python, os.path.abspath(__file__), *args], capture_output=True, text=True, env=env,
                         timeout=900)
    if out.returncode:
        raise RuntimeError(out.stderr[-1500:])
    return out.stdout.strip().splitlines()[-1]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--ffcv-python", default="/tmp/ffcv-venv/bin/python", help="a Python where `import ffcv` works")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sets", default="imagenet,large,large-long")
    p.add_argument("--side-by-side", action="store_true", help="exact vs reduced in one process (docstring)")
    p.add_argument("--rounds", type=int, default=9, help="--side-by-side: interleaved rounds, best of them")
    p.add_argument("--worker", nargs="*", help=argparse.SUPPRESS)  # a child's job
    a = p.parse_args()
    if a.worker:
        job, *rest = a.worker
        if job == "fastprep":
            print(fastprep_rate(rest[0], rest[1], int(rest[2])))
        elif job == "ffcv":
            print(ffcv_rate(rest[0], int(rest[1])))
        elif job == "beton":
            write_beton(rest[0], rest[1], None if rest[2] == "none" else int(rest[2]))
            print(beton_payload(rest[1]))
        elif job == "floor":
            print("\n".join(floor_table(rest[0])))
        elif job == "side-by-side":
            print("\n".join(side_by_side(rest[1:], int(rest[0]))))
        elif job == "psnr":
            print(json.dumps(psnr_table(rest[0], rest[1] == "ffcv")))
        return

    if a.side_by_side:
        return print_side_by_side(a.rounds)
    import fastprep.io as fio  # noqa: PLC0415

    ffcv_python, why = a.ffcv_python, None
    probe = subprocess.run([ffcv_python, "-c", "import ffcv"], capture_output=True, text=True) \
        if os.path.exists(ffcv_python) else None
    if probe is None or probe.returncode:
        why = f"FFCV not measured: {ffcv_python} " + ("does not exist" if probe is None else
                                                      f"cannot import ffcv ({probe.stderr.strip()[-200:]})")
        print(why)
    tmp = tempfile.mkdtemp(prefix="fastprep-recipe-")
    folders = write_sets(tmp)
    print(f"machine: {os.cpu_count()} CPUs; batch 64, 2 threads / workers, RandomResizedCrop(224) + flip, uint8")
    for name in a.sets.split(","):
        folder, epochs = folders[name], max(1, SAMPLES_TIMED // SETS[name])
        rows = {}  # row -> (command args, python)
        sizes = {"folder (JPEG files)": folder_bytes(folder)}
        for side in (None, 256):
            dest = os.path.join(tmp, f"{name}-pack-{side or 'full'}")
            fio.pack(folder, dest, max_side=side, quality=90, progress=False)
            sizes[f"fastprep pack(max_side={side})"] = folder_bytes(dest)
            for jpeg_scale in ("exact", "reduced"):
                rows[f"fastprep pack(max_side={side}) {jpeg_scale}"] = (["fastprep", dest, jpeg_scale, str(epochs)], sys.executable)
            if why is None and side is not None:  # FFCV's recipe shrinks (its full-resolution rows: README)
                beton = os.path.join(tmp, f"{name}-{side or 'full'}.beton")
                payload = int(child(ffcv_python, "--worker", "beton", folder, beton, str(side or "none")))
                sizes[f"FFCV max_resolution={side}: its JPEGs"] = payload
                sizes[f"FFCV max_resolution={side}: the file"] = os.path.getsize(beton)  # page-padded
                rows[f"FFCV max_resolution={side}"] = (["ffcv", beton, str(epochs)], ffcv_python)
        best = {row: 0.0 for row in rows}
        for _ in range(a.repeats):  # interleaved: each repeat runs every row once
            for row, (args, python) in rows.items():
                best[row] = max(best[row], float(child(python, "--worker", *args)))
        print(f"\n{name}: {SETS[name]} photos, {epochs} epochs timed a run, best of {a.repeats} fresh processes")
        for row, rate in best.items():
            print(f"  {row:42s} {rate:9.0f} samples/s")
        for side in (256,):
            if why is None:
                ffcv = best[f"FFCV max_resolution={side}"]
                for d in ("exact", "reduced"):
                    print(f"  ratio fastprep {d} / FFCV at max side {side}: "
                          f"{best[f'fastprep pack(max_side={side}) {d}'] / ffcv:.2f}x")
        print(f"  reduced / exact, full resolution: {best['fastprep pack(max_side=None) reduced'] / best['fastprep pack(max_side=None) exact']:.2f}x")
        for form, n in sizes.items():
            print(f"  bytes: {form:40s} {n:12,d} ({100 * (n / sizes['folder (JPEG files)'] - 1):+.1f}% of the folder)")
    quality = child(ffcv_python if why is None else sys.executable, "--worker", "psnr", folders["large"],
                    "ffcv" if why is None else "none")
    print("\npixel difference from the exact result (large set, 96 windows of 300-1023 px to 224):")
    for k, v in json.loads(quality).items():
        print(f"  {k:46s} PSNR {v['psnr_db']:.1f} dB, max |diff| {v['max_abs']:.0f}")


if __name__ == "__main__":
    main()
