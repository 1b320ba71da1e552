"""Following logs on remote hosts over SSH/SFTP (asyncssh).

* Specs: ``[user@]host[:port]:path`` and ``ssh://user@host:port/path``; ``~`` is the
  remote home (SFTP paths are relative to it).  No shell command is ever run:
  everything goes through SFTP requests, so no remote path can inject anything.
* The user's OpenSSH config (aliases, HostName, User, Port, IdentityFile, ProxyJump)
  and agent are used; known_hosts verification is always on.
* One connection per host for all its files.  A dropped link is noticed by
  keepalives (15 s, 3 misses) and retried with exponential backoff and jitter
  (1 s to 60 s); reading resumes at the saved offsets.  SFTP gives no inode, so a
  file's identity is its first bytes: a different head at the path means a new
  file (the old one is looked for among its rotated siblings and drained).  One
  rotation model with local following: a file seen empty and then written, or replaced
  (also across a dropped connection), first drains the generations rotated through its
  path since, oldest first, told apart by (size, mtime).
* Polling lists directories, not files: one ``readdir`` gives the size and mtime
  of every file in a directory, and only files that changed are opened.  A
  directory is listed every ``list_every`` (10 s), and at once when its mtime says
  a file came or went; a file found changed is stat'ed on its own fast schedule
  until it has been quiet for ``max_idle`` (5 s).  So idle cost grows with the
  listings, not with per-file requests, and one busy file in a directory of
  20,000 costs its own stats, not 20,000 entries four times a second.
* Only regular files are opened (a FIFO would block the server's one SFTP
  channel, and with it every file of the host).
* Events are handed on as each file's bytes are consumed, so a connection cut
  mid-round never advances an offset past events that were thrown away.
* Authentication failures, unknown or changed host keys and a path that does
  not exist when following starts are not retried: they are the user's to fix.
"""
from __future__ import annotations

import asyncio
import logging
import posixpath
import random
import time
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Callable, Optional

from tuimon.parsers.columns import Item

from ..engine import catalog, guard
from ..engine.cache import Ident, ParseCache
from ..engine.ingest import ParseStats, Reading
from ..sources import state as saved
from ..sources.cursor import HEAD_BYTES, MARKER_BYTES, Cursor, Fingerprint
from ..sources.discover import DEFAULT_EXCLUDE, DEFAULT_INCLUDE
from ..sources.positions import SavedPositions
from ..sources.rotation import rotated_through, sibling_names
from ..sources.scope import Scope
from ..sources.specs import RemoteSpec, parse_spec, split_paths  # noqa: F401  (re-exported)
from ..sources.ssh import FatalSSHError, beside_known_hosts, connect, describe, sftp_path  # noqa: F401  (re-exported)

MAX_READ_PER_ROUND = 16 << 20  # a file's backlog is read this much at a time: the other files get their turn
CACHE_EVERY = 30.0  # seconds between two commits of the parse cache entries being written
READ_SIZE = 1 << 20
MAX_DEPTH = 6

LOG = logging.getLogger("tuimon.ssh")


class RemoteThread:
    """Remote hosts followed by an asyncio loop in a thread of its own (for the
    live session, whose other work is synchronous)."""

    def __init__(self, specs: list[RemoteSpec], sink: Callable[[list[Item]], None], **kw) -> None:
        import threading

        self.specs = specs
        self.sink = sink
        self.kw = kw
        self.hosts: list[RemoteHost] = []
        self.errors: list[str] = []
        self.warnings: list[str] = []
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._stop: Optional[asyncio.Event] = None
        self._thread = threading.Thread(target=self._main, name="tuimon-remote", daemon=True)

    def start(self) -> "RemoteThread":
        self._thread.start()
        return self

    def _main(self) -> None:
        async def run() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            await read_remote(self.specs, self.sink, follow=True, on_error=self.errors.append,
                              on_warning=self.warnings.append, stop=self._stop, hosts_out=self.hosts, **self.kw)

        asyncio.run(run())

    def states(self) -> dict[str, str]:
        return {f"ssh {h.host}": h.state.describe() for h in list(self.hosts)}

    def retry_now(self) -> None:
        """Hosts waiting to reconnect try at once (the user asked; the backoff starts over)."""
        if self._loop is not None:
            for host in list(self.hosts):
                self._loop.call_soon_threadsafe(host.retry_now)

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=10)


def _link_down(exc: BaseException) -> bool:
    """Whether an SFTP error is the connection going (not a file gone or closed to us): the
    read that met it is not over, it goes on after the reconnection, so it must propagate."""
    import asyncssh

    return isinstance(exc, (asyncssh.SFTPConnectionLost, asyncssh.SFTPNoConnection))


def _ns(mtime) -> int:
    """An SFTP mtime (whole seconds, or None) in nanoseconds, 0 when not known."""
    try:
        return int(mtime) * 1_000_000_000 if mtime is not None else 0
    except (TypeError, ValueError, OverflowError):
        return 0


@dataclass(eq=False)
class RemoteFile(Cursor):
    """A file followed over SFTP: its cursor (the model local files share: no inode here, its
    first bytes and those before the offset tell it), and its ingest."""

    path: str  # SFTP path
    label: str
    reading: Reading
    size_seen: int = -1
    mtime_seen: Optional[int] = None
    interval: float = 0.0  # adaptive: short after a change, doubling while idle
    due: float = 0.0
    cache_checked: bool = False
    tail: bytes = b""  # the last bytes read (a stuck job's last line is shown from them)
    #: (size, mtime) of its rotated siblings (``x.log.1``...) accounted for: there when it was first
    #: seen (history), or read since.  A rename keeps both, so a generation is known under any name.
    history: Optional[set] = None
    position_checked: bool = False  # its saved position (--state) was looked for
    done_last: bytes = b""  # the bytes before its last complete line's end (a saved position's marker)
    saved_line: int = 0  # the line its last saved position was at
    #: a never-seen rotated generation whose whole read a dropped link cut short: read on
    #: from where it stopped once found again by content (its events up to there were handed on)
    whole: Optional[WholeRead] = None


@dataclass(eq=False, kw_only=True)
class WholeRead(Cursor):
    """A rotated generation read whole, and how far (the same cursor model: it is known
    again by its first bytes and those before the offset, under whatever name it has then)."""

    reading: Reading


@dataclass(eq=False)
class RemoteDir:
    path: str
    depth: int
    root: bool
    due: float = 0.0
    names: dict = field(default_factory=dict)
    mtime: Optional[int] = None  # at the last listing
    listed: bool = False
    check_interval: float = 0.0
    check_due: float = 0.0


@dataclass
class HostState:
    status: str = "connecting"
    retry_at: Optional[float] = None
    error: Optional[str] = None
    bytes_read: int = 0
    files: int = 0

    def describe(self, now: Optional[float] = None) -> str:
        if self.retry_at is not None:
            left = max(0.0, self.retry_at - (now or time.monotonic()))
            return f"retrying in {left:.0f} s ({self.error})"
        if self.error and self.status == "error":
            return f"error: {self.error}"
        return self.status


@dataclass
class RemoteHost:
    """All specs of one host, over one connection."""

    endpoint: tuple[str, Optional[str], Optional[int]]
    paths: list[str]
    sink: Callable[[list[Item]], None]
    ssh_config: Optional[str] = None
    include: tuple[str, ...] = DEFAULT_INCLUDE
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    poll: float = 1.0  # interval for files that just changed is a quarter of this
    max_idle: float = 5.0  # hot files and directories' mtimes are checked at least this often
    list_every: float = 10.0  # every directory is listed at least this often (idle files' changes)
    keepalive: float = 15.0
    connect_timeout: float = 15.0
    once: bool = False  # read what is there, then stop (summary, events without --follow)
    on_warning: Callable[[str], None] = lambda message: None
    state: HostState = field(default_factory=HostState)
    files: dict[str, RemoteFile] = field(default_factory=dict)
    dirs: dict[str, RemoteDir] = field(default_factory=dict)
    explicit: set = field(default_factory=set)  # files named as roots: always polled by stat
    hot: set = field(default_factory=set)  # files that changed lately: polled by stat until quiet
    roots_seen: bool = False  # every root existed once: a missing one later is a state, not an error
    warned: set = field(default_factory=set)
    #: the parse cache database to start files from (keyed by this host) and save to; None: none
    cache: Optional[Path] = None
    #: read positions (``--state``): files resume from theirs, and save theirs as they are read
    positions: Optional[SavedPositions] = None
    _cache: Optional[ParseCache] = None
    _cache_saved: float = 0.0
    _stopping: Optional[asyncio.Event] = None
    _retry: Optional[asyncio.Event] = None  # set while waiting to reconnect: the user's "retry now"

    @cached_property
    def scope(self) -> Scope:
        """The names a listing reads: the rule every verb follows (tuimon.sources.scope)."""
        return Scope(tuple(self.include), tuple(self.exclude))

    @property
    def host(self) -> str:
        return self.endpoint[0]

    # -- the parse cache ------------------------------------------------------------------------
    def _parse_cache(self) -> Optional[ParseCache]:
        if self._cache is None:
            host, user, port = self.endpoint
            self._cache = ParseCache(self.cache, key=catalog.current().key, host=f"ssh:{user or ''}@{host}:{port or ''}",
                                     on_warning=self.on_warning)
        return self._cache if self._cache.usable() else None

    async def _from_cache(self, fh, rf: RemoteFile, size: int, mtime, events: list[Item]) -> None:
        """A file read from 0: start from its cache entry if it is still the file saved
        (no inode over SFTP: its first bytes and those before the saved offset tell)."""
        rf.cache_checked = True
        cache = self._parse_cache()
        if cache is None:
            return
        row = cache.saved(rf.path)
        entry = None
        if row is not None and row.offset <= size:
            head = await fh.read(row.head_len, 0) if row.head_len else b""
            tail = await fh.read(row.tail_len, row.offset - row.tail_len) if row.tail_len else b""
            entry = cache.check(row, Ident(0, 0, head, tail, size, _ns(mtime)), size)
        entry = rf.reading.resume(cache, rf.path, entry, events.extend)
        if entry is not None:
            n = min(MARKER_BYTES, entry.offset)
            rf.placed(entry.offset, await fh.read(n, entry.offset - n), await fh.read(min(HEAD_BYTES, entry.offset), 0))
        rf.reading.write_to(cache, rf.path, entry, keep_store=False)  # memory does not grow with the file

    def _save_cache(self) -> None:
        self._cache_saved = time.monotonic()
        for rf in self.files.values():
            w = rf.reading.writer
            if w is not None and w.dirty:
                tail = rf.last[-min(len(rf.last), rf.offset):] if rf.offset else b""
                w.commit_as(Ident(0, 0, rf.head[:min(HEAD_BYTES, rf.offset)], tail, max(rf.size_seen, 0),
                                  _ns(rf.mtime_seen)), rf.offset, rf.reading.parser)

    async def run(self, stop: asyncio.Event) -> None:
        self._stopping = stop  # a long read looks at it between blocks
        try:
            await self._run(stop)
        finally:
            if self._cache is not None:
                if not self.once:
                    self._save_cache()
                self._cache.close()

    async def _run(self, stop: asyncio.Event) -> None:
        delay = 1.0
        while not stop.is_set():
            try:
                conn = await self._connect()
            except Exception as exc:  # noqa: BLE001 - every failure becomes a state, never a trace
                message, fatal = describe(exc, self.host)
                if fatal or self.once:  # a one-shot read reports instead of retrying forever
                    self.state.status, self.state.error, self.state.retry_at = "error", message, None
                    raise FatalSSHError(message) from None
                delay = 1.0 if await self._backoff(stop, delay, message) else min(60.0, delay * 2)
                continue
            delay = 1.0
            try:
                async with conn:
                    sftp = await conn.start_sftp_client()
                    self.state.status, self.state.error, self.state.retry_at = "connected", None, None
                    LOG.info("%s: connected", self.host)
                    await self._follow(sftp, stop)
                    if self.once:
                        return
            except FatalSSHError as exc:
                self.state.status, self.state.error, self.state.retry_at = "error", str(exc), None
                raise
            except Exception as exc:  # noqa: BLE001
                message, _ = describe(exc, self.host)
                if self.once:
                    self.state.status, self.state.error = "error", message
                    raise FatalSSHError(message) from None
                asked = await self._backoff(stop, delay, f"connection lost: {message}")
                delay = 1.0 if asked else min(60.0, delay * 2)

    def retry_now(self) -> None:
        """(In the host's loop.) A wait before reconnecting ends now."""
        if self._retry is not None:
            self._retry.set()

    async def _backoff(self, stop: asyncio.Event, delay: float, message: str) -> bool:
        """Wait before reconnecting; True where the user asked to retry now (the backoff starts over)."""
        wait = delay * random.uniform(0.7, 1.3)
        self.state.status = "retrying"
        self.state.error = message
        self.state.retry_at = time.monotonic() + wait
        self._retry = retry = asyncio.Event()
        waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(retry.wait())]
        try:
            await asyncio.wait(waiters, timeout=wait, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waiters:
                w.cancel()
            self._retry = None
        if retry.is_set():
            LOG.info("%s: retrying now, as asked", self.host)
        return retry.is_set()

    async def _connect(self):
        return await connect(self.endpoint, self.ssh_config, keepalive_interval=self.keepalive,
                             keepalive_count_max=3, connect_timeout=self.connect_timeout)

    # -- reading ------------------------------------------------------------------------------
    def _warn(self, message: str) -> None:
        if message not in self.warned:
            self.warned.add(message)
            LOG.warning("%s: %s", self.host, message)
            self.on_warning(f"{self.host}: {message}")

    async def _follow(self, sftp, stop: asyncio.Event) -> None:
        """Directories are listed every ``list_every`` seconds, and at once when their
        mtime (checked on a backoff from ``poll`` to ``max_idle``) says a file came or
        went; a file the listing finds changed is *hot*: stat'ed on its own backoff
        from ``poll / 4`` until it has been quiet for ``max_idle``, then left to the
        listings again.  Idle, that is one listing per directory per ``list_every``."""
        next_roots = 0.0
        while not stop.is_set():
            now = time.monotonic()
            if now >= next_roots:
                await self._resolve_roots(sftp)
                next_roots = now + self.max_idle
            now = time.monotonic()
            queue = [d for d in self.dirs.values() if self.once or d.due <= now]
            for d in self.dirs.values():
                if d.due > now and d.check_due <= now and not self.once:
                    if await self._dir_changed(sftp, d):
                        queue.append(d)
                        d.check_interval = self.poll
                    else:
                        d.check_interval = min(max(d.check_interval * 2, self.poll), self.max_idle)
                    d.check_due = now + d.check_interval
            for message in guard.take_new():  # a user format turned off while parsing
                self.on_warning(message)
            while queue:  # a directory found in this round is listed in this round
                d = queue.pop()
                if d.path not in self.dirs:
                    continue  # went away with its parent
                known = len(self.dirs)
                await self._poll_dir(sftp, d, now)
                d.due = now + self.list_every
                if len(self.dirs) > known:
                    queue.extend(list(self.dirs.values())[known:])
            for path in list(self.hot):
                rf = self.files[path]
                if rf.due > now and not self.once:
                    continue
                changed = await self._poll_named(sftp, rf)
                rf.interval = self.poll / 4 if changed else min(max(rf.interval * 2, self.poll / 4), self.max_idle)
                rf.due = now + rf.interval
                if rf.interval >= self.max_idle and path not in self.explicit:
                    self.hot.discard(path)  # quiet: the listings watch it from now on
            self.state.files = len(self.files)
            if self.cache and (self.once or time.monotonic() - self._cache_saved >= CACHE_EVERY):
                self._save_cache()  # before the end-of-input flush of a one-off read
            if self.once:
                events: list[Item] = []
                for rf in self.files.values():
                    events.extend(rf.reading.finish())
                if events:
                    self.sink(events)
                return
            wake = min([min(d.due, d.check_due) for d in self.dirs.values()] + [self.files[p].due for p in self.hot],
                       default=now + self.poll)
            try:
                await asyncio.wait_for(stop.wait(), timeout=max(0.02, min(wake, next_roots) - time.monotonic()))
            except asyncio.TimeoutError:
                pass

    async def _dir_changed(self, sftp, d: RemoteDir) -> bool:
        import asyncssh

        try:
            attrs = await sftp.stat(d.path)
        except asyncssh.SFTPError as exc:
            if _link_down(exc):
                raise
            return True  # gone, or closed to us: the listing says which
        return attrs.mtime != d.mtime

    async def _resolve_roots(self, sftp) -> None:
        """What each named path is: a directory (listed), a file (stat'ed).  A path
        missing when following starts is the user's error; later, only a state."""
        import asyncssh

        for raw in self.paths:
            root = sftp_path(raw)
            try:
                attrs = await sftp.stat(root)
            except asyncssh.SFTPNoSuchFile:
                if not self.roots_seen:
                    raise FatalSSHError(f"{self.host}:{raw}: no such file or directory") from None
                continue
            except asyncssh.SFTPPermissionDenied:
                if not self.roots_seen:
                    raise FatalSSHError(f"{self.host}:{raw}: permission denied") from None
                continue
            if attrs.type == asyncssh.FILEXFER_TYPE_DIRECTORY:
                if root not in self.dirs:
                    self.dirs[root] = RemoteDir(root, 0, True)
            elif attrs.type == asyncssh.FILEXFER_TYPE_REGULAR:
                self._add(root)
                self.explicit.add(root)
                self.hot.add(root)
            else:
                self._warn(f"{raw} is not a regular file: skipped")
        self.roots_seen = True

    async def _poll_dir(self, sftp, d: RemoteDir, now: float) -> None:
        """List one directory; read the files whose size or mtime changed (they become hot)."""
        import asyncssh

        try:
            d.mtime = (await sftp.stat(d.path)).mtime  # before listing: a change during it shows next time
            entries = await sftp.readdir(d.path)
        except asyncssh.SFTPNoSuchFile:
            if not d.root:
                self._forget_dir(d.path)
            return
        except asyncssh.SFTPPermissionDenied:
            self._warn(f"cannot list {d.path}: permission denied (retrying)")
            return
        known = d.names  # name -> its file, or None: not followed (decided once per name)
        listing = _Listing(entries)
        for entry in entries:
            attrs = entry.attrs
            rf = known.get(entry.filename, False)
            if rf is None:
                continue
            if rf is False or attrs.type != asyncssh.FILEXFER_TYPE_REGULAR:  # not the idle path: judge it
                judged = await self._judge(sftp, d, entry)
                if judged is None:
                    continue
                rf, attrs = judged
            if rf.history is None:  # first seen: its rotated siblings now are history, not to read
                rf.history = listing.siblings(posixpath.basename(rf.path))
            if attrs.size != rf.size_seen or attrs.mtime != rf.mtime_seen:
                await self._guarded_read(sftp, rf, attrs.size or 0, attrs.mtime)
                self._heat(rf, now, d)
        if len(known) > 4 * max(len(entries), 1024):
            known.clear()  # names long gone: decided again
        d.listed = True

    async def _judge(self, sftp, d: RemoteDir, entry) -> Optional[tuple[RemoteFile, object]]:
        """A listing entry seen for the first time (or no longer a plain file): a new
        directory to list, a file to follow with its attributes, or nothing."""
        import asyncssh

        name, attrs = entry.filename, entry.attrs
        text = name if isinstance(name, str) else name.decode("utf-8", "replace")
        if text in (".", ".."):
            d.names[name] = None
            return None
        path = posixpath.join(d.path, text)
        if attrs.type == asyncssh.FILEXFER_TYPE_DIRECTORY:
            if not text.startswith(".") and path not in self.dirs and d.depth < MAX_DEPTH:
                self.dirs[path] = RemoteDir(path, d.depth + 1, False)
            return None
        if not self.scope.wants(text):
            d.names[name] = None
            return None
        if attrs.type == asyncssh.FILEXFER_TYPE_SYMLINK:
            try:
                attrs = await sftp.stat(path)  # what the link points at (resolved at each listing)
            except asyncssh.SFTPError as exc:
                if _link_down(exc):
                    raise
                return None
        if attrs.type != asyncssh.FILEXFER_TYPE_REGULAR:
            self._warn(f"{path} is not a regular file: skipped")
            return None
        rf = self._add(path)
        if entry.attrs.type == asyncssh.FILEXFER_TYPE_REGULAR:
            d.names[name] = rf
        return rf, attrs

    def _heat(self, rf: RemoteFile, now: float, d: RemoteDir) -> None:
        """Poll ``rf`` on its own fast schedule until it is quiet.  Not the files found
        at a directory's first listing: most are logs of runs that ended (an active
        one shows at the next listing, at most ``list_every`` later)."""
        if not self.once and d.listed:
            self.hot.add(rf.path)
            rf.interval = self.poll / 4
            rf.due = now + rf.interval

    def _forget_dir(self, path: str) -> None:
        prefix = path.rstrip("/") + "/"
        for p in [p for p in self.dirs if p == path or p.startswith(prefix)]:
            del self.dirs[p]

    async def _poll_named(self, sftp, rf: RemoteFile) -> bool:
        import asyncssh

        try:
            attrs = await sftp.stat(rf.path)
        except (asyncssh.SFTPNoSuchFile, asyncssh.SFTPPermissionDenied):
            return False  # gone for now: looked at again on the idle schedule
        if attrs.type != asyncssh.FILEXFER_TYPE_REGULAR:
            self._warn(f"{rf.path} is not a regular file: skipped")
            return False
        if attrs.size == rf.size_seen and attrs.mtime == rf.mtime_seen:
            return False  # idle following costs one stat, never a read
        await self._guarded_read(sftp, rf, attrs.size or 0, attrs.mtime)
        return True

    async def _guarded_read(self, sftp, rf: RemoteFile, size: int, mtime) -> None:
        import asyncssh

        try:
            await self._read_file(sftp, rf, size, mtime)
        except (asyncssh.SFTPNoSuchFile, asyncssh.SFTPPermissionDenied):
            pass  # gone or closed to us for now: the next listing looks again

    def _add(self, path: str) -> RemoteFile:
        rf = self.files.get(path)
        if rf is None:
            label = f"{self.host}:{path}"
            rf = self.files[path] = RemoteFile(path, label, Reading(label))
        return rf

    async def _read_file(self, sftp, rf: RemoteFile, size: int, mtime) -> None:
        """Read what is new in one file.  Its events are handed on however the read
        ends (a dropped link included): they and its offset advance together."""
        events: list[Item] = []
        try:
            async with sftp.open(rf.path, "rb") as fh:
                if rf.history is None:  # a file named on its own: its siblings now are history
                    rf.history = await self._siblings(sftp, rf)
                if self.positions is not None and not rf.position_checked and rf.offset == 0:
                    await self._from_position(sftp, fh, rf, size, events)
                if self.cache and not rf.cache_checked and rf.offset == 0:
                    await self._from_cache(fh, rf, size, mtime, events)
                if rf.offset and await self._replaced(fh, rf, size):
                    # the file read before left the path (rotated, or copied and truncated), perhaps
                    # during a cut: its rest, and any generation rotated through the path since, first
                    await self._drain_generations(sftp, rf, events)
                    self._restart(rf, events, "a different file is now at this path")
                elif rf.offset == 0 and rf.size_seen == 0 and size > 0:
                    # seen empty, now written: what was written meanwhile may have been rotated away
                    await self._drain_generations(sftp, rf, events)
                budget = size if self.once else MAX_READ_PER_ROUND
                while rf.offset < size and budget > 0:
                    data = await fh.read(min(READ_SIZE, size - rf.offset), rf.offset)
                    if not data:
                        break
                    budget -= len(data)
                    self._consume(rf, data, events)
                    if events:  # handed on a block at a time: memory does not grow with the backlog
                        self.sink(events)
                        events = []
                    self._put_position(rf)
                    if self._stopping is not None and self._stopping.is_set():
                        break
                    await asyncio.sleep(0)  # a stop (Ctrl-C) and the other hosts get their turn
                if not rf.tail and rf.offset:  # its events came from the parse cache: its end, still
                    rf.tail = await fh.read(min(TAIL_BYTES, rf.offset), max(0, rf.offset - TAIL_BYTES))
            # a backlog left for the next round: the file stays hot and is read on then
            rf.size_seen, rf.mtime_seen = (size if rf.offset >= size else -1), mtime
            if rf.offset < size and not self.once:
                self.hot.add(rf.path)
                rf.interval = self.poll / 4
                rf.due = time.monotonic()
        finally:
            if events:
                self.sink(events)
            self._put_position(rf)

    async def _replaced(self, fh, rf: RemoteFile, size: int) -> bool:
        return size < rf.offset or not await self._holds(fh, rf)

    async def _siblings(self, sftp, rf: RemoteFile) -> set:
        """(size, mtime) of ``rf``'s rotated siblings now (one listing)."""
        import asyncssh

        try:
            return _Listing(await sftp.readdir(posixpath.dirname(rf.path) or ".")).siblings(
                posixpath.basename(rf.path))
        except asyncssh.SFTPError as exc:
            if _link_down(exc):
                raise  # not "no siblings": every one there would later be read as new
            return set()

    async def _drain_generations(self, sftp, rf: RemoteFile, events: list[Item]) -> None:
        """The rotation model's procedure (:func:`.rotation.rotated_through`) over SFTP:
        files rotated through ``rf``'s path since it was last read (``x.log`` ->
        ``x.log.1`` -> ``x.log.2``, copytruncate's copy), oldest first.  The one that
        continues what was read is read on from the offset; the others, never seen, are
        read whole.  SFTP has no inode: a generation is known by (size, mtime).

        A dropped link propagates (the reconnection drains again): what was handed on stays
        accounted for, the generation read on by ``rf``'s offset, one read whole by
        ``rf.whole``, those done by the history (a cut swallowed here once restarted the
        path's file over a generation half read, which a later drain read again whole)."""
        import asyncssh

        directory, base = posixpath.split(rf.path)
        try:
            entries = await sftp.readdir(directory or ".")
        except asyncssh.SFTPError as exc:
            if _link_down(exc):
                raise
            return
        history = set(rf.history) if rf.history is not None else set()
        pending, _ = rotated_through(_Listing(entries).generations(base), history)
        for gen in pending:
            try:
                async with sftp.open(posixpath.join(directory, gen.name), "rb") as fh:
                    if rf.whole is not None and rf.whole.offset and await self._holds(fh, rf.whole):
                        await self._read_whole(fh, rf.whole, events)
                    elif await self._continues(fh, rf):
                        await self._read_on(fh, rf, events)
                    else:
                        rf.whole = WholeRead(reading=Reading(rf.label))
                        await self._read_whole(fh, rf.whole, events)
                    # history one generation at a time, once read (before the close, which a
                    # dropped link may fail): a link dropped part-way leaves the rest to be read
                    # after the reconnection (all of them up front lost 453 lines in a soak)
                    rf.whole = None
                    history.add(gen.sig)
                    rf.history = set(history)
            except asyncssh.SFTPError as exc:
                if _link_down(exc):
                    raise
                continue  # gone or closed to us for now: looked at again at the next drain
        rf.whole = None  # a generation cut short and gone since: nothing left of it to read

    async def _continues(self, fh, rf: RemoteFile) -> bool:
        """Whether the file behind ``fh`` holds what was read of ``rf`` (the file read
        before, gone on under another name)."""
        if not rf.offset or (rf.known_by is None and not rf.head):
            return False
        return await self._holds(fh, rf)

    async def _holds(self, fh, cursor: Cursor) -> bool:
        """Whether the file behind ``fh`` holds what ``cursor`` read (its rule,
        :meth:`.cursor.Cursor.continues_in`, over SFTP reads)."""
        n_head, n_last = cursor.wanted()
        head_now = await fh.read(n_head, 0) if n_head else b""
        if not cursor.head_holds(head_now):
            return False  # no second read when the first bytes differ already
        before = await fh.read(n_last, cursor.offset - n_last) if n_last else b""
        return cursor.continues_in(head_now, before)

    async def _read_on(self, fh, rf: RemoteFile, events: list[Item]) -> None:
        while True:
            data = await fh.read(READ_SIZE, rf.offset)
            if not data:
                return
            self._consume(rf, data, events)

    async def _read_whole(self, fh, whole: WholeRead, events: list[Item]) -> None:
        """Read a generation from ``whole``'s offset (0 when first seen) to its end."""
        while True:
            data = await fh.read(READ_SIZE, whole.offset)
            if not data:
                break
            whole.took(data)
            self.state.bytes_read += len(data)
            events.extend(whole.reading.feed(data))
        events.extend(whole.reading.finish())

    def _restart(self, rf: RemoteFile, events: list[Item], reason: str) -> None:
        events.extend(rf.reading.finish())
        events.append(rf.reading.restart(reason))
        rf.rewind()
        rf.done_last = b""
        # nothing of the path's file is read yet: a link dropped before it is looks for what
        # was rotated through the path meanwhile, as a file seen empty and then written does
        rf.size_seen = 0

    def _consume(self, rf: RemoteFile, data: bytes, events: list[Item]) -> None:
        before = rf.last
        rf.took(data)
        rf.tail = (rf.tail + data[-TAIL_BYTES:])[-TAIL_BYTES:]
        self.state.bytes_read += len(data)
        events.extend(rf.reading.feed(data))
        held = rf.reading.pending
        if held < len(data):  # a line ended in this block: the marker of a position saved there
            rf.done_last = (before + data[:len(data) - held])[-MARKER_BYTES:]

    # -- saved positions (--state) ------------------------------------------------------------------
    def _state_key(self, rf: RemoteFile) -> str:
        host, user, port = self.endpoint
        return f"ssh:{user or ''}@{host}:{port or ''}:{rf.path}"

    def _put_position(self, rf: RemoteFile) -> None:
        """``rf``'s events are handed on up to its last complete line: save where that is."""
        if self.positions is None or self.once or rf.known_by is not None:
            return
        complete = rf.offset - rf.reading.pending
        if complete <= 0:
            return
        known = rf.fingerprint(upto=complete, last=rf.done_last)
        line = rf.reading.next_line - 1
        old, rf.saved_line = rf.saved_line, line
        try:
            self.positions.put(self._state_key(rf), saved.Position(
                dev=0, ino=0, head=known.head_digest, head_len=known.head_len, offset=complete,
                marker=known.last.hex(), line=line,
                siblings=sorted(list(sig) for sig in rf.history or ())), max(0, line - old))
        except OSError as exc:  # a full disk: the reading goes on, the state is saved when it can be
            self._warn(f"cannot save state to {self.positions.path}: {exc.strerror or exc}")

    async def _from_position(self, sftp, fh, rf: RemoteFile, size: int, events: list[Item]) -> None:
        """A file read from 0 with a saved position: read on from it if the file at the path is
        the one saved; else (rotated, or copied and truncated, while we were stopped) the
        generations rotated through the path since are read first, the saved one on from its
        offset, then the file at the path from its start."""
        rf.position_checked = True
        assert self.positions is not None
        pos = self.positions.take(self._state_key(rf))
        if pos is None:
            return
        if pos.siblings is not None:
            rf.history = {tuple(sig) for sig in pos.siblings}
        marker = bytes.fromhex(pos.marker)
        rf.reading.next_line = pos.line + 1
        rf.looking_for(Fingerprint(pos.head_len, pos.head, pos.offset, marker))
        if pos.offset <= size and await self._holds(fh, rf):
            rf.placed(pos.offset, marker, await fh.read(min(HEAD_BYTES, pos.offset), 0))
            rf.done_last = marker
            rf.saved_line = pos.line
            return
        try:
            await self._drain_generations(sftp, rf, events)
        finally:
            rf.stop_looking()
        self._restart(rf, events, "a different file is now at this path (while tuimon was stopped)")


TAIL_BYTES = 4096


@dataclass(frozen=True)
class RemoteGeneration:
    """A rotated sibling in an SFTP listing, as the rotation model sees it."""

    name: str
    mtime: float
    size: int
    key: None = None  # SFTP has no inode

    @property
    def sig(self) -> tuple[int, float]:
        return (self.size, self.mtime)


class _Listing:
    """One directory listing, its names sorted: a file's rotated siblings (names that
    extend its own) by bisection, not a scan of the listing per file."""

    def __init__(self, entries: list) -> None:
        import asyncssh

        regular = asyncssh.FILEXFER_TYPE_REGULAR
        self.attrs = {e.filename: e.attrs for e in entries
                      if isinstance(e.filename, str) and e.attrs.type == regular}
        self.names = sorted(self.attrs)

    def generations(self, base: str) -> list[RemoteGeneration]:
        return [RemoteGeneration(name, self.attrs[name].mtime or 0, self.attrs[name].size)
                for name in sibling_names(self.names, base)]

    def siblings(self, base: str) -> set:
        return {g.sig for g in self.generations(base)}


def parsed(hosts: list[RemoteHost]) -> tuple[int, ParseStats]:
    """(files read, their parse stats) over every host: what a batch verb reports."""
    total = ParseStats()
    files = 0
    for host in hosts:
        for rf in host.files.values():
            files += 1
            total.add(rf.reading.stats)
    return files, total


def last_seen(hosts: list[RemoteHost]) -> dict[str, tuple[Optional[float], Optional[str]]]:
    """label -> (the file's mtime when last read, its last non-empty line), of every remote file."""
    out: dict[str, tuple[Optional[float], Optional[str]]] = {}
    for host in hosts:
        for rf in host.files.values():
            lines = [ln for ln in rf.tail.replace(b"\r", b"\n").split(b"\n") if ln.strip()]
            text = lines[-1].decode("utf-8", "replace").strip() if lines else None
            out[rf.label] = (float(rf.mtime_seen) if rf.mtime_seen is not None else None, text)
    return out


def group_by_host(specs: list[RemoteSpec]) -> dict[tuple, list[str]]:
    hosts: dict[tuple, list[str]] = {}
    for spec in specs:
        hosts.setdefault(spec.endpoint, []).append(spec.path)
    return hosts


async def read_remote(specs: list[RemoteSpec], sink: Callable[[list[Item]], None], *,
                      ssh_config: Optional[str] = None, follow: bool = False,
                      on_error: Callable[[str], None] = lambda m: None,
                      on_warning: Callable[[str], None] = lambda m: None,
                      stop: Optional[asyncio.Event] = None, hosts_out: Optional[list] = None,
                      **kw) -> list[RemoteHost]:
    """Read (or follow) every spec, one connection per host; hosts run side by side so
    one host down never stalls the others."""
    stop = stop or asyncio.Event()
    hosts = [RemoteHost(endpoint, paths, sink, ssh_config=ssh_config, once=not follow, on_warning=on_warning, **kw)
             for endpoint, paths in group_by_host(specs).items()]
    if hosts_out is not None:
        hosts_out.extend(hosts)

    async def guarded(h: RemoteHost) -> None:
        try:
            await h.run(stop)
        except FatalSSHError as exc:
            on_error(str(exc))

    await asyncio.gather(*(guarded(h) for h in hosts))
    return hosts


async def check_remote(specs: list[RemoteSpec], ssh_config: Optional[str] = None,
                       timeout: float = 15.0) -> tuple[list[str], list[str]]:
    """Before a dashboard opens: (errors the user must fix, passing troubles).  An
    unknown host, a refused key or a missing path is an error; a host that does not
    answer now is only a warning (the dashboard retries it)."""
    import asyncssh

    errors: list[str] = []
    warnings: list[str] = []

    async def one(endpoint, paths) -> None:
        host = RemoteHost(endpoint, paths, lambda events: None, ssh_config=ssh_config, connect_timeout=timeout)
        try:
            conn = await host._connect()
        except Exception as exc:  # noqa: BLE001 - every failure becomes one line
            message, fatal = describe(exc, host.host)
            (errors if fatal else warnings).append(message)
            return
        async with conn:
            sftp = await conn.start_sftp_client()
            for raw in paths:
                try:
                    await sftp.stat(sftp_path(raw))
                except asyncssh.SFTPNoSuchFile:
                    errors.append(f"{host.host}:{raw}: no such file or directory")
                except asyncssh.SFTPError as exc:
                    errors.append(f"{host.host}:{raw}: {exc.reason}")

    await asyncio.gather(*(one(endpoint, paths) for endpoint, paths in group_by_host(specs).items()))
    return errors, warnings
