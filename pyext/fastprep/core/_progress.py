"""Progress with a time estimate for long runs (packing a dataset, measurements): tqdm's bar when
tqdm is installed, else one line on stderr (rewritten in place on a terminal, a new line every few
seconds otherwise).

Callers report `(what, fraction)` where fraction is the share of the estimated total time done,
so the remaining time is elapsed * (1 - fraction) / fraction.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO


class Progress:
    """`progress(what, fraction)` updates the bar; `close()` ends it.

    Args:
        title: what runs (shown before the bar).
        stream: where to write (default stderr).
        use_tqdm: None picks tqdm when it imports; False always writes the plain line.
    """

    def __init__(self, title: str, stream: TextIO | None = None, use_tqdm: bool | None = None):
        self.title, self.stream = title, stream or sys.stderr
        self.start = time.perf_counter()
        self._last = 0.0
        self._width = 0
        self._bar: Any = None
        if use_tqdm is not False:
            try:
                from tqdm import tqdm  # noqa: PLC0415 (optional: pip install tqdm)
            except ImportError:
                if use_tqdm:
                    raise
            else:
                self._bar = tqdm(total=1000, desc=title, file=self.stream, leave=True, dynamic_ncols=True,
                                 bar_format="{desc}: {percentage:3.0f}%|{bar}| {elapsed} elapsed, "
                                            "about {remaining} left")
        self._tty = self.stream.isatty() if hasattr(self.stream, "isatty") else False

    def __call__(self, what: str, fraction: float) -> None:
        fraction = min(max(fraction, 0.0), 1.0)
        if self._bar is not None:
            self._bar.set_description_str(f"{self.title}: {what}", refresh=False)
            self._bar.update(int(fraction * 1000) - self._bar.n)
            return
        now = time.perf_counter()
        if now - self._last < (0.5 if self._tty else 5.0):
            return
        self._last = now
        self._write(f"{self.title}: {what} {fraction:4.0%} {eta(now - self.start, fraction)}")

    def _write(self, line: str) -> None:
        if self._tty:
            self.stream.write("\r" + line.ljust(self._width))
            self._width = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """End the bar (at 100%) or the line with the time it took."""
        if self._bar is not None:
            self._bar.update(1000 - self._bar.n)
            self._bar.close()
            self._bar = None
        elif self._last:
            self._write(f"{self.title}: done in {time.perf_counter() - self.start:.0f} s")
            if self._tty:
                self.stream.write("\n")
                self.stream.flush()
            self._last = 0.0

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def eta(elapsed: float, fraction: float) -> str:
    """'12 s elapsed, about 30 s left' (no estimate before 1% is done)."""
    if fraction < 0.01:
        return f"{elapsed:.0f} s elapsed"
    return f"{elapsed:.0f} s elapsed, about {elapsed * (1 - fraction) / fraction:.0f} s left"
