"""Delivering alerts: each once, to the user's command and the desktop, at a bounded rate.

:class:`AlertFeed` keeps what was delivered (by alert key, saved beside a follower's
``--state`` file so a restart delivers nothing twice) and hands each new alert to the
``--on-alert`` command and ``notify-send``.  The command is a word list (split with
``shlex``, run with no shell) and gets a JSON list of alerts on stdin: the alerts that
arrived together go in one call (as Alertmanager groups them), each (job, kind) at
most once per ``rate_s``.  At most ``HOOK_WORKERS`` calls run at once, on threads of
their own, so a slow or hanging command never holds the monitor up (it is killed after
``HOOK_TIMEOUT_S``) and a thousand failing jobs start one process, not a thousand.
"""
from __future__ import annotations

import heapq
import json
import logging
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections import deque
from typing import Callable, Iterable, Mapping, Optional, Sequence

from ..figures.alerts import Alert, Rules, evaluate, ledger_alerts, time_deadline
from ..figures.ledger import RunPiece, family, ledgers, piece_of
from ..figures.record import Summary
from ..figures.summary import STARTUP_TIMEOUT_S, summarize
from ..store.job_store import Job

RATE_S = 600.0  # one run of the command per (job, kind) per ten minutes
HOOK_TIMEOUT_S = 60.0
HOOK_WORKERS = 4  # calls of the command running at once
MAX_GROUP = 1000  # alerts in one call at most
MAX_PENDING = 20000  # alerts waiting for a runner at most (the oldest are dropped, with a warning)
MAX_SEEN = 20000
MAX_KEPT = 10000  # delivered alerts kept for the screen (all are counted)
COST_SHARE = 10.0  # a job is judged again no sooner than this many times its last judgement took...
COST_MIN_S = 0.05  # ...when that was this long or longer (a small job is judged at every change)
#: statuses in which time alone, with no new line, can raise an alert (stalled, startup-hang)
_TIME_BOUND = ("training", "starting")

LOG = logging.getLogger("tuimon.alerts")


class HookError(ValueError):
    """An --on-alert command that cannot be split into words (one line for the user)."""


def split_command(text: str) -> list[str]:
    try:
        argv = shlex.split(text)
    except ValueError as exc:
        raise HookError(f"--on-alert {text!r}: {exc}") from None
    if not argv:
        raise HookError("--on-alert: empty command")
    return argv


class _Grouped:
    """Hands alerts to ``action`` in groups, on at most ``workers`` threads: the alerts
    waiting when a runner is free go in one call.  Each (job, kind) passes at most once
    per ``rate_s``."""

    def __init__(self, action: Callable[[list[Alert]], None], rate_s: float, clock: Callable[[], float],
                 workers: int = HOOK_WORKERS, on_drop: Callable[[int], None] = lambda n: None) -> None:
        self.action, self.rate_s, self.clock = action, rate_s, clock
        self.workers = max(1, workers)
        self.on_drop = on_drop
        self._last: dict[tuple[str, str], float] = {}
        self._pending: deque[Alert] = deque()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._running = 0  # runner threads alive
        self.calls = 0

    def __call__(self, alerts: Sequence[Alert]) -> None:
        now = self.clock()
        passed = []
        for alert in alerts:
            key = (alert.job, alert.kind)
            last = self._last.get(key)
            if last is not None and now - last < self.rate_s:
                continue
            self._last[key] = now
            passed.append(alert)
        if not passed:
            return
        with self._lock:
            self._pending.extend(passed)
            dropped = len(self._pending) - MAX_PENDING
            for _ in range(max(0, dropped)):
                self._pending.popleft()
            start = self._running < self.workers
            if start:
                self._running += 1
        if dropped > 0:
            self.on_drop(dropped)
        if start:
            threading.Thread(target=self._runner, daemon=True, name="tuimon-alert-hook").start()

    def _runner(self) -> None:
        while True:
            with self._lock:
                if not self._pending:
                    self._running -= 1
                    self._idle.notify_all()
                    return
                group = [self._pending.popleft() for _ in range(min(MAX_GROUP, len(self._pending)))]
                self.calls += 1
            try:
                self.action(group)
            except Exception:  # a sink's failure is its own warning; the runner goes on
                pass

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the calls under way and waiting."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._running and (left := deadline - time.monotonic()) > 0:
                self._idle.wait(left)


class AlertFeed:
    def __init__(self, rules: Rules, *, command: Optional[Sequence[str]] = None, notify: bool = False,
                 seen_path: Optional[str] = None, startup_timeout: float = STARTUP_TIMEOUT_S,
                 on_warning: Callable[[str], None] = lambda message: None,
                 clock: Callable[[], float] = time.time, rate_s: float = RATE_S,
                 hook_workers: int = HOOK_WORKERS) -> None:
        self.rules = rules
        self.startup_timeout = startup_timeout
        self.on_warning = on_warning
        self.clock = clock
        self.seen_path = seen_path
        self.seen: set[tuple] = set(_load_seen(seen_path, on_warning)) if seen_path else set()
        self.delivered: deque[Alert] = deque(maxlen=MAX_KEPT)  # the latest, for the alerts screen
        self.delivered_count = 0
        #: job key -> (version judged, its last write then, when time alone may next raise an alert or None)
        self._judged: dict[str, tuple[int, Optional[float], Optional[float]]] = {}
        #: each job's last write when first judged: a later one means it was seen growing (quiet_verdict)
        self._first_write: dict[str, Optional[float]] = {}
        self._due: list[tuple[float, str]] = []  # (deadline, job key): a heap, for update_some
        #: (directory, run name) -> job key -> its run's ledger piece (the goodput and redone rules)
        self._pieces: dict[tuple[str, str], dict[str, RunPiece]] = {}
        self._cost: dict[str, tuple[float, float]] = {}  # job key -> (monotonic end, seconds) of its last judgement
        self._due_mono: list[tuple[float, str]] = []  # (monotonic time, job key): big jobs' next turns
        self._waiting: set[str] = set()
        self._warned: set[str] = set()
        self._sinks: list[_Grouped] = []

        def dropped(n: int) -> None:
            self._warn_once(f"alerts come faster than --on-alert takes them: {n} dropped")
        if command:
            self._sinks.append(_Grouped(lambda group: self._run(list(command), group), rate_s, clock,
                                        hook_workers, dropped))
        if notify:
            if shutil.which("notify-send"):
                self._sinks.append(_Grouped(self._notify, rate_s, clock, 1, dropped))
            else:
                on_warning("desktop notifications asked for, but notify-send is not installed: skipped")

    def update(self, jobs: Iterable[Job], last_writes: Optional[dict[str, float]] = None,
               now: Optional[float] = None, versions: Optional[dict[str, int]] = None) -> list[Alert]:
        """The alerts of ``jobs`` not delivered before, now delivered (oldest rule first).
        With ``versions`` (job key -> a number that changes with its figures), a job is
        judged again only when it changed, or once the moment comes when time alone can
        raise one (it stalls, it hangs in startup).  This looks at every job; a follower
        with thousands uses :meth:`update_some`."""
        now = self.clock() if now is None else now
        fresh: list[Alert] = []
        for job in jobs:
            self._judge(job, last_writes, now, versions, fresh)
        return self._deliver(fresh)

    def update_some(self, jobs: Mapping[str, Job], changed: Iterable[str], last_writes: Mapping[str, float],
                    versions: Mapping[str, int], now: Optional[float] = None) -> list[Alert]:
        """:meth:`update` for the jobs (by key) that ``changed`` and those whose deadline
        came: the cost of a tick does not grow with the number of quiet jobs."""
        now = self.clock() if now is None else now
        keys = set(changed)
        while self._due and self._due[0][0] <= now:
            keys.add(heapq.heappop(self._due)[1])
        mono = time.monotonic()
        while self._due_mono and self._due_mono[0][0] <= mono:  # big jobs whose turn came
            keys.add(heapq.heappop(self._due_mono)[1])
        fresh: list[Alert] = []
        for key in sorted(keys):
            job = jobs.get(key)
            if job is not None:
                self._judge(job, last_writes, now, versions, fresh)
        return self._deliver(fresh)

    def _judge(self, job: Job, last_writes: Optional[Mapping[str, float]], now: float,
               versions: Optional[Mapping[str, int]], fresh: list[Alert]) -> None:
        version = versions.get(job.key, 0) if versions is not None else None
        judged = self._judged.get(job.key)
        last_write = (last_writes or {}).get(job.key)
        # judged again when its figures or its last write changed (a write time that arrives after
        # the first judgement can make a stall), or when its deadline has come
        if version is not None and judged is not None and judged[:2] == (version, last_write) and \
                (judged[2] is None or now < judged[2]):
            return
        cost = self._cost.get(job.key)
        started = time.monotonic()
        if cost is not None and cost[1] >= COST_MIN_S and version is not None and judged is not None and \
                started < cost[0] + COST_SHARE * cost[1]:
            # a big job judged at every change would take the core (and the session's lock) whole: at most a
            # tenth of the time goes to it; what changed meanwhile is judged at its next turn
            if job.key not in self._waiting:
                self._waiting.add(job.key)
                heapq.heappush(self._due_mono, (cost[0] + COST_SHARE * cost[1], job.key))
            return
        self._waiting.discard(job.key)
        summary = summarize(job, now=now, last_write=last_write, startup_timeout=self.startup_timeout)
        first = self._first_write.setdefault(job.key, last_write)
        grew = last_write is not None and first is not None and last_write > first
        if version is not None:
            due = time_deadline(job, summary, self.rules, now, last_write, self.startup_timeout, grew) \
                if summary.status in _TIME_BOUND else None
            self._judged[job.key] = (version, last_write, due)
            if due is not None:
                heapq.heappush(self._due, (due, job.key))
        for alert in evaluate(job, summary, self.rules, now=now, last_write=last_write, grew=grew) + \
                self._ledger_alerts(job.key, summary):
            key = _plain_key(alert.key)
            if key in self.seen:
                continue
            self.seen.add(key)
            fresh.append(alert)
        ended = time.monotonic()
        self._cost[job.key] = (ended, ended - started)

    def _ledger_alerts(self, key: str, summary: Summary) -> list[Alert]:
        """The time ledger's alerts of the job ``summary``'s run belongs to: its runs judged so far
        (a small piece of each, per directory and run name) taken together."""
        if not ({"goodput", "redone"} & set(self.rules.settings)):
            return []
        piece = piece_of(summary)
        if piece is None:
            return []
        pieces = self._pieces.setdefault(family(summary), {})
        pieces[key] = piece
        rows = list(pieces.values())
        out: list[Alert] = []
        for ledger in {id(led): led for led in ledgers(rows) if led is not None}.values():
            if summary.job in ledger.runs:
                out += ledger_alerts(ledger, self.rules)
        return out

    def _deliver(self, fresh: list[Alert]) -> list[Alert]:
        for alert in fresh[:100]:
            LOG.info("alert %s: %s: %s (%s:%s)", alert.kind, alert.job, alert.message, alert.file, alert.line)
        self.delivered.extend(fresh)
        self.delivered_count += len(fresh)
        if fresh:
            for sink in self._sinks:
                sink(fresh)
        if fresh and self.seen_path:
            self._save()
        return fresh

    def close(self, timeout: float = 2.0) -> None:
        for sink in self._sinks:
            sink.join(timeout)

    # -- sinks --------------------------------------------------------------------------
    def _run(self, argv: list[str], group: list[Alert]) -> None:
        try:
            body = json.dumps([a.to_dict() for a in group], allow_nan=False).encode()
            # a process group of its own: a hook over its time is killed with what it started (`cmd &`
            # in a shell script ran on after the script was killed)
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, start_new_session=True)
            try:
                proc.communicate(body, timeout=HOOK_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                raise
        except FileNotFoundError:
            self._warn_once(f"--on-alert: {argv[0]}: command not found")
        except PermissionError:
            self._warn_once(f"--on-alert: {argv[0]}: permission denied")
        except subprocess.TimeoutExpired:
            self._warn_once(f"--on-alert: {argv[0]} ran over {HOOK_TIMEOUT_S:.0f} s: killed")
        except OSError as exc:
            self._warn_once(f"--on-alert: {argv[0]}: {exc.strerror or exc}")

    def _notify(self, group: list[Alert]) -> None:
        alert = group[0]
        if len(group) == 1:
            title, body = f"tuimon: {alert.kind} in {alert.job}", alert.message
        else:
            title = f"tuimon: {len(group)} alerts"
            body = "\n".join(f"{a.kind} in {a.job}" for a in group[:8]) + ("\n..." if len(group) > 8 else "")
        try:
            subprocess.run(["notify-send", title[:200], body[:500]],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10, check=False)
        except (OSError, subprocess.TimeoutExpired):
            self._warn_once("notify-send failed")

    def _warn_once(self, message: str) -> None:
        if message not in self._warned:
            self._warned.add(message)
            self.on_warning(message)

    def _save(self) -> None:
        assert self.seen_path is not None
        keys = [list(k) for k in sorted(self.seen, key=repr)][-MAX_SEEN:]
        directory = os.path.dirname(os.path.abspath(self.seen_path))
        try:
            fd, tmp = tempfile.mkstemp(prefix=".tuimon-alerts-", dir=directory)
            with os.fdopen(fd, "w") as fh:
                json.dump({"version": 1, "delivered": keys}, fh)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.seen_path)
        except OSError as exc:
            self._warn_once(f"cannot save delivered alerts to {self.seen_path}: {exc.strerror or exc}")


def seen_path_for(state_path: Optional[str]) -> Optional[str]:
    """Where a follower with ``--state FILE`` keeps the keys of the alerts it delivered."""
    return f"{state_path}.alerts" if state_path else None


def _plain_key(key: tuple) -> tuple:
    return tuple(None if v is None else (v if isinstance(v, (int, str)) else str(v)) for v in key)


def _load_seen(path: Optional[str], on_warning: Callable[[str], None]) -> list[tuple]:
    if not path or not os.path.exists(path):
        return []
    try:
        with open(path) as fh:
            data = json.load(fh)
        return [tuple(k) for k in data["delivered"] if isinstance(k, list)]
    except (OSError, ValueError, KeyError, TypeError):
        on_warning(f"{path}: unreadable list of delivered alerts: ignored (alerts may be delivered again)")
        return []


def _kill_group(proc: subprocess.Popen) -> None:
    """Kill a hook's process group (the hook and whatever it started), then reap the hook."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()
