"""A remote log paged like a local one: the log view's :class:`~tuimon.sources.logfile.LogFile`
reading its bytes over SFTP, on a connection of its own (the follower's may live in
another process).  The view asks for a megabyte at a time while indexing and for a
page when it draws, so a big remote file opens at once and only what is shown or
searched crosses the network.

If the host cannot be reached, the view shows the lines the session keeps, and says why."""
from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Optional

from ..text import sanitize
from .logfile import KeptLines, LogFile
from .ssh import connect, describe, sftp_path

CALL_TIMEOUT_S = 20.0
RECHECK_S = 1.0  # how often a remote file read to its end is asked whether it grew


class RemoteLogFile(LogFile):
    read_block = 1 << 20  # a round trip per megabyte: the view stays answerable while it indexes

    def __init__(self, endpoint: tuple[str, Optional[str], Optional[int]], path: str, name: str,
                 kept: KeptLines, ssh_config: Optional[str] = None) -> None:
        super().__init__(sftp_path(path), name=name)
        self.endpoint = endpoint
        self.ssh_config = ssh_config
        self.kept = kept  # shown when the host cannot be reached
        self.failed: Optional[str] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._thread: Optional[threading.Thread] = None
        self._conn: Any = None
        self._sftp: Any = None
        self._fh: Any = None
        self._checked = float("-inf")  # when its size was last asked

    # -- the connection, on a loop of its own --------------------------------------------------
    def _call(self, coro_fn, *args) -> Any:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="tuimon-remote-log", daemon=True)
            self._thread.start()
        return asyncio.run_coroutine_threadsafe(coro_fn(*args), self._loop).result(CALL_TIMEOUT_S)

    async def _open(self) -> Any:
        if self._fh is None:
            self._conn = await connect(self.endpoint, self.ssh_config, connect_timeout=15)
            self._sftp = await self._conn.start_sftp_client()
            self._fh = await self._sftp.open(self.path, "rb")
        return self._fh

    async def _size_async(self) -> int:
        await self._open()
        return int((await self._sftp.stat(self.path)).size or 0)

    async def _read_async(self, begin: int, end: int) -> bytes:
        fh = await self._open()
        await fh.seek(begin)
        return await fh.read(max(0, end - begin))

    def _fail(self, exc: BaseException) -> None:
        message, _ = describe(exc, self.endpoint[0])
        self.failed = sanitize(message or type(exc).__name__)
        self.note = f"cannot read it over SSH ({self.failed}): the last {len(self.kept)} lines kept"
        self.close()

    def _retried(self, coro_fn, *args) -> Any:
        """One call, and once more on a new connection (a dropped one is opened again)."""
        try:
            return self._call(coro_fn, *args)
        except Exception:
            self._fh = self._sftp = self._conn = None
            return self._call(coro_fn, *args)

    def _file_size(self) -> int:
        if self.failed is not None:
            raise OSError(self.failed)
        try:
            return self._retried(self._size_async)
        except Exception as exc:  # unreachable host, gone file: the kept lines, and why
            self._fail(exc)
            raise OSError(self.failed) from None

    def _read(self, begin: int, end: int) -> bytes:
        if self.failed is not None:
            return b""
        try:
            return self._retried(self._read_async, begin, end)
        except Exception as exc:
            self._fail(exc)
            return b""

    # -- after a failure, the kept lines answer ---------------------------------------------
    def __len__(self) -> int:
        return len(self.kept) if self.failed is not None else super().__len__()

    def index(self, budget: int = LogFile.read_block) -> bool:
        """As a local file's, but a file read to its end is asked for its size at most once
        a second (each question is a round trip, and the view asks twenty times a second)."""
        if self.failed is not None:
            return True
        now = time.monotonic()
        if self.complete and now - self._checked < RECHECK_S:
            return True
        self._checked = now
        super().index(budget)
        if self.failed is not None:
            self.complete = True
        return self.complete

    def lines(self, start: int, count: int) -> list[str]:
        return self.kept.lines(start, count) if self.failed is not None else super().lines(start, count)

    def find(self, needle: str, start: int, forward: bool = True) -> Optional[int]:
        return self.kept.find(needle, start, forward) if self.failed is not None else super().find(needle, start,
                                                                                                     forward)

    def matching(self, pattern, start: int = 0):
        return self.kept.matching(pattern, start) if self.failed is not None else super().matching(pattern, start)

    def close(self) -> None:
        """Close the connection and stop its loop (the view is gone, or the host failed)."""
        loop, self._loop = self._loop, None
        if loop is None:
            return

        async def shut() -> None:
            try:
                if self._fh is not None:
                    await self._fh.close()
                if self._conn is not None:
                    self._conn.close()
            except Exception:
                pass

        try:
            asyncio.run_coroutine_threadsafe(shut(), loop).result(5)
        except Exception:
            pass
        loop.call_soon_threadsafe(loop.stop)
        self._fh = self._sftp = self._conn = None
