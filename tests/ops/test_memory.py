"""No op may grow memory per call: the hot ops run once per sample for days.

torch 2.13's stable-ABI header leaks a heap copy of every `str` argument (~48 bytes a call); the
native bindings avoid it (csrc/ops/str_arg.h, StrArg). Each op is called enough times that a leak
of a quarter byte per call would show above the allocator's noise (checked: a binding taking
std::string grew RSS by 49 bytes a call here and failed this test).
"""

import os

import pytest
import torch

import fastprep
from fastprep.ops._registry import OPS

# Native calls cost 4-20 us; Numba-backend calls go through Python (25-100 us), so fewer of them.
CALLS = int(os.environ.get("FASTPREP_LEAK_CALLS", 200_000 if fastprep.backend() == "native" else 25_000))


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="reads RSS from /proc")
@pytest.mark.parametrize("row", OPS, ids=lambda row: row.name)
def test_rss_flat_over_many_calls(row):
    fn, args = getattr(torch.ops.fastprep, row.name), row.sample()
    for _ in range(20_000):  # warm up allocator caches and lazy compilation
        fn(*args)
    # A leak grows RSS in every window; the allocator growing its heap once does not, so the
    # quieter of two windows is what counts.
    grown = []
    for _window in range(2):
        before = rss_bytes()
        for _ in range(CALLS):
            fn(*args)
        grown.append(rss_bytes() - before)
    assert min(grown) < CALLS // 4, f"{row.name}: RSS grew {grown} bytes in two windows of {CALLS} calls"
