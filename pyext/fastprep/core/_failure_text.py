"""The words a bad sample's error ends in: the file it was and how to skip it (``SKIP_HINT``), in
the message itself (Python 3.10 has no ``add_note``), and one line for an error that stopped a pass,
a DataLoader worker's included (torch puts the worker's traceback in the message), for the
monitor, ``diagnose`` and ``bench --data`` to print instead of a worker's traceback.
"""

from __future__ import annotations

import re

SKIP_HINT = "pass on_error='skip' to skip bad files, or 'warn'"


def with_skip_hint(who: str, name: str | None, exc: BaseException) -> BaseException:
    """What a source raises for bad sample `name` under on_error="raise": `exc` again, of the same
    type (``except ValueError`` / ``except FileNotFoundError`` still catch it), its message naming
    the sample and ending in SKIP_HINT; no ``add_note`` (Python 3.10), so the text is the message.
    An exception whose type cannot be rebuilt from its message (KeyError quotes it, a type with
    its own ``__init__``) or that already says it is returned unchanged."""
    text = str(exc)
    if SKIP_HINT in text:
        return exc
    if name and name not in text and not text.startswith(f"{who}: "):  # the source's own errors name it already
        text = f"{who}: {name}: {text}"
    try:
        if isinstance(exc, OSError) and exc.errno is not None and exc.strerror:  # errno kept: "[Errno 2] ..."
            where = name or exc.filename
            text = f"{who}: {exc.strerror}{f': {where!r}' if where else ''} ({SKIP_HINT})"
            hinted = type(exc)(exc.errno, text)
            text = str(hinted)
        else:
            text = f"{text} ({SKIP_HINT})"
            hinted = type(exc)(text)
    except Exception:  # noqa: BLE001 (a type that cannot be rebuilt keeps its own error)
        return exc
    if str(hinted) != text:
        return exc
    hinted.__cause__, hinted.__suppress_context__ = exc.__cause__, exc.__suppress_context__
    return hinted.with_traceback(exc.__traceback__)


def failure_line(exc: BaseException) -> str:
    """'Type: message' on one line, as Python's last traceback line says it. A DataLoader worker's
    error (torch's ExceptionWrapper: the worker's traceback in the message) is its original last
    line, with the worker named, instead of "Caught ... in DataLoader worker process 0"."""
    message = exc.args[0] if len(exc.args) == 1 and isinstance(exc.args[0], str) else str(exc)
    if "Original Traceback" in message:
        lines = [ln for ln in message.splitlines() if ln.strip()]
        worker = re.search(r"in DataLoader worker process (\d+)", message)
        return f"{lines[-1].strip()} (in DataLoader worker process {worker.group(1) if worker else '?'})"
    text = " ".join(str(exc).split())
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
