"""fastprep: memory-speed CPU transforms and compact batches for PyTorch data pipelines.

Importing fastprep defines the `torch.ops.fastprep.*` ops (their Python wrappers are exported
here, one per row of ops/_registry.py) and loads the backend that runs them on CPU (see
:func:`backend`).
"""

import fastprep.backends._choice as _choice
from fastprep import io as io  # fastprep.io.* after a plain `import fastprep`
from fastprep import ops
from fastprep.backends._choice import backend, build_info
from fastprep.backends._warmup import warmup
from fastprep.batch._collate import CompactCollate, compact_collate
from fastprep.batch._compact import CompactBatch
from fastprep.batch._device_prefetcher import DevicePrefetcher
from fastprep.core._bad_samples import BadSamples
from fastprep.core._rng import derive_seed, draw_seed, random_word
from fastprep.errors import BadSampleWarning, NativeUnavailableWarning, NumbaCacheWarning
from fastprep.loader import Loader, ResumePositionDropped
from fastprep.monitoring import Monitor, MonitorSummary, monitor
from fastprep.ops import *  # noqa: F403  (the op wrappers, as listed in ops.__all__)
from fastprep.transforms import SeedByIndex

__version__ = "0.1.0"

_choice.select_backend()

__all__ = [
    "BadSampleWarning", "BadSamples", "CompactBatch", "CompactCollate", "DevicePrefetcher", "Loader", "Monitor",
    "MonitorSummary",
    "NativeUnavailableWarning", "NumbaCacheWarning", "ResumePositionDropped", "SeedByIndex",
    "backend",
    "build_info", "compact_collate", "derive_seed", "draw_seed", "monitor", "random_word", "warmup",
]
__all__ += ops.__all__
