"""One file's pipeline: bytes -> framing -> parsers -> events."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from parsers import ParserSet, parser_set
from parsers.events import Event, expand

from . import columns
from .scan import trigger_scanner
from .sources.framing import Block, Framer

READ_SIZE = 1 << 20  # the block size; the local follower reads as much at a time


@dataclass(slots=True)
class ParseStats:
    bytes: int = 0
    lines: int = 0
    too_long: int = 0
    invalid_utf8: int = 0

    @property
    def skipped(self) -> int:
        """Lines whose content was not parsed at all."""
        return self.too_long

    def add(self, other: "ParseStats") -> None:
        self.bytes += other.bytes
        self.lines += other.lines
        self.too_long += other.too_long
        self.invalid_utf8 += other.invalid_utf8


class FileParser:
    """Incremental: feed bytes as they arrive, call :meth:`finish` at end of input."""

    def __init__(self, label: str, parsers: Optional[ParserSet] = None,
                 on_block: Optional[Callable[[str, str, int], None]] = None, lanes: bool = True) -> None:
        """With ``lanes`` (the default), runs of same-shaped lines come out as
        :class:`~parsers.events.Batch` events: :func:`parsers.events.expand` gives records."""
        self.label = label
        self.framer = Framer()
        columns.install()  # here, not at import: worker processes that are spawned make one too
        self.parsers = parsers or parser_set(label, scanner=trigger_scanner, lanes=lanes)
        self.on_block = on_block  # (label, text of complete lines, first line number)

    def feed(self, data: bytes) -> list[Event]:
        block = self.framer.feed(data)
        return self.parsers.feed_block(block.text, block.first_line, block.layout) if self._shown(block) else []

    def feed_parts(self, data: bytes, parts: int) -> Iterator[list[Event]]:
        """:meth:`feed`, with the block's lines handed to the parsers in up to
        ``parts`` runs: the events of each run in turn, so a caller may look at
        the parsers' state in between.  The records are :meth:`feed`'s: sniffing
        reads the whole block first, as it would in one feed (a parser it switches
        on sees the block's first line), and the parsers' records do not depend on
        where blocks end."""
        block = self.framer.feed(data)
        if not self._shown(block):
            yield []
            return
        self.parsers.sniff(block.text)
        for text, first_line in line_runs(block.text, block.first_line, parts):
            yield self.parsers.feed_block(text, first_line)

    def finish(self) -> list[Event]:
        block = self.framer.flush()
        events = self.parsers.feed_block(block.text, block.first_line, block.layout) if self._shown(block) else []
        events.extend(self.parsers.flush())
        return events

    def _shown(self, block: Block) -> bool:
        """Whether ``block`` holds lines; if so, ``on_block`` has been shown them."""
        if not block.lines:
            return False
        if self.on_block is not None:
            self.on_block(self.label, block.text, block.first_line)
        return True

    @property
    def stats(self) -> ParseStats:
        f = self.framer
        return ParseStats(bytes=f.bytes_in, lines=f.next_line - 1, too_long=f.too_long,
                          invalid_utf8=f.invalid_utf8)


def line_runs(text: str, first_line: int, parts: int) -> Iterator[tuple[str, int]]:
    """``text`` (lines, each ending in a newline) cut at line ends into up to
    ``parts`` runs of about equal size, each with the number of its first line."""
    step = max(1, len(text) // max(1, parts))
    pos = 0
    while pos < len(text):
        cut = text.find("\n", pos + step - 1)
        end = len(text) if cut < 0 else cut + 1
        run = text[pos:end]
        yield run, first_line
        first_line += run.count("\n")
        pos = end


def read_chunks(path: Path, size: int = READ_SIZE) -> Iterator[bytes]:
    from .sources.files import open_regular  # a name swapped for a FIFO after discovery must not block

    fd, _ = open_regular(str(path))
    with open(fd, "rb", closefd=True) as fh:
        while True:
            chunk = fh.read(size)
            if not chunk:
                return
            yield chunk


def parse_file(path: Path, label: Optional[str] = None,
               sink: Optional[Callable[[list[Event]], None]] = None,
               read_size: int = READ_SIZE) -> tuple[list[Event], ParseStats]:
    """Parse a whole file.  With ``sink``, events (batches included) are handed
    over per chunk and the returned list stays empty (bounded memory on huge
    files); without, the list holds every record, in line order."""
    fp = FileParser(label or str(path))
    collected: list[Event] = []
    out = sink or (lambda events: collected.extend(expand(events)))
    for chunk in read_chunks(path, read_size):
        events = fp.feed(chunk)
        if events:
            out(events)
    tail = fp.finish()
    if tail:
        out(tail)
    return collected, fp.stats
