"""One file's pipeline: bytes -> framing -> parsers -> events."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence

import numpy as np

from tuimon.parsers.columns import ROWS, Item, Rows, expand, weight
from tuimon.parsers.events import Event, Truncated

from ..sources.framing import Block, Framer
from . import catalog as catalog_mod
from . import guard, pipeline
from .blocks import LOG_START_BLOCKS, BlockEngine
from .cache import Entry, EntryWriter, ParseCache, skipped
from .catalog import Catalog
from .plain import plain

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

    @classmethod
    def at_line(cls, label: str, catalog: Optional[Catalog], line: int) -> "FileParser":
        """A parser for a piece of a file that starts at ``line``, a line's first: its own state, past the
        file's first blocks (:meth:`.BlockEngine._log_start` looks no more)."""
        made = cls(label, catalog)
        made.framer.next_line = line
        made.engine._stamp_blocks = LOG_START_BLOCKS
        return made

    def counts(self) -> tuple[int, ...]:
        """What reading counts (its stats: bytes, lines too long, lines of invalid UTF-8, hook failures):
        nothing that decides what a line gives."""
        f = self.framer
        return f.bytes_in, f.too_long, f.invalid_utf8, self.engine.failed

    def set_counts(self, counts: Sequence[int]) -> None:
        f = self.framer
        f.bytes_in, f.too_long, f.invalid_utf8, self.engine.failed = counts

    def deciding(self) -> Any:
        """The state that decides what the next bytes give, as plain values (:mod:`.plain`;
        :meth:`counts` left out): two parsers alike in it give the same events for the same bytes."""
        framer = dict(self.framer.__dict__)
        for name in ("bytes_in", "too_long", "invalid_utf8"):
            del framer[name]
        return plain((self.label, sorted(framer.items()), sorted(self.engine.deciding().items())))

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
            if isinstance(item, Rows):
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


class Reading:
    """One file's ingest, whoever hands its bytes over (a batch read, the local follower, an
    SFTP host): its parser, the parse cache entry being written of it, and how many events a
    cache entry cut short gave already.  Every verb reads a file through one of these; the
    sources above which it sits only hand over bytes at their cursor (:mod:`tuimon.sources.cursor`)."""

    __slots__ = ("label", "parser", "writer", "skip_events", "on_block", "catalog")

    def __init__(self, label: str, catalog: Optional[Catalog] = None,
                 on_block: Optional[Callable[[str, str, int], None]] = None,
                 parser: Optional[FileParser] = None) -> None:
        """``parser``: one restored from the parse cache, to read on with."""
        self.label = label
        self.catalog = catalog
        self.on_block = on_block
        self.parser = parser if parser is not None else FileParser(label, catalog, on_block)
        self.writer: Optional[EntryWriter] = None  # its parse cache entry, while it is read whole, in order
        self.skip_events = 0  # events the parser is yet to give again (a cache entry cut short)

    @property
    def next_line(self) -> int:
        """The number the next line read will have."""
        return self.parser.framer.next_line

    @next_line.setter
    def next_line(self, line: int) -> None:
        self.parser.framer.next_line = line

    @property
    def pending(self) -> int:
        """Bytes read of a line not ended yet (a position saved is at the last line's end)."""
        return self.parser.framer.pending

    @property
    def stats(self) -> "ParseStats":
        return self.parser.stats

    def feed(self, data: bytes) -> list[Item]:
        """The events of ``data``'s complete lines, written to the cache entry, less those given already."""
        return self.taken(self.parser.feed(data))

    def taken(self, events: list[Item]) -> list[Item]:
        """What this parser's events of a block give: written to the cache entry, less those given already."""
        if self.writer is not None:
            self.writer.add(events)
        if self.skip_events:
            events, self.skip_events = skipped(events, self.skip_events)
        return events

    def finish(self) -> list[Item]:
        """End of input: the last line's events and any block left open."""
        return self.parser.finish()

    def restart(self, reason: str) -> Truncated:
        """The file is read again from 0 (truncated, or another file at its path): the event that
        says so; its cache entry, of the old content, starts over."""
        event = Truncated(file=self.label, line=self.next_line, reason=reason)
        if self.writer is not None:
            self.writer.abandon()
            self.writer = self.writer.restart()
        self.parser = FileParser(self.label, self.catalog, self.on_block)
        return event

    def resume(self, cache: ParseCache, key: str, entry: Optional[Entry],
               out: Callable[[list[Item]], None]) -> Optional[Entry]:
        """Take in ``entry`` (checked by the caller to be of the file as it is now, each
        transport its own way): its events go to ``out`` and its parser reads on from its
        offset; returned, or None when the file is to be read from 0 (:attr:`skip_events` of
        its events given already, when a chunk of the entry could not be read: the same bytes
        give the same events)."""
        fp = restored(entry if entry is not None and entry.chunks is not None else None, self.label, self.catalog)
        if fp is None or entry is None:
            return None
        cut_short = cache.replay(key, entry, out)
        if cut_short is not None:
            self.skip_events = cut_short
            return None
        fp.on_block = self.on_block
        self.parser = fp
        return entry

    def write_to(self, cache: ParseCache, key: str, base: Optional[Entry], keep_store: bool = True) -> None:
        """What is read from now on is saved in ``cache`` under ``key``, after ``base``'s."""
        self.writer = cache.writer(key, base, keep_store=keep_store)


def parse_file(path: Path, label: Optional[str] = None,
               sink: Optional[Callable[[list[Item]], None]] = None,
               read_size: int = READ_SIZE, catalog: Optional[Catalog] = None,
               cache: Optional[ParseCache] = None, limit: Optional[int] = None,
               beside: int = 0) -> tuple[list[Event], ParseStats]:
    """Parse a whole file.  With ``sink``, events are handed over per block (a block's
    plain timer and iteration lines as rows, :mod:`tuimon.parsers.columns`) and the returned
    list stays empty (bounded memory on huge files); without, the list holds every
    event, in line order.  With ``cache``, a file read before is not parsed
    again (see :mod:`tuimon.engine.cache`): its saved events come first, then those
    of what it gained since.  With ``limit``, the file is read up to that offset at most
    (the size it had when the report started).  ``beside``: a big file is parsed by up to that many
    workers while ``sink`` takes its events here (see :func:`_read_beside`)."""
    from ..sources.files import open_regular  # a name swapped for a FIFO after discovery must not block

    label = label or str(path)
    collected: list[Item] = []
    out = sink or collected.extend
    fd, _ = open_regular(str(path))
    with open(fd, "rb", closefd=True) as fh:
        reading, offset = Reading(label, catalog), 0
        if cache is not None:
            key = _cache_key(label)
            entry = reading.resume(cache, key, cache.load(key, fh.fileno()), out)
            offset = entry.offset if entry is not None else 0
            if entry is None or os.fstat(fh.fileno()).st_size > offset:
                reading.write_to(cache, key, entry)
        offset = _read_on(fh, reading, offset, read_size, out, limit=limit, beside=beside if sink is not None else 0)
        if reading.writer is not None:
            reading.writer.commit(fh.fileno(), offset, reading.parser)  # the state before the end-of-input flush
        tail = reading.finish()
        if tail:
            out(tail)
    return expand(collected), reading.stats


def _cache_key(label: str) -> str:
    return os.path.abspath(label)


def restored(entry: Optional[Entry], label: str, catalog: Optional[Catalog] = None) -> Optional[FileParser]:
    """The parser saved in a cache entry, ready to read on (with this run's formats),
    if the entry is of a file read under ``label``; else None."""
    if entry is None or getattr(entry.parser, "label", None) != label:
        return None
    fp = entry.parser
    fp.engine.attach(*_formats(catalog))
    fp.cached = entry.offset
    return fp


def parse_file_store(path: Path, label: Optional[str] = None, read_size: int = READ_SIZE,
                     catalog: Optional[Catalog] = None, cache: Optional[ParseCache] = None,
                     on_bytes: Optional[Callable[[int], None]] = None,
                     limit: Optional[int] = None, beside: int = 0) -> tuple[Any, ParseStats]:
    """A store of the file's events alone (merge it with :meth:`JobStore.merge_file`),
    and the stats.  With ``cache``, a file read before is taken in from its saved
    store at once, and only what it gained since is parsed.  ``on_bytes``: told how many
    bytes each block read was (a progress display).  ``limit``: read up to that offset at most.
    ``beside``: a big file is parsed by up to that many workers while this process builds the store
    (see :func:`_read_beside`)."""
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
            store, fp, offset = JobStore(), None, 0
        reading = Reading(label, catalog, parser=fp)
        start = offset
        if on_bytes is not None and start:
            on_bytes(start)  # taken in from the cache
        offset = _read_on(fh, reading, offset, read_size, store.add, on_bytes, limit, beside)
        if cache is not None and (offset > start or not reading.parser.cached):
            cache.save_store(key, fh.fileno(), offset, reading.parser, store)  # before the end-of-input flush
        store.add(reading.finish())
    return store, reading.stats


def _read_on(fh: Any, reading: Reading, offset: int, read_size: int, out: Callable[[list[Item]], None],
             on_bytes: Optional[Callable[[int], None]] = None, limit: Optional[int] = None,
             beside: int = 0) -> int:
    """Feed ``reading`` the file from ``offset`` to its end (or to ``limit``); returns the offset
    reached.  ``beside``: parsed by that many workers at most while ``out`` takes the events here
    (:func:`_read_beside`); none below 1."""
    fd = fh.fileno()
    if beside > 0 and reading.on_block is None and not reading.skip_events and \
            (limit if limit is not None else os.fstat(fd).st_size) - offset >= pipeline.BESIDE_MIN:
        reached, on_bytes = _read_beside(fd, reading, offset, read_size, out, on_bytes, limit, beside)
        if reached is not None:
            return reached
    for passed, data in _pieces(fd, offset, read_size, limit):
        offset += passed
        if on_bytes is not None:
            on_bytes(passed)
        if data:
            events = reading.feed(data)
            if events:
                out(events)
    return offset


def _read_beside(fd: int, reading: Reading, offset: int, read_size: int, out: Callable[[list[Item]], None],
                 on_bytes: Optional[Callable[[int], None]], limit: Optional[int], workers: int,
                 ) -> tuple[Optional[int], Optional[Callable[[int], None]]]:
    """The file parsed by workers (:mod:`.pipeline`), its events taken here: in pieces by ``workers``
    at once where it holds two or more, else by one. Returns the offset reached, ``reading`` holding
    the parser as the read in order leaves it; or None where it is to be read here from ``offset`` (no
    worker could start; or one died: then what was taken is not to be taken again, the events by
    :attr:`Reading.skip_events` (the same bytes give the same events), the bytes by the callback
    returned in place of ``on_bytes``, and the cache entry being written, which has them, is dropped)."""
    given, told = 0, 0

    def take(events: list[Item]) -> None:
        nonlocal given
        events = reading.taken(events)
        if events:
            given += weight(events)  # (rows counted as the events they stand for, as skipping counts them)
            out(events)

    def tell(n: int) -> None:
        nonlocal told
        told += n
        if on_bytes is not None:
            on_bytes(n)

    parser = reading.parser
    end = limit if limit is not None else os.fstat(fd).st_size
    catalog = reading.catalog

    def restore(state: FileParser) -> None:
        state.engine.attach(*_formats(catalog))

    try:
        pieces = pipeline.cut(fd, offset, end, reading.next_line, read_size) if workers > 1 and not reading.pending else []
        if len(pieces) > 1:
            def at_line(line: int, before: Optional[FileParser]) -> FileParser:
                """A piece's parser: a state of the read in order's (``before``), moved on to ``line``; or a new one."""
                if before is None:
                    return FileParser.at_line(parser.label, catalog, line)
                restore(before)
                before.framer.restart_at(line)
                return before

            done = pipeline.parse_in_pieces(fd, pieces, parser, at_line, restore, read_size, take, tell, workers)
        else:
            done = pipeline.parse_beside(_pieces(fd, offset, read_size, limit), parser.feed, lambda: parser, take, tell)
    except pipeline.WorkerLost:
        reading.skip_events = given
        if reading.writer is not None:
            reading.writer.abandon()
            reading.writer = None
        return None, _told_once(on_bytes, told)
    if done is None:
        return None, on_bytes
    passed, reading.parser = done
    if reading.parser is not parser:
        restore(reading.parser)
        reading.parser.cached = parser.cached  # (a piece's parser did not start from the parse cache)
    return offset + passed, on_bytes


def _told_once(on_bytes: Optional[Callable[[int], None]], told: int) -> Optional[Callable[[int], None]]:
    """``on_bytes`` not told the first ``told`` bytes again."""
    if on_bytes is None or not told:
        return on_bytes
    tell, skip = on_bytes, told

    def once(n: int) -> None:
        nonlocal skip
        dropped = min(n, skip)
        skip -= dropped
        if n > dropped:
            tell(n - dropped)
    return once


def _formats(catalog: Optional[Catalog]) -> tuple:
    """The formats a parser restored from a pickle reads with (pickles leave them out)."""
    cat = catalog or catalog_mod.current()
    return cat.user, cat.builtin


def _pieces(fd: int, offset: int, read_size: int, limit: Optional[int]) -> Iterator[tuple[int, bytes]]:
    """The file from ``offset`` to its end (or to ``limit``) as (bytes passed, data): reads of
    ``read_size`` at most, and sparse holes of :data:`HOLE_MIN` or more stepped over (no data: a hole
    holds no line, and a 100 GB one reads as NULs for minutes)."""
    from ..sources.files import next_data

    # read by offset (pread): SEEK_DATA moves the descriptor's position under a buffered reader,
    # which then read the same bytes twice
    end = limit if limit is not None else os.fstat(fd).st_size
    while limit is None or offset < limit:
        if offset < end and (data_at := next_data(fd, offset, end)) is not None and data_at - offset >= HOLE_MIN:
            hole = min(data_at, end) - offset
            offset += hole
            yield hole, b""
            continue
        chunk = os.pread(fd, read_size if limit is None else min(read_size, limit - offset), offset)
        if not chunk:
            return
        offset += len(chunk)
        yield len(chunk), chunk


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
