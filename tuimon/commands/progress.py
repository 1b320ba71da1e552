"""A progress line on stderr while a batch verb reads its logs: files, MB, MB/s.

Shown only when stderr is a terminal and the read has taken longer than
:data:`SHOW_AFTER_S` (a small read stays silent), redrawn at most every
:data:`REDRAW_S`, and wiped when the read ends, so the figures printed on stdout (and a
pipe's copy of stderr) stay clean."""
from __future__ import annotations

import sys
import time
from typing import Callable, Optional, TextIO

SHOW_AFTER_S = 1.0
REDRAW_S = 0.1


class ReadProgress:
    def __init__(self, stream: Optional[TextIO] = None, clock: Callable[[], float] = time.monotonic,
                 force: bool = False) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.on = force or _is_tty(self.stream)
        self.total_bytes = self.total_files = 0
        self.bytes = self.files = 0
        self.clock = clock
        self.started = clock()
        self.drawn_at: Optional[float] = None

    def begin(self, total_bytes: int, total_files: int) -> None:
        """The sizes the reader found (it stats every file anyway)."""
        self.total_bytes, self.total_files = total_bytes, total_files

    def advance(self, nbytes: int, nfiles: int) -> None:
        self.bytes += nbytes
        self.files += nfiles
        if not self.on:
            return
        now = self.clock()
        if now - self.started < SHOW_AFTER_S or (self.drawn_at is not None and now - self.drawn_at < REDRAW_S):
            return
        self.drawn_at = now
        self.stream.write("\r\x1b[K" + self.line(now))
        self.stream.flush()

    def line(self, now: float) -> str:
        mb, total = self.bytes / 1e6, self.total_bytes / 1e6
        rate = mb / max(now - self.started, 1e-9)
        return f"tuimon: reading {self.files}/{self.total_files} files, {mb:,.0f}/{total:,.0f} MB, {rate:,.0f} MB/s"

    def done(self) -> None:
        """Wipe the line (the figures come next)."""
        if self.drawn_at is not None:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
