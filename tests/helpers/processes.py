"""Fresh interpreters for the tests: run_python, and the probe code that counts Numba's compiles
and cache hits there (a count, not a timing)."""

import os
import subprocess
import sys

# Probe code (run in a fresh process): numba_cache_counts() is how many first calls of fastprep's
# Numba kernels loaded from Numba's disk cache and how many compiled (the dispatchers' statistics);
# numba_kernel_counts() puts the number of compiled signatures the dispatchers hold before them.
NUMBA_CACHE_COUNTS = """
import sys, numba


def numba_kernel_counts():
    compiled = hits = misses = 0
    for name, module in list(sys.modules.items()):
        if name.startswith("fastprep.numba_kernels."):
            for obj in vars(module).values():
                if isinstance(obj, numba.core.dispatcher.Dispatcher):
                    compiled += len(obj.overloads)
                    hits += sum(obj.stats.cache_hits.values())
                    misses += sum(obj.stats.cache_misses.values())
    return compiled, hits, misses


def numba_cache_counts():
    return numba_kernel_counts()[1:]
"""

# Prints how many kernels warmup() ran, then its cache hits and misses (a count, not a timing).
WARMUP_PROBE = NUMBA_CACHE_COUNTS + """
import fastprep
latency = fastprep.warmup()
print(len(latency), *numba_cache_counts())
"""


def run_python(code: str, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """`code` run in a fresh interpreter with `env` added to this process's environment."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**os.environ, **env},
                          timeout=timeout)
