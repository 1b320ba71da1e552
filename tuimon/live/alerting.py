"""Delivering alerts: each once, to the user's command and the desktop, at a bounded rate.

:class:`AlertFeed` keeps what was delivered (by alert key, saved beside a follower's
``--state`` file so a restart delivers nothing twice) and hands each new alert to the
``--on-alert`` command and ``notify-send``.  The command is a word list (split with
``shlex``, run with no shell), gets the alert as JSON on stdin, and runs at most once
per (job, kind) per ``rate_s``; it runs on a thread of its own, so a slow or hanging
command never holds the monitor up (it is killed after ``HOOK_TIMEOUT_S``).
"""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from typing import Callable, Iterable, Optional, Sequence

from ..figures.alerts import Alert, Rules, evaluate
from ..figures.summary import STARTUP_TIMEOUT_S, summarize
from ..store.job_store import Job

RATE_S = 600.0  # one run of the command per (job, kind) per ten minutes
HOOK_TIMEOUT_S = 60.0
MAX_SEEN = 20000
#: statuses in which time alone, with no new line, can raise an alert (stalled, startup-hang)
_TIME_BOUND = ("training", "starting")


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


class _Limited:
    """Runs ``action(alert)`` on a thread, at most once per (job, kind) per ``rate_s``."""

    def __init__(self, action: Callable[[Alert], None], rate_s: float, clock: Callable[[], float]) -> None:
        self.action, self.rate_s, self.clock = action, rate_s, clock
        self._last: dict[tuple[str, str], float] = {}
        self.threads: list[threading.Thread] = []

    def __call__(self, alert: Alert) -> None:
        now = self.clock()
        key = (alert.job, alert.kind)
        last = self._last.get(key)
        if last is not None and now - last < self.rate_s:
            return
        self._last[key] = now
        thread = threading.Thread(target=self.action, args=(alert,), daemon=True, name="tuimon-alert-hook")
        thread.start()
        self.threads = [t for t in self.threads if t.is_alive()] + [thread]

    def join(self, timeout: float) -> None:
        for t in self.threads:
            t.join(timeout)


class AlertFeed:
    def __init__(self, rules: Rules, *, command: Optional[Sequence[str]] = None, notify: bool = False,
                 seen_path: Optional[str] = None, startup_timeout: float = STARTUP_TIMEOUT_S,
                 on_warning: Callable[[str], None] = lambda message: None,
                 clock: Callable[[], float] = time.time, rate_s: float = RATE_S) -> None:
        self.rules = rules
        self.startup_timeout = startup_timeout
        self.on_warning = on_warning
        self.clock = clock
        self.seen_path = seen_path
        self.seen: set[tuple] = set(_load_seen(seen_path, on_warning)) if seen_path else set()
        self.delivered: list[Alert] = []
        #: job key -> (version judged, its last write then, whether time alone may raise an alert)
        self._judged: dict[str, tuple[int, Optional[float], bool]] = {}
        self._warned: set[str] = set()
        self._sinks: list[_Limited] = []
        if command:
            self._sinks.append(_Limited(lambda a: self._run(list(command), a), rate_s, clock))
        if notify:
            if shutil.which("notify-send"):
                self._sinks.append(_Limited(self._notify, rate_s, clock))
            else:
                on_warning("desktop notifications asked for, but notify-send is not installed: skipped")

    def update(self, jobs: Iterable[Job], last_writes: Optional[dict[str, float]] = None,
               now: Optional[float] = None, versions: Optional[dict[str, int]] = None) -> list[Alert]:
        """The alerts of ``jobs`` not delivered before, now delivered (oldest rule first).
        With ``versions`` (job key -> a number that changes with its figures), a job is
        judged again only when it changed, or while time alone can raise one (stalls,
        startup hangs)."""
        now = self.clock() if now is None else now
        fresh: list[Alert] = []
        for job in jobs:
            version = versions.get(job.key, 0) if versions is not None else None
            judged = self._judged.get(job.key)
            last_write = (last_writes or {}).get(job.key)
            # judged again when its figures or its last write changed (a write time that arrives after
            # the first judgement can make a stall), or while time alone can raise an alert
            if version is not None and judged is not None and judged == (version, last_write, False):
                continue
            summary = summarize(job, now=now, last_write=last_write, startup_timeout=self.startup_timeout)
            if version is not None:
                self._judged[job.key] = (version, last_write, summary["status"] in _TIME_BOUND)
            for alert in evaluate(job, summary, self.rules, now=now, last_write=last_write):
                key = _plain_key(alert.key)
                if key in self.seen:
                    continue
                self.seen.add(key)
                fresh.append(alert)
        for alert in fresh:
            self.delivered.append(alert)
            for sink in self._sinks:
                sink(alert)
        if fresh and self.seen_path:
            self._save()
        return fresh

    def close(self, timeout: float = 2.0) -> None:
        for sink in self._sinks:
            sink.join(timeout)

    # -- sinks --------------------------------------------------------------------------
    def _run(self, argv: list[str], alert: Alert) -> None:
        try:
            subprocess.run(argv, input=json.dumps(alert.to_dict(), allow_nan=False).encode(), shell=False,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=HOOK_TIMEOUT_S,
                           check=False)
        except FileNotFoundError:
            self._warn_once(f"--on-alert: {argv[0]}: command not found")
        except PermissionError:
            self._warn_once(f"--on-alert: {argv[0]}: permission denied")
        except subprocess.TimeoutExpired:
            self._warn_once(f"--on-alert: {argv[0]} ran over {HOOK_TIMEOUT_S:.0f} s: killed")
        except OSError as exc:
            self._warn_once(f"--on-alert: {argv[0]}: {exc.strerror or exc}")

    def _notify(self, alert: Alert) -> None:
        try:
            subprocess.run(["notify-send", f"tuimon: {alert.kind} in {alert.job}"[:200], alert.message[:500]],
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
