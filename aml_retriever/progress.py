"""A progress line for the command line's long work (import, reindex, backup): how far, how fast,
about how long is left, rewritten in place on a terminal at most twice a second, and nothing at
all when stderr is not a terminal (a log or a pipe reads the command's one result line) or the
command was asked to be quiet.

    import: 12,000 of 20,000 lines, 1,830 a second, about 4 s left
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

# How often the line is rewritten: often enough to look alive, seldom enough to cost nothing.
EVERY_S = 0.5


class Progress:
    """The progress of one command's work in `unit`s ("lines", "users", "files") of `total`."""

    def __init__(self, label: str, unit: str, total: int, quiet: bool = False,
                 stream: TextIO | None = None) -> None:
        self.label = label
        self.unit = unit
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.shown = not quiet and self.stream.isatty()
        self._started = time.monotonic()
        self._last = 0.0
        self._written = False

    def step(self, done: int) -> None:
        """`done` of `total` are done; the line is rewritten when EVERY_S has passed."""
        if not self.shown:
            return
        now = time.monotonic()
        if now - self._last >= EVERY_S or done >= self.total:
            self._last = now
            self.stream.write("\r" + self.line(done, now - self._started) + "\x1b[K")
            self.stream.flush()
            self._written = True

    def finish(self) -> None:
        """End the line, so that the command's result starts on its own."""
        if self._written:
            self.stream.write("\n")
            self.stream.flush()

    def line(self, done: int, elapsed_s: float) -> str:
        """The line for `done` after `elapsed_s` seconds."""
        text = f"{self.label}: {done:,} of {self.total:,} {self.unit}"
        if elapsed_s > 0 and done > 0:
            rate = done / elapsed_s
            text += f", {rate:,.0f} a second"
            if done < self.total:
                text += f", about {max(1, round((self.total - done) / rate)):,} s left"
        return text
