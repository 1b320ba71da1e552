"""Open descriptors of followed files, under a budget.

Thousands of followed files cannot all hold a descriptor: the least recently used ones
of idle streams are closed (and reopened by identity when the stream is read again), and
when the system says there are none left (ENFILE, EMFILE) half are closed and the budget
shrinks to what could be held.  Which streams may be closed is the follower's to say."""
from __future__ import annotations

import errno
import os
from collections import OrderedDict
from typing import Any, Callable

from .files import open_regular


class DescriptorPool:
    def __init__(self, max_open: int, closable: Callable[[Any], bool]) -> None:
        """``closable``: whether a stream's descriptor may be closed now (an attached, idle one)."""
        self.max_open = max_open
        self.closable = closable
        self._open: OrderedDict[Any, None] = OrderedDict()  # streams holding a descriptor, least recent first

    def __len__(self) -> int:
        return len(self._open)

    def used(self, s: Any) -> None:
        """``s`` was just read: the last to be closed."""
        self._open.move_to_end(s)

    def open_path(self, path: str) -> tuple[int, os.stat_result]:
        try:
            return open_regular(path)
        except OSError as exc:
            if exc.errno not in (errno.ENFILE, errno.EMFILE):  # none left: make room and try once more
                raise
        self.evict(len(self._open) // 2)
        self.max_open = max(8, len(self._open))
        return open_regular(path)

    def adopt(self, s: Any, fd: int) -> None:
        s.fd = fd
        self._open[s] = None
        self.evict(self.max_open)

    def evict(self, limit: int) -> None:
        """Close the least recently used descriptors the follower allows, down to ``limit``."""
        if len(self._open) <= limit:
            return
        for s in list(self._open):
            if len(self._open) <= limit:
                return
            if self.closable(s):
                self.close(s)

    def close(self, s: Any) -> None:
        self._open.pop(s, None)
        if s.fd is not None:
            try:
                os.close(s.fd)
            except OSError:
                pass
            s.fd = None

    def close_all(self) -> None:
        for s in list(self._open):
            self.close(s)
