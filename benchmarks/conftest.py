"""Shared by the benchmark files: the backends to compare and a ratio summary per group.

Every group times fastprep beside the baselines a user would otherwise reach for, on the same
inputs, plus a memcpy floor (`run_floor`): a copy moving as many bytes as the op must read and
write, so the floor of an op that reads R bytes and writes W copies (R + W) / 2 of them. The
summary prints, per group, each entry's median, its speed relative to the best baseline, and the
floor beside every fastprep entry (its time and how many times the floor the entry takes).
Native entries call the public functions (``fastprep.dilate(...)``), as users do: the op through
torch.ops plus what the wrapper adds or saves (ops/_library.py, call_differentiable).
Numbers per stage, inside the kernels: benchmarks/kernel_stages.cpp (benchmarks/PROFILE.md).
"""

import pytest
import torch

import fastprep

NATIVE = fastprep.backend() == "native"
requires_native = pytest.mark.skipif(not NATIVE, reason="native backend not loaded")


@pytest.fixture(scope="module")
def one_thread():
    """Single-threaded torch (and OpenCV) for a module: compares one core with one core."""
    try:
        import cv2  # noqa: PLC0415 (a benchmark extra)
    except ImportError:
        cv2 = None
    n, n_cv = torch.get_num_threads(), cv2.getNumThreads() if cv2 else 0
    torch.set_num_threads(1)
    if cv2:
        cv2.setNumThreads(1)
    yield
    torch.set_num_threads(n)
    if cv2:
        cv2.setNumThreads(n_cv)


def bench_warm(benchmark, fn, *args):
    """benchmark(fn, *args) after one untimed call. A Numba op's first call compiles its kernel or
    loads it from the disk cache (~0.2 s), and pytest-benchmark, calibrating on that call, would run
    5 rounds, the first ones on cold caches."""
    fn(*args)
    return benchmark(fn, *args)


def memcpy_floor(nbytes: int):
    """A callable copying `nbytes` between two preallocated buffers."""
    src = torch.ones(nbytes, dtype=torch.uint8)
    dst = torch.empty_like(src)
    return lambda: dst.copy_(src)


def run_floor(benchmark, read: int, written: int, key: str = "") -> None:
    """Times the group's floor: a memcpy moving the bytes an op must read and write (a copy reads
    and writes each byte, so it copies half of them). Entries whose op moves other bytes than the
    group's first floor (packed vs bool masks) name theirs with `use_floor(benchmark, key)`."""
    benchmark.extra_info["floor"] = {"read": read, "written": written, "key": key}
    benchmark(memcpy_floor(max((read + written) // 2, 1)))


def use_floor(benchmark, key: str) -> None:
    benchmark.extra_info["floor_key"] = key


def _kind(bench) -> str:
    name = bench.name
    if "floor" in bench.extra_info or "memcpy" in name:
        return "floor"
    return "fastprep" if any(k in name for k in ("fastprep", "native", "numba")) else "baseline"


# Why the Numba backend stays more than 2x the native one, per group family (printed beside a
# Numba entry that does). Numba reaches no intrinsics: the 64-byte <-> word moves go through LLVM
# vector IR (numba_kernels/_vector_bits.py), everything else through LLVM's vectoriser; and a Numba
# op pays 3.7-8 us of Python a call on a tiny input (checks, allocation, the jit dispatch) where
# the public native op pays 2.5-4.4 (Zen 4, benchmarks/PROFILE.md).
NUMBA_WHY = {
    "rgb_to_ycbcr": "Numba: LLVM forms the numerators by vpmaddwd/vpdpwssd too, but deinterleaves packed RGB "
                    "through uint8 temporaries and divides in 32-bit float lanes; native deinterleaves by vpermb "
                    "and finishes Y in 16-bit lanes",
    "pipeline": "Numba: rgb_to_ycbcr's arithmetic (see there), the mask expanded to bytes for the selects, and "
                "~12 us of Python around the kernel (checks, crop window, allocations, the jit dispatch)",
    "crop": "Numba: the kernel's rows are slices (what lets LLVM vectorise them), each a reference-count call "
            "pair, and ~6 us of Python around it (checks, window, allocation, a jit dispatch of 18 arguments)",
    "dilate": "Numba: ~3.7 us of Python a call (checks, allocation, jit dispatch), and the words at each row's "
              "ends are dilated one by one",
    "random_": "Numba: ~3 us of Python a call, the rest is the generator's 64-bit multiplies in LLVM's vectors",
    "pack_bits": "Numba: ~4 us of Python a call, and across planes (dim != last) each plane's bits are ORed "
                 "into memory where native keeps 8 planes' bits in a register",
    "unpack_bits": "Numba: ~4 us of Python a call",
    "mask_fill": "Numba: the mask bits are expanded to bytes for the selects; native uses the mask words as "
                 "the mask registers of masked moves and stores",
}


def native_twin(bench, benches):
    """The native entry a Numba entry is measured against: the same name with "native" for
    "numba" (test_dilate_numba[256] -> test_dilate_native[256]); None when the group has none."""
    return next((b for b in benches if b.name == bench.name.replace("numba", "native")), None)


def _numba_ratio(group: str, bench, benches) -> str:
    """ "numba / native = r", and why where r > 2, for a Numba entry with a native twin."""
    twin = native_twin(bench, benches) if "numba" in bench.name else None
    if twin is None:
        return ""
    ratio = bench.stats.median / twin.stats.median
    why = next((w for k, w in NUMBA_WHY.items() if group.startswith(k)), "Numba: no intrinsics")
    return f"   numba / native = {ratio:.2f}" + (f"  ({why})" if ratio > 2 else "")


def _floor_line(bench) -> str:
    f = bench.extra_info.get("floor")
    what = (f"memcpy of {max((f['read'] + f['written']) // 2, 1):,} B (the op reads {f['read']:,} B, writes "
            f"{f['written']:,} B)") if f else "memcpy"
    key = f" [{f['key']}]" if f and f["key"] else ""
    return f"  {'floor' + key + ': ' + what:<94} {bench.stats.median * 1e6:9.2f} us"


def _notes(bench, benches) -> str:
    """What an entry adds in extra_info: "samples" per call (printed as samples/s), "also_vs" (entry
    names to print its ratio to, beside the best baseline), "note" (free text)."""
    info, t = bench.extra_info, bench.stats.median
    out = f"   {info['samples'] / t:10,.0f} samples/s" if "samples" in info else ""
    for name in info.get("also_vs", []):
        other = next((b for b in benches if b.name.split("[")[0] == name), None)
        if other is not None:
            out += f"   {other.stats.median / t:5.2f}x {name.removeprefix('test_')}"
    return out + (f"   {info['note']}" if "note" in info else "")


def pytest_terminal_summary(terminalreporter, config):
    session = getattr(config, "_benchmarksession", None)
    if session is None or not session.benchmarks:
        return
    groups: dict[str, list] = {}
    for bench in session.benchmarks:
        if bench.stats is not None:
            groups.setdefault(bench.group or "(no group)", []).append(bench)
    tr = terminalreporter
    tr.section("fastprep ratios (median time; x = times faster; floor = memcpy moving the op's bytes)")
    for group, benches in sorted(groups.items()):
        baselines = [b.stats.median for b in benches if _kind(b) == "baseline"]
        floors = {b.extra_info["floor"]["key"]: b for b in benches if "floor" in b.extra_info}
        tr.write_line(f"{group}")
        for f in floors.values():
            tr.write_line(_floor_line(f))
        rest = [b for b in benches if "floor" not in b.extra_info]
        for b in sorted(rest, key=lambda b: b.stats.median):
            t = b.stats.median
            line = f"  {b.name.split('[')[0]:<44} {t * 1e6:12.2f} us{'   (a copy, not a floor)' if _kind(b) == 'floor' else ''}"
            if _kind(b) == "fastprep":
                line += f"   {min(baselines) / t:7.2f}x best baseline" if baselines else " " * 25
                floor = floors.get(b.extra_info.get("floor_key", ""))
                if floor is not None:
                    line += f"   floor {floor.stats.median * 1e6:8.2f} us, op = {t / floor.stats.median:5.1f}x floor"
                line += _numba_ratio(group, b, benches)
            tr.write_line(line + _notes(b, benches))
