"""fastprep.warmup(): it compiles every Numba kernel once, a second process loads them all from
Numba's disk cache, and DataLoader workers started after it compile nothing.

Both tests share one cold compile of every kernel (conftest's warmed_numba_cache, minutes on 2
cores) and live in one file on purpose: `--dist loadfile` gives them one xdist worker, so the other
worker runs the rest of the suite instead of waiting on the compile's lock."""

import os
import shutil
import subprocess
import sys

import pytest

from helpers.processes import NUMBA_CACHE_COUNTS, WARMUP_PROBE, run_python

pytestmark = [pytest.mark.slow, pytest.mark.one_backend]  # fresh processes; they choose their backend


def test_warmup_compiles_every_numba_kernel_then_loads_from_cache(tmp_path, warmed_numba_cache):
    from fastprep.ops._registry import OPS
    cache, first = warmed_numba_cache  # warmup() in a process with an empty cache: every kernel compiled
    shutil.copytree(cache, tmp_path / "cache")
    second = run_python(WARMUP_PROBE, timeout=600, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    assert second.returncode == 0, second.stderr
    n1, hits1, misses1 = map(int, first.split())
    n2, hits2, misses2 = map(int, second.stdout.split())
    assert n1 == n2 == len(OPS)
    # Numba counts per dispatcher, and a kernel's helpers compile into it: the counts are not per op.
    assert hits1 == 0 and misses1 > 0  # the empty cache: compiled, nothing loaded
    assert misses2 == 0 and hits2 > 0  # the filled one: every op ran, loaded, nothing compiled


WARMUP_THEN_WORKERS = NUMBA_CACHE_COUNTS + '''
import torch
from torch.utils.data import DataLoader, Dataset
import fastprep
from fastprep import transforms as T


class Pipeline(Dataset):
    tf = T.Compose([T.RandomCrop(16, layout="HWC"), T.RandomDilatedMask(0.25, layout="HWC"),
                    T.RGBToYCbCr(layout="HWC")])

    def __len__(self):
        return 3

    def __getitem__(self, i):
        before = numba_kernel_counts()
        self.tf(torch.randint(0, 256, (40, 40, 3), dtype=torch.uint8))
        fastprep.compact_collate([(torch.zeros(4, 9, dtype=torch.bool),)])
        return before, numba_kernel_counts()


if __name__ == "__main__":
    fastprep.warmup()
    loader = DataLoader(Pipeline(), batch_size=None, num_workers=1,
                        multiprocessing_context=sys.argv[1], persistent_workers=True)
    for epoch in range(2):
        for before, after in loader:
            print(*before, *after)
'''


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_warmup_before_workers_spares_them_every_compile(tmp_path, context, warmed_numba_cache):
    """Forked workers inherit warmup()'s compiled kernels; spawned ones load them from the disk
    cache warmup() filled. Either way a worker compiles nothing (persistent, over 2 epochs).
    The cache starts as the one warmup() filled (the compile is the test above's)."""
    probe = tmp_path / "probe.py"
    probe.write_text(WARMUP_THEN_WORKERS)
    shutil.copytree(warmed_numba_cache[0], tmp_path / "cache")
    env = {**os.environ, "FASTPREP_BACKEND": "numba", "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    out = subprocess.run([sys.executable, str(probe), context], capture_output=True, text=True,
                         env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    rows = [list(map(int, line.split())) for line in out.stdout.splitlines()]
    assert len(rows) == 6
    for compiled0, hits0, misses0, compiled1, hits1, misses1 in rows:
        assert misses1 == misses0 and compiled1 == compiled0 + (hits1 - hits0)  # loads, no compiles
        if context == "fork":
            assert compiled0 > 0 and hits1 == hits0  # inherited, nothing even loaded
