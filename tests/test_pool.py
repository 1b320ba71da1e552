"""Files parsed on several processes give what one pass gives: same events in the
same order, same stats, same summaries; a worker that dies costs time, not events."""
from __future__ import annotations

import json
import os
import signal

import pytest

from tests.conftest import FIXTURES
from tuimon.engine import pool
from tuimon.engine.pool import parse_files
from tuimon.figures.summary import summarize
from tuimon.store.job_store import JobStore


def _copies(tmp_path, times=2):
    files = []
    for i, src in enumerate(sorted(FIXTURES.iterdir()) * times):
        dst = tmp_path / f"r{i:02d}-{src.name}"
        dst.write_bytes(src.read_bytes())
        files.append(dst)
    return files


def _run(files, jobs):
    store = JobStore()
    events: list = []
    errors: list = []

    def sink(batch):
        events.extend(batch)
        store.add(batch)

    stats = parse_files(files, sink, jobs=jobs, on_error=lambda p, e: errors.append(p.name))
    summary = json.dumps([summarize(j, now=0.0) for j in store.jobs.values()], sort_keys=True, default=str)
    return [json.dumps(e.to_dict(), sort_keys=True) for e in events], summary, stats, errors


def test_many_files_on_several_processes(tmp_path):
    files = _copies(tmp_path) + [tmp_path / "missing.log"]
    one, two = _run(files, 1), _run(files, 2)
    assert one == two
    assert one[3] == ["missing.log"]
    assert len(one[0]) > 100


def test_spawned_workers_give_one_pass(tmp_path, monkeypatch):
    """Where fork is unsafe (threads running) workers are spawned and start from nothing."""
    import multiprocessing

    monkeypatch.setattr(pool, "process_context", lambda: multiprocessing.get_context("spawn"))
    files = _copies(tmp_path, 1)
    assert _run(files, 2) == _run(files, 1)


def _dies(path, spec):
    os.kill(os.getpid(), signal.SIGKILL)  # what the host's OOM killer does


def test_small_files_whose_worker_dies_are_read_here(tmp_path, monkeypatch):
    if pool.process_context().get_start_method() != "fork":
        pytest.skip("SKIPPED: workers are not forked here, so they do not see this test's wrapper")
    monkeypatch.setattr(pool, "_parse_whole", _dies)
    files = _copies(tmp_path, 1)
    assert _run(files, 2) == _run(files, 1)


def test_a_big_file_is_read_here_beside_the_workers(tmp_path, monkeypatch):
    monkeypatch.setattr(pool, "WORKER_MAX", 4096)
    files = _copies(tmp_path, 1)
    big = tmp_path / "big.log"
    big.write_bytes(b"".join(f.read_bytes() for f in files))
    files.append(big)
    assert _run(files, 2) == _run(files, 1)
