"""A big file parsed by a worker beside what takes its events (tuimon.engine.pipeline): the
same events, in the same order, and the same parser state at the end as one process's read; a
worker that dies or fails costs time, not data, and no worker outlives its parent's read."""
from __future__ import annotations

import json
import multiprocessing
import os
import signal
import threading
import time

import pytest

from tests.conftest import FIXTURES, SHARED
from tests.test_pool import _state
from tuimon.engine import guard, pipeline
from tuimon.engine.cache import ParseCache
from tuimon.engine.ingest import FileParser, parse_file, parse_file_store
from tuimon.engine.pool import parse_files_into
from tuimon.parsers.columns import expand
from tuimon.store.job_store import JobStore


@pytest.fixture
def beside(monkeypatch):
    """Every file parsed beside (no size bar), fork allowed where pytest-xdist runs threads; the
    list of the worker reads that ran (a read that fell back to one process would prove nothing)."""
    monkeypatch.setattr(pipeline, "BESIDE_MIN", 0)
    monkeypatch.setattr(pipeline, "fork_is_safe", lambda: True)
    ran: list[bool] = []
    real = pipeline.parse_beside

    def spy(*args, **kwargs):
        done = real(*args, **kwargs)
        ran.append(done is not None)
        return done

    monkeypatch.setattr(pipeline, "parse_beside", spy)
    return ran


@pytest.fixture
def forked(monkeypatch):
    """The worker forked even where an earlier test left a thread running in this pytest-xdist worker."""
    monkeypatch.setattr(pipeline, "fork_is_safe", lambda: True)


def _logs() -> list:
    files = sorted(FIXTURES.iterdir())
    corpus = SHARED / "corpus"
    if corpus.exists():
        files += sorted(p for p in corpus.rglob("*") if p.is_file() and p.suffix != ".tsv")
    else:
        print(f"SKIPPED (in part): {corpus} not found -- only the fixtures are read beside")
    return files


def _store_state(store: JobStore, stats) -> list:
    return [*_state(store), repr(stats)]


def test_every_log_read_beside_gives_the_one_process_store_and_stats(beside):
    """Fixtures and corpus, in blocks of 64 KiB (many blocks a file, events of a line split
    between blocks): the store, its summaries and the stats are those of a read in one process."""
    logs = _logs()
    for path in logs:
        one = _store_state(*parse_file_store(path, str(path), read_size=1 << 16))
        two = _store_state(*parse_file_store(path, str(path), read_size=1 << 16, beside=True))
        assert two == one, path
    assert beside == [True] * len(logs)


def test_events_read_beside_are_those_of_one_process_in_order(beside):
    """``tuimon events``' path: the items handed to the sink, block by block, expand to the same
    events (rows and all), and the stats are the same."""
    for path in sorted(FIXTURES.iterdir()):
        one: list = []
        two: list = []
        _, stats_one = parse_file(path, str(path), sink=one.append, read_size=4096)
        _, stats_two = parse_file(path, str(path), sink=two.append, read_size=4096, beside=True)
        assert [expand(items) for items in two] == [expand(items) for items in one], path
        assert stats_two == stats_one
    assert all(beside) and beside


def test_the_parser_state_that_comes_back_reads_on_as_the_one_that_read(beside, tmp_path):
    """The state the worker hands back is what the parse cache saves: a file read beside, then grown,
    is read on from that state to what a read of the whole grown file gives."""
    src = FIXTURES / "megatron-deepspeed-8gpu-1234567.log"
    lines = src.read_bytes().splitlines(keepends=True)
    log = tmp_path / "run.log"
    log.write_bytes(b"".join(lines[:len(lines) // 2]))
    cache = ParseCache(tmp_path / "cache" / "parse-cache.sqlite3", key="k")
    parse_file_store(log, str(log), cache=cache, read_size=4096, beside=True)
    with open(log, "ab") as fh:
        fh.write(b"".join(lines[len(lines) // 2:]))
    grown = _store_state(*parse_file_store(log, str(log), cache=cache, read_size=4096, beside=True))
    cache.close()
    whole = _store_state(*parse_file_store(log, str(log), read_size=4096))
    assert grown[:-1] == whole[:-1]  # (the stats differ: the cache's share is told)
    assert beside == [True, True]


def _killed_on(nth: int, monkeypatch) -> None:
    """The worker (only: not this process) killed as it is given its ``nth`` block: the kernel's
    OOM killer, or a user's ``kill -9``."""
    parent, fed = os.getpid(), [0]
    real = FileParser.feed

    def feed(self, data):
        if os.getpid() != parent:
            fed[0] += 1
            if fed[0] == nth:
                os.kill(os.getpid(), signal.SIGKILL)
        return real(self, data)

    monkeypatch.setattr(FileParser, "feed", feed)


def test_a_killed_worker_costs_time_not_data(beside, monkeypatch):
    path = FIXTURES / "megatron-deepspeed-8gpu-1234567.log"
    one = _store_state(*parse_file_store(path, str(path), read_size=2048))
    told: list[int] = []
    _killed_on(4, monkeypatch)
    assert _store_state(*parse_file_store(path, str(path), read_size=2048, on_bytes=told.append,
                                          beside=True)) == one
    assert sum(told) == path.stat().st_size, "each byte told to the progress display once"
    assert beside == [], "the worker read ended in WorkerLost, then the file was read here"
    assert not multiprocessing.active_children()


def test_a_killed_worker_gives_each_event_once_and_leaves_no_cache_entry(beside, monkeypatch, tmp_path):
    """``tuimon events``: the events handed on before the worker died are not handed on again; the cache
    entry being written had them, so it is dropped (the next read parses the file again, to the same)."""
    path = tmp_path / "run.log"
    path.write_bytes((FIXTURES / "megatron-deepspeed-8gpu-1234567.log").read_bytes())
    one: list = []
    parse_file(path, str(path), sink=one.extend, read_size=2048)
    _killed_on(6, monkeypatch)
    cache = ParseCache(tmp_path / "cache" / "parse-cache.sqlite3", key="k")
    two: list = []
    parse_file(path, str(path), sink=two.extend, read_size=2048, cache=cache, beside=True)
    assert expand(two) == expand(one)
    monkeypatch.undo()
    three: list = []
    parse_file(path, str(path), sink=three.extend, read_size=2048, cache=cache)
    cache.close()
    assert expand(three) == expand(one)


def _pieces(n: int, size: int = 10):
    for k in range(n):
        yield size, bytes([65 + k % 26]) * size


def test_the_worker_is_another_process_and_pieces_come_in_order(forked):
    got: list = []
    told: list[int] = []
    passed, state = pipeline.parse_beside(_pieces(50), lambda data: [(os.getpid(), data[:1])],
                                          lambda: "end", got.append, told.append)
    assert passed == 500 and sum(told) == 500 and state == "end"
    assert [d for (_, d), in got] == [bytes([65 + k % 26]) for k in range(50)]
    assert {pid for (pid, _), in got} != {os.getpid()} and len({pid for (pid, _), in got}) == 1


def test_a_hole_passed_over_is_told_and_not_parsed(forked):
    fed: list = []
    got: list = []
    passed, _ = pipeline.parse_beside(iter([(5, b"abcde"), (1 << 20, b""), (3, b"xyz")]),
                                      lambda data: [data], lambda: None, got.append, fed.append)
    assert passed == 5 + (1 << 20) + 3 and fed == [5, 1 << 20, 3] and got == [[b"abcde"], [b"xyz"]]


def test_what_reading_raised_in_the_worker_is_raised_here(forked):
    def fails(data):
        raise OSError(5, "Input/output error")

    with pytest.raises(OSError) as info:
        pipeline.parse_beside(_pieces(3), fails, lambda: None, lambda e: None)
    assert info.value.errno == 5
    assert not multiprocessing.active_children()


class _Unpicklable(Exception):
    def __init__(self, a, b):
        super().__init__(a)  # (rebuilt from its args alone, it cannot be made)


def test_an_error_that_cannot_cross_is_told_by_its_text(forked):
    def fails(data):
        raise _Unpicklable("a hook broke", 2)

    with pytest.raises(RuntimeError, match="_Unpicklable: a hook broke"):
        pipeline.parse_beside(_pieces(3), fails, lambda: None, lambda e: None)


def test_no_worker_is_forked_while_threads_run():
    """(fork copies only the thread that calls it: a lock another thread held stays held in the child)"""
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert pipeline.parse_beside(_pieces(3), lambda d: [d], lambda: None, lambda e: None) is None
    finally:
        stop.set()
        thread.join()


def test_ctrl_c_here_ends_the_worker(forked):
    """Ctrl-C while the events are taken (or anything raised taking them) ends the worker at once: it
    would read on for minutes, orphaned; the worker itself ignores SIGINT (no second traceback)."""
    def take(events):
        raise KeyboardInterrupt

    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        pipeline.parse_beside(_pieces(10 ** 9), lambda d: [d], lambda: None, take)
    assert not multiprocessing.active_children() and time.monotonic() - t0 < 30


def test_a_format_the_worker_turned_off_stays_off_here(monkeypatch, forked):
    monkeypatch.setattr(guard, "_disabled", {})
    monkeypatch.setattr(guard, "_untold", [])

    def feed(data):
        guard.disable("slowfmt", "a regex ran over its bound")
        return []

    pipeline.parse_beside(_pieces(2), feed, lambda: None, lambda e: None)
    assert guard.is_disabled("slowfmt") and len(guard.take_new()) == 1


def test_one_big_file_is_read_beside_its_store_and_many_files_by_the_pool(beside, tmp_path):
    """The batch read of one file on two cores parses it beside the store (no pool: one file); of
    several files, the pool's workers read them (no worker beside: the cores are taken)."""
    log = tmp_path / "run.log"
    log.write_bytes((FIXTURES / "megatron-deepspeed-8gpu-1234567.log").read_bytes())

    def run(files, jobs):
        store = JobStore()
        for path in files:
            store.add_file(str(path))
        parse_files_into(store, files, jobs=jobs, on_error=lambda p, e: None)
        return _state(store)

    assert run([log], 2) == run([log], 1)
    assert beside == [True], "jobs 1 reads in one process; jobs 2 parses beside"
    beside.clear()
    other = tmp_path / "other.log"
    other.write_bytes((FIXTURES / "stronghold-run.log").read_bytes())
    assert run([log, other], 2) == run([log, other], 1)
    assert beside == []


def test_cli_events_and_summary_read_beside_give_one_process_output(beside, run_cli, tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    for name in ("megatron-deepspeed-8gpu-1234567.log", "stronghold-run.log"):
        (logs / name).write_bytes((FIXTURES / name).read_bytes())
    for verb in (["events"], ["summary", "--format", "json"]):
        one = run_cli(*verb, "--no-cache", "--jobs", "1", str(logs / "stronghold-run.log"))
        two = run_cli(*verb, "--no-cache", "--jobs", "2", str(logs / "stronghold-run.log"))
        assert one[0] == two[0] == 0 and one[1] == two[1] and one[1]
    assert beside == [True, True]
    code, out, _ = run_cli("events", "--no-cache", "--jobs", "2", str(logs))
    assert code == 0 and all(json.loads(line) for line in out.splitlines())
