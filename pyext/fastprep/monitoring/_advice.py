"""The one catalogue of advice about a slow input pipeline: each piece is worded here once, as data.

``python -m fastprep diagnose`` (its verdict, fastprep.tools.diagnose._verdict, and the advice made for the
pipeline, fastprep.tools.diagnose._raw_loading) and ``fastprep.monitor``'s summary (fastprep.monitoring._summary)
only choose pieces and fill in their numbers; the remedy table (fastprep.monitoring._remedies) words
its rows with the phrases below.

- SOURCES: what each source of raw samples is, and what raw loading covers there.
- STAGES: each stage of the caching method: what it is, the sentence that names it as the
  bottleneck, and its remedies where the pipeline's details are not known.
- the phrases the stages, the remedy rows and the summary share (MORE_THREADS, COMPACT, ...).
- the verdicts that name no stage (MODEL_BOUND, NOISE) and the summary's findings (templates).

Example:
    >>> from fastprep.monitoring import advice
    >>> advice.stage_text("raw loading", advice.STAGES["raw loading"].remedies)
    'Reading or decoding raw samples is the bottleneck: decode less (...), ...'
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

RAW, TRANSFORMS, COLLATE, COPY = "raw loading", "transforms", "collate/IPC", "host->device copy"


@dataclass(frozen=True)
class Source:
    """A source of raw samples: what it is (the pipeline's description), and what raw loading covers
    there (diagnose's report) with fastprep's crop first (`by_window`) and without (`whole`)."""
    what: str
    by_window: str
    whole: str = ""

    def raw_loading(self, crops_by_window: bool) -> str:
        return self.by_window if crops_by_window or not self.whole else self.whole


_WHOLE = "decoded whole before the transform, which is not fastprep's crop"
SOURCES = {
    "pil-files": Source("image files decoded whole by Pillow in the dataset",
                        "Pillow decodes each image whole in the dataset"),
    "files": Source("image files decoded whole by fastprep (roi=False)",
                    "fastprep decodes each file whole (roi=False)"),
    "jpeg-files": Source("JPEG files read by window (roi=True)",
                         "each JpegFile (roi=True) is decoded by window inside the crop, billed here",
                         f"each JpegFile (roi=True) is {_WHOLE}"),
    "packed-jpeg": Source("packed JPEG shards, read by window",
                          "each packed JPEG window is decoded from its restart intervals inside the crop, billed here",
                          f"each packed JPEG record is {_WHOLE}"),
    "packed-raw": Source("packed raw shards (uint8 pixels from a memory map, nothing decoded)",
                         "raw pixels are read from the shards' memory map (nothing is decoded)"),
    "remote-pack": Source("a pack at a URL, fetched into a local cache",
                          "each record of the remote pack is fetched (through its cache) and decoded inside the crop",
                          "each record of the remote pack is fetched (through its cache) and decoded whole"),
    "windowed": Source("images read by window", "each image is read by window inside the crop, billed here",
                       f"each image is {_WHOLE}"),
    "tensors": Source("tensors / arrays (nothing decoded)",
                      "the dataset's tensors are indexed (nothing is decoded)"),
    "other": Source("samples made by the dataset",
                    "the dataset's raw samples are read (and decoded) before the transforms"),
}

# Phrases shared by the stages' remedies, the remedy table's rows and the summary.
STEP_FIRST = "speed up the step itself (mixed precision, torch.compile, larger batches) before touching data loading"
DEEPER_QUEUE = "a deeper queue (Loader depth=, DataLoader prefetch_factor=)"
MORE_THREADS = f"more threads (fastprep.Loader(..., threads=N), DataLoader num_workers) and {DEEPER_QUEUE}"
DECODE_LESS = "decode less (smaller stored images, a faster decoder), faster storage, cache decoded data"
PORT = ("fastprep's transforms for your steps (fastprep.transforms: torchvision v2's names and bits, fused into one "
        "op where they can be; docs/transforms.md)")
GPU_MOVE = "move the work to the GPU (ship uint8 + packed masks and expand them there)"
LOADER = "fastprep.Loader (threads without the GIL in its ops: no IPC, batches written in place)"
LOADER_DONE = "a fastprep.Loader (threads, no IPC)"
COMPACT = "collate_fn=fastprep.compact_collate (uint8 images, packed masks: 4x fewer bytes to move than float32)"
PERSISTENT = "persistent_workers=True"
STEADY = "fewer torch threads, torch.set_num_threads(1); fewer loader threads"  # what steadies a noisy step
UINT8_DEVICE = ("ship uint8 batches and convert them on the GPU: fastprep.Loader(..., device='cuda', expand=True) "
                "(or expand=False and CompactBatch.expand() there)")


def more_threads(facts: Any = None) -> str:
    """More loader threads or workers, with the count of `facts`' loader (a PipelineFacts: this
    catalogue imports nothing of the package), else both loaders'."""
    if facts is not None and facts.loader == "fastprep":
        return f"more threads (fastprep.Loader(threads=...): {facts.workers} now) and a larger depth"
    if facts is not None and facts.loader == "dataloader":
        return f"more num_workers ({facts.workers} now) and a larger prefetch_factor"
    return MORE_THREADS


@dataclass(frozen=True)
class Stage:
    """A stage of the caching method: what it is, the sentence naming it as the bottleneck, and
    its remedies where the pipeline's details are not known."""
    what: str
    bottleneck: str
    remedies: str


STAGES = {
    RAW: Stage("reading and decoding raw samples", "Reading or decoding raw samples is the bottleneck",
               f"{DECODE_LESS}; {MORE_THREADS}"),
    TRANSFORMS: Stage("the per-sample transforms", "The per-sample transforms are the bottleneck",
                      f"{PORT}; {MORE_THREADS}; or {GPU_MOVE}"),
    COLLATE: Stage("assembling batches and moving them between processes",
                   "Batches cost too much to assemble or move between processes",
                   f"{COMPACT}; {LOADER}; {PERSISTENT}; {MORE_THREADS}"),
    COPY: Stage("copying batches to the device (and decoding them there)",
                "Copying batches to the device is the bottleneck",
                f"ship less and overlap the copy: {COMPACT}, pin_memory=True, fastprep.DevicePrefetcher; or "
                f"{UINT8_DEVICE}"),
}
# A fastprep.Loader's collate/IPC: its threads already write compact batches without IPC.
LOADER_COLLATE = ("Assembling batches, or the Loader's threads taking the cores the step needs, costs the step: the "
                  "Loader already writes compact uint8 batches in threads, without IPC; fewer threads so that the two "
                  "do not compete (" + STEADY + ": {workers} loader threads now), or a larger depth.")


def stage_text(stage: str, remedies: str) -> str:
    """The sentence naming `stage` as the bottleneck, then `remedies`."""
    return f"{STAGES[stage].bottleneck}: {remedies}."


MODEL_BOUND = f"The input pipeline keeps up: {STEP_FIRST}."
NOISE = ("Measure longer (more --repeats, a smaller --precision) or on a quieter machine: the levels are within "
         "noise of each other. On cores busy with other work, torch's intra-op threads stall each other at every "
         f"parallel op: fewer threads often steady the step ({STEADY}).")
GENERAL = {"model-bound": MODEL_BOUND, "noise": NOISE, **{s: stage_text(s, st.remedies) for s, st in STAGES.items()}}

# The monitor's findings (fastprep.monitoring._summary), filled with its numbers.
KEEPS_UP = "the input keeps up: the loop waited {share:.0%} of the time (input-bound above {threshold:.0%})."
GPU_IDLE = ("yet the GPU is busy only {util:.0f}% of the time: the step itself leaves it idle (host work between "
            "kernels, .item() / .cpu() syncs, small kernels): profile the step (torch.profiler), larger batches, "
            "torch.compile or CUDA graphs.")
WAITED = "the loop waited {share:.0%} of the time: an input that kept up would make it up to {speedup:.1f}x faster."
DIAGNOSE = ("find the stage: python -m fastprep diagnose mymodule:make_pipeline --device {device}   (make_pipeline() "
            "returns (loader, step_fn): it names the stage that costs, raw loading/decoding, transforms, collate/IPC "
            "or the host->device copy)")
CORES = {
    "unknown": "{threads} if the cores have room; and make samples cheaper:",
    "own": "the cores are busy with this process's work (CPU {own:.0f}%): make samples cheaper, more threads will "
           "not help:",
    "others": "the cores are busy, but with other processes' work (machine {busy:.0f}%, this process {own:.0f}%): "
              "more threads would compete with them for the cores; free the cores, or make samples cheaper:",
    "room": "the cores have room (CPU {busy:.0f}%{machine}): {threads}; and make samples cheaper:",
}
BURSTS = "waits come in bursts (p50 {p50}, p95 {p95}): workers finish together; " + DEEPER_QUEUE + " absorbs them."
IN_PLACE = "already in place: {}."


def in_place(done: list[str]) -> str:
    """The remedies already taken, as a sentence of its own ("" when none is)."""
    return IN_PLACE.format("; ".join(done)) if done else ""
