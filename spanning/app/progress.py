"""Progress lines for the waits a user would otherwise sit through in silence (Spark's start, a first batch).

On a terminal, one line on standard error, rewritten as the work moves on and cleared when it ends; in a
log or a pipe, plain lines, or nothing at all with ``quiet_off_terminal`` (the commands' outputs that tests
and scripts read stay as they were).

>>> import io
>>> steps = Progress(stream=io.StringIO(), terminal=False)
>>> steps("starting Spark")
>>> steps.stream.getvalue().endswith("s] starting Spark\\n")
True
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

__all__ = ["Progress"]

_WIDTH = 100


class Progress:
    """``progress("message")``: a timed line; ``progress.done()`` clears the terminal's line."""

    def __init__(self, stream: TextIO | None = None, terminal: bool | None = None, quiet_off_terminal: bool = False):
        self.stream = sys.stderr if stream is None else stream
        self.terminal = self.stream.isatty() if terminal is None else terminal
        self.silent = quiet_off_terminal and not self.terminal
        self.began = time.perf_counter()
        self.shown = False

    def __call__(self, message: str) -> None:
        if self.silent:
            return
        line = f"[{time.perf_counter() - self.began:6.1f}s] {message}"
        if self.terminal:
            print(f"\r{line[:_WIDTH]:<{_WIDTH}}", end="", file=self.stream, flush=True)
            self.shown = True
        else:
            print(line, file=self.stream, flush=True)

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc) -> None:
        self.done()  # an error's line too starts clean

    def done(self) -> None:
        """Clear the line on a terminal, so that what the command prints next starts clean."""
        if self.shown:
            print(f"\r{'':<{_WIDTH}}\r", end="", file=self.stream, flush=True)
            self.shown = False
