"""No op may grow memory per call: the hot ops run once per sample for days.

torch 2.13's stable-ABI header leaks a heap copy of every `str` argument (~48 bytes a call); the
native bindings avoid it (csrc/ops/common.h, StrArg). Each op is called enough times that a leak
of one byte per call would show above the allocator's noise.
"""

import os

import pytest
import torch

import fastprep

# native calls cost ~4 us; Numba-backend calls go through Python (~25 us), so fewer of them.
CALLS = int(os.environ.get("FASTPREP_LEAK_CALLS", 1_000_000 if fastprep.backend() == "native" else 200_000))

_MASK = torch.zeros(3, 16, dtype=torch.bool)
_PACKED = torch.zeros(3, 2, dtype=torch.uint8)

# op name -> (callable, args) exercising every argument kind the op takes, str ones included.
OP_CALLS = {
    "pack_bits": (torch.ops.fastprep.pack_bits, (_MASK, -1, "little")),
    "unpack_bits": (torch.ops.fastprep.unpack_bits, (_PACKED, 16, -1, "big")),
}


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads RSS from /proc")
@pytest.mark.parametrize("name", sorted(OP_CALLS))
def test_rss_flat_over_many_calls(name):
    fn, args = OP_CALLS[name]
    for _ in range(20_000):  # warm up allocator caches and lazy compilation
        fn(*args)
    before = rss_bytes()
    for _ in range(CALLS):
        fn(*args)
    grown = rss_bytes() - before
    # One byte per call would be CALLS bytes; allow a quarter of that for allocator noise.
    assert grown < CALLS // 4, f"{name}: RSS grew {grown} bytes over {CALLS} calls"
