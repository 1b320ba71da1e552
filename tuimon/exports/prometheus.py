"""The figures of a live session as Prometheus metrics, served at ``/metrics`` only.

prometheus_client writes the exposition (text 0.0.4, or OpenMetrics when the
scraper asks for it) and escapes label values as the format requires; we hand it
values that encode: a file name's undecodable bytes become ``\\xNN`` text, so a hostile
name never breaks a scrape.  Jobs that ended more than ``retain_s`` ago drop off,
and at most ``max_jobs`` (the most recently updated) are exported: the number of
series stays bounded however many logs pile up.
"""
from __future__ import annotations

import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterable, Iterator, Optional

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector, CollectorRegistry

from ..figures.record import STATUSES
from ..live.session import JobRow, LiveSession, Snapshot
from ..sources.specs import host_and_path
from ..store.fields import FIELDS
from .listen import DEFAULT_LISTEN, ListenError, parse_listen, url_host

ENDED = ("finished", "ended", "failed", "no-iterations")


def label_text(value: Any) -> str:
    """A label value that encodes as UTF-8 (escaping is prometheus_client's)."""
    text = "" if value is None else str(value)
    return "".join(f"\\x{ord(ch) - 0xDC00:02x}" if 0xDC80 <= ord(ch) <= 0xDCFF else ch for ch in text)


LOCK_WAIT_S = 0.25  # how long a scrape waits for the session before it answers with the figures it had


class SessionCollector(Collector):
    def __init__(self, session: LiveSession, *, retain_s: float = 86400.0, max_jobs: int = 1000,
                 clock: Callable[[], float] = time.time) -> None:
        self.session, self.retain_s, self.max_jobs, self.clock = session, retain_s, max_jobs, clock
        self.lock = threading.Lock()  # scrapes may overlap: one snapshot at a time
        self._last: Optional[tuple[Snapshot, list]] = None  # the figures of the scrape before

    def rows(self, snap: Snapshot) -> list[JobRow]:
        """The jobs exported: not ended more than ``retain_s`` ago, the ``max_jobs`` latest."""
        kept = [r for r in snap.rows
                if not (r.summary.status in ENDED and r.age_s is not None and r.age_s > self.retain_s)]
        kept.sort(key=lambda r: r.age_s if r.age_s is not None else float("inf"))
        return kept[:self.max_jobs]

    def collect(self) -> Iterator[Any]:
        with self.lock:
            # a scrape only reads (the session's figures thread judges), and waits at most LOCK_WAIT_S for
            # the session: while a big batch is being stored it answers with the figures of the scrape before
            snap = self.session.try_snapshot(wait=LOCK_WAIT_S) if self._last is not None \
                else self.session.snapshot()
            alerts = self.session.try_alerts(LOCK_WAIT_S) if snap is not None else None
            if snap is None or alerts is None:
                assert self._last is not None
                snap, alerts = self._last
            self._last = (snap, alerts)
        now = self.clock()
        rows = self.rows(snap)
        yield from _job_metrics(rows, alerts, now)
        yield from self._process_metrics(snap, now)

    def _process_metrics(self, snap: Snapshot, now: float) -> Iterable[Any]:
        yield GaugeMetricFamily("tuimon_files_followed", "Log files followed", value=snap.files)
        yield CounterMetricFamily("tuimon_read_bytes", "Bytes of log read", value=snap.bytes_done)  # (unit last: _total)
        # how long the reading has been behind: 0 when every byte written has been read
        yield GaugeMetricFamily("tuimon_parse_lag_seconds", "Time the reading has been behind the writers",
                                value=snap.lag_s)
        yield GaugeMetricFamily("tuimon_backlog_bytes", "Log bytes written and not read yet",
                                value=snap.backlog_bytes)
        hosts = [state for name, state in snap.statuses.items() if name.startswith("ssh ")]
        yield GaugeMetricFamily("tuimon_remote_hosts_connected", "Remote hosts with a live SSH connection",
                                value=sum(1 for s in hosts if s.startswith("connected")))
        yield GaugeMetricFamily("tuimon_jobs_exported", "Jobs in this exposition (after --retain and --max-jobs)",
                                value=len(self.rows(snap)))


LABELS = ["job", "framework", "host", "path"]


def _job_metrics(rows: list[JobRow], alerts: list, now: float) -> Iterable[Any]:
    def gauge(name: str, text: str, extra: Optional[list[str]] = None) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, text, labels=LABELS + (extra or []))

    it = gauge("tuimon_job_iteration", "Last training iteration (or step) logged")
    total = gauge("tuimon_job_train_iters", "Iterations the run is set to train")
    secs = gauge("tuimon_job_iteration_seconds", "Iteration time: steady median, and the last", ["stat"])
    # the field registry's own figures: one family each (a new registry field is a new family)
    registry = [(f.key, gauge(f.metric_name, f.metric_help)) for f in FIELDS if f.summary]
    tflops = gauge("tuimon_job_tflops_per_gpu", "TFLOPs per GPU as the log reports them and as computed",
                   ["source"])
    mfu = gauge("tuimon_job_mfu_ratio", "Model FLOPs utilisation: the model's FLOPs achieved over the GPU's peak")
    hfu = gauge("tuimon_job_hfu_ratio", "Hardware FLOPs utilisation: recomputation counted, over the GPU's peak")
    loss = gauge("tuimon_job_loss", "Latest loss")
    evaluation = gauge("tuimon_job_eval", "Latest evaluation figure, by metric as the log names it", ["metric"])
    startup = gauge("tuimon_job_startup_seconds", "Job start to first training step")
    updated = gauge("tuimon_job_last_update_timestamp_seconds", "When the job's logs were last written")
    status = gauge("tuimon_job_status", "1 for the job's current status", ["status"])
    world = gauge("tuimon_job_world_size", "GPUs of the run")
    goodput = gauge("tuimon_job_goodput_ratio", "Training time over the job's span, its runs together (the time "
                    "ledger; on the row of its latest run)")
    ledger_s = gauge("tuimon_job_ledger_seconds", "The job's span by part: startup, training, checkpoint, eval, stall, "
                     "redone, teardown, gap (the time ledger; on the row of its latest run)", ["part"])
    ledger_gpu = gauge("tuimon_job_ledger_gpu_seconds", "The job's parts in GPU-seconds: world size x seconds "
                       "(the time ledger; on the row of its latest run)", ["part"])
    counts = CounterMetricFamily("tuimon_job_alerts", "Alerts raised, by kind", labels=LABELS + ["kind"])
    by_job: dict[tuple[str, str], int] = {}
    for a in alerts:
        by_job[(a.job, a.kind)] = by_job.get((a.job, a.kind), 0) + 1
    for row in rows:
        s = row.summary
        host, path = host_and_path(s.files[0] if s.files else "")
        labels = [label_text(s.job), label_text(s.framework), label_text(host), label_text(path)]

        def put(family: GaugeMetricFamily, value: Any, *extra: str) -> None:
            if value is not None and not isinstance(value, str):
                family.add_metric(labels + list(extra), float(value))

        put(it, s.last_progress)
        put(total, s.train_iters)
        if s.iter_time_ms:
            put(secs, s.iter_time_ms.median / 1000.0, "median")
        if s.iter_time_last_ms is not None:
            put(secs, s.iter_time_last_ms / 1000.0, "last")
        for key, family in registry:
            put(family, s.metric(key))
        put(tflops, s.tflops_per_gpu.reported, "reported")
        put(tflops, s.tflops_per_gpu.computed, "computed")
        put(tflops, s.tflops_per_gpu.hardware, "hardware")
        put(mfu, s.mfu)
        put(hfu, s.hfu)
        loss_value = s.loss_last
        put(loss, float(loss_value) if isinstance(loss_value, str) else loss_value)  # "nan" is news too
        for metric, value in s.eval_last.items():  # at most MAX_METRICS names a job (tuimon.store.evals)
            put(evaluation, float(value) if isinstance(value, str) else value, label_text(metric))
        put(startup, s.startup_s)
        if row.age_s is not None:
            put(updated, now - row.age_s)
        current = "stalled" if row.stalled else s.status
        for name in STATUSES:
            status.add_metric(labels + [name], 1.0 if name == current else 0.0)
        put(world, s.world_size)
        ledger = s.ledger
        if ledger is not None and ledger.runs and ledger.runs[-1] == s.job:  # once a job, on its latest run
            put(goodput, ledger.goodput)
            for part, value in ledger.seconds.items():
                put(ledger_s, value, part)
                hours = ledger.gpu_hours.get(part)
                put(ledger_gpu, None if hours is None else hours * 3600.0, part)
        for (job, kind), n in by_job.items():
            if job == s.job:
                counts.add_metric(labels + [label_text(kind)], float(n))
    yield from (it, total, secs, *(family for _, family in registry), tflops, mfu, hfu, loss, evaluation, startup, updated,
                status, world, goodput, ledger_s, ledger_gpu, counts)


def registry_for(session: LiveSession, **kw: Any) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SessionCollector(session, **kw))
    return registry


IDLE_TIMEOUT_S = 10.0  # a connection that sends nothing for this long is closed
MAX_CONNECTIONS = 512  # connections served at once; one more is closed at once


class _Server(ThreadingHTTPServer):
    """A thread per connection, at most :data:`MAX_CONNECTIONS` of them (idle ones time
    out): a crowd of idle sockets cannot hold threads forever."""

    daemon_threads = True
    # socketserver listens with a backlog of 5: 200 scrapers at once met resets and SYN retries (p99 31 s)
    request_queue_size = socket.SOMAXCONN

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)
        super().__init__(address, handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self.slots.acquire(blocking=False):
            self.shutdown_request(request)  # full: the client retries on its next scrape
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self.slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self.slots.release()


class MetricsServer:
    """``GET /metrics`` (text format, or OpenMetrics on content negotiation); every
    other path is 404, every other method 405.  Threads of its own; ``close`` stops it."""

    def __init__(self, registry: CollectorRegistry, listen: str = DEFAULT_LISTEN) -> None:
        host, port = parse_listen(listen)
        handler = _handler(registry)
        try:
            self.httpd = _Server((host, port), handler)
        except OSError as exc:
            raise ListenError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
        self.address = f"{url_host(host)}:{self.httpd.server_address[1]}"
        # polled every 0.1 s for shutdown: Ctrl-C stops serve within a second
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.1,), daemon=True,
                                        name="tuimon-metrics")

    def start(self) -> "MetricsServer":
        self._thread.start()
        return self

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


#: a scrape within this long of the last one (in the same format) gets the body made for it: a crowd of
#: scrapers costs one collection, not one each (Prometheus scrapes every 15 s by default, 1 s at most)
FRESH_S = 0.5


class _Bodies:
    """The last body made in each format, and when; one collection at a time (the others wait for it)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self.lock = threading.Lock()
        self.made: dict[str, tuple[float, bytes]] = {}

    def body(self, encoder: Any, content_type: str) -> bytes:
        with self.lock:
            made = self.made.get(content_type)
            now = time.monotonic()
            if made is not None and now - made[0] < FRESH_S:
                return made[1]
            body = encoder(self.registry)
            self.made[content_type] = (time.monotonic(), body)
            return body


def _handler(registry: CollectorRegistry) -> type[BaseHTTPRequestHandler]:
    bodies = _Bodies(registry)

    class Handler(BaseHTTPRequestHandler):
        server_version = "tuimon"
        timeout = IDLE_TIMEOUT_S  # the socket's: a client that sends nothing is let go

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if self.path.split("?", 1)[0] != "/metrics":
                self._reply(404, b"not found: tuimon serves /metrics only\n", "text/plain; charset=utf-8")
                return
            encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
            try:
                body = bodies.body(encoder, content_type)
            except Exception as exc:  # a scrape must say what went wrong rather than drop the connection
                self._reply(500, f"tuimon: cannot collect: {exc}\n".encode("utf-8", "replace"), "text/plain")
                return
            self._reply(200, body, content_type)

        def do_POST(self) -> None:  # noqa: N802
            self._reply(405, b"method not allowed\n", "text/plain; charset=utf-8")

        do_PUT = do_DELETE = do_PATCH = do_POST

        def _reply(self, code: int, body: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # scrapes every second: no log lines
            return

    return Handler
