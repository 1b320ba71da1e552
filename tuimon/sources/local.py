"""Following local log files by name, like ``tail -F`` but losing and repeating nothing.

A followed *path* points at a *stream*: one open file (one inode).  Each poll
stats the path: a new inode at the path means rotation, recreation or a
repointed symlink, and the old stream is drained to its end before the new one
is read from 0; a file shorter than what was read, or whose bytes before the
read offset changed, was truncated (``truncated`` event, read again from 0,
copytruncate's leading NULs skipped).  Streams that left their path (rotated away,
deleted) stay open for a grace period, then are closed.

Polling is the source of truth.  Watchdog (inotify) only wakes the loop early on
local filesystems; network filesystems (see :mod:`.mounts`) are only polled.
"""
from __future__ import annotations

import heapq
import os
import stat
import threading
import time
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from parsers.events import Event, Truncated

from ..discover import DEFAULT_EXCLUDE, DEFAULT_INCLUDE, matches
from ..ingest import FileParser
from . import state as saved
from .mounts import needs_polling

MIN_INTERVAL = 0.05
READ_SIZE = 1 << 20
MAX_READ_PER_POLL = 16 << 20  # keeps one busy file from starving the others


@dataclass(eq=False)
class Stream:
    key: tuple[int, int]
    fh: object
    label: str
    parser: FileParser
    offset: int = 0
    head: bytes = b""
    last: bytes = b""  # the bytes just before ``offset`` (up to MARKER_BYTES)
    skip_nuls: bool = False
    mtime_ns: int = 0
    history: Optional["History"] = None
    detached_at: Optional[float] = None
    opened_at: float = 0.0

    def fileno(self) -> int:
        return self.fh.fileno()  # type: ignore[attr-defined]


@dataclass(eq=False)
class History:
    """The middle of a large file, read after its head and tail (see ``head_tail``)."""

    start: int
    end: int
    parser: FileParser
    offset: int = 0


@dataclass(eq=False)
class Followed:
    path: str
    explicit: bool
    stream: Optional[Stream] = None
    status: str = "waiting"
    interval: float = MIN_INTERVAL
    due: float = 0.0
    dead: bool = False
    missing_since: Optional[float] = None
    previous: Optional[Stream] = None  # the stream that was at the path before it went missing
    hot: bool = True  # recently changed: polled on its own backoff schedule


@dataclass
class Progress:
    bytes_done: int = 0
    bytes_total: int = 0


class LocalFollower:
    """Call :meth:`poll` repeatedly (or :meth:`run`); events go to ``sink``."""

    def __init__(self, paths: Sequence[str], sink: Callable[[list[Event]], None], *,
                 include: Sequence[str] = DEFAULT_INCLUDE, exclude: Sequence[str] = DEFAULT_EXCLUDE,
                 poll: Optional[float] = None, max_interval: float = 1.0, grace: float = 2.0,
                 state_path: Optional[str] = None, use_inotify: bool = True,
                 head_tail: Optional[int] = None,
                 on_block: Optional[Callable[[str, str, int], None]] = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.sink = sink
        self.include, self.exclude = tuple(include), tuple(exclude)
        self.forced_poll = poll is not None
        self.max_interval = poll if poll is not None else max_interval
        self.grace = grace
        self.clock = clock
        self.roots = [os.path.abspath(os.path.expanduser(p)) for p in paths]
        self._root_is_dir = {r: os.path.isdir(r) for r in self.roots}
        self.followed: dict[str, Followed] = {}
        self.streams: dict[tuple[int, int], Stream] = {}
        self.detached: list[Stream] = []
        self._finished: set[tuple[int, int, bytes]] = set()  # rotated-away files read to the end
        self._generations: dict[str, list[tuple[bytes, int]]] = {}
        self._with_history: list[Stream] = []
        self._subdirs: dict[str, list[str]] = {}
        self._dir_mtimes: dict[str, float] = {}
        self._heap: list[tuple[float, int, Followed]] = []
        self._seq = 0
        self._wake = threading.Event()
        self._woken: set[str] = set()
        self._lock = threading.Lock()
        self._observer = None
        self._watched: dict[str, object] = {}
        self.use_inotify = use_inotify and not self.forced_poll
        self.state_path = state_path
        self.head_tail = head_tail  # files larger than this: head and tail first, history after
        self.on_block = on_block  # sees the raw text of each block of lines (for log tails)
        self.warnings: list[str] = []
        self._positions: dict[str, saved.Position] = {}
        if state_path:
            self._positions, warning = saved.load(state_path)
            if warning:
                self.warnings.append(warning)
        self.progress = Progress()
        self.root_status: dict[str, str] = {}
        self._next_scan = 0.0
        self._next_sweep = 0.0
        self._cold: list[Followed] = []  # idle files, all checked in one sweep per interval
        self._dirty_state = False

    # -- discovery ----------------------------------------------------------------------
    def scan(self) -> None:
        """Find followed paths: named files (even before they exist) and matching
        files under named directories; walk a directory again only if it changed."""
        for root in self.roots:
            try:
                os.stat(root)
            except FileNotFoundError:
                self.root_status[root] = "missing"
                if self._root_is_dir[root]:
                    self._forget_watch(root)
                    self._dir_mtimes = {d: m for d, m in self._dir_mtimes.items()
                                        if not (d == root or d.startswith(root + os.sep))}
                else:
                    self._follow(root, explicit=True)  # tail -F: picked up when it appears
                continue
            except PermissionError:
                self.root_status[root] = "permission denied"
                continue
            if os.path.isdir(root):
                self.root_status[root] = "ok"
                self._walk(root)
                self._ensure_watch(root)
            else:
                self.root_status[root] = "ok"
                self._follow(root, explicit=True)
                self._ensure_watch(os.path.dirname(root))

    def _walk(self, top: str) -> None:
        stack = [top]
        while stack:
            directory = stack.pop()
            try:
                mtime = os.stat(directory).st_mtime_ns
            except OSError:
                continue
            if self._dir_mtimes.get(directory) == mtime:
                stack.extend(self._subdirs.get(directory, ()))  # unchanged: no need to list it again
                continue
            self._dir_mtimes[directory] = mtime
            try:
                with os.scandir(directory) as it:
                    entries = list(it)
            except OSError:
                continue
            subdirs = []
            for entry in entries:
                try:
                    if entry.is_dir() and not entry.name.startswith("."):
                        subdirs.append(entry.path)
                    elif matches(entry.name, self.include) and not matches(entry.name, self.exclude):
                        self._follow(entry.path, explicit=False)
                except OSError:
                    continue
            self._subdirs[directory] = subdirs
            stack.extend(subdirs)

    def _follow(self, path: str, explicit: bool) -> None:
        if path not in self.followed:
            f = self.followed[path] = Followed(path, explicit)
            self._schedule(f, self.clock())

    def _schedule(self, f: Followed, when: float) -> None:
        f.due = when
        self._seq += 1
        heapq.heappush(self._heap, (when, self._seq, f))

    # -- watchdog (optional, only lowers latency) -----------------------------------------
    def _ensure_watch(self, directory: str) -> None:
        if not self.use_inotify or directory in self._watched or needs_polling(directory):
            return
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer
        except ImportError:  # pragma: no cover - watchdog is a dependency
            self.use_inotify = False
            return
        follower = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event) -> None:  # runs in watchdog's thread
                paths = {os.fsdecode(event.src_path)}
                if getattr(event, "dest_path", None):
                    paths.add(os.fsdecode(event.dest_path))
                with follower._lock:
                    follower._woken.update(paths)
                follower._wake.set()

        try:
            if self._observer is None:
                self._observer = Observer()
                self._observer.daemon = True
                self._observer.start()
            self._watched[directory] = self._observer.schedule(Handler(), directory, recursive=True)
        except OSError:
            pass  # e.g. inotify watch limit reached: polling still covers it

    def _forget_watch(self, directory: str) -> None:
        watch = self._watched.pop(directory, None)
        if watch is not None and self._observer is not None:
            try:
                self._observer.unschedule(watch)
            except (KeyError, OSError, RuntimeError):
                pass

    # -- polling ----------------------------------------------------------------------------
    def poll(self) -> list[Event]:
        """One pass over what is due; returns (and sinks) the events read."""
        now = self.clock()
        events: list[Event] = []
        if now >= self._next_scan:
            self.scan()
            self._next_scan = now + self.max_interval
            now = self.clock()  # files found by the scan are due now
        with self._lock:
            woken, self._woken = self._woken, set()
        for path in woken:
            f = self.followed.get(path)
            if f is not None:
                self._heat(f, now)
            elif os.path.isdir(path) or not os.path.exists(path):
                self._next_scan = now
        # files rotated away hold older lines than whatever is now at their names: first
        self._poll_detached(now, events)
        while self._heap and self._heap[0][0] <= now:
            due, _, f = heapq.heappop(self._heap)
            if f.dead or due != f.due or not f.hot:
                continue  # superseded entry
            grew = self._poll_path(f, events)
            f.interval = MIN_INTERVAL if grew else min(f.interval * 2, self.max_interval)
            if f.interval >= self.max_interval and not f.dead:
                f.hot = False
                self._cold.append(f)
            else:
                self._schedule(f, now + f.interval)
        if now >= self._next_sweep:
            self._sweep(now, events)
            self._next_sweep = now + self.max_interval
        self._poll_history(events)
        if events:
            self._dirty_state = True
            self.sink(events)
        return events

    def _heat(self, f: Followed, now: float) -> None:
        f.interval = MIN_INTERVAL
        if not f.hot:
            f.hot = True
            self._cold.remove(f)
        self._schedule(f, now)

    def _sweep(self, now: float, events: list[Event]) -> None:
        """Check every idle file once: one stat each, inline, since this loop is
        what following thousands of quiet files costs."""
        stat_ = os.stat
        changed: list[Followed] = []
        for f in self._cold:
            try:
                st = stat_(f.path)
            except OSError:
                changed.append(f)
                continue
            s = f.stream
            if (s is None or st.st_ino != s.key[1] or st.st_size != s.offset or st.st_mtime_ns != s.mtime_ns
                    or st.st_dev != s.key[0]):
                changed.append(f)
        for f in changed:
            if f.dead:
                continue
            if self._poll_path(f, events):
                self._heat(f, now)
        self._cold = [f for f in self._cold if not f.dead and not f.hot]

    def next_wakeup(self) -> float:
        candidates = [self._next_scan, self._next_sweep]
        if self._heap:
            candidates.append(self._heap[0][0])
        if self.detached:
            candidates.append(self.clock() + MIN_INTERVAL * 4)
        if self._with_history:
            candidates.append(self.clock())
        return max(0.0, min(candidates) - self.clock())

    def wake(self) -> None:
        """Cut the current :meth:`sleep` short (another thread asks for a poll or a stop)."""
        self._wake.set()

    def sleep(self, at_most: Optional[float] = None) -> None:
        """Wait until the next poll is due, a watched file changes or :meth:`wake`."""
        timeout = min(self.next_wakeup(), self.max_interval)
        self._wake.wait(timeout=timeout if at_most is None else min(timeout, at_most))
        self._wake.clear()

    def run(self, stop: threading.Event, state_every: float = 1.0) -> None:
        last_save = self.clock()
        while not stop.is_set():
            self.poll()
            if self.state_path and self._dirty_state and self.clock() - last_save >= state_every:
                self.save_state()
                last_save = self.clock()
            self.sleep()
        if self.state_path:
            self.save_state()

    def close(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer = None
        for s in list(self.streams.values()) + self.detached:
            try:
                s.fh.close()  # type: ignore[attr-defined]
            except OSError:
                pass

    def status(self) -> dict[str, str]:
        return {p: f.status for p, f in self.followed.items()}

    # -- one path -----------------------------------------------------------------------------
    def _poll_path(self, f: Followed, events: list[Event]) -> bool:
        try:
            st = os.stat(f.path)
            s = f.stream
            if (s is not None and st.st_ino == s.key[1] and st.st_size == s.offset and st.st_mtime_ns == s.mtime_ns
                    and st.st_dev == s.key[0]):
                return False  # the common case: nothing changed

        except FileNotFoundError:
            if f.stream is not None:
                self._detach(f.stream, events)
                f.previous, f.stream = f.stream, None
            f.status = "missing"
            now = self.clock()
            if f.missing_since is None:
                f.missing_since = now
            elif not f.explicit and now - f.missing_since > max(self.grace, 10.0):
                f.dead = True  # gone for good: stop polling a name nobody writes to
                self.followed.pop(f.path, None)
            return False
        except PermissionError:
            f.status = "permission denied"
            return False
        except OSError as exc:
            f.status = f"error: {exc.strerror}"
            return False
        if not _is_regular(st.st_mode):
            f.status = "not a regular file"
            return False
        f.missing_since = None
        key = (st.st_dev, st.st_ino)
        s = f.stream
        if s is None or s.key != key:
            rotated_from = s or f.previous
            if s is not None:  # rotated, recreated or repointed: finish the old one first
                self._detach(s, events)
                self._read_rotated_siblings(f, s, key, events)
            elif f.previous is not None and f.previous.key != key:
                # the name was missing for a moment (rename, then create): files rotated
                # through it meanwhile still have to be read, oldest first
                self._read_rotated_siblings(f, f.previous, key, events)
            f.previous = None
            s = self.streams.get(key) or self._reattach(key)
            if s is None:
                s = self._open(f, key, st.st_size)
                if s is None:
                    f.previous = rotated_from  # gone again before we could open it: next poll looks again
                    return False
                if s.key != key and rotated_from is not None:
                    # rotated again between our stat and our open: the file we stat'ed is
                    # now a sibling, and it comes before the one we opened
                    self._read_rotated_siblings(f, rotated_from, s.key, events)
            f.stream = s
            if s.key != key:
                st = os.fstat(s.fileno())
        f.status = "following"
        return self._read(s, st.st_size, events, st.st_mtime_ns)

    def _parser(self, label: str) -> FileParser:
        return FileParser(label, on_block=self.on_block)

    def _reattach(self, key: tuple[int, int]) -> Optional[Stream]:
        """A file that left one followed path and appeared at another (a rename
        into the followed set) goes on from where it was."""
        for s in self.detached:
            if s.key == key:
                self.detached.remove(s)
                s.detached_at = None
                self.streams[key] = s
                return s
        return None

    def _open(self, f: Followed, key: tuple[int, int], size: int) -> Optional[Stream]:
        try:
            fh = open(f.path, "rb", buffering=0)
        except PermissionError:
            f.status = "permission denied"
            return None
        except OSError as exc:
            f.status = f"error: {exc.strerror}"
            return None
        st = os.fstat(fh.fileno())
        real_key = (st.st_dev, st.st_ino)
        if real_key != key and real_key in self.streams:
            fh.close()
            return self.streams[real_key]
        s = Stream(real_key, fh, f.path, self._parser(f.path), opened_at=self.clock())
        self._resume(s, f.path)
        if s.offset == 0 and (real_key[0], real_key[1], os.pread(fh.fileno(), 64, 0)) in self._finished:
            s.offset = st.st_size  # a rotated file already read to its end under another name
            s.last = os.pread(fh.fileno(), saved.MARKER_BYTES, max(0, s.offset - saved.MARKER_BYTES))
            s.head = os.pread(fh.fileno(), saved.HEAD_BYTES, 0)
        self.streams[real_key] = s
        self.progress.bytes_total += max(0, st.st_size - s.offset)
        if self.head_tail and s.offset == 0 and st.st_size > self.head_tail:
            self._head_and_tail(s, st.st_size)
        return s

    HEAD = 1 << 20
    TAIL = 4 << 20

    def _head_and_tail(self, s: Stream, size: int) -> None:
        """Parse the first MiB (config, startup) and the last MiBs (current state) now,
        and leave the middle to :meth:`_poll_history`, so a job's state is known fast."""
        fd = s.fileno()
        head = os.pread(fd, self.HEAD, 0)
        head_end = head.rfind(b"\n") + 1
        tail_probe = os.pread(fd, self.TAIL, size - self.TAIL)
        tail_start = size - self.TAIL + tail_probe.find(b"\n") + 1
        if head_end <= 0 or tail_start <= head_end:
            return
        events: list[Event] = []
        self._consume(s, head[:head_end], events)
        lines_before_tail = head[:head_end].count(b"\n")
        pos = head_end
        while pos < tail_start:  # count lines at memory speed, to number the tail's lines
            chunk = os.pread(fd, min(8 << 20, tail_start - pos), pos)
            if not chunk:
                break
            lines_before_tail += chunk.count(b"\n")
            pos += len(chunk)
        history = History(head_end, tail_start, FileParser(s.label), head_end)  # old lines: not for the live tail
        history.parser.framer.next_line = s.parser.framer.next_line
        s.parser.framer.next_line = lines_before_tail + 1
        s.offset = tail_start
        s.history = history
        self._with_history.append(s)
        if events:
            self.sink(events)

    def _poll_history(self, events: list[Event]) -> None:
        budget = MAX_READ_PER_POLL
        for s in list(self._with_history):
            h = s.history
            if h is None:
                self._with_history.remove(s)
                continue
            while h.offset < h.end and budget > 0:
                data = os.pread(s.fileno(), min(READ_SIZE, h.end - h.offset, budget), h.offset)
                if not data:
                    break
                h.offset += len(data)
                budget -= len(data)
                self.progress.bytes_done += len(data)
                events.extend(h.parser.feed(data))
                time.sleep(0)
            if h.offset >= h.end:
                events.extend(h.parser.finish())
                s.history = None
                self._with_history.remove(s)
            if budget <= 0:
                return

    def _resume(self, s: Stream, path: str) -> None:
        pos = self._positions.pop(path, None)
        if pos is None or (pos.dev, pos.ino) != s.key:
            return
        fd = s.fileno()
        head = os.pread(fd, pos.head_len, 0)
        if len(head) != pos.head_len or saved.head_digest(head) != pos.head:
            return  # another file with a reused inode: read it from the start
        n = min(saved.MARKER_BYTES, pos.offset)
        marker = os.pread(fd, n, pos.offset - n) if n else b""
        if marker.hex() != pos.marker:
            return
        s.offset = pos.offset
        s.head = head
        s.last = marker
        s.parser.framer.next_line = pos.line + 1

    def _read(self, s: Stream, size: int, events: list[Event], mtime_ns: Optional[int] = None) -> bool:
        fd = s.fileno()
        changed = size != s.offset or (mtime_ns is not None and mtime_ns != s.mtime_ns)
        if mtime_ns is not None:
            s.mtime_ns = mtime_ns
        if size < s.offset:
            self._truncated(s, events, "file shrank")
        elif changed and s.offset and self._rewritten(s, fd):
            self._truncated(s, events, "content before the read offset changed")
        if size <= s.offset:
            return False
        budget = MAX_READ_PER_POLL
        grew = False
        while s.offset < size and budget > 0:
            data = os.pread(fd, min(READ_SIZE, size - s.offset, budget), s.offset)
            if not data:
                break
            grew = True
            budget -= len(data)
            self._consume(s, data, events)
            time.sleep(0)  # let the UI thread take the GIL between blocks
        return grew

    @staticmethod
    def _rewritten(s: Stream, fd: int) -> bool:
        """Truncated and written again past the old offset between two polls: the
        first bytes or the bytes before the offset are no longer what was read."""
        if s.last and os.pread(fd, len(s.last), s.offset - len(s.last)) != s.last:
            return True
        return bool(s.head) and os.pread(fd, len(s.head), 0) != s.head

    def _consume(self, s: Stream, data: bytes, events: list[Event]) -> None:
        if len(s.head) < saved.HEAD_BYTES:
            s.head += data[: saved.HEAD_BYTES - len(s.head)]
        s.offset += len(data)
        s.last = (s.last + data)[-saved.MARKER_BYTES:]
        self.progress.bytes_done += len(data)
        if s.skip_nuls:
            stripped = data.lstrip(b"\x00")
            if stripped:
                s.skip_nuls = False
            data = stripped
        if data:
            events.extend(s.parser.feed(data))

    def _remember(self, s: Stream) -> None:
        """What one generation of a path started with and how much of it was read:
        a copy of it (copytruncate's) found next to the path is not new data."""
        if s.head:
            gens = self._generations.setdefault(s.label, [])
            gens.append((s.head[:256], s.offset))
            del gens[:-64]

    def _truncated(self, s: Stream, events: list[Event], reason: str) -> None:
        self._remember(s)
        events.extend(s.parser.finish())
        events.append(Truncated(file=s.label, line=s.parser.framer.next_line, reason=reason))
        s.parser = self._parser(s.label)
        s.offset = 0
        s.head = b""
        s.last = b""
        s.skip_nuls = True  # copytruncate with a writer that keeps its offset leaves NULs

    # -- streams that left their path ----------------------------------------------------------
    def _detach(self, s: Stream, events: list[Event]) -> None:
        self._drain(s, events)
        self._remember(s)
        if s.detached_at is None:
            s.detached_at = self.clock()
            self.detached.append(s)
        self.streams.pop(s.key, None)

    def _drain(self, s: Stream, events: list[Event]) -> None:
        while True:
            try:
                st = os.fstat(s.fileno())
            except OSError:
                return
            if not self._read(s, st.st_size, events, st.st_mtime_ns):
                return

    def _poll_detached(self, now: float, events: list[Event]) -> None:
        keep = []
        for s in self.detached:
            self._drain(s, events)
            if now - (s.detached_at or now) >= self.grace:
                events.extend(s.parser.finish())
                self._finished.add((s.key[0], s.key[1], s.head[:64]))
                try:
                    s.fh.close()  # type: ignore[attr-defined]
                except OSError:
                    pass
            else:
                keep.append(s)
        self.detached = keep

    def _read_rotated_siblings(self, f: Followed, old: Stream, new_key: tuple[int, int],
                               events: list[Event]) -> None:
        """Files rotated through ``f.path`` between two polls (``x.log`` -> ``x.log.1``
        -> ``x.log.2``...) that were never seen at the path: read them, oldest first,
        before the file now at the path."""
        directory, base = os.path.split(f.path)
        try:
            names = [n for n in os.listdir(directory or ".") if n.startswith(base) and n != base]
        except OSError:
            return
        # the file last seen at the path (``new_key``) counts as a sibling once it too
        # has been rotated away: it then takes its turn among them, before the newer ones
        known = set(self.streams) | {s.key for s in self.detached}
        found = []
        for name in names:
            path = os.path.join(directory, name)
            try:
                st = os.stat(path)
            except OSError:
                continue
            key = (st.st_dev, st.st_ino)
            if key in known or not _is_regular(st.st_mode) or st.st_mtime < old_birth(old):
                continue
            try:
                with open(path, "rb") as fh:
                    head = fh.read(256)
            except OSError:
                continue
            if (key[0], key[1], head[:64]) in self._finished or not head:
                continue
            if any(head == g[: len(head)] and st.st_size <= n for g, n in self._generations.get(f.path, ())):
                continue  # a copy of data already read (copytruncate)
            found.append((st.st_mtime_ns, path, key))
        for _, path, key in sorted(found):
            try:
                fh = open(path, "rb", buffering=0)
            except OSError:
                continue
            s = Stream(key, fh, f.path, self._parser(f.path), opened_at=self.clock())
            # a rotated-through file is complete: read it to its end and let it go
            self._drain(s, events)
            events.extend(s.parser.finish())
            self._finished.add((key[0], key[1], s.head[:64]))
            fh.close()

    def save_state(self) -> None:
        if not self.state_path:
            return
        positions = dict(self._positions)
        for f in self.followed.values():
            s = f.stream
            if s is None:
                continue
            complete = s.offset - s.parser.framer.pending
            if complete < 0:
                continue
            fd = s.fileno()
            try:
                n = min(saved.MARKER_BYTES, complete)
                marker = os.pread(fd, n, complete - n) if n else b""
                head = os.pread(fd, min(saved.HEAD_BYTES, max(complete, 0)), 0)
            except OSError:
                continue
            positions[f.path] = saved.Position(dev=s.key[0], ino=s.key[1], head=saved.head_digest(head),
                                               head_len=len(head), offset=complete, marker=marker.hex(),
                                               line=s.parser.framer.next_line - 1)
        saved.save(self.state_path, positions)
        self._dirty_state = False


def old_birth(s: Stream) -> float:
    """Wall-clock time from which a rotated sibling may be newer than ``s``."""
    try:
        return os.fstat(s.fileno()).st_ctime - 1.0
    except OSError:
        return 0.0


def _is_regular(mode: int) -> bool:
    return stat.S_ISREG(mode)
