"""Large files read out of order: the first MiB (config, start-up) and the last MiBs (the
job's state now) at once, the middle after, a budget of bytes per poll, so that a
follower shows where a job is long before it has read a week of its log.  The middle
has its own parser (its lines are old: not for the live tail); the stream's own parser
reads on from the tail."""
from __future__ import annotations

import os
import time
from typing import Callable

from tuimon.parsers.columns import Item

from ..engine.ingest import Reading
from ..sources import state as saved
from ..sources.files import display
from ..sources.streams import History, Progress, Stream

READ_SIZE = 1 << 20
COUNT_SIZE = 8 << 20  # lines are counted (to number the tail's) at memory speed, in blocks this large


class Backfill:
    """The streams whose middle is still to be read."""

    HEAD = 1 << 20
    TAIL = 4 << 20

    def __init__(self, fd_of: Callable[[Stream], int], progress: Progress, warn: Callable[[str], None]) -> None:
        self._fd_of = fd_of
        self._progress = progress
        self._warn = warn
        self.streams: list[Stream] = []

    def __bool__(self) -> bool:
        return bool(self.streams)

    def start(self, s: Stream, size: int, consume: Callable[[Stream, bytes, list[Item]], None]) -> list[Item]:
        """Read the head and the tail of ``s`` (at 0) now, through ``consume``; returns
        their events.  The middle is left to :meth:`poll`.  Nothing is done to a file
        whose head and tail meet."""
        fd = self._fd_of(s)
        head = os.pread(fd, self.HEAD, 0)
        head_end = head.rfind(b"\n") + 1
        tail_probe = os.pread(fd, self.TAIL, size - self.TAIL)
        tail_start = size - self.TAIL + tail_probe.find(b"\n") + 1
        events: list[Item] = []
        if head_end <= 0 or tail_start <= head_end:
            return events
        consume(s, head[:head_end], events)
        lines_before_tail = head[:head_end].count(b"\n")
        pos = head_end
        while pos < tail_start:
            chunk = os.pread(fd, min(COUNT_SIZE, tail_start - pos), pos)
            if not chunk:
                break
            lines_before_tail += chunk.count(b"\n")
            pos += len(chunk)
        history = History(head_end, tail_start, Reading(s.label), head_end)
        history.reading.next_line = s.reading.next_line
        s.reading.next_line = lines_before_tail + 1
        s.placed(tail_start, os.pread(fd, saved.MARKER_BYTES, tail_start - saved.MARKER_BYTES), s.head)
        s.history = history
        self.streams.append(s)
        return events

    def poll(self, budget: int, events: list[Item]) -> None:
        """Read on in the middles, ``budget`` bytes at most; a middle read to its end
        gives its parser's last events and is done."""
        for s in list(self.streams):
            h = s.history
            if h is None:
                self.streams.remove(s)
                continue
            try:
                fd = self._fd_of(s)
                while h.offset < h.end and budget > 0:
                    data = os.pread(fd, min(READ_SIZE, h.end - h.offset, budget), h.offset)
                    if not data:
                        break
                    h.offset += len(data)
                    budget -= len(data)
                    self._progress.bytes_done += len(data)
                    events.extend(h.reading.feed(data))
                    time.sleep(0)  # the UI thread takes the GIL between blocks
            except OSError as exc:
                self._warn(f"{display(s.label)}: history not read: {exc.strerror or type(exc).__name__}")
                h.offset = h.end
            if h.offset >= h.end:
                events.extend(h.reading.finish())
                s.history = None
                self.streams.remove(s)
            if budget <= 0:
                return
