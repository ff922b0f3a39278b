"""fastprep.Loader: batches made by threads in the training process, written straight into a ring
of reused batch slots.

A DataLoader worker spends most of each core on moving bytes: a fresh output tensor per sample,
a stack copy into fresh shared memory, IPC, then a copy into pinned memory. The Loader's threads
(fastprep's native ops release the GIL) write each sample once, into a slot that is allocated
once (pinned when the device is CUDA) and reused; a fused transform writes there directly, one
op call per chunk of samples, with no per-sample tensor at all.

| module | what |
| --- | --- |
| core | Loader: len, epochs, resume state (what changes while it runs) |
| settings | LoaderSettings: its arguments, checked and resolved once, frozen; what a pass is handed |
| hooks | LoaderHooks: named points of a pass a profiler wraps (loader.hooks) |
| order | an epoch's indices (a dataset's, or an iterable's positions) in batches, and where a resume starts |
| iteration | one pass: threads started on the first batch, batches handed out, state, close |
| pool | the Loader's threads, stopped on close, garbage collection and interpreter exit |
| apply | a chunk of a batch in a thread: seeds, loading, the transform's plan, writes into the slot |
| fused_chunks | the fused batch path of a chunk: the items the plan's fused op takes, in runs of op calls |
| ahead | from one pass to the next: the slot ring kept, the next epoch's first batch made ahead (prestart) |
| device_split | decode_on: the threads cut JPEG windows, the device decodes them (the GPU decode split) |
| device_slots | the split's batches in flight: per sample the cut, flips, placement; the rows' host tensors |
"""

from fastprep.errors import ResumePositionDropped
from fastprep.loader._core import Loader

__all__ = ["Loader", "ResumePositionDropped"]
