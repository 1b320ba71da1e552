"""``tuimon alerts``, and the alert feed every reading verb builds from its options
(the options themselves: :mod:`.alert_options`)."""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Callable, Optional

from ..engine.native import json_indented
from ..figures.alerts import Alert, RuleError, Rules
from ..live.alerting import AlertFeed, HookError, split_command
from ..store.job_store import JobStore
from ..text import sanitize
from .alert_options import AlertOptionError
from .settings import Settings

TICK_S = 1.0  # how often a follower looks for new alerts (stalls need time to pass, not lines)


def feed_from(settings: Settings, *, seen_path: Optional[str] = None, on_warning: Callable[[str], None] = lambda m: None,
              clock: Callable[[], float] = time.time) -> AlertFeed:
    """The alert feed the options ask for; raises :class:`AlertOptionError`."""

    try:
        rules = Rules.parse(settings.alert or [])
        command = split_command(settings.on_alert) if settings.on_alert else None
    except (RuleError, HookError) as exc:
        raise AlertOptionError(str(exc)) from None
    return AlertFeed(rules, command=command, notify=settings.notify, seen_path=seen_path,
                     startup_timeout=settings.startup_timeout, on_warning=on_warning,
                     clock=clock)


def last_writes(store: JobStore, known: Optional[dict[str, float]] = None) -> dict[str, float]:
    """The latest mtime of each job's files: how long ago it last said something.
    ``known``: mtimes of files that are not local (remote labels)."""
    out: dict[str, float] = {}
    for key, job in store.jobs.items():
        times = []
        for f in job.files:
            if known and f in known:
                times.append(known[f])
                continue
            try:
                times.append(os.stat(f).st_mtime)
            except OSError:
                pass
        if times:
            out[key] = max(times)
    return out


def render_alerts(alerts: list[Alert], fmt: str) -> str:
    if fmt == "json":
        return json_indented([a.to_dict() for a in alerts]) + "\n"
    head = ("Job", "Kind", "Rank", "Iter", "Where", "Message")
    rows: list[tuple[str, ...]] = [(a.job, a.kind, a.rank or "-", "-" if a.iteration is None else str(a.iteration),
             f"{os.path.basename(a.file)}:{a.line}" if a.file and a.line else (os.path.basename(a.file or "") or "-"),
             a.message) for a in alerts]
    rows = [tuple(sanitize(c).replace("\n", " ") for c in r) for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(head)]
    widths[-1] = len(head[-1])

    def line(cells) -> str:
        return "  ".join(c.ljust(w) for c, w in zip(cells[:-1], widths[:-1])) + "  " + cells[-1]
    out = [line(head), line(["-" * w for w in widths])] + [line(r) for r in rows]
    if not rows:
        out.append("(no alerts)")
    return "\n".join(out) + "\n"


def cmd_alerts(settings: Settings, *, parse_into, files_of, warn: Callable[[str], None]) -> int:
    """One-shot: every alert of the logs (``--follow`` is the followers' :func:`cli.cmd_follow`)."""
    feed = feed_from(settings, on_warning=warn)
    store = JobStore()
    remote_mtimes = parse_into(store, files_of(settings))
    alerts = feed.update(list(store.jobs.values()), last_writes(store, remote_mtimes))
    sys.stdout.write(render_alerts(alerts, settings.format))
    sys.stdout.flush()
    feed.close()
    return 1 if alerts else 0  # as grep does: a script's `if tuimon alerts ...; then` reads "found some"


class StoreTicker:
    """A follower's events go into a store; every ``TICK_S`` the jobs whose figures or
    last write changed, and those whose deadline came (a stall, a startup hang), are
    judged and new alerts handed to ``out``.  A quiet job costs nothing per tick.

    ``mtimes``: the files whose mtime changed since it was last called (label -> mtime),
    from what the follower already knows (no stat of every file every tick)."""

    def __init__(self, feed: AlertFeed, out: Callable[[list[Alert]], None],
                 mtimes: Callable[[], dict[str, float]]) -> None:
        self.feed, self.out = feed, out
        self.mtimes = mtimes
        self.store = JobStore(bounded=True)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.versions: dict[str, int] = {}  # job key -> a number that changes with its figures
        self.writes: dict[str, float] = {}  # job key -> its files' latest mtime
        self._changed: set[str] = set()
        self._pending: dict[str, float] = {}  # mtimes of files with no event yet
        self._thread = threading.Thread(target=self._run, daemon=True, name="tuimon-alerts")

    def add(self, events) -> None:
        with self.lock:
            self.store.add(events)
            for file in {e.file for e in events}:
                self.store.job_for(file)
                mtime = self._pending.pop(file, None)
                for job in self.store.runs_of(file)[-2:]:  # a batch that began a new run changed the one before
                    key = job.key
                    self.versions[key] = self.versions.get(key, 0) + 1
                    self._changed.add(key)
                    if mtime is not None and mtime > self.writes.get(key, float("-inf")):
                        self.writes[key] = mtime

    def start(self) -> None:
        self._thread.start()

    def tick(self) -> None:
        moved = self.mtimes()
        with self.lock:
            for label, mtime in moved.items():
                job = self.store.job_of(label)
                if job is None:  # no event from it yet: its job's write time waits for one
                    self._pending[label] = mtime
                    continue
                key = job.key
                if mtime > self.writes.get(key, float("-inf")):
                    self.writes[key] = mtime
                    self._changed.add(key)
            changed, self._changed = self._changed, set()
            fresh = self.feed.update_some(self.store.jobs, changed, self.writes, self.versions)
        if fresh:
            self.out(fresh)

    def _run(self) -> None:
        while not self.stop.wait(TICK_S):
            self.tick()

    def close(self, interrupted: bool = False) -> None:
        """Stop judging; a last judgement of what came in, unless the user interrupted
        (Ctrl-C stops at once: hooks under way get a moment, not a judgement)."""
        self.stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=0.2 if interrupted else 5)
        if not interrupted:
            self.tick()
        self.feed.close(timeout=0.2 if interrupted else 2.0)


def alert_lines(alerts: list[Alert], fmt: str) -> str:
    """New alerts as a follower prints them: JSON lines, or table rows without the header."""
    if fmt == "json":
        return "".join(json.dumps(a.to_dict(), allow_nan=False) + "\n" for a in alerts)
    return "".join(line + "\n" for line in render_alerts(alerts, "table").splitlines()[2:])
