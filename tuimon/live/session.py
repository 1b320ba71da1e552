"""A live session: followers feeding the job store in a background thread, and
snapshots of it for the UI.  No Textual here.

The follower thread is the only writer of the store; the UI thread only calls
:meth:`LiveSession.snapshot` and :meth:`LiveSession.job_detail`, which copy what
they need under the session lock.  Timing uses this machine's clock only (log
stamps may come from clocks that are off).
"""
from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Optional, Sequence

import numpy as np

from tuimon.parsers.columns import Item, slices

from ..figures import flops
from ..figures.alerts import DEFAULTS as ALERT_DEFAULTS
from ..figures.alerts import Alert, Rules, quiet_verdict
from ..figures.ledger import ledgers
from ..figures.metrics import steady_stats
from ..figures.record import IterTime, Summary
from ..figures.summary import (
    STARTUP_TIMEOUT_S,
    closes_with_eval,
    closing_status,
    global_batch,
    params_billion,
    settled_status,
    stamp_span,
    startup_status,
    summarize,
    world_size,
)
from ..follow.local import LocalFollower, supervise
from ..follow.remote import RemoteThread, split_paths
from ..sources.logfile import Lines
from ..store.job_store import Job, JobStore
from ..store.series import Series
from .alerting import AlertFeed
from .messages import Batch, IngestError, IngestWarning, Message, Progress

LOG = logging.getLogger("tuimon.session")
TAIL_LINES = 2000
SINK_SLICE = 500
NEW_ROWS_PER_SNAPSHOT = 96
MESSAGE_EVENTS = 1000
ALERTS_KEPT = 5  # a job's latest alerts its screen lists
#: an ETA is shown once the run is this far through (and has enough steady points): 1 of 317,892
#: iterations at the warm-up's pace says nothing of the weeks ahead
ETA_MIN_DONE = 0.01
ETA_MIN_POINTS = 5


def eta(train_iters: int, last: int, it: IterTime) -> Optional[float]:
    """Seconds to the last iteration at the steady median pace, once that means something."""
    if it.n < ETA_MIN_POINTS or last < ETA_MIN_DONE * train_iters:
        return None
    return max(0, train_iters - last) * it.median / 1000.0
ALERT_EVERY_S = 1.0
DETAILS_KEPT = 8
_STARTUP_STATES = ("starting", "stuck-in-startup", "no-iterations")


@dataclass(frozen=True)
class JobRow:
    key: str
    version: int  # changes whenever the job's figures change (the UI caches per version)
    summary: Summary
    age_s: Optional[float]
    eta_s: Optional[float]
    stalled: bool
    tflops_series: list[float]
    alerts: int = 0  # alerts the job has raised so far


@dataclass(frozen=True)
class Notices:
    """What the UI is to say once, handed over (:meth:`LiveSession.take_notices`)."""

    error: Optional[str]
    warnings: tuple[str, ...]
    alerts: tuple[Alert, ...]


@dataclass(frozen=True)
class Snapshot:
    rows: list[JobRow]
    bytes_done: int
    bytes_total: int
    files: int
    statuses: dict[str, str] = field(default_factory=dict)
    backlog_bytes: int = 0  # written and not read yet (history to read included)
    lag_s: float = 0.0  # how long the reading has been behind (0: every byte written is read)
    taken_at: float = 0.0
    alerts: int = 0
    #: changes whenever a row may have: the same number twice means the same rows (a screen skips its work)
    generation: int = 0


@dataclass
class RankRow:
    rank: str
    points: int
    median_ms: Optional[float]
    last_iteration: Optional[int]
    straggler: bool


@dataclass
class Curve:
    """A chart's points: their iterations (-1: not known), wall times in seconds since the
    series' first stamp (NaN: not known) and values (NaN: not finite or not logged)."""

    iterations: np.ndarray
    walls: np.ndarray
    values: np.ndarray

    @classmethod
    def of(cls, series: Series, values: np.ndarray, cut: slice = slice(None)) -> "Curve":
        """``values`` at ``series``' points (``cut``: those points only)."""
        return cls(series.column("iteration")[cut].astype(np.int64), series.column("wall")[cut].astype(np.float64),
                   np.asarray(values, dtype=np.float64))

    @classmethod
    def empty(cls) -> "Curve":
        return cls(np.zeros(0, np.int64), np.zeros(0), np.zeros(0))


@dataclass
class JobDetail:
    row: JobRow
    iterations: np.ndarray
    iter_ms: np.ndarray
    loss: np.ndarray
    tflops: Curve  # its own points: a run that logs steps reports TFLOPs on its throughput lines
    timers: list[tuple[str, str, float]]  # (name, group, mean ms)
    ranks: list[RankRow]
    tail: list[str]
    failures: list[dict]
    config: dict
    walls: np.ndarray = field(default_factory=lambda: np.zeros(0))  # of ``iterations``' points
    eval_metric: Optional[str] = None  # the evaluation a row shows (tuimon.store.evals), and its points:
    evals: Curve = field(default_factory=lambda: Curve.empty())
    alerts: list[Alert] = field(default_factory=list)  # the job's latest alerts (ALERTS_KEPT), oldest first

    def curve(self, name: str) -> Curve:
        """The ``tflops``, ``iter`` (seconds), ``loss`` or ``eval`` chart's points."""
        if name == "tflops":
            return self.tflops
        if name == "eval":
            return self.evals
        values = self.iter_ms / 1000.0 if name == "iter" else self.loss
        walls = self.walls if len(self.walls) == len(values) else np.full(len(values), np.nan)
        return Curve(self.iterations.astype(np.int64), walls, values)


class LiveSession:
    """With ``process=True`` the files are read and parsed in a separate process
    (the other core), and only events cross over: the UI process never competes
    with parsing for the GIL.  With ``process=False`` a thread does it (tests)."""

    def __init__(self, paths: Sequence[str], *, poll: Optional[float] = None, head_tail: Optional[int] = 64 << 20,
                 gpu_peak: Optional[float] = None, gpu: Optional[str] = None,
                 startup_timeout: float = STARTUP_TIMEOUT_S, clock: Callable[[], float] = time.time, process: bool = False,
                 ssh_config: Optional[str] = None, catalog_spec: Sequence[tuple[str, str]] = (),
                 alerts: Optional[AlertFeed] = None, **follower_kw) -> None:
        """``follower_kw`` go to the LocalFollower (``cache``: the parse cache database
        to start from and save to, or None); ``catalog_spec``: the user formats, for the
        ingest process (a spawned one does not inherit them)."""
        self.store = JobStore(bounded=True)  # a long-running verb: series keep a thinned history
        self.lock = threading.Lock()
        self.clock = clock
        self.gpu_peak = gpu_peak
        self.gpu = gpu
        self.startup_timeout = startup_timeout
        self.tails: dict[str, deque[str]] = {}
        self.last_update: dict[str, float] = {}  # job key -> when its files were last written
        self._mtime_seen: dict[str, float] = {}  # file -> its mtime when events of it last came
        self._dated: dict[str, int] = {}  # file -> how many of its runs (before its last two) have a date
        self._first_update: dict[str, float] = {}  # job key -> that, when first read (a later one: it grew)
        # each job's row as summarized at its version, and as last built from it (times measured again): a
        # row once handed out is never changed (a screen drawing it while the figures thread ticks)
        self._cache: dict[str, tuple[int, JobRow]] = {}
        self._built_rows: dict[str, JobRow] = {}
        self._ledgers: dict = {}  # each job's time ledger, kept while its runs are the same (figures.ledger)
        self._details: dict[str, tuple[int, JobDetail]] = {}  # job key -> (version, detail)
        self._job_versions: dict[str, int] = {}
        self._changed_jobs: set[str] = set()  # jobs whose figures changed since alerts were last judged
        self._generation = 0  # bumped whenever a row may change (events, alerts)
        self._rows: Optional[tuple[int, list[JobRow]]] = None  # (generation, rows) of the last snapshot
        self._rows_at = 0.0  # the session clock when they were built
        self._rows_sig: tuple = ()
        self._built: tuple[int, list[JobRow], float] = (-1, [], clock())  # (generation, rows, when): what tick built
        self._read_since_built = True
        self._paths = list(paths)
        self._options = dict(poll=poll, head_tail=head_tail, **follower_kw)
        self._ssh_config = ssh_config
        self._remote_options = dict(ssh_config=ssh_config, poll=poll or 1.0, cache=follower_kw.get("cache"))
        self._catalog_spec = tuple(catalog_spec)
        self.process = process
        self.warnings: deque[str] = deque(maxlen=50)  # for the UI to show once each, then drop
        # alerts: judged at most every ALERT_EVERY_S; new ones wait in new_alerts for the UI
        self.alert_feed = alerts if alerts is not None else AlertFeed(Rules.default(), startup_timeout=startup_timeout)
        self.new_alerts: deque[Alert] = deque(maxlen=200)
        self._alerts_at = float("-inf")
        self.started_at = clock()
        self._alert_counts: dict[str, int] = {}
        self._latest_alert: dict[str, Alert] = {}  # job key -> its latest alert (the preview shows it)
        self._recent_alerts: dict[str, deque[Alert]] = {}  # job key -> its latest ALERTS_KEPT alerts (job screen)
        self.follower: Optional[LocalFollower] = None
        self.remote: Optional[RemoteThread] = None
        if not process:
            local, remote = split_paths(self._paths)
            # thread mode: the follower's callbacks are the same messages the ingest process sends
            self.follower = LocalFollower(local, self._batch, on_block=self._on_block,
                                          on_warning=lambda text: self.apply(IngestWarning(text)), **self._options)
            if remote:
                self.remote = RemoteThread(remote, self._batch, **self._remote_options)
        self._progress = (0, 0, 0, 0)  # bytes done, bytes total, files, backlog
        self._behind_since: Optional[float] = None  # (monotonic) since when the reading is behind
        self._statuses: dict[str, str] = {}
        self._hosts: dict[str, str] = {}  # of _statuses, the hosts' and the ingest's
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._figures: Optional[threading.Thread] = None
        self._changed = threading.Event()  # set when events came in: the figures thread ticks soon
        self._listeners: list[Callable[[], None]] = []  # told when a tick changed the figures (the app)
        self._proc: Optional[Any] = None
        self._queue: Optional[Any] = None
        self._proc_stop = None
        self._retry: Any = None  # the ingest process's "retry now" event
        self.error: Optional[str] = None

    # -- background side --------------------------------------------------------------------
    def start(self) -> None:
        if self.process:
            from ..engine.procs import process_context

            ctx = process_context()
            self._queue = ctx.Queue(maxsize=256)  # bounded: a slow UI slows the reader, never the reverse
            self._proc_stop = ctx.Event()
            self._retry = ctx.Event()
            self._proc = ctx.Process(target=ingest_main, args=(self._paths, self._options, self._queue,
                                                               self._proc_stop, self._remote_options,
                                                               self._catalog_spec, self._retry),
                                     name="tuimon-ingest", daemon=True)
            self._proc.start()
            target = self._receive
        else:
            target = self._run
            if self.remote is not None:
                self.remote.start()
        self._thread = threading.Thread(target=target, name="tuimon-follower", daemon=True)
        self._thread.start()
        self.start_figures()

    def start_figures(self) -> None:
        """Start the figures thread alone (a test that feeds the session by hand)."""
        if self._figures is None:
            self._figures = threading.Thread(target=self._tick_loop, name="tuimon-figures", daemon=True)
            self._figures.start()

    def on_figures(self, listener: Callable[[], None]) -> None:
        """Call ``listener`` (from the figures thread: it must only hand over, as Textual's thread-safe
        ``post_message`` does) each time a tick changed what a screen shows: new rows, new alerts."""
        self._listeners.append(listener)

    def _tick_loop(self) -> None:
        """The figures thread: summaries and alerts, so the UI thread only draws. It ticks when events
        come in (debounced: at least MIN_TICK_GAP_S and three times the last tick's cost apart, so it
        takes at most a quarter of a core however fast lines come), else each IDLE_TICK_S for what the
        clock alone changes (alerts of quiet jobs, ages, ETAs); then tells the listeners (the app
        redraws at once, rather than on its next fixed tick)."""
        last_start, cost = float("-inf"), 0.0
        while not self._stop.is_set():
            self._changed.wait(IDLE_TICK_S)
            wait = last_start + max(MIN_TICK_GAP_S, 3.0 * cost) - time.monotonic()
            if self._stop.wait(max(0.0, wait)):
                return
            last_start = time.monotonic()
            before = (self._built[0], len(self.new_alerts), self.alert_feed.delivered_count)
            try:
                self._changed.clear()
                self.tick()
            except Exception as exc:  # a figure that cannot be computed must not stop the others
                message = f"figures: {type(exc).__name__}: {exc}"
                if message != self.error:
                    LOG.exception("figures tick failed")
                self.error = message
            cost = time.monotonic() - last_start
            if (self._built[0], len(self.new_alerts), self.alert_feed.delivered_count) != before or self.error:
                for listener in list(self._listeners):
                    listener()

    def _run(self) -> None:
        assert self.follower is not None
        supervise(self.follower, self._stop, self.warnings.append)

    def _receive(self) -> None:
        import queue as queue_mod

        while not self._stop.is_set():
            try:
                msg = self._queue.get(timeout=0.2)  # type: ignore[union-attr]
            except queue_mod.Empty:
                if self._proc is not None and not self._proc.is_alive() and not self._stop.is_set():
                    self.error = "the ingest process stopped unexpectedly: the figures shown are no longer updated"
                    self._statuses = {**self._statuses, "ingest": "STOPPED, no more updates"}  # stays in the header
                    self._hosts = {**self._hosts, "ingest": "STOPPED, no more updates"}
                    return
                continue
            except (EOFError, OSError):
                return
            self.apply(msg)

    def apply(self, msg: Message) -> None:
        """One message of the ingest, whichever mode sent it."""
        if isinstance(msg, Batch):
            for label, lines in msg.tails.items():
                self._append_tail(label, lines)
            if msg.events:
                self._sink(msg.events)
        elif isinstance(msg, Progress):
            self._progress = (msg.bytes_done, msg.bytes_total, msg.files, msg.backlog)
            if msg.states is not None:  # None: as before
                self._statuses = msg.states
                self._hosts = {n: st for n, st in msg.states.items() if n.startswith("ssh ") or n == "ingest"}
        elif isinstance(msg, IngestError):
            self.error = msg.text
        elif isinstance(msg, IngestWarning):
            self.warnings.append(msg.text)

    def retry_hosts(self) -> None:
        """Remote hosts waiting to reconnect try at once (the app's R)."""
        if self._retry is not None:
            self._retry.set()  # the ingest process looks at it each round (at most 0.25 s)
        if self.remote is not None:
            self.remote.retry_now()

    def stop(self, wait: float = 5.0) -> None:
        """Stop following; ``wait``: how long the ingest may take to end its block (Ctrl-C
        gives it under a second: a thread still busy then is left to the process's exit)."""
        self._stop.set()
        if self.follower is not None:
            self.follower.wake()
        if self._proc_stop is not None:
            self._proc_stop.set()
        if self._thread is not None:
            self._thread.join(timeout=wait)
        if self._figures is not None:
            self._figures.join(timeout=wait)
        if self._proc is not None:
            self._proc.join(timeout=wait)
            if self._proc.is_alive():
                self._proc.terminate()
        if self.follower is not None and (self._thread is None or not self._thread.is_alive()):
            self.follower.close()
        if self.remote is not None:
            self.remote.stop()

    def _batch(self, events: list[Item]) -> None:
        self.apply(Batch(events))

    def _on_block(self, label: str, text: str, first_line: int) -> None:
        self.apply(Batch([], {label: _last_lines(text)}))

    def _append_tail(self, label: str, lines: list[str]) -> None:
        with self.lock:
            tail = self.tails.get(label)
            if tail is None:
                tail = self.tails[label] = deque(maxlen=TAIL_LINES)
            tail.extend(lines)

    def _sink(self, events: list[Item]) -> None:
        now = self.clock()
        written: dict[str, float] = {}
        for e in events:
            if e.file not in written:
                try:
                    mtime = os.stat(e.file).st_mtime
                except OSError:
                    written[e.file] = now
                    continue
                # a file first seen is dated by its mtime; one whose mtime moved since was written since
                # we last looked: now, on our own clock (a +2 h jump of the clock, or a file server's
                # skew, made every line of an active log a new "stalled" alert: 17 in a test)
                seen = self._mtime_seen.get(e.file)
                written[e.file] = min(now, mtime) if seen is None or seen == mtime else now
                self._mtime_seen[e.file] = mtime
                if len(self._mtime_seen) > 65536:
                    self._mtime_seen.pop(next(iter(self._mtime_seen)))
        # in slices, so that the UI thread never waits long for the lock
        for part in slices(events, SINK_SLICE):
            with self.lock:
                self.store.add(part)
        with self.lock:
            for file, when in written.items():
                self.store.job_for(file)
                runs = self.store.runs_of(file)
                # a batch of many runs (a file read from its start) dates the runs before its last two as well,
                # when they first appear: a run with no date read as fresh, "training" where the batch summary,
                # dating it by its file, says it ended (the live view and the summary are one model)
                for job in runs[self._dated.get(file, 0):-2]:
                    self.last_update.setdefault(job.key, when)
                    self._first_update.setdefault(job.key, when)
                self._dated[file] = max(self._dated.get(file, 0), len(runs) - 2)
                for job in runs[-2:]:  # a batch that began a new run changed the one before
                    self.last_update[job.key] = max(self.last_update.get(job.key, 0.0), when)
                    self._first_update.setdefault(job.key, when)
                    self._job_versions[job.key] = self._job_versions.get(job.key, 0) + 1
                    self._changed_jobs.add(job.key)
            self._generation += 1
        self._changed.set()

    def progress(self) -> tuple[int, int, int, int]:
        """(bytes read, bytes of history found, files, bytes written and not read yet)."""
        if self.follower is not None:
            p = self.follower.progress
            return p.bytes_done, p.bytes_total, len(self.follower.followed), self.follower.backlog()
        return self._progress

    def _lag(self, backlog: int) -> float:
        """How long the reading has been behind: 0 once every byte written is read."""
        now = time.monotonic()
        if backlog <= 0:
            self._behind_since = None
            return 0.0
        if self._behind_since is None:
            self._behind_since = now
        return now - self._behind_since

    def statuses(self) -> dict[str, str]:
        """Every file's state, and the hosts' and the ingest's."""
        if self.follower is None:
            return dict(self._statuses)
        return {**self.follower.status(), **self.host_statuses()}

    def host_statuses(self) -> dict[str, str]:
        """The states of the remote hosts (``ssh HOST``) and of the ingest process: what a
        snapshot carries (a state per file, for thousands of files, would be copied a frame)."""
        if self.follower is None:
            return dict(self._hosts)
        out: dict[str, str] = {}
        if self.remote is not None:
            out.update(self.remote.states())
            for message in self.remote.errors:
                self.error = message
            self.remote.errors.clear()
            self.warnings.extend(self.remote.warnings)
            self.remote.warnings.clear()
        return out

    # -- the figures: judged and built by tick(), off the UI thread ---------------------------------
    def tick(self) -> None:
        """Judge alerts and build the rows (summaries) a snapshot shows: the figures thread's
        work while the session runs (a test's or a headless verb's otherwise).  Every job
        whose events changed is summarized here, at most NEW_ROWS_PER_SNAPSHOT a tick, so the
        lock is never held long; :meth:`snapshot` only reads what this built."""
        now = self.clock()
        with self.lock:
            self._judge_alerts(now)
            self._build_rows(now)

    def _build_rows(self, now: float) -> None:
        generation = self._generation
        if self._rows is not None and self._rows[0] == generation and (
                0 <= now - self._rows_at < TIME_REFRESH_S or not self._read_since_built):
            return  # nothing changed since (or only time, and nobody looked): an idle tick costs no pass
        retimed = self._rows is not None and self._rows[0] == generation  # only time passed
        rows = []
        budget = NEW_ROWS_PER_SNAPSHOT  # thousands of new jobs appear over a few ticks, not in one
        for job in self.store.jobs.values():
            cached = self._cache.get(job.key)
            if cached is None or cached[0] != self._job_versions.get(job.key, 0):
                if budget <= 0:
                    if cached is not None:
                        rows.append(self._built_rows.get(job.key, cached[1]))
                    continue
                budget -= 1
            rows.append(self._row(job, now))
        # each run's job's time ledger: its runs together, with their statuses as of now
        for k, ledger in enumerate(ledgers([r.summary for r in rows], self._ledgers)):
            row = rows[k]
            if ledger is not None and row.summary.ledger is not ledger:
                rows[k] = self._built_rows[row.key] = replace(row, summary=row.summary.with_(ledger=ledger))
        if budget > 0:  # every row is up to date: the next tick may reuse them
            # what time alone changes (age, ETA, stalled, stuck in startup) is measured again every
            # TIME_REFRESH_S; the screens redraw only if what they show of it changed
            sig = _time_signature(rows)
            if retimed and sig != self._rows_sig:
                self._generation += 1
                generation = self._generation
            self._rows, self._rows_at, self._rows_sig = (generation, rows), now, sig
        else:
            self._rows = None
            self._generation += 1  # rows still to build: the next tick is not an idle one
            self._changed.set()
            generation = self._generation
        self._built = (generation, rows, now)
        self._read_since_built = False

    # -- UI side: reads only ----------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The rows the last :meth:`tick` built, and the states now."""
        snap = self.try_snapshot()
        assert snap is not None
        return snap

    def try_snapshot(self, wait: Optional[float] = None) -> Optional[Snapshot]:
        """:meth:`snapshot`, or None when the session's lock is not free within ``wait``
        seconds (a scrape then answers with the figures it had)."""
        if not self.lock.acquire(timeout=-1 if wait is None else wait):
            return None
        try:
            generation, rows, taken_at = self._built
            self._read_since_built = True  # what time alone changes is measured again for the next reader
        finally:
            self.lock.release()
        done, total, files, backlog = self.progress()
        return Snapshot(rows=rows, bytes_done=done, bytes_total=total, files=files, statuses=self.host_statuses(),
                        taken_at=taken_at, alerts=self.alert_feed.delivered_count, generation=generation,
                        backlog_bytes=backlog, lag_s=self._lag(backlog))

    def _judge_alerts(self, now: float) -> None:
        """New alerts of every job (under the lock), at most every ALERT_EVERY_S of real time:
        the throttle bounds work, so it runs on the monotonic clock, not on ``now`` (a session's
        clock may stand still, as a replay's or a test's does, and then never judged again)."""
        tick = time.monotonic()
        if tick - self._alerts_at < ALERT_EVERY_S:
            return
        self._alerts_at = tick
        changed, self._changed_jobs = self._changed_jobs, set()
        for alert in self.alert_feed.update_some(self.store.jobs, changed, self.last_update, self._job_versions,
                                                 now=now):
            key = alert.job_key
            self._alert_counts[key] = self._alert_counts.get(key, 0) + 1
            self._latest_alert[key] = alert
            self._recent_alerts.setdefault(key, deque(maxlen=ALERTS_KEPT)).append(alert)
            self._generation += 1  # its row's alert badge
            # a job whose logs were last written before this session began is history: its alerts
            # are counted and listed, not announced (toasts and the bell are for what happens now)
            written = self.last_update.get(key)
            if written is not None and written >= self.started_at:
                self.new_alerts.append(alert)

    def take_notices(self) -> Notices:
        """The error to show (then cleared), and the warnings and new alerts not handed over yet: the
        UI says each once and writes nothing back into the session."""
        with self.lock:
            error, self.error = self.error, None
        warnings, alerts = [], []
        while self.warnings:  # (deques: the threads that append need no lock)
            warnings.append(self.warnings.popleft())
        while self.new_alerts:
            alerts.append(self.new_alerts.popleft())
        return Notices(error, tuple(warnings), tuple(alerts))

    def latest_alert(self, key: str) -> Optional[Alert]:
        """The latest alert of the job ``key`` (no copy of every alert a frame)."""
        with self.lock:
            return self._latest_alert.get(key)

    def alerts(self) -> list[Alert]:
        with self.lock:
            return list(self.alert_feed.delivered)

    def try_alerts(self, wait: float) -> Optional[list[Alert]]:
        """:meth:`alerts`, or None when the lock is not free within ``wait`` seconds."""
        if not self.lock.acquire(timeout=wait):
            return None
        try:
            return list(self.alert_feed.delivered)
        finally:
            self.lock.release()

    def _row(self, job: Job, now: float) -> JobRow:
        version = self._job_versions.get(job.key, 0)
        cached = self._cache.get(job.key)
        if cached is None or cached[0] != version:
            summary = summarize(job, now=now, last_write=self.last_update.get(job.key), gpu_peak=self.gpu_peak,
                                gpu=self.gpu, startup_timeout=self.startup_timeout)
            base = JobRow(job.key, version, summary, None, None, False, _tflops_series(job))
            self._cache[job.key] = (version, base)
        else:
            base = cached[1]
        written = self.last_update.get(job.key)
        s = base.summary
        it = s.iter_time_ms
        eta_s: Optional[float] = None
        stalled = False
        last = s.last_progress
        if closes_with_eval(job) and settled_status(job) is None:  # (the clock moved on since it was made)
            s = s.with_(status=closing_status(now, written))
        if it and s.status == "training":
            grew = written is not None and written > self._first_update.get(job.key, written)
            verdict = quiet_verdict(job, s, ALERT_DEFAULTS["stalled"], now, written, grew)
            if verdict == "ended":  # a log that stopped long ago, never seen growing: no stalled run
                s = s.with_(status="ended")
            stalled = verdict == "stalled"  # a stalled job has no ETA: the rate it would be read from is gone
            if verdict is None and s.train_iters and last is not None:
                eta_s = eta(s.train_iters, last, it)
        # time passes: measured now, not when the summary was cached; a status the log itself says (a job
        # script's end, a launcher's exits before any step) is no clock's, as in the batch summary (on_clock)
        if s.status in _STARTUP_STATES and settled_status(job) is None:
            status, failure = startup_status(s.started, stamp_span(job), now, written, self.startup_timeout,
                                             s.files[-1] if s.files else None)
            if status == "stuck-in-startup" and failure is not None:
                failure = replace(failure, last_line=self._last_line(job))
            s = s.with_(status=status, failure=failure)
        row = self._built_rows[job.key] = replace(
            base, summary=s, age_s=now - written if written is not None else None, eta_s=eta_s, stalled=stalled,
            alerts=self._alert_counts.get(job.key, 0))
        return row

    def _last_line(self, job: Job) -> Optional[str]:
        """The last line a job's files showed (the tails this session keeps)."""
        for label in reversed(job.files):
            tail = self.tails.get(label)
            if tail:
                return tail[-1]
        return None

    def job_detail(self, key: str) -> Optional[JobDetail]:
        """A job's figures for its screen and the jobs screen's preview, asked for at every
        refresh: its series, curves and ranks are computed again only when its events change
        (its version); its row and log tail are always the latest."""
        now = self.clock()
        with self.lock:
            job = self.store.jobs.get(key)
            if job is None:
                return None
            # the row the figures thread built last: no summary on the UI thread
            built = self._built_rows.get(key)
            row = built if built is not None else self._row(job, now)
            tail: list[str] = []
            for file in job.files:
                tail.extend(self.tails.get(file, ()))
            tail = tail[-TAIL_LINES:]
            cached = self._details.get(key)
            alerts = list(self._recent_alerts.get(key, ()))
            if cached is not None and cached[0] == row.version:
                return replace(cached[1], row=row, tail=tail, alerts=alerts)
            primary = job.primary
            main = primary if primary is not None and len(primary) else job.steps
            its = main.column("iteration").copy()
            ms = main.column("elapsed_ms").astype(np.float64)
            loss = main.column("loss").astype(np.float64)
            walls = main.column("wall").astype(np.float64)
            tflops = _tflops_curve(job)
            timers = sorted(((n, t.group, t.mean_ms) for n, t in job.timers.items()), key=lambda x: -x[2])
            ranks = _rank_rows(job)
            failures = [{"kind": f.kind, "message": f.message, "file": f.file, "line": f.line}
                        for f in job.failures[:50]]
            # (the screens hold the detail while ingest goes on: the per-rank counts are a dict of their own)
            config = {k: dict(v) if isinstance(v, dict) else v for k, v in job.config.items()}
            metric = job.evals.primary
            detail = JobDetail(row, its, ms, loss, tflops, timers, ranks, tail, failures, config, walls, metric,
                               _eval_curve(job, metric, main.wall_base), alerts)
            self._details.pop(key, None)
            self._details[key] = (row.version, detail)
            while len(self._details) > DETAILS_KEPT:  # the jobs looked at lately
                self._details.pop(next(iter(self._details)))
        return detail

    def series_csv(self, key: str) -> Optional[tuple[str, str]]:
        """(job name, CSV of every rank's points: rank, iteration, wall time and each registry
        field), or None for an unknown job."""
        import csv
        import io

        from ..figures.cells import csv_text
        from ..store.fields import FIELDS

        with self.lock:
            job = self.store.jobs.get(key)
            if job is None:
                return None
            buf = io.StringIO()
            writer = csv.writer(buf, lineterminator="\n")
            keys = [f.key for f in FIELDS]
            # source: which lines a point is of (a rank's iteration lines, step lines, throughput lines);
            # rank: the rank of an iteration point, empty otherwise
            writer.writerow(["source", "rank", *keys, "wall_time", "file", "line"])
            sources = [("iteration", rank, series) for rank, series in job.ranks.items()]
            sources += [("step", "", job.steps), ("throughput", "", job.reported)]
            for source, rank, series in sources:
                base = series.wall_base
                for p in series.points:
                    wall = float(p["wall"]) + base if base is not None and math.isfinite(p["wall"]) else None
                    values: list[Any] = [int(p["iteration"]) if p["iteration"] >= 0 else ""]
                    # a float32 value as it was logged (6618.7, not 6618.700195): its shortest repr
                    values += ["" if not math.isfinite(v) else float(str(v)) for v in (p[k] for k in keys[1:])]
                    fid = int(p["file"])
                    # a rank is a number, a node's label, or "-" where the lines name none: then the cell is empty
                    cell = rank if isinstance(rank, int) else "" if rank in ("-", "") else csv_text(str(rank))
                    writer.writerow([source, cell, *values, "" if wall is None else round(wall, 3),
                                     csv_text(job.files[fid]) if fid < len(job.files) else "", int(p["line"])])
            return job.name, buf.getvalue()

    def log_sources(self, key: str) -> list[Lines]:
        """A job's files for the log view, whole: a file here is read from disk, a remote
        one over SFTP (on a connection of the view's own), each indexed as the view pages."""
        from ..sources.logfile import KeptLines, LogFile
        from ..sources.remote_log import RemoteLogFile
        from ..sources.specs import host_and_path
        from ..store.identity import identify

        with self.lock:
            job = self.store.jobs.get(key)
            if job is None:
                return []
            files = list(job.files)
            kept = {label: list(self.tails.get(label, ())) for label in files}
        _, specs = split_paths(self._paths)
        endpoints = {spec.host: spec.endpoint for spec in specs}
        out: list[Lines] = []
        for label in files:
            host, path = host_and_path(label)
            if host == "local":
                if os.path.isfile(path):
                    out.append(LogFile(path, name=_shown_path(path)))
                else:
                    out.append(KeptLines(label, kept[label], note="the file is gone: the lines read last"))
            else:
                tail = KeptLines(label, kept[label])
                out.append(RemoteLogFile(endpoints.get(host, (host, None, None)), path, label, tail,
                                         ssh_config=self._ssh_config))
            out[-1].rank = identify(label).rank
        return out

    def rank_vs_others(self, key: str, rank: str) -> tuple[Curve, Curve]:
        """A rank's iteration times (ms) and, at the same iterations, the median of the
        other ranks' (empty curves: an unknown job or rank)."""
        with self.lock:
            job = self.store.jobs.get(key)
            if job is None:
                return Curve.empty(), Curve.empty()
            own = next((s for k, s in job.ranks.items() if str(k) == rank), None)
            if own is None:
                return Curve.empty(), Curve.empty()
            mine = Curve.of(own, own.column("elapsed_ms").astype(np.float64))
            others = [(s.column("iteration").astype(np.int64), s.column("elapsed_ms").astype(np.float64))
                      for k, s in job.ranks.items() if str(k) != rank]
        return mine, Curve(mine.iterations, mine.walls, median_at(mine.iterations, others))


def _last_lines(text: str, n: int = 200) -> list[str]:
    if text.count("\n") > n:
        return text.rsplit("\n", n + 1)[-(n + 1):-1]
    return text.split("\n")[:-1]


def ingest_main(paths: list[str], options: dict, out, stop, remote_options: Optional[dict] = None,
                catalog_spec: Sequence[tuple[str, str]] = (), retry=None) -> None:
    """Entry point of the ingest process: follow and parse local files and remote
    hosts, and send events, log tails and states to the UI process."""
    from ..engine import catalog

    if catalog_spec:
        catalog.use(catalog.from_spec(catalog_spec))
    events: list[Item] = []
    tails: dict[str, list[str]] = {}
    lock = threading.Lock()

    def sink(batch: list[Item]) -> None:
        with lock:  # remote events arrive from the asyncio thread
            events.extend(batch)

    def on_block(label: str, text: str, first_line: int) -> None:
        lines = tails.setdefault(label, [])
        lines.extend(_last_lines(text))
        del lines[:-TAIL_LINES]

    def warn(message: str) -> None:
        out.put(IngestWarning(message))

    remote_thread: Optional[RemoteThread] = None
    try:
        local, remote = split_paths(paths)
        follower = LocalFollower(local, sink, on_block=on_block, on_warning=warn, **options)
        if remote:
            remote_thread = RemoteThread(remote, sink, **(remote_options or {})).start()
        last_status = 0.0
        sent_states: Optional[dict] = None
        sent_progress: Optional[tuple] = None
        while not stop.is_set():
            _poll_supervised(follower, warn)
            if retry is not None and retry.is_set():  # the user's "retry now" (R): hosts waiting reconnect
                retry.clear()
                if remote_thread is not None:
                    remote_thread.retry_now()
            with lock:
                batch, events[:] = events[:], []
            if batch or tails:
                # small messages: unpickling one is a single call that holds the UI process's GIL
                # cut where a store can take each part on its own (never between a block's events and
                # its rows: a cut there folded rows before the events of their lines, out of order)
                for k, part in enumerate(slices(batch, MESSAGE_EVENTS) or [batch]):
                    out.put(Batch(list(part), tails if k == 0 else {}))
                tails = {}
            now = time.monotonic()
            if now - last_status >= 0.25:
                p = follower.progress
                states = follower.status()
                if remote_thread is not None:
                    states.update(remote_thread.states())
                    for message in remote_thread.errors:
                        out.put(IngestError(message))
                    remote_thread.errors.clear()
                    for message in remote_thread.warnings:
                        warn(message)
                    remote_thread.warnings.clear()
                progress = (p.bytes_done, p.bytes_total, len(follower.followed), follower.backlog())
                # sent when it changed: a status of 4,096 files pickled four times a second cost a core's 5 %
                if states != sent_states or progress != sent_progress:
                    out.put(Progress(*progress[:3], states if states != sent_states else None, progress[3]))
                    sent_states, sent_progress = states, progress
                last_status = now
            follower.sleep(0.25)
        follower.close()
    except Exception as exc:  # the UI shows it; the ingest process must not die silently
        out.put(IngestError(f"ingest stopped: {exc}"))
    finally:
        if remote_thread is not None:
            remote_thread.stop()


def _poll_supervised(follower: LocalFollower, warn: Callable[[str], None]) -> None:
    """One poll of the ingest loop; an error in it is said and the loop goes on
    (the follower keeps its files and offsets: nothing is lost or read twice)."""
    try:
        follower.poll()
    except Exception as exc:  # noqa: BLE001 - the ingest process must keep following
        follower.restarts += 1
        warn(f"the follower stopped ({type(exc).__name__}: {exc}); restarted")
        time.sleep(0.5)


#: the figures thread ticks when events come in, at least this far apart (and three times a tick's cost),
#: and at least every IDLE_TICK_S (what time alone changes: stalls, ages, ETAs)
MIN_TICK_GAP_S = 0.03
IDLE_TICK_S = 1.0
TIME_REFRESH_S = 5.0  # rows reused while nothing changed are measured again against the clock this often


def _time_signature(rows: list[JobRow]) -> tuple:
    """What time alone changes in the rows, as shown (ages and ETAs to the unit the
    screen prints them in)."""
    return tuple((r.summary.status, r.stalled, _coarse(r.age_s), _coarse(r.eta_s)) for r in rows)


def _coarse(seconds: Optional[float]) -> Optional[int]:
    """Seconds to the step the screens print (1 s under 90 s, 1 min under 90 min, 6 min after)."""
    if seconds is None or not math.isfinite(seconds):
        return None
    if seconds < 90:
        return int(seconds)
    if seconds < 5400:
        return int(seconds // 60) * 60
    return int(seconds // 360) * 360


def _shown_path(path: str) -> str:
    """A local file's name as the user typed its directory: relative to the current
    directory when it is under it, the full path otherwise."""
    from ..sources.files import display

    try:
        rel = os.path.relpath(path)
    except ValueError:
        rel = path
    return display(rel if not rel.startswith("..") else os.path.abspath(path))


def median_at(iterations: np.ndarray, series: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
    """At each of ``iterations``, the median of the finite values the ``(iterations,
    values)`` series hold there (NaN: none does)."""
    out = np.full(len(iterations), np.nan)
    if not series or not len(iterations):
        return out
    its = np.concatenate([i for i, _ in series])
    vals = np.concatenate([v for _, v in series])
    keep = np.isfinite(vals) & (its >= 0)
    its, vals = its[keep], vals[keep]
    if not its.size:
        return out
    order = np.lexsort((vals, its))  # by iteration, then value: a group's middle is its median
    its, vals = its[order], vals[order]
    uniq, start, count = np.unique(its, return_index=True, return_counts=True)
    medians = (vals[start + (count - 1) // 2] + vals[start + count // 2]) / 2.0
    at = np.searchsorted(uniq, iterations)
    found = (at < uniq.size) & (uniq[np.minimum(at, uniq.size - 1)] == iterations)
    out[found] = medians[at[found]]
    return out


def _eval_curve(job: Job, metric: Optional[str], wall_base: Optional[float]) -> Curve:
    """The points of a job's evaluation ``metric``, wall times on the charts' clock."""
    series = job.evals.series.get(metric) if metric is not None else None
    if series is None:
        return Curve.empty()
    its = np.array([-1 if i is None else i for i in series.iterations], dtype=np.int64)
    walls = np.array([np.nan if w is None or wall_base is None else w - wall_base for w in series.walls])
    return Curve(its, walls, np.array(series.values, dtype=np.float64))


def _tflops_curve(job: Job, last: Optional[int] = None) -> Curve:
    """TFLOPs per GPU at each logged point (``last``: the latest so many only): reported
    where the log gives it, else computed from the point's iteration time with the job's
    model size."""
    primary = job.primary
    if primary is None or not len(primary):  # a run that logs steps: what its throughput lines report
        reported = job.reported.column("tflops").astype(np.float64)
        keep = np.flatnonzero(np.isfinite(reported))[-last if last else 0:]
        return Curve(job.reported.column("iteration")[keep].astype(np.int64),
                     job.reported.column("wall")[keep].astype(np.float64), reported[keep])
    cut = slice(-last if last else 0, None)  # the UI thread asks for a sparkline's worth every refresh
    reported = primary.column("tflops").astype(np.float64)
    if np.isfinite(reported).any():
        return Curve.of(primary, reported[cut], cut)
    cfg = job.config
    gbs = global_batch(cfg)
    work = flops.iteration_flops(cfg, gbs, params_billion(cfg))
    gpus = world_size(cfg)
    if work is None or not gpus:
        return Curve.empty()
    # the rate the TFLOPs cell shows where the log prints none (figures.record.achieved_tflops)
    per_iteration = work.hardware if work.hardware is not None else work.model
    ms = primary.column("elapsed_ms")[cut].astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        values = per_iteration / (ms / 1000.0 * gpus * 1e12)
    return Curve.of(primary, np.where(np.isfinite(values), values, np.nan), cut)


def _tflops_series(job: Job) -> list[float]:
    """The latest TFLOPs per GPU, for the jobs table's sparkline."""
    return [float(v) for v in _tflops_curve(job, last=200).values]


def _rank_rows(job: Job) -> list[RankRow]:
    medians = {}
    for key, series in job.ranks.items():
        # the steady median, warm-up left out by the rule the jobs list's median uses
        stats = steady_stats(series.column("elapsed_ms"))
        medians[key] = stats.median if stats is not None else None
    known = [m for m in medians.values() if m is not None]
    overall = float(np.median(known)) if known else None
    rows = []
    for key, series in sorted(job.ranks.items(), key=lambda kv: str(kv[0])):
        med = medians[key]
        straggler = (len(known) > 1 and med is not None and overall is not None and med > 1.1 * overall
                     and med == max(known))
        last = series.last("iteration")
        rows.append(RankRow(str(key), series.appended, med, int(last) if last is not None and last >= 0 else None,
                            straggler))
    return rows
