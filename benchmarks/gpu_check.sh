#!/usr/bin/env bash
# On a machine with a CUDA GPU and torch installed (the device tool's, say): build fastprep against
# that torch, run the CUDA tests and the whole suite on the native backend, time the GPU form of
# the mask + colour steps, and print a summary. From the repository root:
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
echo "summary: CUDA tests rc=$cuda_rc, native suite rc=$suite_rc"
exit $(( cuda_rc || suite_rc ))
