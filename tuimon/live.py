"""A live session: followers feeding the job store in a background thread, and
snapshots of it for the UI.  No Textual here.

The follower thread is the only writer of the store; the UI thread only calls
:meth:`LiveSession.snapshot` and :meth:`LiveSession.job_detail`, which copy what
they need under the session lock.  Timing uses this machine's clock only (log
stamps may come from clocks that are off).
"""
from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from parsers.events import Event

from .sources.local import LocalFollower
from .store import Job, JobStore
from .summary import global_batch, params_billion, summarize, world_size

TAIL_LINES = 2000
STALL_FACTOR = 5.0  # no iteration for this many typical iteration times: stalled


@dataclass
class JobRow:
    key: str
    summary: dict
    age_s: Optional[float]
    eta_s: Optional[float]
    stalled: bool
    tflops_series: list[float]


@dataclass
class Snapshot:
    rows: list[JobRow]
    bytes_done: int
    bytes_total: int
    files: int
    statuses: dict[str, str] = field(default_factory=dict)
    taken_at: float = 0.0


@dataclass
class RankRow:
    rank: str
    points: int
    median_ms: Optional[float]
    last_iteration: Optional[int]
    straggler: bool


@dataclass
class JobDetail:
    row: JobRow
    iterations: np.ndarray
    iter_ms: np.ndarray
    loss: np.ndarray
    tflops: np.ndarray
    timers: list[tuple[str, str, float]]  # (name, group, mean ms)
    ranks: list[RankRow]
    tail: list[str]
    failures: list[dict]
    config: dict


class LiveSession:
    def __init__(self, paths: Sequence[str], *, poll: Optional[float] = None, head_tail: Optional[int] = 64 << 20,
                 gpu_peak: Optional[float] = None, clock: Callable[[], float] = time.time, **follower_kw) -> None:
        self.store = JobStore()
        self.lock = threading.Lock()
        self.clock = clock
        self.gpu_peak = gpu_peak
        self.tails: dict[str, deque[str]] = {}
        self.last_update: dict[str, float] = {}  # job key -> when its files were last written
        self._version = 0
        self._cache: dict[str, tuple[int, JobRow]] = {}
        self._job_versions: dict[str, int] = {}
        self.follower = LocalFollower(list(paths), self._sink, poll=poll, head_tail=head_tail,
                                      on_block=self._on_block, **follower_kw)
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self.error: Optional[str] = None

    # -- background side --------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="tuimon-follower", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self.follower.run(self._stop)
        except Exception as exc:  # reported in the UI, never a crash of the app
            self.error = f"follower stopped: {exc}"

    def stop(self) -> None:
        self._stop.set()
        self.follower._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.follower.close()

    def _on_block(self, label: str, text: str, first_line: int) -> None:
        lines = text.rsplit("\n", 201)[-201:-1] if text.count("\n") > 200 else text.split("\n")[:-1]
        with self.lock:
            tail = self.tails.get(label)
            if tail is None:
                tail = self.tails[label] = deque(maxlen=TAIL_LINES)
            tail.extend(lines)

    def _sink(self, events: list[Event]) -> None:
        now = self.clock()
        written: dict[str, float] = {}
        for e in events:
            if e.file not in written:
                try:
                    written[e.file] = min(now, os.stat(e.file).st_mtime)
                except OSError:
                    written[e.file] = now
        with self.lock:
            self.store.add(events)
            for file, when in written.items():
                job = self.store.job_for(file)[0]
                self.last_update[job.key] = max(self.last_update.get(job.key, 0.0), when)
                self._job_versions[job.key] = self._job_versions.get(job.key, 0) + 1
            self._version += 1

    def add_events(self, events: list[Event]) -> None:
        """Feed events directly (tests, replays)."""
        self._sink(events)

    # -- UI side ---------------------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        now = self.clock()
        with self.lock:
            rows = [self._row(job, now) for job in self.store.jobs.values()]
            progress = self.follower.progress
            snap = Snapshot(rows=rows, bytes_done=progress.bytes_done, bytes_total=progress.bytes_total,
                            files=len(self.follower.followed), statuses=self.follower.status(), taken_at=now)
        return snap

    def _row(self, job: Job, now: float) -> JobRow:
        version = self._job_versions.get(job.key, 0)
        cached = self._cache.get(job.key)
        if cached is None or cached[0] != version:
            summary = summarize(job, now=now, last_write=self.last_update.get(job.key), gpu_peak=self.gpu_peak)
            row = JobRow(job.key, summary, None, None, False, _tflops_series(job, summary))
            self._cache[job.key] = (version, row)
        else:
            row = cached[1]
        last = self.last_update.get(job.key)
        row.age_s = now - last if last is not None else None
        s = row.summary
        it = s["iter_time_ms"]
        row.eta_s = None
        row.stalled = False
        if it and s["train_iters"] and s["last_iteration"] is not None and s["status"] == "training":
            row.eta_s = max(0, s["train_iters"] - s["last_iteration"]) * it["median"] / 1000.0
            if row.age_s is not None and row.age_s > STALL_FACTOR * max(it["median"] / 1000.0, 1.0):
                row.stalled = True
        if s["status"] == "starting":  # the live window is measured here, not when the summary was cached
            row.summary = dict(s, status="starting" if row.age_s is None or row.age_s < 600 else "no-iterations")
        return row

    def job_detail(self, key: str) -> Optional[JobDetail]:
        now = self.clock()
        with self.lock:
            job = self.store.jobs.get(key)
            if job is None:
                return None
            row = self._row(job, now)
            primary = job.primary
            if primary is not None and len(primary):
                its = primary.column("iteration").copy()
                ms = primary.column("elapsed_ms").astype(np.float64)
                loss = primary.column("loss").astype(np.float64)
            else:
                its = job.steps.column("iteration").copy()
                ms = job.steps.column("elapsed_ms").astype(np.float64)
                loss = job.steps.column("loss").astype(np.float64)
            tflops = np.asarray(row.tflops_series, dtype=np.float64)
            timers = sorted(((n, t.group, t.mean_ms) for n, t in job.timers.items()), key=lambda x: -x[2])
            ranks = _rank_rows(job)
            tail: list[str] = []
            for file in job.files:
                tail.extend(self.tails.get(file, ()))
            tail = tail[-TAIL_LINES:]
            failures = [{"kind": f.kind, "message": f.message, "file": f.file, "line": f.line}
                        for f in job.failures[:50]]
            config = dict(job.config)
        return JobDetail(row, its, ms, loss, tflops, timers, ranks, tail, failures, config)

    def rank_series(self, key: str, rank: str) -> list[float]:
        with self.lock:
            job = self.store.jobs.get(key)
            return _rank_ms(job, rank) if job is not None else []


def _rank_ms(job: Job, rank: str) -> list[float]:
    for key, series in job.ranks.items():
        if str(key) == rank:
            ms = series.column("elapsed_ms").astype(np.float64)[-300:]
            return [float(v) for v in ms if math.isfinite(v)]
    return []


def _tflops_series(job: Job, summary: dict) -> list[float]:
    """TFLOPs per GPU at each logged point: reported where the log gives it, else
    computed from the point's iteration time with the job's model size."""
    primary = job.primary
    if primary is None or not len(primary):
        return []
    reported = primary.column("tflops").astype(np.float64)
    if np.isfinite(reported).any():
        return [float(v) for v in reported[-200:]]
    cfg = job.config
    params, gpus, gbs, seq = params_billion(cfg), world_size(cfg), global_batch(cfg), cfg.get("seq_length")
    if not (params and gpus and gbs and seq):
        return []
    k = 3 if cfg.get("activation_checkpointing") is False else 4
    ms = primary.column("elapsed_ms").astype(np.float64)[-200:]
    with np.errstate(divide="ignore", invalid="ignore"):
        values = params * k * 2 * seq * gbs / (ms / 1000.0 * gpus * 1e3)
    return [float(v) if math.isfinite(v) else float("nan") for v in values]


def _rank_rows(job: Job) -> list[RankRow]:
    medians = {}
    for key, series in job.ranks.items():
        ms = series.column("elapsed_ms").astype(np.float64)
        ms = ms[np.isfinite(ms)]
        medians[key] = float(np.median(ms[1:] if ms.size > 1 else ms)) if ms.size else None
    known = [m for m in medians.values() if m is not None]
    overall = float(np.median(known)) if known else None
    rows = []
    for key, series in sorted(job.ranks.items(), key=lambda kv: str(kv[0])):
        med = medians[key]
        straggler = (len(known) > 1 and med is not None and overall is not None and med > 1.1 * overall
                     and med == max(known))
        last = series.last("iteration")
        rows.append(RankRow(str(key), len(series), med, int(last) if last is not None and last >= 0 else None,
                            straggler))
    return rows
