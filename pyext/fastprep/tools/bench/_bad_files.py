"""`bench --data` on a folder holding a bad file (a truncated JPEG, a text file named .jpg): one
line naming the file and the policy it was read under, instead of "measuring raised OSError ...
DataLoader worker process 0" naming nothing.

The usual pipeline's torchvision ImageFolder reads through :func:`naming_loader`, whose error
names the file (Pillow's "image file is truncated" does not); fastprep's sources name it already.
A failure while measuring whose text names one of the folder's files (or carries a source's
``on_error`` advice) becomes a :class:`BadFileStop` carrying that line.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastprep.core._failure_text import SKIP_HINT, failure_line

POLICY = ("bench reads every file with on_error='raise', as torchvision's ImageFolder does: remove or repair "
          "it (to train past bad files: fastprep.io.ImageFolder(on_error='skip') or fastprep.Loader(on_error='skip'), "
          "or 'warn')")


class BadFileError(ValueError):
    """torchvision's loader failed on a file: the message is "PATH: Type: cause" (one string, so
    a DataLoader worker re-raises it as it re-raises a ValueError)."""


class BadFileStop(Exception):
    """Measuring stopped at a bad file: the message is the line to print."""


def naming_loader(path: str) -> Any:
    """torchvision's default_loader (a PIL image in RGB) for `path`; its error as a BadFileError
    naming the file. Module-level, so a DataLoader worker started by spawn can unpickle it."""
    try:
        from torchvision.datasets.folder import default_loader  # noqa: PLC0415 (bench --data needs torchvision)
    except ImportError:  # a torchvision without its folder module: the same Pillow loader
        from fastprep.tools.photos import decode_rgb as default_loader  # noqa: PLC0415

    try:
        return default_loader(path)
    except Exception as exc:  # noqa: BLE001 (whatever Pillow raises for a file it cannot read)
        raise BadFileError(f"{path}: {failure_line(exc)}") from exc


def bad_file_line(exc: BaseException, paths: Sequence[str]) -> str | None:
    """The line for a measurement stopped by a bad file: the file (the longest of `paths` the
    error's text names), the cause and the policy; None when the error is not about a sample."""
    text = failure_line(exc)
    named = [p for p in paths if p in text]
    if not named and SKIP_HINT not in text:
        return None
    cause = text.replace(f" ({SKIP_HINT})", "").replace(f"{BadFileError.__module__}.", "")
    if not named:
        return f"measuring stopped at a bad sample ({cause}); {POLICY}"
    path = max(named, key=len)
    cause = cause.replace(f"{BadFileError.__name__}: {path}: ", "")  # the loader's error: the cause after the path
    return f"measuring stopped: {path!r} is a bad file ({cause}); {POLICY}"
