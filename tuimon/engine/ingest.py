"""One file's pipeline: bytes -> framing -> parsers -> events."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np

from tuimon.parsers.columns import ROWS, Item, IterationRows, TimerRows, expand
from tuimon.parsers.events import Event

from ..sources.framing import Block, Framer
from . import catalog as catalog_mod
from . import guard
from .blocks import BlockEngine
from .cache import Entry, EntryWriter, ParseCache, skipped
from .catalog import Catalog

READ_SIZE = 1 << 20  # the block size; the local follower reads as much at a time
HOLE_MIN = 1 << 20  # sparse holes at least this large are stepped over, not read as NULs (as the follower does)


def start_sizes(files: list[Path]) -> dict[Path, Optional[int]]:
    """Each file's size now (None where it cannot be told: reading it will say why).  A batch
    report reads its files up to these, not after a writer that keeps them growing."""
    sizes: dict[Path, Optional[int]] = {}
    for path in files:
        try:
            sizes[path] = path.stat().st_size
        except OSError:
            sizes[path] = None
    return sizes


@dataclass(slots=True)
class ParseStats:
    bytes: int = 0
    lines: int = 0
    too_long: int = 0
    invalid_utf8: int = 0
    failed: int = 0  # lines a parser hook raised on
    cached: int = 0  # bytes whose events came from the parse cache
    #: user formats turned off (name -> why): a regex ran over its time bound (see engine.guard)
    disabled: dict = field(default_factory=dict)

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
        self.cached += other.cached
        self.disabled.update(other.disabled)


class FileParser:
    """Incremental: feed bytes as they arrive, call :meth:`finish` at end of input."""

    def __init__(self, label: str, catalog: Optional[Catalog] = None,
                 on_block: Optional[Callable[[str, str, int], None]] = None) -> None:
        self.label = label
        self.framer = Framer()
        cat = catalog or catalog_mod.current()
        self.engine = BlockEngine(label, cat.parsers, cat.user, cat.builtin, log_start=True)
        self.on_block = on_block  # (label, text of complete lines, first line number)
        self.cached = 0  # bytes restored from the parse cache

    def __getstate__(self) -> dict:
        """Saved without ``on_block`` (the follower's callback): the parse cache keeps the rest."""
        state = dict(self.__dict__)
        state["on_block"] = None
        return state

    def feed(self, data: bytes) -> list[Item]:
        """The events of the complete lines so far (a block's plain timer lines and iteration
        lines as rows, :mod:`tuimon.parsers.columns`, after its other events)."""
        return self._parse(self.framer.feed(data))

    def finish(self) -> list[Item]:
        events = self._parse(self.framer.flush())
        events.extend(self.engine.flush())
        return events

    def _parse(self, block: Block) -> list[Item]:
        """The block's events (``on_block`` shown its lines first).  Segments of one line
        (a lone ``\\r`` ended them) are parsed with the block, as lines of their own, and
        their events then given the number of the file line they are in."""
        if not block.lines:
            return []
        if not block.continued:
            if self.on_block is not None:
                self.on_block(self.label, block.text, block.first_line)
            return self.engine.feed_block(block.text, block.first_line)
        if self.on_block is not None:
            for text, first in block.runs():
                self.on_block(self.label, text, first)
        items: list[Item] = self.engine.feed_block(block.text, block.first_line)
        later = np.asarray([i for i in block.continued if i > 0], dtype=np.int64)
        first = block.first_line

        def renumbered(lines: np.ndarray) -> np.ndarray:
            return np.where(lines > first, lines - np.searchsorted(later, lines - first, side="right"), lines)

        rows = [item for item in items if type(item) in ROWS]
        if rows:
            # rows order themselves by line: a row sharing its file line with another item
            # (segments of one line) could not; then the rows become events, in the segments' order.
            # The block's first line may go on from the block before (whose items are out already)
            row_lines = renumbered(np.concatenate([np.asarray(r.line, dtype=np.int64) for r in rows]))
            others = renumbered(np.asarray([e.line for e in items if type(e) not in ROWS and e.line is not None],
                                           dtype=np.int64))
            if len(np.unique(row_lines)) < len(row_lines) or np.intersect1d(row_lines, others).size or \
                    (block.continued[0] == 0 and (row_lines == first).any()):
                items = list(expand(items))
        out: list[Item] = []
        for item in items:
            if isinstance(item, (TimerRows, IterationRows)):
                out.append(item.renumbered(renumbered(np.asarray(item.line, dtype=np.int64)).tolist()))
            elif item.line is not None and item.line > first:
                out.append(item._replace(line=item.line - int(np.searchsorted(later, item.line - first, side="right"))))
            else:
                out.append(item)
        return out

    @property
    def stats(self) -> ParseStats:
        f = self.framer
        return ParseStats(bytes=f.bytes_in, lines=f.next_line - 1, too_long=f.too_long,
                          invalid_utf8=f.invalid_utf8, failed=self.engine.failed, cached=self.cached,
                          disabled=guard.disabled())


def parse_file(path: Path, label: Optional[str] = None,
               sink: Optional[Callable[[list[Item]], None]] = None,
               read_size: int = READ_SIZE, catalog: Optional[Catalog] = None,
               cache: Optional[ParseCache] = None, limit: Optional[int] = None) -> tuple[list[Event], ParseStats]:
    """Parse a whole file.  With ``sink``, events are handed over per block (a block's
    plain timer and iteration lines as rows, :mod:`tuimon.parsers.columns`) and the returned
    list stays empty (bounded memory on huge files); without, the list holds every
    event, in line order.  With ``cache``, a file read before is not parsed
    again (see :mod:`tuimon.engine.cache`): its saved events come first, then those
    of what it gained since.  With ``limit``, the file is read up to that offset at most
    (the size it had when the report started)."""
    from ..sources.files import open_regular  # a name swapped for a FIFO after discovery must not block

    label = label or str(path)
    collected: list[Item] = []
    out = sink or collected.extend
    fd, _ = open_regular(str(path))
    with open(fd, "rb", closefd=True) as fh:
        fp, writer, offset, skip = _from_cache(cache, label, fh.fileno(), out, catalog)
        if fp is None:
            fp = FileParser(label, catalog)
        skip_left = [skip]

        def taken(events: list[Item]) -> None:
            if writer is not None:
                writer.add(events)
            if skip_left[0]:  # given already, from an entry cut short
                events, skip_left[0] = skipped(events, skip_left[0])
            if events:
                out(events)

        offset = _read_on(fh, fp, offset, read_size, taken, limit=limit)
        if writer is not None:
            writer.commit(fh.fileno(), offset, fp)  # the state before the end-of-input flush
        tail = fp.finish()
        if tail:
            out(tail)
    return expand(collected), fp.stats


def _cache_key(label: str) -> str:
    return os.path.abspath(label)


def restored(entry: Optional[Entry], label: str, catalog: Optional[Catalog] = None) -> Optional[FileParser]:
    """The parser saved in a cache entry, ready to read on (with this run's formats),
    if the entry is of a file read under ``label``; else None."""
    if entry is None or getattr(entry.parser, "label", None) != label:
        return None
    cat = catalog or catalog_mod.current()
    fp = entry.parser
    fp.engine.attach(cat.user, cat.builtin)
    fp.cached = entry.offset
    return fp


@dataclass(frozen=True)
class Resumed:
    """A file's parse cache entry taken in by a reader: ``parser`` goes on from the entry's
    offset (its events were handed on), with ``entry`` the base of what is saved next; or,
    with ``parser`` None, the file is read from 0, its first ``skip_events`` events
    already handed on (a chunk of the entry could not be read: the same bytes give the
    same events)."""

    parser: Optional[FileParser] = None
    entry: Optional[Entry] = None
    skip_events: int = 0


def resume(cache: ParseCache, key: str, entry: Optional[Entry], label: str, out: Callable[[list[Item]], None],
           catalog: Optional[Catalog] = None) -> Resumed:
    """Take in ``entry`` (checked by the caller to be of the file as it is now, each
    transport its own way): its saved events go to ``out`` and its parser is restored."""
    fp = restored(entry if entry is not None and entry.chunks is not None else None, label, catalog)
    if fp is None or entry is None:
        return Resumed()
    cut_short = cache.replay(key, entry, out)
    if cut_short is not None:
        return Resumed(skip_events=cut_short)
    return Resumed(fp, entry)


def _from_cache(cache: Optional[ParseCache], label: str, fd: int, out: Callable[[list[Item]], None],
                catalog: Optional[Catalog]) -> tuple[Optional[FileParser], Optional[EntryWriter], int, int]:
    """(parser or None, cache writer or None, offset, events to skip): the file's saved
    events handed to ``out`` and its parser restored, or what to read from 0 with."""
    if cache is None:
        return None, None, 0, 0
    key = _cache_key(label)
    got = resume(cache, key, cache.load(key, fd), label, out, catalog)
    if got.parser is None or got.entry is None:
        return None, cache.writer(key, None), 0, got.skip_events
    grown = os.fstat(fd).st_size > got.entry.offset
    return got.parser, (cache.writer(key, got.entry) if grown else None), got.entry.offset, 0


def parse_file_store(path: Path, label: Optional[str] = None, read_size: int = READ_SIZE,
                     catalog: Optional[Catalog] = None, cache: Optional[ParseCache] = None,
                     on_bytes: Optional[Callable[[int], None]] = None,
                     limit: Optional[int] = None) -> tuple[Any, ParseStats]:
    """A store of the file's events alone (merge it with :meth:`JobStore.merge_file`),
    and the stats.  With ``cache``, a file read before is taken in from its saved
    store at once, and only what it gained since is parsed.  ``on_bytes``: told how many
    bytes each block read was (a progress display).  ``limit``: read up to that offset at most."""
    from ..sources.files import open_regular
    from ..store.job_store import JobStore

    label = label or str(path)
    fd, _ = open_regular(str(path))
    with open(fd, "rb", closefd=True) as fh:
        store, fp, offset = None, None, 0
        key = _cache_key(label)
        if cache is not None:
            entry = cache.load(key, fh.fileno())
            store = entry.store() if entry is not None else None
            if store is None and entry is not None and entry.chunks is not None:
                # a follower's entry keeps the events, not their store: replayed (faster than a parse)
                store = JobStore()
                if cache.replay(key, entry, store.add) is not None:
                    store = None  # a chunk could not be read: parsed from 0
            fp = restored(entry, label, catalog) if store is not None else None
            offset = fp.cached if fp is not None else 0
        if fp is None or store is None:
            store, fp, offset = JobStore(), FileParser(label, catalog), 0
        start = offset
        if on_bytes is not None and start:
            on_bytes(start)  # taken in from the cache
        offset = _read_on(fh, fp, offset, read_size, store.add, on_bytes, limit)
        if cache is not None and (offset > start or not fp.cached):
            cache.save_store(key, fh.fileno(), offset, fp, store)  # before the end-of-input flush
        store.add(fp.finish())
    return store, fp.stats


def _read_on(fh: Any, fp: FileParser, offset: int, read_size: int, out: Callable[[list[Item]], None],
             on_bytes: Optional[Callable[[int], None]] = None, limit: Optional[int] = None) -> int:
    """Feed ``fp`` the file from ``offset`` to its end (or to ``limit``); returns the offset
    reached.  A sparse hole of :data:`HOLE_MIN` or more is stepped over: it holds no line (a 100 GB
    hole reads as NULs for minutes)."""
    from ..sources.files import next_data

    # read by offset (pread): SEEK_DATA moves the descriptor's position under a buffered reader,
    # which then read the same bytes twice
    fd = fh.fileno()
    end = limit if limit is not None else os.fstat(fd).st_size
    while limit is None or offset < limit:
        if offset < end and (data_at := next_data(fd, offset, end)) is not None and data_at - offset >= HOLE_MIN:
            hole = min(data_at, end) - offset
            if on_bytes is not None:
                on_bytes(hole)
            offset += hole
            continue
        chunk = os.pread(fd, read_size if limit is None else min(read_size, limit - offset), offset)
        if not chunk:
            return offset
        offset += len(chunk)
        if on_bytes is not None:
            on_bytes(len(chunk))
        events = fp.feed(chunk)
        if events:
            out(events)
    return offset


def cached_store(path: Path, cache: ParseCache, label: Optional[str] = None) -> Optional[tuple[Any, ParseStats]]:
    """(store, stats) of an unchanged file from its saved store, or None when it must
    be parsed (not saved, changed, or not readable now)."""
    from ..sources.files import NotRegular, open_regular

    label = label or str(path)
    try:
        fd, _ = open_regular(str(path))
    except (OSError, NotRegular):
        return None
    try:
        entry = cache.load(_cache_key(label), fd, unchanged=True)
        store = entry.store() if entry is not None else None
        fp = restored(entry, label) if store is not None else None
        if fp is None or store is None:
            return None
        store.add(fp.finish())
        return store, fp.stats
    finally:
        os.close(fd)
