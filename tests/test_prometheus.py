"""`tuimon serve`: its /metrics parsed as Prometheus parses it, hostile file names, a real
Prometheus server scraping it every second, and the contrib rules checked by promtool."""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as openmetrics_families
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import FIXTURES, ROOT, shared_or_skip

PROMETHEUS = shutil.which("prometheus")
PROMTOOL = shutil.which("promtool")


class Serve:
    """A `tuimon serve` process on a free port."""

    def __init__(self, *paths: str, extra: tuple[str, ...] = ()) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tuimon", "serve", *paths, "--listen", "127.0.0.1:0",
                                      "--poll", "0.2", *extra], cwd=ROOT, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stderr.readline()  # type: ignore[union-attr]
        m = re.search(r"http://([\d.]+:\d+)/metrics", line)
        assert m, f"no address in {line!r}"
        self.address = m.group(1)

    def get(self, path: str = "/metrics", accept: str = "") -> tuple[int, str, str]:
        req = urllib.request.Request(f"http://{self.address}{path}", headers={"Accept": accept} if accept else {})
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.headers.get("Content-Type", ""), r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.headers.get("Content-Type", ""), e.read().decode()

    def families(self, until=lambda fams: True, timeout: float = 60.0) -> dict:
        deadline = time.time() + timeout
        while True:
            _, _, text = self.get()
            fams = {f.name: f for f in text_string_to_metric_families(text)}
            if until(fams):
                return fams
            # a wait that times out is a failure, not a slow pass (a stale count waited the full minute)
            assert time.time() < deadline, f"/metrics did not reach the state waited for in {timeout:.0f} s"
            time.sleep(0.3)

    def close(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def jobs_in(fams: dict, name: str = "tuimon_job_iteration") -> dict[str, float]:
    return {s.labels["job"]: s.value for s in fams[name].samples} if name in fams else {}


def test_metrics_of_the_fixtures_parse_and_hold_every_job(tmp_path):
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES, logs)
    for f in logs.iterdir():  # written an hour ago (a fresh clone's files are minutes old)
        os.utime(f, (time.time() - 3600, time.time() - 3600))
    serve = Serve(str(logs))
    try:
        # five fixtures log iterations; alerts are judged every second: three failed, one stuck in startup
        fams = serve.families(lambda f: len(jobs_in(f)) == 5 and "tuimon_job_alerts" in f
                              and len(f["tuimon_job_alerts"].samples) == 4)
        assert jobs_in(fams) == {"megatron-deepspeed-8gpu-1234567": 20.0, "stronghold-run": 50.0, "oom-run": 1.0,
                                 "nccl-timeout-555001": 3.0, "cancelled-777001": 2.0}
        tflops = {(s.labels["job"], s.labels["source"]): s.value for s in fams["tuimon_job_tflops_per_gpu"].samples}
        assert tflops[("megatron-deepspeed-8gpu-1234567", "reported")] == 98.1
        assert tflops[("megatron-deepspeed-8gpu-1234567", "computed")] == 33.75  # the model's work
        assert tflops[("megatron-deepspeed-8gpu-1234567", "hardware")] == 45.0  # recomputation counted
        status = {(s.labels["job"], s.labels["status"]): s.value for s in fams["tuimon_job_status"].samples}
        assert status[("oom-run", "failed")] == 1.0 and status[("oom-run", "training")] == 0.0
        for job in {j for j, _ in status}:  # one status each, "ended" too (a log quiet for an hour)
            assert sum(v for (j, _), v in status.items() if j == job) == 1.0, job
        assert status[("no-iterations-888001", "stuck-in-startup")] == 1.0
        secs = {(s.labels["job"], s.labels["stat"]): s.value for s in fams["tuimon_job_iteration_seconds"].samples}
        assert secs[("stronghold-run", "median")] == pytest.approx(7.7766)
        assert all(s.labels["host"] == "local" and s.labels["path"].startswith(str(logs))
                   for s in fams["tuimon_job_iteration"].samples)
        alerts = {(s.labels["job"], s.labels["kind"]): s.value for s in fams["tuimon_job_alerts"].samples}
        assert alerts[("oom-run", "failed")] == 1.0
        assert fams["tuimon_files_followed"].samples[0].value == 6
        # every byte read: not behind (a writer faster than the reading: tests/test_app.py's header test)
        assert fams["tuimon_backlog_bytes"].samples[0].value == 0 and fams["tuimon_parse_lag_seconds"].samples[0].value == 0
        # units as suffixes, _total last (Prometheus's naming): read bytes are tuimon_read_bytes_total
        assert fams["tuimon_read_bytes"].samples[0].value == sum(f.stat().st_size for f in logs.iterdir())
        plain = serve.get()[2]
        assert "tuimon_read_bytes_total " in plain and "bytes_read" not in plain
        # OpenMetrics on content negotiation, nothing but /metrics
        code, ctype, text = serve.get(accept="application/openmetrics-text; version=1.0.0; charset=utf-8")
        assert code == 200 and ctype.startswith("application/openmetrics-text") and text.endswith("# EOF\n")
        assert "tuimon_job_iteration" in {f.name for f in openmetrics_families(text)}
        assert serve.get("/")[0] == 404 and serve.get("/favicon.ico")[0] == 404
    finally:
        serve.close()


def test_evaluation_metrics_are_served_by_metric(tmp_path):
    from tests.conftest import FORMATS

    logs = tmp_path / "logs"
    shutil.copytree(FORMATS, logs)
    serve = Serve(str(logs))
    try:
        fams = serve.families(lambda f: len({s.labels["job"] for s in f["tuimon_job_eval"].samples}) == 4
                              if "tuimon_job_eval" in f else False)
        got = {(s.labels["job"], s.labels["metric"]): s.value for s in fams["tuimon_job_eval"].samples}
        assert got[("hf-trainer-run", "eval_loss")] == pytest.approx(2.4012)
        assert got[("mlperf-run", "eval_accuracy")] == pytest.approx(3.92)
        assert got[("torchtitan-run", "validation loss")] == pytest.approx(5.1234)
        # the field registry's figures, each a family of its own: per-GPU tokens and the run's own MFU
        per_gpu = jobs_in(fams, "tuimon_job_tokens_per_gpu_per_second")
        assert per_gpu["torchtitan-run"] == pytest.approx(65622, abs=1)
        assert jobs_in(fams, "tuimon_job_mfu_reported_ratio")["torchtitan-run"] == pytest.approx(0.1459, abs=1e-4)
        assert "mlperf-run" not in jobs_in(fams, "tuimon_job_mfu_reported_ratio")  # no figure, no sample
    finally:
        serve.close()


HOSTILE = ['quote"d', "back\\slash", "new\nline", "brace}{=,", "ünï cödé"]


def test_hostile_file_names_never_break_a_scrape(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    line = " iteration {i:8d}/      10 | elapsed time per iteration (ms): 1000.0 | lm loss: 2.0E+00 |\n"
    names = HOSTILE + [os.fsdecode(b"bad\xffbyte")]
    for n, name in enumerate(names):
        (logs / f"{name}-{n}.log").write_text(line.format(i=n + 1))
    serve = Serve(str(logs))
    try:
        fams = serve.families(lambda f: len(jobs_in(f)) == len(names))
        paths = {s.labels["path"] for s in fams["tuimon_job_iteration"].samples}
        for n, name in enumerate(HOSTILE):
            assert str(logs / f"{name}-{n}.log") in paths
        assert str(logs / "bad\\xffbyte-5.log") in paths  # an undecodable byte, spelt out
    finally:
        serve.close()


def test_retention_and_max_jobs_bound_the_series(tmp_path):
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES, logs)
    for f in logs.iterdir():  # ended an hour ago
        os.utime(f, (time.time() - 3600, time.time() - 3600))
    serve = Serve(str(logs), extra=("--retain", "30m", "--max-jobs", "2"))
    try:
        fams = serve.families(lambda f: "tuimon_jobs_exported" in f)
        time.sleep(2)
        fams = serve.families()
        # finished and failed jobs ended over 30 minutes ago drop off; of the rest, the 2 latest stay
        exported = {s.labels["job"] for s in fams["tuimon_job_status"].samples}
        assert exported <= {"megatron-deepspeed-8gpu-1234567", "no-iterations-888001"}
        assert fams["tuimon_jobs_exported"].samples[0].value == len(exported) <= 2
    finally:
        serve.close()


def test_serve_errors_are_one_line(tmp_path):
    for argv, want in ((["--listen", "nonsense"], "expected HOST:PORT"), (["--retain", "soon"], "not a duration")):
        r = subprocess.run([sys.executable, "-m", "tuimon", "serve", str(tmp_path), *argv], cwd=ROOT,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 2 and want in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_metrics_of_the_whole_corpus_parse():
    corpus = shared_or_skip("corpus")
    serve = Serve(str(corpus))
    try:
        # the corpus holds 130 jobs, 100 of them with a step or iteration (tuimon summary): wait for nearly all
        fams = serve.families(lambda f: f.get("tuimon_jobs_exported") is not None
                              and f["tuimon_jobs_exported"].samples[0].value >= 125, timeout=120)
        exported = fams["tuimon_jobs_exported"].samples[0].value if "tuimon_jobs_exported" in fams else None
        assert exported is not None and exported >= 125, f"{exported} jobs exported after 120 s"
        assert len(jobs_in(fams)) >= 90
        for fam in fams.values():
            for s in fam.samples:
                assert s.value == s.value or fam.name == "tuimon_job_loss", (fam.name, s)  # only a loss may be NaN
    finally:
        serve.close()


@pytest.mark.skipif(PROMTOOL is None, reason="SKIPPED: promtool not installed (apt-get install prometheus)")
def test_the_exposition_passes_promtool_s_linter():
    """Prometheus's own linter on the fixtures' exposition: names, units as suffixes, help texts."""
    from prometheus_client import generate_latest

    from tests.conftest import loaded_session
    from tuimon.exports.prometheus import registry_for

    plain = generate_latest(registry_for(loaded_session([FIXTURES]))).decode()
    assert "tuimon_job_iteration" in plain and "tuimon_read_bytes_total" in plain
    lint = subprocess.run([PROMTOOL, "check", "metrics"], input=plain, capture_output=True, text=True, timeout=60)
    assert lint.returncode == 0 and not (lint.stdout + lint.stderr).strip(), lint.stdout + lint.stderr


@pytest.mark.skipif(PROMTOOL is None, reason="SKIPPED: promtool not installed (apt-get install prometheus)")
def test_contrib_alerting_rules_pass_promtool():
    r = subprocess.run([PROMTOOL, "check", "rules", str(ROOT / "contrib/prometheus/tuimon-rules.yml")],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "SUCCESS: 6 rules found" in r.stdout
    json.loads((ROOT / "contrib/grafana/tuimon-dashboard.json").read_text())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.skipif(PROMETHEUS is None, reason="SKIPPED: the prometheus server is not installed "
                                               "(apt-get install prometheus); .ci/run installs it")
def test_a_real_prometheus_scrapes_tuimon_every_second(tmp_path):
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURES, logs)
    hostile = logs / 'h"o\\stile\nname-31337.log'
    hostile.write_text(" iteration        1/      10 | elapsed time per iteration (ms): 1000.0 |\n")
    serve = Serve(str(logs))
    port = _free_port()
    config = tmp_path / "prometheus.yml"
    # as contrib/prometheus/prometheus.yml: honor_labels keeps tuimon's job label (the training job) rather than
    # renaming it exported_job under the scrape job's name
    config.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n"
                      f"  - job_name: tuimon\n    honor_labels: true\n    static_configs:\n"
                      f"      - targets: ['{serve.address}']\n")
    prom = subprocess.Popen([PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)

    def query(expr: str) -> list[dict]:
        url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.load(r)["data"]["result"]

    def wait_for(expr: str, ok, timeout: float = 60.0) -> list[dict]:
        deadline = time.time() + timeout
        result: list[dict] = []
        while time.time() < deadline:
            try:
                result = query(expr)
                if ok(result):
                    return result
            except (OSError, KeyError, ValueError):
                pass
            time.sleep(0.5)
        return result

    try:
        # each job's iteration and TFLOPs are in Prometheus
        its = wait_for("tuimon_job_iteration", lambda r: len(r) == 6)
        assert {r["metric"]["job"]: float(r["value"][1]) for r in its}["stronghold-run"] == 50.0
        tflops = wait_for('tuimon_job_tflops_per_gpu{source="computed"}', lambda r: len(r) >= 2)
        assert {r["metric"]["job"] for r in tflops} >= {"stronghold-run", "megatron-deepspeed-8gpu-1234567"}
        names = {r["metric"]["path"] for r in its}
        assert str(hostile) in names  # the hostile name arrived intact
        # appending iterations raises tuimon_job_iteration within a few scrapes
        with open(logs / "megatron-deepspeed-8gpu-1234567.log", "a") as fh:
            for i in range(21, 26):
                fh.write(f" iteration {i:8d}/     100 | consumed samples: {i * 64:10d} | elapsed time per iteration "
                         f"(ms): 2500.0 | learning rate: 1.406E-06 | global batch size:    64 | lm loss: 8.5E+00 |\n")
        risen = wait_for('tuimon_job_iteration{job="megatron-deepspeed-8gpu-1234567"}',
                         lambda r: bool(r) and float(r[0]["value"][1]) == 25.0, timeout=30)
        assert risen and float(risen[0]["value"][1]) == 25.0
        # up stayed 1 through every scrape, hostile names and all
        samples = wait_for('count_over_time(up{instance="%s"}[1m])' % serve.address,
                           lambda r: bool(r) and float(r[0]["value"][1]) >= 5)
        assert float(samples[0]["value"][1]) >= 5  # scraped every second
        ups = wait_for('min_over_time(up{instance="%s"}[1m])' % serve.address, lambda r: bool(r))
        assert ups and float(ups[0]["value"][1]) == 1.0
    finally:
        prom.terminate()
        prom.wait(timeout=30)
        serve.close()


@pytest.mark.parametrize("listen", ["[]:9464", "0:9464", ":9464", "10:9464", "[0]:9464", "::1:9464", "a b:1"])
def test_a_listen_address_must_name_its_host(tmp_path, listen):
    r = subprocess.run([sys.executable, "-m", "tuimon", "serve", str(tmp_path), "--listen", listen], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert "cannot listen on" in r.stderr


def test_listen_addresses_that_are_fine():
    from tuimon.exports.listen import parse_listen

    assert parse_listen("127.0.0.1:0") == ("127.0.0.1", 0)
    assert parse_listen("0.0.0.0:9464") == ("0.0.0.0", 9464)  # every interface, asked for in full
    assert parse_listen("[::]:9464") == ("::", 9464)
    assert parse_listen("[::1]:1") == ("::1", 1)
    assert parse_listen("node-01.cluster:9464") == ("node-01.cluster", 9464)


def test_idle_connections_time_out_and_scrapes_stay_fast(monkeypatch):
    import threading

    from prometheus_client.registry import CollectorRegistry

    from tuimon.exports import prometheus

    def idle_sockets(server, n):
        port = int(server.address.rsplit(":", 1)[1])
        return [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(n)]

    # idle connections held for 30 s: an honest scrape does not wait for them (waiting would take 30 s)
    monkeypatch.setattr(prometheus, "IDLE_TIMEOUT_S", 30.0)
    server = prometheus.MetricsServer(CollectorRegistry(), "127.0.0.1:0").start()
    try:
        idle = idle_sockets(server, 60)
        t0 = time.monotonic()
        with urllib.request.urlopen(f"http://{server.address}/metrics", timeout=20) as r:
            assert r.status == 200
        assert time.monotonic() - t0 < 10.0, "an honest scrape waited for the idle connections"
        for s in idle:
            s.close()
    finally:
        server.close()
    # and each idle connection is let go after its timeout: the server closes it, its thread ends
    monkeypatch.setattr(prometheus, "IDLE_TIMEOUT_S", 0.5)
    server = prometheus.MetricsServer(CollectorRegistry(), "127.0.0.1:0").start()
    try:
        before = threading.active_count()
        idle = idle_sockets(server, 30)
        for s in idle:
            assert s.recv(1) == b"", "an idle connection was kept open"
            s.close()
        deadline = time.monotonic() + 10
        while threading.active_count() > before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert threading.active_count() <= before, "threads of idle connections are still there"
    finally:
        server.close()


def test_a_scrape_does_not_wait_for_a_busy_session(tmp_path):
    """While the session's lock is held (a big job being judged), a scrape answers
    within a fraction of a second with the figures of the scrape before."""
    import threading

    from prometheus_client.exposition import generate_latest

    from tuimon.exports.prometheus import registry_for
    from tuimon.live.session import LiveSession

    shutil.copy(FIXTURES / "megatron-deepspeed-8gpu-1234567.log", tmp_path)
    session = LiveSession([str(tmp_path)], poll=0.1)
    session.start()
    try:
        deadline = time.monotonic() + 20
        while not session.snapshot().rows and time.monotonic() < deadline:
            time.sleep(0.1)
        registry = registry_for(session)
        first = generate_latest(registry).decode()
        assert "tuimon_job_iteration" in first
        held = threading.Event()

        def busy() -> None:
            with session.lock:
                held.set()
                time.sleep(2.0)
        threading.Thread(target=busy).start()
        held.wait(5)
        t0 = time.monotonic()
        again = generate_latest(registry).decode()
        assert time.monotonic() - t0 < 1.0, "the scrape waited for the session"
        assert [ln for ln in again.splitlines() if ln.startswith("tuimon_job_iteration")] == \
            [ln for ln in first.splitlines() if ln.startswith("tuimon_job_iteration")]
    finally:
        session.stop()


def test_a_crowd_of_scrapers_is_answered_from_one_collection():
    """The exporter listens with the system's backlog (socketserver's is 5: 200 scrapers at once met
    resets and 31 s at p99), and scrapes within FRESH_S share one collection: 200 at once are all
    answered, and the collector runs a handful of times, not 200."""
    import threading

    from prometheus_client.registry import CollectorRegistry

    from tuimon.exports import prometheus

    calls = [0]

    class Slow:
        def collect(self):
            calls[0] += 1
            time.sleep(0.05)  # a collection that takes a while, as a big session's does
            g = prometheus.GaugeMetricFamily("tuimon_test_gauge", "a figure")
            g.add_metric([], 1.0)
            yield g

    registry = CollectorRegistry(auto_describe=False)
    registry.register(Slow())
    server = prometheus.MetricsServer(registry, "127.0.0.1:0").start()
    try:
        port = int(server.address.rsplit(":", 1)[1])
        listening = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True).stdout
        if listening.split():
            assert int(listening.split()[2]) == socket.SOMAXCONN or int(listening.split()[2]) >= 128, listening
        start = threading.Barrier(200)
        answers: list[int] = []
        errors: list[str] = []

        def scrape() -> None:
            start.wait()
            try:
                with urllib.request.urlopen(f"http://{server.address}/metrics", timeout=60) as r:
                    answers.append(r.status if b"tuimon_test_gauge 1.0" in r.read() else -1)
            except OSError as exc:
                errors.append(repr(exc))
        threads = [threading.Thread(target=scrape) for _ in range(200)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        assert errors == [] and answers == [200] * 200, (errors[:3], len(answers))
        assert calls[0] <= 20, calls[0]  # one collection serves the scrapes of its half second
    finally:
        server.close()
