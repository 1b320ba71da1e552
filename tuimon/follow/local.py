"""Following local log files by name, like ``tail -F`` but losing and repeating nothing.

A followed *path* points at a *stream*: one file (one inode).  Each poll stats
the path: a new inode at the path means rotation, recreation or a repointed
symlink, and the old stream is drained to its end before the new one is read
from 0; a file shorter than what was read, or whose bytes before the read offset
changed, was truncated (its copy, copytruncate's, is read up to its end first).
Streams that left their path stay open for a grace period, then are *parked*:
closed, but remembered by identity and content, so that a parked file found
again among the rotated siblings is read on from where it was left.

Files are read through a bounded set of descriptors (an LRU under a limit from
``RLIMIT_NOFILE``): an idle file's descriptor is closed and reopened by identity
when it changes.  Only regular files are opened.  Trouble with one file (an
error of any kind) is contained to that file: it is reported once and retried.

Polling is the source of truth.  Watchdog (inotify) only wakes the loop early on
local filesystems; network filesystems (see :mod:`.mounts`) are only polled.
"""
from __future__ import annotations

import logging
import os
import stat
import threading
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

from tuimon.parsers.columns import Item

from ..engine import catalog, guard
from ..engine.cache import ParseCache
from ..engine.ingest import Reading
from ..sources import state as saved
from ..sources.cursor import continues
from ..sources.descriptors import DescriptorPool
from ..sources.discover import DEFAULT_EXCLUDE, DEFAULT_INCLUDE, PathError
from ..sources.files import Directories, NotRegular, Sibling, display, fd_budget, kind_of, next_data, open_regular
from ..sources.parking import COPY_HEAD, MAX_PARKED, Parking
from ..sources.positions import SavedPositions, read_so_far
from ..sources.rotation import rotated_through
from ..sources.schedule import Schedule
from ..sources.scope import LOG as SCOPE_LOG
from ..sources.scope import SNIFF_BYTES, SNIFF_MIN, Scope, looks_binary, refusal, refused_encoding
from ..sources.streams import MIN_INTERVAL, Followed, Gone, Progress, Stream
from ..sources.walk import DirectoryWalker
from ..sources.watches import Watches
from .backfill import Backfill

READ_SIZE = 1 << 20
MAX_READ_PER_POLL = 16 << 20  # keeps one busy file from starving the others
HOLE_MIN = 1 << 20  # sparse holes at least this large are skipped, not read as NULs
SINK_EVERY_EVENTS = 2048  # a poll hands its events on in pieces at least this big (the first one reads every file)
YIELD_EVERY_S = 0.005  # between blocks, the GIL is offered to the UI's thread at most this often
SAVE_EVERY_LINES = 10_000  # with a state file: lines output between two saves, at most
CACHE_EVERY = 30.0  # seconds between two commits of the parse cache entries being written
ERROR_RETRY = 1.0

LOG = logging.getLogger("tuimon.follow")


class LocalFollower:
    """Call :meth:`poll` repeatedly (or :meth:`run`); events go to ``sink``."""

    def __init__(self, paths: Sequence[str], sink: Callable[[list[Item]], None], *,
                 include: Sequence[str] = DEFAULT_INCLUDE, exclude: Sequence[str] = DEFAULT_EXCLUDE,
                 poll: Optional[float] = None, max_interval: float = 1.0, grace: float = 2.0,
                 state_path: Optional[str] = None, use_inotify: bool = True,
                 head_tail: Optional[int] = None,
                 on_block: Optional[Callable[[str, str, int], None]] = None,
                 on_warning: Optional[Callable[[str], None]] = None,
                 max_open: Optional[int] = None,
                 cache: Optional[Path] = None,
                 follow_links: bool = False,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        """With ``cache`` (a parse cache database), a file read before starts from its entry
        (events and parser state), and what is read is saved there every
        :data:`CACHE_EVERY` seconds and on :meth:`close`."""
        self.sink = sink
        self.scope = Scope(tuple(include), tuple(exclude), follow_links)  # what a walk reads: every verb's rule
        self.forced_poll = poll is not None
        self.max_interval = poll if poll is not None else max_interval
        self.grace = grace
        self.clock = clock
        self.wall = wall  # the clock alerts are judged on: a write seen is dated by it
        self.roots = [os.path.abspath(os.path.expanduser(p)) for p in paths]
        self._root_is_dir = {r: os.path.isdir(r) for r in self.roots}
        self.followed: dict[str, Followed] = {}
        self._mtimes_changed: dict[str, float] = {}  # label -> mtime (s), changed since taken
        self._stop: Optional[threading.Event] = None
        self.streams: dict[tuple[int, int], Stream] = {}
        self.detached: list[Stream] = []
        self.parking = Parking()
        self._retired: dict[str, Followed] = {}  # paths missing long enough to stop polling them
        self._wake = threading.Event()
        self._woken: set[str] = set()
        self._lock = threading.Lock()
        self.watches = Watches(self._on_watch_event, enabled=use_inotify and not self.forced_poll)
        self.state_path = state_path
        self.head_tail = head_tail  # files larger than this: head and tail first, history after
        self.on_block = on_block  # sees the raw text of each block of lines (for log tails)
        self.warnings: list[str] = []
        self._warned: set[str] = set()
        self._on_warning = on_warning
        self.positions = SavedPositions(state_path, self._warn)
        self.progress = Progress()
        self.backfill = Backfill(self._fd, self.progress, self._warn)
        self.root_status: dict[str, str] = {}
        self._next_scan = 0.0
        self._next_sweep = 0.0
        self._dirty_state = False
        self._lines_unsaved = 0
        self._hurry = False  # a read stopped early to save the state: poll again at once
        self._yielded = 0.0  # when the reading last offered the GIL to other threads
        self._bounded_saves = False  # set by run(), which saves after each bounded read
        self.fds = DescriptorPool(max_open or fd_budget(), self._closable)
        self._dirs = Directories()
        self.schedule = Schedule(self.max_interval, self._covered)
        self._walker = DirectoryWalker(self.scope.wants, self._warn, clock, self.scope.enters)
        self.restarts = 0
        self.cache_path = cache
        self._cache: Optional[ParseCache] = None  # opened in the thread that polls (SQLite's rule)
        self._cache_saved = clock()

    def _warn(self, message: str) -> None:
        """Tell the user once per distinct message (a file's trouble is retried quietly)."""
        if message in self._warned:
            return
        self._warned.add(message)
        LOG.warning("%s", message)
        if len(self._warned) > 10_000:
            self._warned.clear()
        if self._on_warning is not None:
            self._on_warning(message)
        else:
            self.warnings.append(message)

    # -- discovery ----------------------------------------------------------------------
    def scan(self) -> None:
        """Find followed paths: named files (even before they exist) and matching
        files under named directories; list a directory again only if it changed."""
        for root in self.roots:
            try:
                os.stat(root)
            except FileNotFoundError:
                self.root_status[root] = "missing"
                if self._root_is_dir[root]:
                    self._forget_watch(root)
                    self._walker.forget(root)
                else:
                    self._follow(root, explicit=True)  # tail -F: picked up when it appears
                continue
            except OSError as exc:
                self.root_status[root] = exc.strerror or "error"
                continue
            if os.path.isdir(root):
                self.root_status[root] = "ok"
                for path in self._walker.walk(root):
                    self._follow(path, explicit=False)
                self._ensure_watch(root)
            else:
                self.root_status[root] = "ok"
                self._follow(root, explicit=True)
                self._ensure_watch(os.path.dirname(root))

    def _follow(self, path: str, explicit: bool) -> None:
        if path not in self.followed:
            f = self._retired.pop(path, None)  # back after a long absence: what it knew still holds
            if f is None:
                f = Followed(path, explicit)
            self.followed[path] = f
            self.schedule.add(f, self.clock())

    # -- watches (optional, only lower latency: tuimon.sources.watches) -------------------------
    def _on_watch_event(self, paths: set[str]) -> None:  # watchdog's thread
        with self._lock:
            self._woken.update(paths)
        self._wake.set()

    def _ensure_watch(self, directory: str) -> None:
        if self.watches.ensure(directory):
            self._coverage_changed()

    def _forget_watch(self, directory: str) -> None:
        self._coverage_changed()
        self.watches.forget(directory)

    def _coverage_changed(self) -> None:
        for f in self.followed.values():
            f.watched = None  # judged again
        self.schedule.coverage_changed()

    # -- polling ----------------------------------------------------------------------------
    def poll(self) -> list[Item]:
        """One pass over what is due; returns (and sinks) the events read."""
        now = self.clock()
        events: list[Item] = []
        self._hurry = False
        if now >= self._next_scan:
            self.scan()
            self._next_scan = now + self.max_interval
            now = self.clock()  # files found by the scan are due now
        with self._lock:
            woken, self._woken = self._woken, set()
        for path in woken:
            f = self.followed.get(path)
            if f is not None:
                self.schedule.heat(f, now)
            elif os.path.isdir(path) or not os.path.exists(path):
                self._next_scan = now
        # files rotated away hold older lines than whatever is now at their names: first
        self._poll_detached(now, events)
        sunk = 0
        for f in self.schedule.due(now):
            self.schedule.polled(f, self._guarded(f, events), now)
            if len(events) - sunk >= SINK_EVERY_EVENTS:  # the first poll of 10,000 files: out as they are read
                self._dirty_state = True
                self.sink(events[sunk:])
                sunk = len(events)
        if now >= self._next_sweep:
            self._sweep(now, events)
            self._next_sweep = now + self.max_interval
        self.backfill.poll(MAX_READ_PER_POLL, events)
        if len(events) > sunk:
            self._dirty_state = True
            self.sink(events[sunk:] if sunk else events)
        if self.cache_path is not None and self.clock() - self._cache_saved >= CACHE_EVERY:
            self.save_cache()
        return events

    def _guarded(self, f: Followed, events: list[Item]) -> bool:
        """:meth:`_poll_path`, with any error kept to this file: reported once,
        retried on the idle schedule.  Events read before the error are kept."""
        try:
            return self._poll_path(f, events)
        except Exception as exc:  # noqa: BLE001 - one file's trouble never stops the others
            f.status = f"error: {_describe(exc)}"
            self._warn(f"{display(f.path)}: {_describe(exc)} (retrying)")
            return False

    def _covered(self, f: Followed) -> bool:
        """Whether inotify sees ``f``'s changes: a live watch holds its directory, on a
        local filesystem."""
        if f.watched is None:
            f.watched = self.watches.covers(os.path.dirname(f.path))
        return f.watched

    def _sweep(self, now: float, events: list[Item]) -> None:
        """Check idle files: one stat each, inline, since this loop is what following
        thousands of quiet files costs.  Polling stays the source of truth, but a file
        inotify watches (its changes wake the loop at once) is looked at on one sweep in
        :data:`WATCHED_SWEEP_EVERY`, in turn: 4,096 quiet files cost a fifth of a sweep."""
        stat_ = os.stat
        changed: list[Followed] = []
        for f in self.schedule.sweep_turn():
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
            if self._guarded(f, events):
                self.schedule.heat(f, now)
        if changed:
            self.schedule.swept()

    def next_wakeup(self) -> float:
        if self._hurry:
            return 0.0
        candidates = [self._next_scan, self._next_sweep]
        due = self.schedule.next_due()
        if due is not None:
            candidates.append(due)
        if self.detached:
            candidates.append(self.clock() + MIN_INTERVAL * 4)
        if self.backfill:
            candidates.append(self.clock())
        return max(0.0, min(candidates) - self.clock())

    def wake(self) -> None:
        """Cut the current :meth:`sleep` short (another thread asks for a poll or a stop)."""
        self._wake.set()

    def sleep(self, at_most: Optional[float] = None) -> None:
        """Wait until the next poll is due, a watched file changes or :meth:`wake`."""
        timeout = min(self.next_wakeup(), self.max_interval)
        if timeout <= 0:
            return
        self._wake.wait(timeout=timeout if at_most is None else min(timeout, at_most))
        self._wake.clear()

    def run(self, stop: threading.Event, state_every: float = 1.0) -> None:
        """Poll until ``stop``; the state file is saved at most ``state_every``
        seconds or :data:`SAVE_EVERY_LINES` lines after the output it covers."""
        last_save = self.clock()
        self._bounded_saves = bool(self.state_path)
        self._stop = stop  # a read of a long backlog looks at it between blocks: Ctrl-C stops within one
        while not stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - reported; the next round starts over
                self.restarts += 1
                self._warn(f"follower recovered from an error: {_describe(exc)}")
                self._wake.wait(ERROR_RETRY)
            for message in guard.take_new():  # a user format turned off while parsing
                self._warn(message)
            if self.state_path and self._dirty_state and (
                    self.clock() - last_save >= state_every or self._lines_unsaved >= SAVE_EVERY_LINES):
                self._save_quietly()
                last_save = self.clock()
            self.sleep()
        if self.state_path:
            self._save_quietly()

    def _save_quietly(self) -> None:
        try:
            self.save_state()
        except (OSError, PathError) as exc:
            self._warn(f"cannot save state to {display(self.state_path or '')}: {_describe(exc)}")

    def close(self) -> None:
        if self.cache_path is not None:
            self.save_cache()
            if self._cache is not None:
                self._cache.close()
                self._cache = None
        self.watches.stop()
        self.fds.close_all()
        self.positions.release()

    def status(self) -> dict[str, str]:
        return {p: f.status for p, f in self.followed.items()}

    def backlog(self) -> int:
        """Bytes written but not read yet, as far as the last stat of each file knows (the lag
        a reader behind a fast writer has: said by --debug, /metrics and the dashboard's header)."""
        return sum(s.size_seen - s.offset for s in list(self.streams.values()) if s.size_seen > s.offset)

    def take_mtimes(self) -> dict[str, float]:
        """label -> mtime in seconds of the files whose mtime changed since the last call
        (no system call: the alert judge asks every second)."""
        with self._lock:
            out, self._mtimes_changed = self._mtimes_changed, {}
        return out

    # -- descriptors (the pool's; reopening by identity is the follower's) ------------------------
    def _closable(self, s: Stream) -> bool:
        """An attached stream not being read through (a detached or back-filling one keeps its file)."""
        return s.detached_at is None and s.history is None and s.key in self.streams

    def _fd(self, s: Stream) -> int:
        """The stream's descriptor, reopened by identity if it was closed."""
        if s.fd is None:
            self._reopen(s)
        else:
            self.fds.used(s)
        assert s.fd is not None
        return s.fd

    def _reopen(self, s: Stream) -> None:
        for path in [s.path] + [sib.path for sib in self._dirs.siblings(s.label) if sib.key == s.key]:
            try:
                fd, st = self.fds.open_path(path)
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == s.key:
                s.path = path
                self.fds.adopt(s, fd)
                return
            os.close(fd)
        raise Gone(f"{display(s.label)} was moved or deleted while closed")

    # -- one path -----------------------------------------------------------------------------
    def _poll_path(self, f: Followed, events: list[Item]) -> bool:
        try:
            st = os.stat(f.path)
        except FileNotFoundError:
            self._lose_path(f, events, "missing")
            now = self.clock()
            if f.missing_since is None:
                f.missing_since = now
            elif not f.explicit and now - f.missing_since > max(self.grace, 10.0):
                f.dead = True  # gone for good: stop polling a name nobody writes to
                self.followed.pop(f.path, None)
                self._retired[f.path] = f  # its rotated files and history, should the name come back
                while len(self._retired) > MAX_PARKED:
                    self._retired.pop(next(iter(self._retired)))
            return False
        except PermissionError:
            f.status = "permission denied"
            self._warn(f"{display(f.path)}: permission denied (retrying)")
            return False
        except OSError as exc:
            f.status = f"error: {exc.strerror}"
            return False
        s = f.stream
        if (s is not None and st.st_ino == s.key[1] and st.st_size == s.offset and st.st_mtime_ns == s.mtime_ns
                and st.st_dev == s.key[0]):
            return False  # the common case: nothing changed
        if not stat.S_ISREG(st.st_mode):
            self._lose_path(f, events, "not a regular file")
            self._warn(f"{display(f.path)} is {kind_of(st.st_mode)}: skipped (only regular files are read)")
            return False
        f.missing_since = None
        key = (st.st_dev, st.st_ino)
        if s is None or s.key != key:
            s = self._switch(f, s, key, st, events)
            if s is None:
                return False
            if s.key != key:
                st = os.fstat(self._fd(s))
        f.status = "following"
        return self._read(s, st.st_size, events, st.st_mtime_ns)

    def _lose_path(self, f: Followed, events: list[Item], status: str) -> None:
        """The path no longer names the file we follow: drain that file (it may still be
        written through a descriptor), keep it to look for among the siblings."""
        if f.stream is not None:
            self._detach(f.stream, events)
            f.previous, f.stream = f.stream, None
        f.status = status

    def _switch(self, f: Followed, s: Optional[Stream], key: tuple[int, int], st: os.stat_result,
                events: list[Item]) -> Optional[Stream]:
        """A new file at the path: finish the old one and every file rotated through
        the path since, oldest first, then open the new one."""
        if s is not None and self._continued_by_copy(f, s, key, st):
            return s
        rotated_from = s or f.previous
        if s is not None:  # rotated, recreated or repointed: finish the old one first
            LOG.info("%s: a new file at the path (rotated, recreated or repointed): the old one finished", f.path)
            self._detach(s, events)
        # the same inode back at the path is the same file only while we hold it open
        # (once closed, the inode may have been freed and given to a new file)
        if rotated_from is not None and (rotated_from.key != key or rotated_from.fd is None):
            self._read_rotated_siblings(f, key, events)
        elif rotated_from is None and f.siblings is None and self.positions.restore(
                f, key, self.parking, lambda: self._dirs.siblings(f.path)):
            self._read_rotated_siblings(f, key, events)  # rotated while we were stopped
        f.previous = None
        s = self.streams.get(key) or self._reattach(key, f.path)
        if s is None:
            had_position = f.path in self.positions
            s = self._open(f, key, st.st_size)
            if s is None:
                f.previous = rotated_from  # gone again before we could open it: next poll looks again
                return None
            if s.key != key and rotated_from is not None:
                # rotated again between our stat and our open: the file we stat'ed is
                # now a sibling, and it comes before the one we opened
                self._read_rotated_siblings(f, s.key, events)
            elif had_position and s.key in self.parking and f.siblings is not None:
                self._read_rotated_siblings(f, s.key, events)  # truncated while we were stopped: its copy
        if f.siblings is None:
            f.siblings = {sib.sig for sib in self._dirs.siblings(f.path, fresh=False)}
        f.stream = s
        return s

    def _continued_by_copy(self, f: Followed, s: Stream, key: tuple[int, int], st: os.stat_result) -> bool:
        """An atomic replace (rsync, ``sed -i``, an editor's save: a copy renamed over the path):
        the new file holds what was read (its first bytes and the bytes before our offset) while
        the old one is linked nowhere any more.  It is the same log, read on from our offset
        (Vector's checksum fingerprint), not a new file read from 0: 60 replaces gave 10,800
        lines for 700 written, and ``serve`` a run per replace.  The stream takes the new file's
        descriptor and identity."""
        if not s.head or st.st_size < s.offset or key in self.streams:
            return False
        try:
            if os.fstat(self._fd(s)).st_nlink:
                return False  # the old file is still somewhere (rotated): the rotation path reads it
        except OSError:  # deleted and closed: nothing to read there
            pass
        try:
            fd, now = self.fds.open_path(f.path)
        except OSError:
            return False
        # (replaced again since our stat: the file opened is the one to judge)
        key = (now.st_dev, now.st_ino)
        if key in self.streams or now.st_size < s.offset or not continues(fd, s):
            os.close(fd)
            return False
        # what the old file held past our offset is in its copy too (the copy continues it): read there
        LOG.info("%s: replaced by a file that continues it (rsync, sed -i): read on from %d", f.path, s.offset)
        self.streams.pop(s.key, None)
        self.fds.close(s)
        s.key, s.path = key, f.path
        self.fds.adopt(s, fd)
        self.streams[key] = s
        return True

    def _reading(self, label: str) -> Reading:
        return Reading(label, on_block=self.on_block)

    def _reattach(self, key: tuple[int, int], path: str) -> Optional[Stream]:
        """A file that left one followed path and appeared at another (a rename
        into the followed set) goes on from where it was."""
        for s in self.detached:
            if s.key == key:
                self.detached.remove(s)
                s.detached_at = None
                s.path = path
                self.streams[key] = s
                return s
        return None

    def _open(self, f: Followed, key: tuple[int, int], size: int) -> Optional[Stream]:
        try:
            fd, st = self.fds.open_path(f.path)
        except PermissionError:
            f.status = "permission denied"
            self._warn(f"{display(f.path)}: permission denied (retrying)")
            return None
        except FileNotFoundError:
            return None
        except NotRegular:
            f.status = "not a regular file"
            return None
        real_key = (st.st_dev, st.st_ino)
        if real_key != key and real_key in self.streams:
            os.close(fd)
            return self.streams[real_key]
        s = Stream(real_key, None, f.path, f.path, self._reading(f.path))
        self.fds.adopt(s, fd)
        parked = self.parking.take(real_key)
        if parked is not None and parked.offset and parked.matches(fd):
            parked.resume(s, fd)  # a file already read under another name: go on from there
            self.positions.forget(f.path)
        else:
            self.positions.resume(s, f.path, self._fd, self.parking)
            if s.offset == 0 and self.cache_path is not None:
                self._from_cache(s, fd, st.st_size)
        self.streams[real_key] = s
        self.progress.bytes_total += max(0, st.st_size - s.offset)
        if self.head_tail and s.offset == 0 and st.st_size > self.head_tail:
            events = self.backfill.start(s, st.st_size, self._consume)
            if events:
                self.sink(events)
        return s

    # -- the parse cache ------------------------------------------------------------------------
    def _parse_cache(self) -> Optional[ParseCache]:
        if self._cache is None:
            self._cache = ParseCache(self.cache_path, key=catalog.current().key, on_warning=self._warn)
        return self._cache if self._cache.usable() else None

    def _from_cache(self, s: Stream, fd: int, size: int) -> None:
        """Start ``s`` (at 0) from its cache entry if the file is the one saved; then
        (or when it is to be read from 0 in order) save what is read of it."""
        cache = self._parse_cache()
        if cache is None:
            return
        key = os.path.abspath(s.label)
        entry = s.reading.resume(cache, key, cache.load(key, fd), self.sink)
        if entry is not None:
            n = min(saved.MARKER_BYTES, entry.offset)
            s.placed(entry.offset, os.pread(fd, n, entry.offset - n), os.pread(fd, min(saved.HEAD_BYTES, entry.offset), 0))
            self._dirty_state = True
        if s.offset == 0 and self.head_tail and size > self.head_tail:
            return  # read head, tail, then middle: not in order, not for the cache
        s.reading.write_to(cache, key, entry, keep_store=False)  # a follower: memory does not grow with the file

    def save_cache(self) -> None:
        """Commit every stream's cache entry that took events since the last commit."""
        self._cache_saved = self.clock()
        for s in list(self.streams.values()):
            w = s.reading.writer
            if w is None or not w.dirty:
                continue
            try:
                w.commit(self._fd(s), s.offset, s.reading.parser)
            except OSError:
                s.reading.writer = None

    def _read(self, s: Stream, size: int, events: list[Item], mtime_ns: Optional[int] = None) -> bool:
        fd = self._fd(s)
        s.size_seen = size
        changed = size != s.offset or (mtime_ns is not None and mtime_ns != s.mtime_ns)
        if changed and s.offset == 0 and s.mtime_ns and mtime_ns is not None:
            self._copies_of_empty(s, mtime_ns, events)
        if mtime_ns is not None:
            if s.mtime_ns != mtime_ns:
                with self._lock:
                    # first seen: its mtime; written since we looked: now, on our own clock (a jump of
                    # the clock or a file server's skew must not make every line a "stalled" alert)
                    self._mtimes_changed[s.label] = mtime_ns / 1e9 if not s.mtime_ns else self.wall()
            s.mtime_ns = mtime_ns
        if size < s.offset:
            self._truncated(s, events, "file shrank")
        elif changed and s.offset and self._rewritten(s, fd):
            self._truncated(s, events, "content before the read offset changed")
        if size <= s.offset:
            return False
        if not s.judged and self._not_text(s, fd, size):
            return False
        budget = MAX_READ_PER_POLL
        grew = False
        while s.offset < size and budget > 0:
            if size - s.offset >= HOLE_MIN and self._skip_hole(s, fd, size):
                grew = True
                continue
            want = min(READ_SIZE, size - s.offset, budget)
            data = os.pread(fd, want, s.offset)
            if not data:
                break
            if self._bounded_saves:
                data = self._within_save_bound(data)
            grew = True
            budget -= len(data)
            self._consume(s, data, events)
            if self._hurry or (self._stop is not None and self._stop.is_set()):
                break
            now = time.monotonic()
            if now - self._yielded >= YIELD_EVERY_S:  # let the UI thread take the GIL between blocks
                self._yielded = now
                time.sleep(0)
        return grew

    def _not_text(self, s: Stream, fd: int, size: int) -> bool:
        """A file found in a directory whose first bytes are not text (``a.out`` matches ``*.out``)
        is not read; a file the user named is.  Judged once, when its first bytes can tell."""
        f = self.followed.get(s.label)
        if s.offset or f is None or f.stream is not s:
            s.judged = True
            return False
        head = os.pread(fd, 2 * SNIFF_BYTES, 0)
        encoding = refused_encoding(head)
        if encoding:  # named or found: said, not read as garbage
            s.judged = s.binary = True
            f.status = f"skipped: {encoding}"
            self._warn(refusal(display(s.label), encoding))
            return True
        if f.explicit:
            s.judged = True
            return False
        if len(head.lstrip(b"\x00")) < SNIFF_MIN and size < 2 * SNIFF_BYTES:
            return False  # too little yet to tell: read it, judged again... once it has more
        s.judged = True
        s.binary = looks_binary(head)
        if s.binary:
            f.status = "skipped: not text"
            SCOPE_LOG.debug("skipped %s: not text (its name matches, its first bytes are binary)", display(s.label))
        return s.binary

    def _within_save_bound(self, data: bytes) -> bytes:
        """With a state file, a read stops after the line that makes
        :data:`SAVE_EVERY_LINES` unsaved lines, so that a kill doubles no more on restart."""
        room = SAVE_EVERY_LINES - self._lines_unsaved
        if data.count(b"\n") < room:
            return data
        cut = -1
        for _ in range(max(1, room)):
            cut = data.find(b"\n", cut + 1)
        self._hurry = True
        return data[:cut + 1] if cut >= 0 else data

    def _skip_hole(self, s: Stream, fd: int, size: int) -> bool:
        """Step over a large sparse hole (it reads as NULs) instead of reading it."""
        data_at = next_data(fd, s.offset, size)
        if data_at is None or data_at - s.offset < HOLE_MIN:
            return False
        hole = min(data_at, size) - s.offset
        s.stepped_over(hole)
        self.progress.bytes_done += hole
        return True

    def _copies_of_empty(self, s: Stream, mtime_ns: int, events: list[Item]) -> None:
        """``s`` was empty when we last looked and was written since: if it was also
        copied and truncated meanwhile (copytruncate), the copy alone holds what came
        first.  Such a copy is older than the file's last write; files rotated
        through the path after it are newer, and wait for their turn."""
        f = self.followed.get(s.label) or self._retired.get(s.label)
        if f is not None and f.siblings is not None:
            self._read_rotated_siblings(f, s.key, events, not_after=mtime_ns)

    def _rewritten(self, s: Stream, fd: int) -> bool:
        """Truncated and written again past the old offset between two polls: the
        first bytes or the bytes before the offset are no longer what was read."""
        return not continues(fd, s)

    def _consume(self, s: Stream, data: bytes, events: list[Item]) -> None:
        s.took(data)
        self.progress.bytes_done += len(data)
        if s.skip_nuls:
            stripped = data.lstrip(b"\x00")
            if stripped:
                s.skip_nuls = False
            data = stripped
        if data:
            before = s.reading.next_line
            events.extend(s.reading.feed(data))
            self._lines_unsaved += s.reading.next_line - before

    def _truncated(self, s: Stream, events: list[Item], reason: str) -> None:
        self._read_copy(s, events)
        self.parking.remember(s)
        events.extend(s.reading.finish())
        f = self.followed.get(s.label)
        if f is not None and f.stream is s and f.siblings is not None:
            # several copytruncates between two polls: the generations we never saw in
            # the file are only in their copies, which are older than its last write
            self._read_rotated_siblings(f, s.key, events, not_after=s.mtime_ns or None)
        events.append(s.reading.restart(reason))
        s.rewind()
        s.skip_nuls = True  # copytruncate with a writer that keeps its offset leaves NULs

    def _read_copy(self, s: Stream, events: list[Item]) -> None:
        """copytruncate: what was written after our last read and before the copy is
        only in the copy.  Read the copy on from our offset, as if nothing happened."""
        if not s.head:
            return
        for sib in reversed(self._dirs.siblings(s.path)):  # the copy is the newest sibling
            if sib.size <= s.offset or sib.key in self.streams:
                continue
            try:
                fd, _ = open_regular(sib.path)
            except OSError:
                continue
            try:
                if not continues(fd, s):
                    continue
                while True:
                    data = os.pread(fd, READ_SIZE, s.offset)
                    if not data:
                        break
                    self._consume(s, data, events)
                return
            finally:
                os.close(fd)

    # -- streams that left their path ----------------------------------------------------------
    def _detach(self, s: Stream, events: list[Item]) -> None:
        try:
            self._drain(s, events)
        except Gone as exc:
            self._warn(f"{exc}: its last lines, if any, were not read")
        self.parking.remember(s)
        if s.detached_at is None:
            s.detached_at = self.clock()
            self.detached.append(s)
        self.streams.pop(s.key, None)

    def _drain(self, s: Stream, events: list[Item]) -> None:
        while True:
            try:
                st = os.fstat(self._fd(s))
            except Gone:
                raise
            except OSError:
                return
            if not self._read(s, st.st_size, events, st.st_mtime_ns):
                return

    def _poll_detached(self, now: float, events: list[Item]) -> None:
        keep = []
        for s in self.detached:
            try:
                self._drain(s, events)
            except Exception as exc:  # noqa: BLE001 - kept to this file
                self._warn(f"{display(s.label)} (rotated): {_describe(exc)}")
                s.detached_at = now - self.grace
            if now - (s.detached_at or now) >= self.grace:
                self._park(s, events)
            else:
                keep.append(s)
        self.detached = keep

    def _park(self, s: Stream, events: list[Item]) -> None:
        events.extend(s.reading.finish())
        self.fds.close(s)
        self.parking.park(s)

    def _read_rotated_siblings(self, f: Followed, new_key: tuple[int, int], events: list[Item],
                               not_after: Optional[int] = None) -> None:
        """Files rotated through ``f.path`` between two polls (``x.log`` -> ``x.log.1``
        -> ``x.log.2``...) that were never seen at the path, and the file that left
        it if it was closed meanwhile: read them, oldest first, before the file now
        at the path (the rotation model's procedure, :func:`.rotation.rotated_through`).
        Siblings that were there when we started are history."""
        history = f.siblings or set()
        listed = self._dirs.siblings(f.path)
        known = set(self.streams) | {s.key for s in self.detached}
        if all(sib.key != new_key for sib in listed):  # the file at the path, about to be opened
            known.add(new_key)
        # else it rotated away after our stat, newer files after it: a generation like the others,
        # read in its turn (before the newer ones), not after them by identity
        pending, after = rotated_through(listed, history, known=known, found_again=self.parking,
                                         not_after=not_after)
        for sib in pending:
            if self._is_copy(f.path, sib) or self._read_parked(f.path, sib, events):
                continue
            if sib.sig not in history:
                self._read_whole(f, sib, events)
        f.siblings = after  # only once all were read: a read that failed part-way is tried again

    def _read_parked(self, label: str, sib: Sibling, events: list[Item]) -> bool:
        """A parked file of ``label`` found again by its content, under any name (a
        rotation, or copytruncate's copy of it): read what was added since."""
        candidates = self.parking.candidates(label, sib.key, sib.size)
        if not candidates:
            return False
        try:
            fd, _ = open_regular(sib.path)
        except OSError:
            return False
        try:
            for parked in candidates:
                if parked.matches(fd):
                    self.parking.take(parked.key)
                    s = Stream(sib.key, None, sib.path, label, self._reading(label))
                    parked.resume(s, fd)
                    self.fds.adopt(s, fd)
                    fd = -1
                    self._finish_sibling(s, events)
                    return True
            return False
        finally:
            if fd >= 0:
                os.close(fd)

    def _is_copy(self, label: str, sib: Sibling) -> bool:
        """A copy of data already read (copytruncate's), recognised by its first bytes."""
        if not self.parking.knows_generations(label):
            return False
        try:
            with open(sib.path, "rb") as fh:
                head = fh.read(COPY_HEAD)
        except OSError:
            return True
        return self.parking.is_copy(label, head, sib.size)

    def _read_whole(self, f: Followed, sib: Sibling, events: list[Item]) -> None:
        try:
            fd, st = open_regular(sib.path)
        except OSError:
            return
        s = Stream((st.st_dev, st.st_ino), None, sib.path, f.path, self._reading(f.path))
        self.fds.adopt(s, fd)
        self._finish_sibling(s, events)

    def _finish_sibling(self, s: Stream, events: list[Item]) -> None:
        """A rotated-through file is complete: read it to its end and park it."""
        try:
            self._drain(s, events)
        finally:
            self._park(s, events)

    # -- saved positions (tuimon.sources.positions) -----------------------------------------------
    def save_state(self) -> None:
        rotated = list(self.parking) + [read_so_far(d, self._fd) for d in self.detached]
        self.positions.save(self.followed.values(), rotated, self._fd)
        self._dirty_state = False
        self._lines_unsaved = 0


def _describe(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__



def supervise(follower: LocalFollower, stop: threading.Event, say: Callable[[str], None]) -> None:
    """Run ``follower`` until ``stop``; if it dies, say so and start it again (its
    files, offsets and parsers are kept: nothing is read twice)."""
    while not stop.is_set():
        try:
            follower.run(stop)
            return
        except Exception as exc:  # noqa: BLE001 - a follower must never stop for good
            follower.restarts += 1
            say(f"the follower stopped ({_describe(exc)}); restarted")
            stop.wait(ERROR_RETRY)
