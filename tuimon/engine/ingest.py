"""One file's pipeline: bytes -> framing -> parsers -> events."""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional

from parsers.events import Event

from ..sources.framing import Block, Framer
from . import catalog as catalog_mod
from .blocks import BlockEngine
from .cache import CacheMiss, ParseCache
from .catalog import Catalog

READ_SIZE = 1 << 20  # the block size; the local follower reads as much at a time


@dataclass(slots=True)
class ParseStats:
    bytes: int = 0
    lines: int = 0
    too_long: int = 0
    invalid_utf8: int = 0
    failed: int = 0  # lines a parser hook raised on
    cached: int = 0  # bytes whose events came from the parse cache

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


class FileParser:
    """Incremental: feed bytes as they arrive, call :meth:`finish` at end of input."""

    def __init__(self, label: str, catalog: Optional[Catalog] = None,
                 on_block: Optional[Callable[[str, str, int], None]] = None) -> None:
        self.label = label
        self.framer = Framer()
        cat = catalog or catalog_mod.current()
        self.engine = BlockEngine(label, cat.parsers, cat.user, cat.builtin)
        self.on_block = on_block  # (label, text of complete lines, first line number)
        self.cached = 0  # bytes restored from the parse cache

    def __getstate__(self) -> dict:
        """Saved without ``on_block`` (the follower's callback): the parse cache keeps the rest."""
        state = dict(self.__dict__)
        state["on_block"] = None
        return state

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
                          invalid_utf8=f.invalid_utf8, failed=self.engine.failed, cached=self.cached)


def parse_file(path: Path, label: Optional[str] = None,
               sink: Optional[Callable[[list[Event]], None]] = None,
               read_size: int = READ_SIZE, catalog: Optional[Catalog] = None,
               cache: Optional[ParseCache] = None) -> tuple[list[Event], ParseStats]:
    """Parse a whole file.  With ``sink``, events are handed over per block and the
    returned list stays empty (bounded memory on huge files); without, the list holds
    every record, in line order.  With ``cache``, a file read before is not parsed
    again (see :mod:`tuimon.engine.cache`): its saved events come first, then those
    of what it gained since."""
    from ..sources.files import open_regular  # a name swapped for a FIFO after discovery must not block

    label = label or str(path)
    collected: list[Event] = []
    out = sink or collected.extend
    fd, _ = open_regular(str(path))
    with open(fd, "rb", closefd=True) as fh:
        fp, writer, offset = _from_cache(cache, label, fh.fileno(), out, catalog)
        if isinstance(writer, _Skip):
            out = _skipping(out, writer.n)
            writer = None
        if fp is None:
            fp = FileParser(label, catalog)
            writer = cache.writer(_cache_key(label), None) if cache is not None else None
        def taken(events: list[Event]) -> None:
            out(events)
            if writer is not None:
                writer.add(events)

        offset = _read_on(fh, fp, offset, read_size, taken)
        if writer is not None:
            writer.commit(fh.fileno(), offset, fp)  # the state before the end-of-input flush
        tail = fp.finish()
        if tail:
            out(tail)
    return collected, fp.stats


def _skipping(out: Callable[[list[Event]], None], n: int) -> Callable[[list[Event]], None]:
    left = [n]

    def sink(events: list[Event]) -> None:
        if left[0]:
            drop = min(left[0], len(events))
            left[0] -= drop
            events = events[drop:]
        if events:
            out(events)
    return sink


class _Skip:
    """A sink-side stand-in for a cache writer: drops the first ``n`` events of a parse."""

    def __init__(self, out: Callable[[list[Event]], None], n: int) -> None:
        self.out, self.n = out, n


def _cache_key(label: str) -> str:
    return os.path.abspath(label)


def _from_cache(cache: Optional[ParseCache], label: str, fd: int, out: Callable[[list[Event]], None],
                catalog: Optional[Catalog]):
    """(parser, writer, offset) restored from the cache, or (None, None, 0)."""
    if cache is None:
        return None, None, 0
    key = _cache_key(label)
    entry = cache.load(key, fd)
    if entry is None or entry.chunks is None or getattr(entry.parser, "label", None) != label:
        return None, None, 0
    handed = 0
    try:
        for events in cache.events(key, entry):
            out(events)
            handed += len(events)
    except CacheMiss:  # parsed again; the same bytes give the same events: those already out are skipped
        return None, _Skip(out, handed), 0
    cat = catalog or catalog_mod.current()
    fp = entry.parser
    fp.engine.attach(cat.user, cat.builtin)
    fp.cached = entry.offset
    size = os.fstat(fd).st_size
    return fp, (cache.writer(key, entry) if size > entry.offset else None), entry.offset


def parse_file_store(path: Path, label: Optional[str] = None, read_size: int = READ_SIZE,
                     catalog: Optional[Catalog] = None, cache: Optional[ParseCache] = None) -> tuple[Any, ParseStats]:
    """A store of the file's events alone (merge it with :meth:`JobStore.merge_file`),
    and the stats.  With ``cache``, a file read before is taken in from its saved
    store at once, and only what it gained since is parsed."""
    from ..sources.files import open_regular
    from ..store.job_store import JobStore

    label = label or str(path)
    fd, _ = open_regular(str(path))
    with open(fd, "rb", closefd=True) as fh:
        store, fp, offset = None, None, 0
        key = _cache_key(label)
        if cache is not None:
            entry = cache.load(key, fh.fileno())
            if entry is not None and getattr(entry.parser, "label", None) == label:
                store = entry.store()
                if store is not None:
                    cat = catalog or catalog_mod.current()
                    fp = entry.parser
                    fp.engine.attach(cat.user, cat.builtin)
                    fp.cached = offset = entry.offset
        if fp is None or store is None:
            store, fp, offset = JobStore(), FileParser(label, catalog), 0
        start = offset
        offset = _read_on(fh, fp, offset, read_size, store.add)
        if cache is not None and (offset > start or not fp.cached):
            cache.save_store(key, fh.fileno(), offset, fp, store)  # before the end-of-input flush
        store.add(fp.finish())
    return store, fp.stats


def _read_on(fh: Any, fp: FileParser, offset: int, read_size: int, out: Callable[[list[Event]], None]) -> int:
    """Feed ``fp`` the file from ``offset`` to its end; returns the offset reached."""
    fh.seek(offset)
    while True:
        chunk = fh.read(read_size)
        if not chunk:
            return offset
        offset += len(chunk)
        events = fp.feed(chunk)
        if events:
            out(events)


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
        entry = cache.load(_cache_key(label), fd)
        if entry is None or entry.offset != os.fstat(fd).st_size or getattr(entry.parser, "label", None) != label:
            return None
        store = entry.store()
        if store is None:
            return None
        fp = entry.parser
        cat = catalog_mod.current()
        fp.engine.attach(cat.user, cat.builtin)
        fp.cached = entry.offset
        store.add(fp.finish())
        return store, fp.stats
    finally:
        os.close(fd)
