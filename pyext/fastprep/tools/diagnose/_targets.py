"""What `python -m fastprep diagnose` checks before it measures anything: the MODULE:FACTORY
target, what the factory returns, and that --json / --plot can be written.

Every problem with what the user gave (a malformed MODULE:FACTORY, a module that does not import,
a factory that fails or returns the wrong thing, an unwritable output path) is a UsageError: the
command prints it as one line on stderr and exits with status 2, before any measurement.
"""

from __future__ import annotations

import importlib
import inspect
import keyword
import os
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastprep.tools.measuring._usage import UsageError

FORMS = "(dataset, step_fn, batch_size[, collate_fn]) or (loader, step_fn)"


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _a(obj: Any) -> str:
    name = type(obj).__name__
    return f"{'an' if name[:1].lower() in 'aeiou' else 'a'} {name}"


def _raised(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else repr(exc)


def _dotted(text: str) -> bool:
    return all(part.isidentifier() and not keyword.iskeyword(part) for part in text.split("."))


def parse_target(target: str) -> tuple[str, list[str]]:
    """'pkg.mod:factory' -> ('pkg.mod', ['factory']); a dotted attribute path is allowed."""
    example = "e.g. mypkg.train:make_pipeline"
    if target.count(":") != 1:
        raise UsageError(f"expected MODULE:FACTORY with one ':' ({example}), got {target!r}")
    module, attr = target.split(":")
    if not module:
        raise UsageError(f"the module name before ':' is empty in {target!r} ({example})")
    if not attr:
        raise UsageError(f"the factory name after ':' is empty in {target!r} ({example})")
    if not _dotted(module):
        raise UsageError(f"{module!r} in {target!r} is not a dotted Python module name ({example})")
    if not _dotted(attr):
        raise UsageError(f"{attr!r} in {target!r} is not a Python name (a function in the module, {example})")
    return module, attr.split(".")


def load_factory(target: str) -> Callable[[], Any]:
    module_name, attrs = parse_target(target)
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise UsageError(f"cannot import {module_name!r}: no module named {exc.name!r} (is it on sys.path? "
                             f"`python -m fastprep` adds the current directory)") from exc
        raise UsageError(f"importing {module_name!r} failed: ModuleNotFoundError: {exc}") from exc
    except (Exception, SystemExit) as exc:  # the user's module raised while importing
        raise UsageError(f"importing {module_name!r} raised {_raised(exc)}") from exc
    for k, attr in enumerate(attrs):
        if not hasattr(obj, attr):
            where = module_name + "".join(f".{a}" for a in attrs[:k])
            raise UsageError(f"{where!r} has no attribute {attr!r} (from {target!r})")
        obj = getattr(obj, attr)
    if not callable(obj):
        raise UsageError(f"{target} is {_a(obj)} ({_short(obj)}), not a factory function returning "
                         f"{FORMS}")
    return obj


@dataclass
class Target:
    """A validated factory result: either a loader (DataLoader or fastprep.Loader) or a dataset
    with its batch size and collate_fn, and the step function."""
    step_fn: Callable[[Any], Any]
    loader: Any = None
    dataset: Any = None
    batch_size: int | None = None
    collate_fn: Callable | None = None


def _is_loader(obj: Any) -> bool:
    from torch.utils.data import DataLoader  # noqa: PLC0415

    from fastprep.tools.diagnose._bottleneck import is_fastprep_loader  # noqa: PLC0415

    return isinstance(obj, DataLoader) or is_fastprep_loader(obj)


def call_factory(factory: Callable[[], Any], label: str) -> Target:
    """Call the factory with no arguments and check what it returns."""
    try:
        inspect.signature(factory).bind()
    except TypeError:
        raise UsageError(f"{label} takes required arguments {inspect.signature(factory)}; diagnose calls it "
                         f"with none") from None
    except ValueError:
        pass  # no signature to check (a builtin): calling it says
    try:
        made = factory()
    except (Exception, SystemExit) as exc:
        raise UsageError(f"{label}() raised {_raised(exc)}") from exc
    if _is_loader(made):
        raise UsageError(f"{label}() returned {_a(made)} alone; return (loader, step_fn)")
    if not isinstance(made, (tuple, list)) or len(made) not in (2, 3, 4):
        what = f"{len(made)} items" if isinstance(made, (tuple, list)) else _a(made)
        raise UsageError(f"{label}() returned {what} ({_short(made)}); expected {FORMS}")
    if len(made) == 2:
        loader, step_fn = made
        if not _is_loader(loader):
            raise UsageError(f"{label}()[0] is {_a(loader)} ({_short(loader)}); with 2 items, expected "
                             f"(loader, step_fn) where loader is a torch DataLoader or a fastprep.Loader")
        return Target(_check_step(step_fn, label), loader=loader)
    dataset, step_fn, batch_size = made[:3]
    collate_fn = made[3] if len(made) == 4 else None
    if not hasattr(dataset, "__getitem__") and not hasattr(dataset, "__iter__"):
        raise UsageError(f"{label}()[0] is {_a(dataset)} ({_short(dataset)}), not a dataset "
                         f"(expected __getitem__ and __len__, or __iter__)")
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise UsageError(f"{label}()[2] (batch_size) must be an int >= 1, got {_short(batch_size)}")
    if collate_fn is not None and not callable(collate_fn):
        raise UsageError(f"{label}()[3] (collate_fn) must be callable or None, got {_short(collate_fn)}")
    return Target(_check_step(step_fn, label), dataset=dataset, batch_size=batch_size, collate_fn=collate_fn)


def _check_step(step_fn: Any, label: str) -> Callable[[Any], Any]:
    if not callable(step_fn):
        raise UsageError(f"{label}()'s step_fn is {_a(step_fn)} ({_short(step_fn)}), not callable")
    return step_fn


def check_writable(flag: str, path: str) -> None:
    """Fail now, not after the run, if `path` cannot be written."""
    if not path:
        raise UsageError(f"{flag}: empty path")
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path}: is a directory")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError(f"{flag} {path}: directory {parent} does not exist")
    try:
        if os.path.exists(path):
            with open(path, "ab"):  # appends nothing: the file is rewritten after the run
                pass
        else:
            fd, probe = tempfile.mkstemp(dir=parent, prefix=".fastprep-write-check-")
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot write there ({exc.strerror or exc})") from None


def check_plot(path: str) -> None:
    """--plot: matplotlib must import and know the file's format."""
    check_writable("--plot", path)
    try:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        from matplotlib.figure import Figure  # noqa: PLC0415
    except ImportError as exc:
        raise UsageError(f"--plot needs matplotlib: pip install 'fastprep[plot]' ({exc})") from None
    ext = os.path.splitext(path)[1].lstrip(".").lower()
    formats = Figure().canvas.get_supported_filetypes()
    if ext and ext not in formats:
        raise UsageError(f"--plot {path}: matplotlib cannot write .{ext} files "
                         f"(it writes {', '.join(sorted(formats))})")
