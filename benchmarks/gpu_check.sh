#!/usr/bin/env bash
# On a machine with a CUDA GPU and torch installed (the device tool's, say): build fastprep against
# that torch, run the CUDA tests and the whole suite on the native backend, time the GPU form of
# the mask + colour steps and the GPU decode split (Loader(decode_on="cuda"): nvJPEG on window
# cuts; needs torchvision built for that torch), and print a summary. From the repository root:
#   bash benchmarks/gpu_check.sh [--json OUT]
set -uo pipefail
cd "$(dirname "$0")/.."
py=${PYTHON:-python3}
log=$(mktemp -d)
"$py" -m pip install -q scikit-build-core pybind11 numpy numba pytest hypothesis scipy pillow >"$log/deps" 2>&1
"$py" -m pip install -q --no-build-isolation --no-deps . >"$log/build" 2>&1 || { tail -40 "$log/build"; exit 1; }
"$py" - <<'PY'
import torch, fastprep
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, device {torch.cuda.get_device_name() if torch.cuda.is_available() else 'none'}")
print("fastprep build:", {k: v for k, v in fastprep.build_info().items() if k in ("torch_version", "isa_selected")})
PY
cd tests || exit 1  # import the installed build, not the source tree
FASTPREP_BACKEND=native "$py" -m pytest -q -p no:cacheprovider -c ../pyproject.toml --rootdir .. test_cuda.py 2>&1 | tail -3
cuda_rc=${PIPESTATUS[0]}
FASTPREP_BACKEND=native "$py" -m pytest -q -p no:cacheprovider -c ../pyproject.toml --rootdir .. -m "not slow" . 2>&1 | tail -3
suite_rc=${PIPESTATUS[0]}
cd ..
"$py" - <<'PY'
import time, torch, fastprep
if torch.cuda.is_available():
    n, h = 256, 256
    imgs = torch.randint(0, 256, (n, 3, h, h), dtype=torch.uint8)
    masks = torch.stack([fastprep.random_dilated_mask([h, h], 0.25, s, packed=True) for s in range(n)])
    gi, gm = imgs.cuda(), masks.cuda()
    for _ in range(3):
        fastprep.mask_ycbcr(gi, gm, torch.float32, 1 / 255)
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(20):
        fastprep.mask_ycbcr(gi, gm, torch.float32, 1 / 255)
    torch.cuda.synchronize(); gpu = (time.perf_counter() - t) / 20
    src = torch.randint(0, 256, (1024, 1024, 3), dtype=torch.uint8)
    t = time.perf_counter()
    for s in range(n):
        fastprep.crop_mask_ycbcr(src, h, h, 0.25, s, out_dtype=torch.float32, scale=1 / 255)
    cpu = (time.perf_counter() - t) / n
    print(f"mask_ycbcr on the GPU: {n / gpu:,.0f} samples/s (batch {n}, {gpu * 1e3:.2f} ms); "
          f"the fused op on one CPU core: {1 / cpu:,.0f} samples/s")
PY
"$py" - <<'PY'
# The GPU decode split, Loader(decode_on="cuda"): nvJPEG on the window cuts the threads make.
import os, time
import numpy as np, torch, fastprep
import fastprep.io as fio
from fastprep import transforms as T
from fastprep.tools.file_sources import FileImages, FileSet
try:
    import torchvision.io  # noqa: F401
    why = None if torch.cuda.is_available() else "no CUDA device"
except Exception as exc:  # not installed, or built for another torch
    why = f"torchvision does not import ({exc})"
if why:
    print(f"decode split: skipped: {why}")
    raise SystemExit(0)
fs = FileSet(32)  # 1024^2 q90 4:2:0 photo-mosaic JPEGs, packed with restart markers
try:
    ds, rng = fs.dataset("packed-jpeg"), np.random.default_rng(0)
    cuts = []
    for _ in range(256):
        item = ds.load_raw(int(rng.integers(len(ds))))[0]
        cuts.append(item.cut((int(rng.integers(item.height - 255)), int(rng.integers(item.width - 255)), 256, 256)))
    for _ in range(3):
        fio.decode_window_batch(cuts, device="cuda")
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(10):
        fio.decode_window_batch(cuts, device="cuda")
    torch.cuda.synchronize(); nv = (time.perf_counter() - t) / 10
    t = time.perf_counter(); fio.decode_window_batch(cuts[:64], device="cpu"); cpu = (time.perf_counter() - t) / 64
    print(f"decode split: nvJPEG decodes {256 / nv:,.0f} windows/s (batches of 256 cuts of 256^2 windows, "
          f"{np.mean([len(c.data) for c in cuts]) / 1e3:.1f} kB each); libjpeg-turbo, one core: {1 / cpu:,.0f}/s")
    def rate(threads, **split):
        tf = lambda: T.Compose([T.RandomCrop(256, layout="HWC"), T.RandomDilatedMask(0.25), T.RGBToYCbCr()])
        it = iter(fastprep.Loader(FileImages(fs, "packed-jpeg", 256 * 60, tf()), 256, transform=tf(), threads=threads,
                                  seed=0, drop_last=True, device="cuda", decode=True, **split))
        for _ in range(5):
            next(it)
        torch.cuda.synchronize(); t = time.perf_counter()
        for _ in range(30):
            next(it)
        torch.cuda.synchronize()
        return 30 * 256 / (time.perf_counter() - t)
    cores = len(os.sched_getaffinity(0))
    for threads in sorted({1, cores}):
        print(f"decode split: Loader threads={threads}, into the device, decode=True: decode in the threads "
              f"{rate(threads):,.0f} samples/s, decode_on='cuda' {rate(threads, decode_on='cuda'):,.0f} samples/s")
finally:
    fs.close()
PY
echo "summary: CUDA tests rc=$cuda_rc, native suite rc=$suite_rc"
exit $(( cuda_rc || suite_rc ))
