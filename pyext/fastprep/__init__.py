"""fastprep: memory-speed CPU transforms and compact batches for PyTorch data pipelines.

Importing fastprep defines the `torch.ops.fastprep.*` ops (their Python wrappers are exported
here, one per row of ops/registry.py) and loads the backend that runs them on CPU (see
:func:`backend`).
"""

from fastprep import io as io  # fastprep.io.* after a plain `import fastprep`
from fastprep import ops
from fastprep._backend import NativeUnavailableWarning, backend, build_info, select_backend
from fastprep._warnings import NumbaCacheWarning
from fastprep.bad_samples import BadSamples, BadSampleWarning
from fastprep.batch import CompactBatch
from fastprep.collate import CompactCollate, compact_collate
from fastprep.loader import Loader, ResumePositionDropped
from fastprep.monitoring import Monitor, MonitorSummary, monitor
from fastprep.ops import *  # noqa: F403  (the op wrappers, as listed in ops.__all__)
from fastprep.prefetch import DevicePrefetcher
from fastprep.rng import derive_seed, draw_seed, random_word
from fastprep.transforms import SeedByIndex
from fastprep.warmup import warmup

__version__ = "0.1.0"

select_backend()

__all__ = [
    "BadSampleWarning", "BadSamples", "CompactBatch", "CompactCollate", "DevicePrefetcher", "Loader", "Monitor",
    "MonitorSummary",
    "NativeUnavailableWarning", "NumbaCacheWarning", "ResumePositionDropped", "SeedByIndex",
    "backend",
    "build_info", "compact_collate", "derive_seed", "draw_seed", "monitor", "random_word", "warmup",
]
__all__ += ops.__all__
