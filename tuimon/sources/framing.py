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
from typing import Optional

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


def _keep_last_segments(data: bytes) -> bytes:
    """Lines holding ``\r`` lose the ones that end them (``\r\n``) and keep what
    follows the last other one (progress bars).  Only those lines are touched."""
    parts: list = []
    pos = 0
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
        parts.append(line[line.rfind(b"\r") + 1:])
        pos = end
        cr = find(b"\r", end)
    parts.append(view[pos:])
    return b"".join(parts)


def _fix_carriage_returns(data: bytes) -> bytes:
    first = data.find(b"\n")
    if first > 0 and data[first - 1] == 13:  # CRLF line endings: replace them in bulk first
        data = _drop_cr_before_nl(data)
        if b"\r" not in data:
            return data
    return _keep_last_segments(data)


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
    lines: int
    #: when ``text`` is ASCII: its bytes and the offsets of its newlines, which the
    #: trigger scanner would otherwise compute again (see tuimon.scan)
    layout: Optional[tuple[bytes, np.ndarray]] = None


class Framer:
    def __init__(self, max_line: int = DEFAULT_MAX_LINE) -> None:
        self.max_line = max_line
        self._partial = b""
        self._discarding = False
        self.next_line = 1
        self.too_long = 0
        self.invalid_utf8 = 0
        self.bytes_in = 0

    @property
    def pending(self) -> int:
        """Bytes of the held, incomplete last line."""
        return len(self._partial)

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
            self._hold(self._partial + data if self._partial else data)
            return self._finish(prefix_lines, b"")
        # one copy of the complete lines (a block is a megabyte), none when the read ends a line
        if self._partial:
            complete = b"".join((self._partial, memoryview(data)[:last_nl + 1]))
        else:
            complete = data if last_nl + 1 == len(data) and type(data) is bytes else bytes(data[:last_nl + 1])
        self._hold(data[last_nl + 1:])
        return self._finish(prefix_lines, complete)

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

    def _finish(self, prefix_lines: list[str], complete: bytes) -> Block:
        if not complete:
            text = "".join(line + "\n" for line in prefix_lines)
            return self._block(text, len(prefix_lines))
        if len(complete) > self.max_line and _has_line_longer(complete, self.max_line):
            complete = self._drop_long_lines(complete)
        if b"\r" in complete:
            complete = _fix_carriage_returns(complete)
        newlines = np.flatnonzero(np.frombuffer(complete, dtype=np.uint8) == 10)
        n = len(newlines)
        try:
            text = complete.decode("utf-8")
        except UnicodeDecodeError:
            text = complete.decode("utf-8", "replace")
            self.invalid_utf8 += sum(1 for line in text.split("\n") if "\ufffd" in line)
        if "\x00" in text:
            text = text.replace("\x00", "\u2400")
        if prefix_lines:
            text = "".join(line + "\n" for line in prefix_lines) + text
        layout = (complete, newlines) if text.isascii() else None  # a marker or a U+FFFD is not ASCII
        return self._block(text, n + len(prefix_lines), layout)

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

    def _block(self, text: str, lines: int, layout: Optional[tuple[bytes, np.ndarray]] = None) -> Block:
        block = Block(text, self.next_line, lines, layout)
        self.next_line += lines
        return block
