"""Named points of a fastprep.Loader's work that a profiler (tools/bench/profile_loader.py) can wrap,
instead of patching the Loader's functions by name: ``loader.hooks.add(stage, hook)``.

A hook is called as ``hook(stage, call, *args)`` in place of the stage's ``call(*args)``, and
returns what the stage returns: it times the call, counts it, or (a profile of the Python alone)
leaves an op out. Hooks of one stage nest, the first added outermost. The parts of a pass take the
hooks when the pass begins (a hook added later counts from the next pass); with none added they
are handed None, and each stage costs one ``is None`` test per call (per chunk or run of samples,
never per sample).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

# stage: what it wraps (where it runs)
STAGES = {
    "chunk": "a chunk of a batch, in all (a Loader thread: ChunkRunner)",
    "seeds": "the chunk's item seeds (item_seeds)",
    "draws": "the chunk's seeded draws (seeded_draws)",
    "load": "loading a map-style dataset's chunk under its streams",
    "fold": "folding the chunk's items into runs of the fused op (ChunkRuns)",
    "write": "a run of the fused op into the batch, with its rows found (ChunkRunner._write_run)",
    "op": "the fused op's call itself (fusion.run: group, run, rows)",
    "labels": "writing a run's other fields, the labels (BatchJob.write_rest)",
    "hand_off": "a complete batch handed to the consumer (BatchJob.batch, the consumer's thread)",
    "pool_start": "the pass's threads started (ThreadPool)",
    "pool_stop": "the pass's threads stopped (ThreadPool.shutdown)",
    "take_ring": "the pass's slot ring and batch made ahead taken (ahead.take)",
    "keep_ring": "a whole pass's ring and batch made ahead kept for the next (ahead.keep)",
}


class LoaderHooks:
    """The hooks of one Loader (``loader.hooks``), by stage (see the module's STAGES)."""

    def __init__(self) -> None:
        self._hooks: dict[str, list[Callable[..., Any]]] = {}

    def add(self, stage: str, hook: Callable[..., Any]) -> None:
        """Call ``hook(stage, call, *args)`` in place of `stage`'s ``call(*args)`` from the next pass on."""
        if stage not in STAGES:
            raise ValueError(f"LoaderHooks.add: stage={stage!r} is not a hook point; expected one of {list(STAGES)}")
        if not callable(hook):
            raise ValueError(f"LoaderHooks.add: expected hook to be callable, got {hook!r}")
        self._hooks.setdefault(stage, []).append(hook)

    def remove(self, stage: str, hook: Callable[..., Any]) -> None:
        """Drop a hook added to `stage` (a ValueError when it was not)."""
        hooks = self._hooks.get(stage, [])
        if hook not in hooks:
            raise ValueError(f"LoaderHooks.remove: {hook!r} is not a hook of stage {stage!r}")
        hooks.remove(hook)
        if not hooks:
            del self._hooks[stage]

    def clear(self) -> None:
        self._hooks.clear()

    def __bool__(self) -> bool:
        return bool(self._hooks)

    def run(self, stage: str, call: Callable[..., Any], *args: Any) -> Any:
        """`call(*args)` through `stage`'s hooks (none: called as is)."""
        for hook in reversed(self._hooks.get(stage, ())):
            call = functools.partial(hook, stage, call)
        return call(*args)


def hooked(hooks: LoaderHooks | None, stage: str, call: Callable[..., Any], *args: Any) -> Any:
    """`call(*args)`, through `hooks`' hooks of `stage` when a pass was given hooks."""
    return call(*args) if hooks is None else hooks.run(stage, call, *args)
