"""Where a monitored loop shows itself while it runs: a tqdm bar's postfix (the user's bar when the
loop already has one, else one of its own), or a line every few seconds on stderr or a logger;
and, optionally, TensorBoard scalars."""

from __future__ import annotations

import logging
import os
import sys
from typing import Any, TextIO


def tqdm_around(iterable: Any, monitor: Any) -> Any:
    """The user's tqdm bar on this loop: the wrapped iterable itself, or a bar iterating `monitor`
    (``tqdm(fastprep.monitor(loader))``); None when there is none (or tqdm was never imported)."""
    std = sys.modules.get("tqdm.std")
    if std is None:
        return None
    if isinstance(iterable, std.tqdm):
        return iterable
    for bar in list(getattr(std.tqdm, "_instances", ())):
        if getattr(bar, "iterable", None) is monitor:
            return bar
    return None


def tqdm_class(required: bool) -> Any:
    """tqdm's bar class, or None when tqdm is not installed (an error when `required`)."""
    try:
        from tqdm import tqdm  # noqa: PLC0415 (optional: pip install tqdm)
    except ImportError:
        if required:
            raise ValueError("monitor: live='tqdm' but tqdm is not installed (pip install tqdm)") from None
        return None
    return tqdm


class Live:
    """One pass's live line.

    Args:
        bar: the user's tqdm bar to put the postfix on, or None.
        bar_class: tqdm's class to open a bar of our own with (when `bar` is None), or None for
            log lines.
        total: the pass's length for our own bar (None when unknown).
        logger: a logging.Logger for log lines and the summary, or None for `stream`.
        stream: where lines go without a logger (stderr by default).
        log_every: seconds between log lines.
    """

    def __init__(self, bar: Any, bar_class: Any, total: int | None, logger: logging.Logger | None,
                 stream: TextIO | None, log_every: float, now: float):
        self.logger, self.stream, self.log_every = logger, stream, log_every
        self.borrowed = bar
        self.own = None
        if bar is None and bar_class is not None:
            self.own = bar_class(total=total, desc="fastprep.monitor", unit="step", file=stream or sys.stderr,
                                 dynamic_ncols=True, leave=True)
        self.shown = 0
        self.next_log = now + log_every

    def show(self, text: str, batches: int, now: float) -> None:
        """Put `text` on the bar (and count `batches` so far on our own bar), or log it when due."""
        bar = self.own if self.own is not None else self.borrowed  # (a tqdm of length 0 is falsy)
        if bar is not None:
            bar.set_postfix_str(text, refresh=False)
            if self.own is not None:
                self.own.update(batches - self.shown)
                self.shown = batches
            return
        if now >= self.next_log:
            self.next_log = now + self.log_every
            self.write(f"fastprep.monitor: {batches} batches | {text}")

    def close(self, batches: int) -> None:
        if self.own is not None:
            self.own.update(batches - self.shown)
            self.own.close()
            self.own = None

    def write(self, text: str) -> None:
        """A line (or the summary) to the logger, or the stream, around a bar that is still open."""
        if self.logger is not None:
            self.logger.info(text)
        elif self.borrowed is not None and not getattr(self.borrowed, "disable", True):
            type(self.borrowed).write(text, file=self.stream or sys.stderr)
        else:
            stream = self.stream or sys.stderr
            stream.write(text + "\n")
            stream.flush()


class TensorBoard:
    """Scalars under `fastprep.monitor/` at every refresh: input_bound (% of steps), wait_ms,
    step_ms, gpu_util, cpu_util (the machine's) and cpu_process (this process's) (%), against the
    number of steps measured.

    Args:
        target: a SummaryWriter (anything with add_scalar), or a log directory for a writer of
            our own (torch.utils.tensorboard, imported here: pip install tensorboard).
    """

    def __init__(self, target: Any):
        if hasattr(target, "add_scalar"):
            self.writer, self.owned = target, False
            return
        if not isinstance(target, (str, os.PathLike)):
            raise ValueError(f"monitor: expected tensorboard to be a SummaryWriter or a log directory, got {target!r}")
        try:
            from torch.utils.tensorboard import SummaryWriter  # noqa: PLC0415 (optional: pip install tensorboard)
        except ImportError as exc:
            raise ValueError(f"monitor: tensorboard={target!r} needs the tensorboard package "
                             f"(pip install tensorboard): {exc}") from None
        self.writer, self.owned = SummaryWriter(os.fspath(target)), True

    def add(self, step: int, values: dict[str, float | None]) -> None:
        for name, value in values.items():
            if value is not None:
                self.writer.add_scalar(f"fastprep.monitor/{name}", value, step)

    def close(self) -> None:
        self.writer.flush()
        if self.owned:
            self.writer.close()
