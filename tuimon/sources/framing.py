"""Framing: bytes in, blocks of complete normalised lines out.

* Lines end at ``b"\\n"`` only (never ``str.splitlines``, which also breaks on
  U+2028, ``\\x0b``, ``\\x1c``...).  A partial last line is held until its newline.
* ``\\r\\n`` endings lose the ``\\r``; ``\\r`` progress bars keep their last segment.
* A line longer than ``max_line`` is replaced by one marker line (memory stays
  bounded: its bytes are dropped as they arrive) and counted.
* Decoding replaces invalid UTF-8 with U+FFFD; a multibyte character can never be
  split, because only whole lines are decoded.  NUL bytes become U+2400 (␀).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np

DEFAULT_MAX_LINE = 1 << 20
TOO_LONG_MARKER = "\u2400tuimon: line too long, skipped"

_CR_BEFORE_NL = re.compile(rb"\r+(?=\n)")

# Carriage returns are handled on the bytes, before decoding: b"\r" and b"\n" never
# occur inside a UTF-8 sequence, and bytes searches run several times faster than str ones.


def _drop_cr_before_nl(data: bytes) -> bytes:
    """``\r\n`` -> ``\n`` (and ``\r\r\n``...).  replace() runs ten times faster than
    the regex, which stays as the fallback for long runs of ``\r``."""
    for _ in range(2):
        if b"\r\n" not in data:
            return data
        data = data.replace(b"\r\n", b"\n")
    return _CR_BEFORE_NL.sub(b"", data) if b"\r\n" in data else data


_CR_RUN = re.compile(rb"\r+")


def _segments(line: bytes) -> bytes:
    """One line (no ``\n``, trailing ``\r`` gone) holding ``\r``: a progress bar (it
    starts with ``\r``) keeps its last segment; otherwise every non-empty segment is a
    line (the ``\r`` ended a record)."""
    if line[:1] == b"\r":
        return line[line.rfind(b"\r") + 1:]
    return _CR_RUN.sub(b"\n", line)


def _keep_last_segments(data: bytes, continued: list[int]) -> bytes:
    """Lines holding ``\r`` lose the ones that end them (``\r\n``) and are split or cut
    by :func:`_segments`.  Only those lines are touched.  The output lines that are
    second or later segments of one line are added to ``continued`` (by index): they
    keep that line's number."""
    parts: list = []
    pos = 0
    out_lines = 0  # lines of the output before ``pos``
    view = memoryview(data)  # the untouched runs are joined without a copy of their own
    find, rfind = data.find, data.rfind
    cr = find(b"\r")
    while cr >= 0:
        start = rfind(b"\n", 0, cr) + 1
        end = find(b"\n", cr)
        if end < 0:
            end = len(data)
        line = data[start:end].rstrip(b"\r")
        parts.append(view[pos:start])
        out_lines += data.count(b"\n", pos, start)
        if b"\r" in line:
            line = _segments(line)
            extra = line.count(b"\n")
            continued.extend(range(out_lines + 1, out_lines + 1 + extra))
            out_lines += extra
        parts.append(line)
        pos = end
        cr = find(b"\r", end)
    parts.append(view[pos:])
    return b"".join(parts)


def split_held(partial: bytes) -> tuple[bytes, bytes]:
    """A held partial line (from a line start, no ``\n``) as (records it already ends,
    what stays held).  A record line ended by a lone ``\r`` followed by more bytes is
    complete; a trailing ``\r`` waits (it may be half of ``\r\n``).  A progress bar
    holds only its leading ``\r`` and last segments: memory stays bounded."""
    cut = partial.rstrip(b"\r").rfind(b"\r")
    if cut <= 0:
        return b"", partial
    if partial[:1] == b"\r":
        return b"", b"\r" + partial[cut + 1:]
    return partial[:cut] + b"\n", partial[cut + 1:]  # its segments are split (and numbered) as any line's


def _fix_carriage_returns(data: bytes, continued: list[int]) -> bytes:
    first = data.find(b"\n")
    if first > 0 and data[first - 1] == 13:  # CRLF line endings: replace them in bulk first
        data = _drop_cr_before_nl(data)
        if b"\r" not in data:
            return data
    return _keep_last_segments(data, continued)


def _has_line_longer(data: bytes, limit: int) -> bool:
    """Whether a line of ``data`` (which ends in a newline) has more than ``limit``
    bytes.  Such a line covers a multiple of ``limit``: only those lines are measured."""
    rfind, find = data.rfind, data.find
    for at in range(limit, len(data), limit):
        if find(b"\n", at) - rfind(b"\n", 0, at) - 1 > limit:
            return True
    return False


@dataclass(slots=True)
class Block:
    text: str  # complete lines, each ending in "\n"
    first_line: int  # 1-based number of the first line
    lines: int  # lines of the file the block ends (segments of one line count once)
    #: indices of the text's lines that are later segments of the line before (a lone
    #: ``\r`` ended a record): they carry its number.  Empty for almost every block.
    continued: tuple[int, ...] = ()

    def runs(self) -> list[tuple[str, int]]:
        """(text, number of its first line) pieces whose lines are numbered one after
        another: the whole block unless some lines are segments of one line."""
        if not self.continued:
            return [(self.text, self.first_line)] if self.text else []
        lines = self.text.split("\n")[:-1]
        out: list[tuple[str, int]] = []
        cont = set(self.continued)
        start, number = 0, self.first_line
        for i in range(1, len(lines) + 1):
            if i == len(lines) or i in cont:
                out.append(("".join(line + "\n" for line in lines[start:i]), number))
                number += (i - start) - (1 if i in cont else 0)
                start = i
        return out


class Framer:
    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.max_line = max_line
        self._partial = b""
        self._discarding = False
        self.next_line = 1
        self._open = False  # the held partial line began in a block already out (its first segments)
        self.too_long = 0
        self.invalid_utf8 = 0
        self.bytes_in = 0

    @property
    def pending(self) -> int:
        """Bytes of the held, incomplete last line."""
        return len(self._partial)

    def restart_at(self, line: int) -> None:
        """The next bytes start line ``line`` (nothing held; the counts go on)."""
        self._partial, self._discarding, self._open, self.next_line = b"", False, False, line

    def feed(self, data: bytes) -> Block:
        self.bytes_in += len(data)
        prefix_lines: list[str] = []
        if self._discarding:
            nl = data.find(b"\n")
            if nl < 0:
                return self._block("", 0)
            data = data[nl + 1:]
            self._discarding = False
            prefix_lines.append(TOO_LONG_MARKER)
        last_nl = data.rfind(b"\n")  # the held partial line has none
        if last_nl < 0:
            held = self._partial + data if self._partial else bytes(data)
            done, held = split_held(held) if b"\r" in held else (b"", held)
            self._hold(held)
            return self._finish(prefix_lines, done, open_after=bool(done))
        # one copy of the complete lines (a block is a megabyte), none when the read ends a line
        if self._partial:
            complete = b"".join((self._partial, memoryview(data)[:last_nl + 1]))
        else:
            complete = data if last_nl + 1 == len(data) and type(data) is bytes else bytes(data[:last_nl + 1])
        rest = bytes(data[last_nl + 1:])
        done = b""
        if b"\r" in rest:
            done, rest = split_held(rest)
            complete = complete + done if done else complete
        self._hold(rest)
        return self._finish(prefix_lines, complete, open_after=bool(done))

    def flush(self) -> Block:
        """End of input: the held partial line becomes a line of its own."""
        if self._discarding:
            self._discarding = False
            return self._finish([TOO_LONG_MARKER], b"")
        rest, self._partial = self._partial, b""
        return self._finish([], rest + b"\n" if rest else b"")

    # -- internals ---------------------------------------------------------------------
    def _hold(self, rest: bytes) -> None:
        if len(rest) > self.max_line:
            self._partial = b""
            self._discarding = True
            self.too_long += 1
        else:
            self._partial = bytes(rest)

    def _finish(self, prefix_lines: list[str], complete: bytes, open_after: bool = False) -> Block:
        """The block of ``prefix_lines`` (markers) and the ``complete`` lines.  While a
        line is open (its first segments went out, the rest is held), what ends it is a
        segment of it: numbered with it."""
        continued: list[int] = [0] if self._open and (prefix_lines or complete) else []
        if not (prefix_lines or complete):
            return self._block("", 0)
        self._open = open_after
        if not complete:
            text = "".join(line + "\n" for line in prefix_lines)
            return self._block(text, len(prefix_lines), continued)
        if len(complete) > self.max_line and _has_line_longer(complete, self.max_line):
            complete = self._drop_long_lines(complete)
        if b"\r" in complete:
            segments: list[int] = []
            complete = _fix_carriage_returns(complete, segments)
            continued += [i + len(prefix_lines) for i in segments]
        n = int(np.count_nonzero(np.frombuffer(complete, dtype=np.uint8) == 10))
        try:
            text = complete.decode("utf-8")
        except UnicodeDecodeError:
            text = complete.decode("utf-8", "replace")
            self.invalid_utf8 += sum(1 for line in text.split("\n") if "\ufffd" in line)
        if "\x00" in text:
            text = text.replace("\x00", "\u2400")
        if prefix_lines:
            text = "".join(line + "\n" for line in prefix_lines) + text
        return self._block(text, n + len(prefix_lines), continued)

    def _drop_long_lines(self, complete: bytes) -> bytes:
        marker = TOO_LONG_MARKER.encode()
        out = []
        for line in complete.split(b"\n")[:-1]:
            if len(line) > self.max_line:
                self.too_long += 1
                out.append(marker)
            else:
                out.append(line)
        return b"\n".join(out) + b"\n"

    def _block(self, text: str, lines: int, continued: Sequence[int] = ()) -> Block:
        if continued:
            first = self.next_line - 1 if continued[0] == 0 else self.next_line  # an open line goes on
            lines -= len(continued)
            block = Block(text, first, lines + (1 if continued[0] == 0 else 0), tuple(sorted(continued)))
        else:
            block = Block(text, self.next_line, lines)
        self.next_line += lines
        return block
