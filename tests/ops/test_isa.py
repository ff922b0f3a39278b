"""FASTPREP_ISA forces the native kernels' ISA level (x86-64, x86-64-v3, x86-64-v4, x86-64-v4-icl,
auto). Every level this CPU runs must give the same bytes for the same op calls; a bad value fails
at import with a message naming it. (.ci/isa runs the op test files once per level as well.)"""

import json
import os
import subprocess
import sys

import pytest

import fastprep

from helpers.op_calls import requires_native

pytestmark = requires_native

# A fixed set of calls over every op family, with widths around the 8-, 32- and 64-pixel steps
# the vector loops take and odd strides, so that tails and layouts of every level run.
CALLS = r"""
import hashlib, json, torch, fastprep

g = torch.Generator().manual_seed(0)
def img(*shape, dtype=torch.uint8):
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, dtype=torch.uint8, generator=g)
    return torch.rand(shape, generator=g).to(dtype)
def mask(*shape, p=0.3):
    return torch.rand(shape, generator=g) < p

out = {}
def put(name, t):
    ts = t if isinstance(t, (tuple, list)) else (t,)
    h = hashlib.sha256()
    for x in ts:
        h.update(x.contiguous().view(torch.uint8).numpy().tobytes() if x.numel() else b"")
    out[name] = h.hexdigest()

# Every colour once, both directions, uint8 exact.
every = torch.arange(1 << 24, dtype=torch.int32)
rgb = torch.stack([every >> 16, (every >> 8) & 255, every & 255], -1).to(torch.uint8).view(4096, 4096, 3)
put("rgb_to_ycbcr all colours", fastprep.rgb_to_ycbcr(rgb, "HWC"))
put("ycbcr_to_rgb all colours", fastprep.ycbcr_to_rgb(rgb, "HWC"))
for w in (1, 7, 31, 33, 65, 203, 300):
    src = img(5, w, 3)
    for dt in (None, torch.float32, torch.float16, torch.bfloat16):
        put(f"rgb_to_ycbcr HWC w={w} {dt}", fastprep.rgb_to_ycbcr(src, "HWC", dt, 1 if dt is None else 1 / 255))
        put(f"ycbcr_to_rgb CHW w={w} {dt}", fastprep.ycbcr_to_rgb(src.permute(2, 0, 1), "CHW", dt))
    f = img(3, 4, w, dtype=torch.float32)
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        put(f"rgb_to_ycbcr float w={w} {dt}", fastprep.rgb_to_ycbcr(f.to(dt), "CHW", dt))
        put(f"ycbcr_to_rgb strided float w={w} {dt}", fastprep.ycbcr_to_rgb(f.to(dt)[:, :, ::2], "CHW"))
big = img(300, 400, 3)
for dt in (torch.uint8, torch.float32, torch.float16):
    put(f"crop {dt}", fastprep.crop(big.to(dt), 17, 23, 129, 203, "HWC"))
    put(f"crop CHW strided {dt}", fastprep.crop(big.to(dt).permute(2, 0, 1)[:, ::2], 3, 5, 65, 97, "CHW"))
put("random_crop padded", fastprep.random_crop(big.permute(2, 0, 1), 310, 410, 3, "CHW", True, 7.0))
for dt in (None, torch.float32, torch.bfloat16):
    for hw in ((256, 256), (37, 203), (64, 65)):
        for hflip in (False, True):
            put(f"crop_mask_ycbcr {hw} {dt} {hflip}", fastprep.crop_mask_ycbcr(
                big, *hw, 0.25, 11, "HWC", "cross", dt, 1 if dt is None else 1 / 255, return_mask=True, hflip=hflip))
    put(f"crop_mask_ycbcr CHW {dt}", fastprep.crop_mask_ycbcr(
        big.permute(2, 0, 1).contiguous(), 100, 77, 0.1, 12, "CHW", "square", dt))
    put(f"crop_mask_ycbcr strided {dt}", fastprep.crop_mask_ycbcr(big[:, ::3], 99, 100, 0.3, 13, "HWC", out_dtype=dt))
for shape in ((3, 37, 203), (2, 64, 128), (1, 9, 1), (4, 5, 64 * 5 + 1)):
    for p in (0.0, 0.05, 0.25, 0.3, 1.0):
        for packed in (False, True):
            put(f"random_mask {shape} {p} {packed}", fastprep.random_mask(list(shape), p, 9, packed))
            for st in ("cross", "square"):
                for it in (1, 2):
                    put(f"random_dilated_mask {shape} {p} {packed} {st} {it}",
                        fastprep.random_dilated_mask(list(shape), p, 4, st, it, packed))
    m = mask(*shape, p=0.1)
    for st in ("cross", "square"):
        for it in (0, 1, 3):
            put(f"dilate {shape} {st} {it}", fastprep.dilate(m, st, it))
            put(f"dilate_packed {shape} {st} {it}",
                fastprep.dilate_packed(fastprep.pack_bits(m), shape[-1], st, it))
    for dim in range(3):
        for order in ("little", "big"):
            pk = fastprep.pack_bits(m, dim, order)
            put(f"pack_bits {shape} {dim} {order}", pk)
            put(f"unpack_bits {shape} {dim} {order}", fastprep.unpack_bits(pk, shape[dim], dim, order))
for dt in (torch.uint8, torch.float32, torch.float16):
    for w in (7, 64, 203):
        im, m = img(2, 3, 33, w, dtype=dt), mask(2, 33, w)
        value = 9 if dt == torch.uint8 else 0.5
        put(f"mask_fill CHW {dt} {w}", fastprep.mask_fill(im, m, value, "CHW"))
        put(f"mask_fill packed HWC {dt} {w}",
            fastprep.mask_fill(im.permute(0, 2, 3, 1), fastprep.pack_bits(m[0]), value, "HWC"))
        put(f"mask_fill_ strided {dt} {w}", fastprep.mask_fill_(im[:, :, :, ::2].clone(), m[:, :, ::2], value, "CHW"))
        put(f"mask_fill_ HWC view {dt} {w}", fastprep.mask_fill_(im.permute(0, 2, 3, 1), m, value, "HWC"))
print(json.dumps({"isa": fastprep.build_info()["isa_selected"], "hashes": out}))
"""


def _run(isa: str, code: str = CALLS) -> subprocess.CompletedProcess:
    env = dict(os.environ, FASTPREP_ISA=isa, FASTPREP_BACKEND="native")
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)


def _levels_this_cpu_runs() -> list[str]:
    info = fastprep.build_info()
    levels = info["isa_variants"].split(",")
    return levels[: levels.index(info["isa_cpu_best"]) + 1]


def _hashes(isa: str) -> dict:
    r = _run(isa)
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.strip().splitlines()[-1])
    assert result["isa"] == (isa if isa != "auto" else fastprep.build_info()["isa_cpu_best"])
    return result["hashes"]


@pytest.fixture(scope="module")
def auto_hashes():
    return _hashes("auto")


@pytest.mark.parametrize("isa", ["x86-64", "x86-64-v3", "x86-64-v4", "x86-64-v4-icl"])
def test_every_level_gives_the_same_bytes(isa, auto_hashes):
    if isa not in _levels_this_cpu_runs():
        pytest.skip(f"this CPU does not run {isa}")
    hashes = _hashes(isa)
    assert hashes.keys() == auto_hashes.keys()
    differ = [name for name in hashes if hashes[name] != auto_hashes[name]]
    assert not differ, f"FASTPREP_ISA={isa} differs from auto in: {differ}"


def test_auto_is_the_default_and_the_cpu_best():
    info = fastprep.build_info()
    forced = os.environ.get("FASTPREP_ISA", "auto").strip().lower() or "auto"
    assert info["isa_selected"] == (info["isa_cpu_best"] if forced == "auto" else forced)
    assert info["isa_cpu_best"] in info["isa_variants"].split(",")


@pytest.mark.slow  # a fresh process per value
def test_the_value_is_case_and_space_insensitive():
    r = _run(" X86-64 ", "import fastprep; print(fastprep.build_info()['isa_selected'])")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["x86-64"]


@pytest.mark.slow  # a fresh process per value
@pytest.mark.parametrize("value", ["x86-64-v5", "avx2", "native"])
def test_an_unknown_value_fails_at_import_naming_it(value):
    r = _run(value, "import fastprep")
    assert r.returncode != 0
    expected = (f"ValueError: FASTPREP_ISA: expected one of x86-64, x86-64-v3, x86-64-v4, x86-64-v4-icl, auto, "
                f"got '{value}'")
    assert expected in r.stderr, r.stderr


@pytest.mark.slow  # a fresh process per value
def test_a_level_the_cpu_cannot_run_fails_at_import_naming_it_and_the_best():
    best = fastprep.build_info()["isa_cpu_best"]
    above = fastprep.build_info()["isa_variants"].split(",")
    above = above[above.index(best) + 1:]
    if not above:
        pytest.skip(f"this CPU runs every compiled level (best: {best})")
    r = _run(above[-1], "import fastprep")
    assert r.returncode != 0
    assert (f"ValueError: FASTPREP_ISA={above[-1]}: this CPU cannot run {above[-1]}; the best it runs is {best}"
            in r.stderr), r.stderr


@pytest.mark.slow  # a fresh process per value
def test_the_numba_backend_ignores_it():
    # FASTPREP_ISA steers the native kernels only; Numba compiles for the CPU it runs on.
    env = dict(os.environ, FASTPREP_ISA="bogus", FASTPREP_BACKEND="numba")
    code = "import fastprep, torch; print(fastprep.backend(), int(fastprep.pack_bits(torch.ones(9, dtype=torch.bool))[0]))"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["numba", "255"]

