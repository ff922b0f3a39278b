"""What `python -m fastprep diagnose` says when the pipeline it measures raises: one line naming
the stage that raised (loading item N, the transform, collation, the step function), the item
where it is known, and the error; ``--traceback`` prints the rest.

The stage is read from the traceback: walking from the frame that raised outwards, the first
frame running code of the pipeline's own parts (the step function, the collate function, the
transforms, the dataset's ``__getitem__`` / ``load_raw``, through wrappers' ``.dataset``) names
it, and the frame of the dataset's ``__getitem__`` holds the item's index. An error from a
DataLoader worker process comes as text (torch re-raises it with the worker's traceback in the
message): its frames are matched by file and function name, without the index.
"""

from __future__ import annotations

import functools
import operator
import re
from types import CodeType, TracebackType
from typing import Any

from fastprep.core._bad_samples import sample_name
from fastprep.core._failure_text import SKIP_HINT, failure_line

PHASE_NOTE = "fastprep diagnose: raised while "  # find_bottleneck's note on an error escaping it
_TEXT_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line \d+, in (?P<name>\S+)', re.M)


def _codes(fn: Any) -> list[CodeType]:
    """The code objects a call of `fn` runs first: a function's, a method's, a partial's function's,
    an nn.Module's forward, another callable object's __call__."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    fn = getattr(fn, "__func__", fn)  # a bound method
    code = getattr(fn, "__code__", None)
    if isinstance(code, CodeType):
        return [code]
    import torch  # noqa: PLC0415 (the tooling imports torch lazily)

    # nn.Module.__call__ is one function for every module (the user's model too): its forward is its own.
    method = getattr(type(fn), "forward" if isinstance(fn, torch.nn.Module) else "__call__", None)
    code = getattr(getattr(method, "__func__", method), "__code__", None)
    return [code] if isinstance(code, CodeType) else []


def _datasets(dataset: Any) -> list[Any]:
    """`dataset` and the datasets it wraps (``.dataset``), outermost first."""
    chain = []
    while dataset is not None and len(chain) < 32 and all(dataset is not d for d in chain):
        chain.append(dataset)
        dataset = getattr(dataset, "dataset", None)
    return chain


class Stages:
    """The pipeline's parts, by the code each runs: what `describe` matches frames against.

    Args:
        loader: the DataLoader or fastprep.Loader measured (or None: give `dataset`).
        step_fn: the step function.
        dataset: the dataset, when there is no loader (default: the loader's).
        collate_fn: the collate function, when there is no loader (default: the loader's).

    Example:
        >>> try:
        ...     find_bottleneck(loader, step_fn)
        ... except Exception as exc:
        ...     print(Stages(loader, step_fn).describe(exc))
        loading item 5 raised KeyError: 'no such key: 5' while measuring level 5/5 (nothing cached)
    """

    def __init__(self, loader: Any, step_fn: Any, dataset: Any = None, collate_fn: Any = None):
        dataset = getattr(loader, "dataset", None) if dataset is None else dataset
        self.dataset = dataset
        policy = getattr(loader, "on_error", None) or getattr(dataset, "on_error", None)
        self.on_error = policy if isinstance(policy, str) else "raise"
        collate = collate_fn or getattr(loader, "collate_fn", None)
        parts: list[tuple[str, Any]] = [("the step function", step_fn), ("collation", collate)]
        transforms = [getattr(loader, "transform", None)]
        items = []
        for d in _datasets(dataset):
            transforms += [getattr(d, name, None) for name in ("transform", "target_transform", "transforms")]
            transforms.append(getattr(d, "apply_transform", None))
            items += [getattr(type(d), "__getitem__", None), getattr(type(d), "load_raw", None)]
        parts += [("the transform", t) for t in transforms if callable(t)]
        parts += [("loading", f) for f in items if callable(f)]
        self.codes: dict[CodeType, str] = {}
        for stage, fn in parts:
            for code in _codes(fn):
                self.codes.setdefault(code, stage)
        self.names = {(c.co_filename, c.co_name): stage for c, stage in self.codes.items()}
        top = type(dataset) if dataset is not None else None
        self.item_codes = {c for f in (getattr(top, "__getitem__", None), getattr(top, "load_raw", None))
                           if callable(f) for c in _codes(f)}

    def describe(self, exc: BaseException) -> str:
        """'loading item 5 raised KeyError: ...' (and the phase where find_bottleneck noted it)."""
        stage, item = self._stage(exc)
        error, advice = error_text(exc), ""
        if stage == "loading":
            name = sample_name(self.dataset, item) if item is not None and self.dataset is not None else None
            stage = f"loading item {item}" if item is not None else "loading an item"
            if name and name not in error:
                stage += f" ({name})"
            if (name or SKIP_HINT in error) and SKIP_HINT not in error:  # a file or record: a bad sample
                advice = f"; on_error={self.on_error!r} stops at a bad sample: {SKIP_HINT} (fastprep's sources " \
                         f"and Loader take it)"
        elif stage is not None and item is not None:
            stage = f"{stage} (item {item})"
        phase = next((n[len(PHASE_NOTE):] for n in getattr(exc, "__notes__", ()) if n.startswith(PHASE_NOTE)), None)
        where = f" while {phase}" if phase else ""
        return f"{stage or 'the pipeline'} raised {error}{where}{advice}"

    def _stage(self, exc: BaseException) -> tuple[str | None, int | None]:
        frames = list(_frames(exc.__traceback__))
        stage, item = None, None
        for frame in reversed(frames):  # from the frame that raised outwards
            if stage is None:
                stage = self.codes.get(frame.f_code)
            if item is None and frame.f_code in self.item_codes:
                item = _first_argument(frame)
        if stage is None:
            for found in reversed(_TEXT_FRAME.findall(_message(exc))):  # a DataLoader worker's traceback
                stage = self.names.get(found)
                if stage is not None:
                    break
        return stage, item


def _frames(tb: TracebackType | None) -> Any:
    while tb is not None:
        yield tb.tb_frame
        tb = tb.tb_next


def _first_argument(frame: Any) -> int | None:
    """The index a ``__getitem__(self, i)`` / ``load_raw(self, i)`` frame was called with."""
    code = frame.f_code
    if code.co_argcount < 2:
        return None
    try:
        return operator.index(frame.f_locals.get(code.co_varnames[1]))  # an int, a numpy or 0-d tensor index
    except TypeError:
        return None


def _message(exc: BaseException) -> str:
    """The message as raised (a KeyError's str() is its repr)."""
    return exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], str) else str(exc)


error_text = failure_line  # "KeyError: 'no such key'"; a DataLoader worker's error: its original last line
