"""Files parsed on several processes, each into a store of its own merged in file
order, leave the store as their events added in turn would: same summaries, same
series, same facts; a worker that dies costs time, not data."""
from __future__ import annotations

import json
import os
import signal

import pytest

from tests.conftest import FIXTURES, SHARED
from tuimon.engine import pool
from tuimon.engine.ingest import parse_file
from tuimon.engine.pool import parse_files_into
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
    errors: list = []
    for path in files:
        store.add_file(str(path))
    stats = parse_files_into(store, files, jobs=jobs, on_error=lambda p, e: errors.append(p.name))
    return _state(store), stats, errors


def _state(store: JobStore) -> list[str]:
    """What the store keeps, as text: summaries and the facts they come from."""
    out = []
    for job in store.jobs.values():
        out.append(json.dumps(summarize(job, now=0.0).as_dict(), sort_keys=True, default=str))
        # (the memory figures' order is when each was first seen: no figure reads it)
        out.append(repr((job.files, job.frameworks, job.last_progress, job.last_lr, job.last_iteration,
                         job.last_losses, job.config, sorted(job.memory.items()), job.first_wall, job.last_wall,
                         job.first_step_wall,
                         job.events, job.truncations, job.milestones, job.failures, job.exits, job.checkpoints,
                         # a file's timer totals are summed, then added: equal to the last bits only
                         sorted((k, v.group, f"{v.total_ms:.9g}", v.count, v.last_ms) for k, v in job.timers.items()))))
        for key, series in [*job.ranks.items(), ("steps", job.steps), ("reported", job.reported)]:
            out.append(f"{key}: {series.points.tobytes().hex()}")
    return out


def _replayed(files) -> list[str]:
    """The reference: every file's events added to one store, file after file."""
    store = JobStore()
    for path in files:
        store.add_file(str(path))
    for path in files:
        if path.exists():
            store.add(parse_file(path)[0])
    return _state(store)


def test_many_files_on_several_processes(tmp_path):
    files = _copies(tmp_path) + [tmp_path / "missing.log"]
    one, two = _run(files, 1), _run(files, 2)
    assert one == two
    assert one[2] == ["missing.log"]
    assert one[0] == _replayed(files), "merged stores hold what the events added in turn would"


def _split_job(tmp_path, path, parts: int) -> list:
    """One job's log cut into the files of one Slurm job (.out, .err, .log: one job, one rank key)."""
    lines = path.read_bytes().splitlines(keepends=True)
    step = max(1, len(lines) // parts)
    out = []
    for k in range(parts):
        dst = tmp_path / f"slurm-7770001{('.out', '.err', '.log')[k]}"
        dst.write_bytes(b"".join(lines[k * step:(k + 1) * step if k < parts - 1 else len(lines)]))
        out.append(dst)
    return out


@pytest.mark.parametrize("name", ["stronghold-run.log", "megatron-deepspeed-8gpu-1234567.log",
                                  "cancelled-777001.out"])
def test_a_job_in_several_files_merges_as_its_events_would_add(tmp_path, name):
    files = _split_job(tmp_path, FIXTURES / name, 3)
    assert _run(files, 1)[0] == _replayed(files)


def test_corpus_merges_as_its_events_would_add(tmp_path):
    corpus = SHARED / "corpus"
    if not corpus.exists():
        pytest.skip(f"SKIPPED: {corpus} not found -- the corpus comparison needs ../shared")
    files = sorted(corpus.rglob("*.log"))
    assert _run(files, 2)[0] == _replayed(files)


def test_spawned_workers_give_one_pass(tmp_path, monkeypatch):
    """Where fork is unsafe (threads running) workers are spawned and start from nothing."""
    import multiprocessing

    monkeypatch.setattr(pool, "process_context", lambda: multiprocessing.get_context("spawn"))
    files = _copies(tmp_path, 1)
    assert _run(files, 2) == _run(files, 1)


def _dies(path, spec, *rest):
    os.kill(os.getpid(), signal.SIGKILL)  # what the host's OOM killer does


def test_small_files_whose_worker_dies_are_read_here(tmp_path, monkeypatch):
    import multiprocessing

    # forked even where threads run (pytest-xdist's): the child sees the wrapper and only dies
    monkeypatch.setattr(pool, "process_context", lambda: multiprocessing.get_context("fork"))
    monkeypatch.setattr(pool, "_parse_batch", _dies)
    files = _copies(tmp_path, 1)
    assert _run(files, 2) == _run(files, 1)


def test_a_pool_that_breaks_while_tasks_are_handed_out_leaves_the_rest_read_here(tmp_path, monkeypatch):
    """A worker that dies before every task is handed out breaks the pool: submit raises (a race the
    test above met on a busy machine); the tasks not handed out are read here."""
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    handed = []

    def submit(self, fn, *args, **kwargs):
        if handed:
            raise BrokenProcessPool("a child process terminated abruptly")
        handed.append(args[0])
        return real(self, fn, *args, **kwargs)

    real = ProcessPoolExecutor.submit
    monkeypatch.setattr(ProcessPoolExecutor, "submit", submit)
    files = _copies(tmp_path, 1)
    assert _run(files, 2) == _run(files, 1)
    assert len(handed) == 1 and len(handed[0]) < len(files)  # (one task went to the workers, the rest here)


def test_small_files_go_to_the_workers_together_and_give_what_one_process_gives(tmp_path, monkeypatch):
    """A task a batch of small files (one a file, a task's start-up was twice the work on two workers):
    the store the same as --jobs 1's, a file that fails in a batch read here and reported, once."""
    files = _copies(tmp_path, 3)
    tasks = pool.batches(files, {p: p.stat().st_size for p in files}, 2)
    # 18 files, at least 4 tasks a worker: 3 files a task at most, in the order given
    assert [len(t) for t in tasks] == [3] * 6 and [p for t in tasks for p in t] == files
    assert pool.batches(files, {p: pool.BATCH_BYTES for p in files}, 2) == [[p] for p in files]
    assert _run(files, 2) == _run(files, 1)
    gone = files[4]
    real = pool.parse_file_store

    def fails_once_there(path, *args, **kwargs):  # (in the forked worker only: its failure is read here)
        if path == gone and os.getpid() != parent:
            raise MemoryError("the worker ran short")
        return real(path, *args, **kwargs)

    import multiprocessing

    parent = os.getpid()
    monkeypatch.setattr(pool, "process_context", lambda: multiprocessing.get_context("fork"))
    monkeypatch.setattr(pool, "parse_file_store", fails_once_there)
    assert _run(files, 2) == _run(files, 1)


def test_a_big_file_is_read_here_beside_the_workers(tmp_path, monkeypatch):
    monkeypatch.setattr(pool, "WORKER_MAX", 4096)
    files = _copies(tmp_path, 1)
    big = tmp_path / "big.log"
    big.write_bytes(b"".join(f.read_bytes() for f in files))
    files.append(big)
    assert _run(files, 2) == _run(files, 1)


def test_several_big_files_are_read_on_every_core(tmp_path, monkeypatch):
    """The biggest file is read here, every other big one by a worker (a directory of big
    logs was read one file after the other): the store is the same as --jobs 1's."""
    monkeypatch.setattr(pool, "WORKER_MAX", 4096)
    from concurrent.futures import ProcessPoolExecutor  # (the pool imports it with its first worker)

    sent: list[str] = []
    real_submit = ProcessPoolExecutor.submit

    def submit(self, fn, paths, *args):
        sent.extend(os.path.basename(path) for path in paths)
        return real_submit(self, fn, paths, *args)

    monkeypatch.setattr(ProcessPoolExecutor, "submit", submit)
    files = _copies(tmp_path, 1)
    bigs = []
    for k in range(3):
        big = tmp_path / f"big{k}.log"
        big.write_bytes(b"".join(f.read_bytes() for f in files) * (4 - k))  # big0 > big1 > big2 > the others
        bigs.append(big)
    files = [bigs[2], *files, bigs[0], bigs[1]]
    assert _run(files, 2) == _run(files, 1) and _run(files, 1)[0] == _replayed(files)
    assert "big0.log" not in sent, "the biggest is read here"
    assert sent[:2] == ["big1.log", "big2.log"], "the other big ones go to workers, the biggest first"


@pytest.mark.parametrize("to", ["group", "parent", "term", "kill"])
def test_ctrl_c_ends_a_summary_read_by_several_processes_at_once(tmp_path, to):
    """Ctrl-C (SIGINT to the terminal's process group, or to tuimon alone) while worker processes read:
    the summary exits 130 at once (it waited for the files being read: 4.9-5.6 s on 345 MB) and leaves no
    worker behind. (Measured: 0.01 s; the bound here leaves room for a busy machine.)  A SIGTERM (what
    ``timeout`` sends) or a SIGKILL give tuimon no time to stop them: the kernel does (its workers
    read on, orphaned, for 17 minutes)."""
    import subprocess
    import sys
    import time

    from tests.conftest import ROOT

    line = (" iteration {i:8d}/ 1000000 | consumed samples: {c} | elapsed time per iteration (ms): 1234.5 | "
            "learning rate: 1.000E-04 | global batch size:   512 | lm loss: 2.345678E+00 | loss scale: 1.0 |\n")
    chunk = "".join(line.format(i=j, c=j * 512) for j in range(5000))
    for k in range(4):  # big enough to read for seconds: the Ctrl-C comes mid-read
        (tmp_path / f"job-{k}.out").write_text(chunk * 60)
    proc = subprocess.Popen([sys.executable, "-m", "tuimon", "summary", "--no-cache", "--jobs", "3", str(tmp_path)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    workers: list[str] = []
    while len(workers) < 2 and proc.poll() is None and time.monotonic() < deadline:  # the workers read
        workers = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
        time.sleep(0.05)
    assert len(workers) >= 2 and proc.poll() is None
    time.sleep(0.5)
    asked = time.monotonic()
    if to == "group":
        os.killpg(proc.pid, signal.SIGINT)
    else:
        proc.send_signal({"parent": signal.SIGINT, "term": signal.SIGTERM, "kill": signal.SIGKILL}[to])
    proc.communicate(timeout=60)
    took = time.monotonic() - asked
    expected = {"term": -signal.SIGTERM, "kill": -signal.SIGKILL}.get(to, 130)
    assert proc.returncode == expected and took < 3.0, (proc.returncode, took)
    def alive(pid: str) -> bool:  # running (a zombie waits only for its reaping)
        try:
            with open(f"/proc/{pid}/stat") as fh:
                return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
        except OSError:
            return False
    while any(map(alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(map(alive, workers)), "a worker outlived the summary"
