"""Random access to a log's lines by number, for a view that pages through the whole
file the way ``less`` does: an index of where each line starts (built in blocks, so a
large file is usable before it is all indexed, and extended as the file grows), and
lines read from disk only when they are shown or searched.

The same interface over lines kept in memory (:class:`KeptLines`) serves remote files,
of which the session keeps only the tail."""
from __future__ import annotations

import os
import re
from typing import Iterable, Optional, Protocol, Sequence

import numpy as np

from ..text import sanitize

BLOCK = 8 << 20  # bytes indexed or searched at a time
LINE_SHOWN = 64 << 10  # a line's bytes shown at most (a 10 MB line is cut, and says by how much)


class Lines(Protocol):
    """What a log view needs of a file."""

    name: str
    complete: bool  # every line is indexed (a partial last line counts once it ends)
    note: str  # shown beside the file's name: what the view covers
    rank: Optional[int]  # the rank whose file it is (its name says so: run-rank3.log), if any

    def __len__(self) -> int: ...
    def index(self, budget: int = BLOCK) -> bool: ...
    def lines(self, start: int, count: int) -> list[str]: ...
    def find(self, needle: str, start: int, forward: bool = True) -> Optional[int]: ...
    def matching(self, pattern: "re.Pattern[str]", start: int = 0) -> np.ndarray: ...


class LogFile:
    """A file on this machine.  Line numbers start at 0; the text is sanitized (no
    control sequences reach the terminal) and decoded leniently (bad UTF-8 is shown as
    U+FFFD, never raised)."""

    def __init__(self, path: str, name: Optional[str] = None) -> None:
        self.path = path
        self.name = name or path
        self.note = ""
        self.rank: Optional[int] = None
        self._buf = np.zeros(1024, dtype=np.int64)  # grown by doubling: a block's lines are not a copy of all before
        self._count = 1  # where each line starts (_buf[:_count]); the last: where the next would
        self._indexed = 0  # bytes scanned for newlines
        self._size = 0
        self.complete = False

    def __len__(self) -> int:
        """Lines indexed so far, a last line without its newline included."""
        n = len(self._starts) - 1
        return n + 1 if self.complete and self._size > self._starts[-1] else n

    # -- the bytes: a file here (a subclass reads them elsewhere) ---------------------------------
    read_block = BLOCK  # bytes read at a time while indexing

    def _file_size(self) -> int:
        return os.path.getsize(self.path)

    def _read(self, begin: int, end: int) -> bytes:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(begin)
                return fh.read(max(0, end - begin))
        except OSError:
            return b""

    def index(self, budget: int = BLOCK) -> bool:
        """Index up to ``budget`` more bytes (the file may have grown, or been truncated:
        then it is indexed again from the start).  True when every byte is indexed."""
        try:
            size = self._file_size()
        except OSError:
            self.complete = True
            return True
        if size < self._indexed:  # truncated or replaced: start over
            self._count = 1
            self._indexed = 0
        self._size = size
        todo = min(budget, self.read_block, size - self._indexed)
        if todo > 0:
            block = self._read(self._indexed, self._indexed + todo)
            ends = np.flatnonzero(np.frombuffer(block, dtype=np.uint8) == 10).astype(np.int64) + (self._indexed + 1)
            if ends.size:
                need = self._count + ends.size
                if need > self._buf.size:
                    grown = np.zeros(max(need, 2 * self._buf.size), dtype=np.int64)
                    grown[:self._count] = self._buf[:self._count]
                    self._buf = grown
                self._buf[self._count:need] = ends
                self._count = need
            self._indexed += len(block)
        self.complete = self._indexed >= size
        return self.complete

    @property
    def _starts(self) -> np.ndarray:
        return self._buf[:self._count]

    def _span(self, line: int) -> tuple[int, int]:
        starts = self._starts
        start = int(starts[line])
        end = int(starts[line + 1]) if line + 1 < len(starts) else self._size
        return start, end

    def lines(self, start: int, count: int) -> list[str]:
        n = len(self)
        start, stop = max(0, start), min(n, start + count)
        if stop <= start:
            return []
        first, _ = self._span(start)
        _, last = self._span(stop - 1)
        if last - first > (stop - start) * LINE_SHOWN:  # some huge lines: each read up to its cut
            return [self._cut_line(n) for n in range(start, stop)]
        data = self._read(first, last)
        out = data.decode("utf-8", errors="replace").split("\n")
        if out and out[-1] == "" and data.endswith(b"\n"):
            out.pop()
        return [_shown(line) for line in out[: stop - start]]

    def _cut_line(self, line: int) -> str:
        begin, end = self._span(line)
        if line + 1 < len(self._starts):
            end -= 1  # its newline
        data = self._read(begin, min(end, begin + LINE_SHOWN))
        text = _shown(data.decode("utf-8", errors="replace"))
        if end - begin > LINE_SHOWN:
            text += f" … ({end - begin - LINE_SHOWN} more bytes)"
        return text

    def _line_at(self, offset: int) -> int:
        return int(np.searchsorted(self._starts, offset, side="right")) - 1

    def find(self, needle: str, start: int, forward: bool = True) -> Optional[int]:
        """The first line from ``start`` on (or before it, going back) holding ``needle``,
        any case; None when none does.  Reads the file in blocks, not line by line."""
        key = needle.lower().encode("utf-8", errors="replace")
        n = len(self)
        if not key or not n:
            return None
        start = min(max(0, start), n - 1)
        if forward:
            pos, _ = self._span(start)
            end = self._span(n - 1)[1]
            while pos < end:
                stop = min(end, pos + self.read_block)
                block = self._read(pos, min(end, stop + len(key) - 1)).lower()
                hit = block.find(key)
                if hit >= 0:
                    return self._line_at(pos + hit)
                pos = stop
            return None
        _, end = self._span(start)
        while end > 0:
            begin = max(0, end - self.read_block)
            block = self._read(begin, min(self._span(start)[1], end + len(key) - 1)).lower()
            hit = block.rfind(key)
            if hit >= 0:
                return self._line_at(begin + hit)
            end = begin
        return None

    def matching(self, pattern: "re.Pattern[str]", start: int = 0) -> np.ndarray:
        """The numbers of the lines from ``start`` on that ``pattern`` matches (read a
        block of lines at a time)."""
        found: list[np.ndarray] = []
        n = len(self)
        step = 100_000
        for first in range(max(0, start), n, step):
            chunk = self.lines(first, step)
            found.append(np.fromiter((first + i for i, line in enumerate(chunk) if pattern.search(line)),
                                     dtype=np.int64))
        return np.concatenate(found) if found else np.zeros(0, dtype=np.int64)


def _shown(line: str) -> str:
    line = line.rstrip("\r")
    if len(line) > LINE_SHOWN:
        line = line[:LINE_SHOWN] + f" … ({len(line) - LINE_SHOWN} more characters)"
    return sanitize(line, max_len=LINE_SHOWN + 64)


class KeptLines:
    """Lines the session keeps in memory (a remote file's tail)."""

    def __init__(self, name: str, lines: Iterable[str], note: str = "") -> None:
        self.name = name
        self.note = note
        self.rank: Optional[int] = None
        self._lines: Sequence[str] = [_shown(line) for line in lines]
        self.complete = True

    def __len__(self) -> int:
        return len(self._lines)

    def index(self, budget: int = BLOCK) -> bool:
        return True

    def lines(self, start: int, count: int) -> list[str]:
        return list(self._lines[max(0, start): max(0, start + count)])

    def find(self, needle: str, start: int, forward: bool = True) -> Optional[int]:
        key = needle.lower()
        if not key or not self._lines:
            return None
        start = min(max(0, start), len(self._lines) - 1)
        order = range(start, len(self._lines)) if forward else range(start, -1, -1)
        return next((i for i in order if key in self._lines[i].lower()), None)

    def matching(self, pattern: "re.Pattern[str]", start: int = 0) -> np.ndarray:
        return np.fromiter((i for i, line in enumerate(self._lines) if i >= start and pattern.search(line)),
                           dtype=np.int64)
