"""A progress bar on stderr while a batch verb reads its logs: files, MB, MB/s, time left.

(A terminal display, so it lives with the UI: the CLI's summary is what shows it.)

Rich's progress display (rich is a dependency already), shown only when stderr is a terminal and the
read has taken longer than :data:`SHOW_AFTER_S` (a small read stays silent), redrawn at most every
:data:`REDRAW_S` (by the reader's own calls: no refresh thread beside the parse), and transient: wiped
when the read ends, so the figures printed on stdout (and a pipe's copy of stderr) stay clean.
``TUIMON_PROGRESS_AFTER_S`` sets the wait (seconds, a number at least 0; anything else: the default),
for a reader faster than its test's log is long."""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Optional, TextIO

SHOW_AFTER_S = 1.0
REDRAW_S = 0.1


class ReadProgress:
    def __init__(self, stream: Optional[TextIO] = None, clock: Callable[[], float] = time.monotonic,
                 force: bool = False, width: Optional[int] = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.force, self.width = force, width
        self.on = force or _is_tty(self.stream)
        self.total_bytes = self.total_files = 0
        self.bytes = self.files = 0
        self.clock = clock
        self.started = clock()
        self.after_s = _wait()
        self.drawn_at: Optional[float] = None
        self._bar: Any = None  # rich's Progress, made (and rich imported: 50 ms) when first drawn
        self._task: Any = None

    def begin(self, total_bytes: int, total_files: int) -> None:
        """The sizes the reader found (it stats every file anyway)."""
        self.total_bytes, self.total_files = total_bytes, total_files

    def advance(self, nbytes: int, nfiles: int) -> None:
        self.bytes += nbytes
        self.files += nfiles
        if not self.on:
            return
        now = self.clock()
        if now - self.started < self.after_s or (self.drawn_at is not None and now - self.drawn_at < REDRAW_S):
            return
        self.drawn_at = now
        rate = f"{self.bytes / 1e6 / max(now - self.started, 1e-9):,.0f} MB/s"  # since the read began
        files = f"{self.files}/{self.total_files} files"
        if self._bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

            console = Console(file=self.stream, force_terminal=True if self.force else None, width=self.width,
                              highlight=False, soft_wrap=False)
            self._bar = Progress(TextColumn("tuimon: reading {task.fields[files]}"), BarColumn(), DownloadColumn(),
                                 TextColumn("{task.fields[rate]}"), TimeRemainingColumn(),
                                 console=console, transient=True, auto_refresh=False, get_time=self.clock,
                                 redirect_stdout=False, redirect_stderr=False)  # stdout is the figures'
            self._task = self._bar.add_task("read", total=self.total_bytes or None, completed=self.bytes,
                                            files=files, rate=rate)
            self._bar.start()
        else:
            self._bar.update(self._task, completed=self.bytes, files=files, rate=rate)
        self._bar.refresh()

    def done(self) -> None:
        """Wipe the bar (the figures come next)."""
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _wait() -> float:
    """How long a read goes on before it is shown (:data:`SHOW_AFTER_S`, or the environment's)."""
    try:
        wait = float(os.environ.get("TUIMON_PROGRESS_AFTER_S", SHOW_AFTER_S))
    except ValueError:
        return SHOW_AFTER_S
    return wait if 0.0 <= wait < float("inf") else SHOW_AFTER_S


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
