"""One file's pipeline: bytes -> framing -> parsers -> events."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional

from parsers.events import Event

from .engine import catalog as catalog_mod
from .engine.blocks import BlockEngine
from .engine.catalog import Catalog
from .sources.framing import Block, Framer

READ_SIZE = 1 << 20  # the block size; the local follower reads as much at a time


@dataclass(slots=True)
class ParseStats:
    bytes: int = 0
    lines: int = 0
    too_long: int = 0
    invalid_utf8: int = 0
    failed: int = 0  # lines a parser hook raised on

    @property
    def skipped(self) -> int:
        """Lines whose content was not parsed at all."""
        return self.too_long

    def add(self, other: "ParseStats") -> None:
        self.bytes += other.bytes
        self.lines += other.lines
        self.too_long += other.too_long
        self.invalid_utf8 += other.invalid_utf8
        self.failed += other.failed


class FileParser:
    """Incremental: feed bytes as they arrive, call :meth:`finish` at end of input."""

    def __init__(self, label: str, catalog: Optional[Catalog] = None,
                 on_block: Optional[Callable[[str, str, int], None]] = None) -> None:
        self.label = label
        self.framer = Framer()
        cat = catalog or catalog_mod.current()
        self.engine = BlockEngine(label, cat.parsers, cat.user, cat.builtin)
        self.on_block = on_block  # (label, text of complete lines, first line number)

    def feed(self, data: bytes) -> list[Event]:
        block = self.framer.feed(data)
        return self.engine.feed_block(block.text, block.first_line) if self._shown(block) else []

    def finish(self) -> list[Event]:
        block = self.framer.flush()
        events = self.engine.feed_block(block.text, block.first_line) if self._shown(block) else []
        events.extend(self.engine.flush())
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
                          invalid_utf8=f.invalid_utf8, failed=self.engine.failed)


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
               read_size: int = READ_SIZE, catalog: Optional[Catalog] = None) -> tuple[list[Event], ParseStats]:
    """Parse a whole file.  With ``sink``, events (batches included) are handed
    over per chunk and the returned list stays empty (bounded memory on huge
    files); without, the list holds every record, in line order."""
    fp = FileParser(label or str(path), catalog)
    collected: list[Event] = []
    out = sink or collected.extend
    for chunk in read_chunks(path, read_size):
        events = fp.feed(chunk)
        if events:
            out(events)
    tail = fp.finish()
    if tail:
        out(tail)
    return collected, fp.stats
