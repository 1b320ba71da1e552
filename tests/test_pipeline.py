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
    return _spied(monkeypatch, "parse_beside")


def _spied(monkeypatch, name: str) -> list[bool]:
    """Whether each call of ``pipeline.<name>`` read with workers (None: it could not start them)."""
    ran: list[bool] = []
    real = getattr(pipeline, name)

    def spy(*args, **kwargs):
        done = real(*args, **kwargs)
        ran.append(done is not None)
        return done

    monkeypatch.setattr(pipeline, name, spy)
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


def _at_worker_block(nth: int, act, monkeypatch) -> None:
    """``act()`` in a worker (only: not this process) as it is given its ``nth`` block."""
    parent, fed = os.getpid(), [0]
    real = FileParser.feed

    def feed(self, data):
        if os.getpid() != parent:
            fed[0] += 1
            if fed[0] == nth:
                act()
        return real(self, data)

    monkeypatch.setattr(FileParser, "feed", feed)


def _killed_on(nth: int, monkeypatch) -> None:
    """The worker killed as it is given its ``nth`` block: the kernel's OOM killer, or ``kill -9``."""
    _at_worker_block(nth, lambda: os.kill(os.getpid(), signal.SIGKILL), monkeypatch)


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


@pytest.mark.parametrize("name, read_size, nth", [("megatron-deepspeed-8gpu-1234567.log", 2048, 6),
                                                   ("stronghold-run.log", 512, 8)])
def test_a_killed_worker_gives_each_event_once_and_leaves_no_cache_entry(beside, monkeypatch, tmp_path, name,
                                                                           read_size, nth):
    """``tuimon events``: the events handed on before the worker died are not handed on again (a row of
    DeepSpeed's step lines is its Step, Throughput and Memory: counted as the events it stands for); the
    cache entry being written had them, so it is dropped (the next read parses the file again, to the same)."""
    path = tmp_path / "run.log"
    path.write_bytes((FIXTURES / name).read_bytes())
    one: list = []
    parse_file(path, str(path), sink=one.extend, read_size=read_size)
    _killed_on(nth, monkeypatch)
    cache = ParseCache(tmp_path / "cache" / "parse-cache.sqlite3", key="k")
    two: list = []
    parse_file(path, str(path), sink=two.extend, read_size=read_size, cache=cache, beside=True)
    assert expand(two) == expand(one)
    monkeypatch.undo()
    three: list = []
    parse_file(path, str(path), sink=three.extend, read_size=read_size, cache=cache)
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


def test_what_the_worker_raised_is_the_cause_of_its_loss(forked):
    def fails(data):
        raise OSError(5, "Input/output error")

    with pytest.raises(pipeline.WorkerLost) as info:
        pipeline.parse_beside(_pieces(3), fails, lambda: None, lambda e: None)
    assert isinstance(info.value.__cause__, OSError) and info.value.__cause__.errno == 5
    assert not multiprocessing.active_children()


class _Unpicklable(Exception):
    def __init__(self, a, b):
        super().__init__(a)  # (rebuilt from its args alone, it cannot be made)


def test_an_error_that_cannot_cross_is_told_by_its_text(forked):
    def fails(data):
        raise _Unpicklable("a hook broke", 2)

    with pytest.raises(pipeline.WorkerLost) as info:
        pipeline.parse_beside(_pieces(3), fails, lambda: None, lambda e: None)
    assert isinstance(info.value.__cause__, RuntimeError) and "_Unpicklable: a hook broke" in str(info.value)


def _fails_there(nth: int, error: BaseException, monkeypatch) -> None:
    """A worker raises ``error`` as it is given its ``nth`` block."""
    def fail() -> None:
        raise error

    _at_worker_block(nth, fail, monkeypatch)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_worker_that_fails_costs_time_not_data(pieces, monkeypatch, workers):
    """A worker short of memory (its own), or any error of its own: the file is read again here, to the
    same store; an error of the file's would be met again here, and raised as a read in one process does."""
    path = FIXTURES / "megatron-deepspeed-8gpu-1234567.log"
    one = _store_state(*parse_file_store(path, str(path), read_size=512))
    _fails_there(5, MemoryError("the worker ran short"), monkeypatch)
    told: list[int] = []
    assert _store_state(*parse_file_store(path, str(path), read_size=512, on_bytes=told.append,
                                          beside=workers)) == one
    assert sum(told) == path.stat().st_size and not multiprocessing.active_children()


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


# -- a file in pieces, on several workers ----------------------------------------------------------
@pytest.fixture
def pieces(monkeypatch, beside):
    """Pieces of 2 KiB (every fixture is cut in many places); how many blocks this process parsed
    again (``here``, a list of one count) beside the worker reads that ran."""
    monkeypatch.setattr(pipeline, "PIECE_BYTES", 2048)
    ran = _spied(monkeypatch, "parse_in_pieces")
    parent, here = os.getpid(), [0]
    feed = FileParser.feed

    def counted(self, data):
        if os.getpid() == parent:
            here[0] += 1
        return feed(self, data)

    monkeypatch.setattr(FileParser, "feed", counted)
    return ran, here


def _megatron_with_bad_lines(tmp_path):
    """A Megatron log with invalid UTF-8, NULs and lines too long for the framer in several places."""
    from tuimon.sources import framing

    lines = (FIXTURES / "megatron-deepspeed-8gpu-1234567.log").read_bytes().splitlines(keepends=True)
    out = []
    for k, line in enumerate(lines):
        out.append(line)
        if k % 17 == 5:
            out.append(b"garbage \xff\xfe\x00 bytes\n")
        if k % 41 == 7:
            out.append(b"x" * (framing.DEFAULT_MAX_LINE + 10) + b"\n")
    path = tmp_path / "bad.log"
    path.write_bytes(b"".join(out))
    return path


@pytest.mark.parametrize("workers", [2, 3])
def test_a_file_in_pieces_gives_the_one_process_store_and_stats(pieces, tmp_path, workers, monkeypatch):
    """Every fixture (pieces of 256 bytes: all but the smallest are cut), and a log with invalid UTF-8
    and lines too long (the stats' counts summed over the pieces)."""
    ran, here = pieces
    monkeypatch.setattr(pipeline, "PIECE_BYTES", 256)
    logs = [*sorted(FIXTURES.iterdir()), _megatron_with_bad_lines(tmp_path)]
    blocks = again = 0
    for path in logs:
        one = _store_state(*parse_file_store(path, str(path), read_size=64))
        here[0] = 0
        two = _store_state(*parse_file_store(path, str(path), read_size=64, beside=workers))
        if path.parent == FIXTURES:  # (the other's pieces are its lines of a megabyte: parsed here, mostly)
            blocks += -(-path.stat().st_size // 64)
            again += here[0]
        assert two == one, path
    assert ran == [True] * sum(p.stat().st_size >= 512 for p in logs)  # (a smaller one has no two pieces)
    assert 0 < again < blocks, "some blocks are parsed again here, some are the workers' alone"


def test_the_corpus_in_pieces_gives_the_one_process_store(pieces, monkeypatch):
    corpus = SHARED / "corpus"
    if not corpus.exists():
        pytest.skip(f"SKIPPED: {corpus} not found -- the corpus read in pieces needs ../shared")
    monkeypatch.setattr(pipeline, "PIECE_BYTES", 1 << 16)
    for path in sorted(p for p in corpus.rglob("*") if p.is_file() and p.suffix != ".tsv"):
        one = _store_state(*parse_file_store(path, str(path), read_size=1 << 13))
        assert _store_state(*parse_file_store(path, str(path), read_size=1 << 13, beside=2)) == one, path
    assert any(pieces[0])


def _plan(path, starts, read_size):
    """Pieces of ``path`` whose first lines are these (numbers, 1 first), each read from its start:
    the grid of a read in order whose reads end at those lines' starts too."""
    from tuimon.engine.pipeline import Piece

    data = path.read_bytes()
    at = [0] + [k + 1 for k, byte in enumerate(data) if byte == 10]
    starts = sorted({1, *starts})
    ends = [at[s - 1] for s in starts[1:]] + [len(data)]
    return [Piece(at[s - 1], at[s - 1], end, s) for s, end in zip(starts, ends)]


def _in_order(path, plan, read_size) -> list:
    """The events of one parser fed the plan's blocks in turn (the read in order on that grid)."""
    parser = FileParser(str(path))
    out: list = []
    with open(path, "rb") as fh:
        for piece in plan:
            at = piece.grid
            while at < piece.end:
                data = os.pread(fh.fileno(), min(read_size, piece.end - at), at)
                at += len(data)
                out.extend(parser.feed(data))
    return expand(out + parser.finish())


def test_cuts_at_every_line_of_a_stretch_and_at_random_lines(forked):
    """A piece may start at any line: in a Megatron argument block, a timer report, a traceback,
    between the lines of an iteration (each cut of a stretch of lines, then random sets of cuts): the
    events are those of one parser reading the same blocks in turn."""
    import random

    from tuimon.engine.ingest import _formats

    rng = random.Random(46)
    met = 0
    for name in ("megatron-deepspeed-8gpu-1234567.log", "stronghold-run.log", "nccl-timeout-555001.out"):
        path = FIXTURES / name
        n = path.read_bytes().count(b"\n")
        plans = [[k] for k in range(2, min(n, 120))] + [rng.sample(range(2, n), 5) for _ in range(20)]
        with open(path, "rb") as fh:
            for starts in plans:
                plan = _plan(path, starts, 256)
                first = FileParser(str(path))
                got: list = []
                passed, state = pipeline.parse_in_pieces(
                    fh.fileno(), plan, first, lambda line, before: FileParser.at_line(str(path), None, line),
                    lambda p: p.engine.attach(*_formats(None)), 256, got.extend, None, 2)
                assert passed == path.stat().st_size
                assert expand(got + state.finish()) == _in_order(path, plan, 256), (name, starts)
                met += state is not first
    assert met


def test_a_cut_falls_where_the_read_in_order_ends_a_block(tmp_path):
    """Pieces follow each other (a piece's grid is the one before's end), each read from where the read in
    order is (a multiple of the read size from the start), its first line's start the bytes after the last
    line end before it (no carriage return in them), and numbered as that line is."""
    lines = [(f"line {k} " + "x" * (k * 37 % 300) + ("\r progress\r" if k % 13 == 0 else "") + "\n").encode()
             for k in range(40_000)]
    path = tmp_path / "run.log"
    path.write_bytes(b"".join(lines))
    data = path.read_bytes()
    pipeline_bytes = pipeline.PIECE_BYTES
    try:
        pipeline.PIECE_BYTES = 1 << 16
        with open(path, "rb") as fh:
            for offset, first_line in ((0, 1), (sum(map(len, lines[:100])), 101)):
                cut = pipeline.cut(fh.fileno(), offset, len(data), first_line, 4096)
                assert len(cut) > 20 and cut[0].start == cut[0].grid == offset and cut[-1].end == len(data)
                for before, piece in zip(cut, cut[1:]):
                    assert piece.grid == before.end and (piece.grid - offset) % 4096 == 0
                    held = data[piece.start:piece.grid]
                    assert data[piece.start - 1:piece.start] == b"\n" and b"\n" not in held and b"\r" not in held
                    assert piece.line == data[:piece.start].count(b"\n") + 1
    finally:
        pipeline.PIECE_BYTES = pipeline_bytes


def test_pieces_whose_states_never_meet_are_parsed_here(pieces, monkeypatch):
    """No state sent back (none compared): every piece but the first is parsed here, to the same."""
    ran, here = pieces
    monkeypatch.setattr(pipeline, "CHECKED_BLOCKS", 0)
    path = FIXTURES / "megatron-deepspeed-8gpu-1234567.log"
    one = _store_state(*parse_file_store(path, str(path), read_size=512))
    first_piece_blocks = -(-2048 // 512) + 1
    here[0] = 0
    assert _store_state(*parse_file_store(path, str(path), read_size=512, beside=2)) == one
    assert ran == [True] and here[0] >= -(-path.stat().st_size // 512) - first_piece_blocks


def test_a_killed_worker_of_pieces_costs_time_not_data(pieces, monkeypatch):
    ran, _ = pieces
    path = FIXTURES / "megatron-deepspeed-8gpu-1234567.log"
    one = _store_state(*parse_file_store(path, str(path), read_size=512))
    told: list[int] = []
    _killed_on(7, monkeypatch)
    assert _store_state(*parse_file_store(path, str(path), read_size=512, on_bytes=told.append, beside=3)) == one
    assert sum(told) == path.stat().st_size and ran == []
    assert not multiprocessing.active_children()


def test_events_of_a_file_in_pieces_are_those_of_one_process(pieces):
    for path in sorted(FIXTURES.iterdir()):
        one: list = []
        two: list = []
        _, stats_one = parse_file(path, str(path), sink=one.extend, read_size=512)
        _, stats_two = parse_file(path, str(path), sink=two.extend, read_size=512, beside=2)
        assert expand(two) == expand(one) and stats_two == stats_one, path


def test_a_piece_whose_state_is_the_read_in_order_s_is_not_parsed_here(pieces, monkeypatch, tmp_path):
    """llm.c's step lines leave no state that changes from piece to piece: a worker's piece goes on from
    its last one's state and meets the read in order's before its first block (its first line's start,
    before the cut, held as the read in order holds it), so nothing is parsed again here but the first
    piece of the second worker (a parser of its own, which has not seen the first lines)."""
    ran, here = pieces
    monkeypatch.setattr(pipeline, "PIECE_BYTES", 1 << 16)
    path = tmp_path / "main.log"
    path.write_bytes(_llmc(1, 40_000))
    one = _store_state(*parse_file_store(path, str(path), read_size=1 << 13))
    here[0] = 0
    assert _store_state(*parse_file_store(path, str(path), read_size=1 << 13, beside=2)) == one
    assert ran == [True] and here[0] <= 1 << 16 >> 13, here


class _Logged:
    """A parser that writes down each block it is fed (by the worker's pid) and whose state is always
    the read in order's: the workers' pace, seen from outside."""

    def __init__(self, log: str) -> None:
        self.log = log

    def feed(self, data: bytes) -> list:
        with open(self.log, "a") as fh:
            fh.write(f"{os.getpid()} {data[:8].decode()}\n")
        return [data[:8]]

    def deciding(self):
        return 0

    def counts(self):
        return (0,)

    def set_counts(self, counts) -> None:
        pass


def test_a_worker_runs_one_piece_ahead_of_the_store_at_most(forked, tmp_path):
    """The memory bound: while the store is still taking the first piece, the second worker parses its
    first piece (the second) and then waits: its next (the fourth) waits for the store to take the second,
    and so on."""
    from tuimon.engine.pipeline import Piece

    log = str(tmp_path / "fed.log")
    path = tmp_path / "pieces.bin"
    path.write_bytes(b"".join(f"piece{k:02d}-".encode() * 8 for k in range(6)))  # 6 pieces of 8 blocks of 8 bytes
    plan = [Piece(64 * k, 64 * k, 64 * (k + 1), k) for k in range(6)]
    seen: list = []

    def fed() -> list[str]:
        return open(log).read().split() if os.path.exists(log) else []

    def ahead(done: str, waiting: str) -> None:
        deadline = time.monotonic() + 60
        while fed().count(done) < 8 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert fed().count(done) == 8
        time.sleep(0.3)  # (time enough for a worker that did not wait to start its next piece)
        assert waiting not in fed()

    def take(events) -> None:
        seen.extend(events)
        if len(seen) == 1:  # the store at the first piece: the second is parsed, the fourth waits
            ahead("piece01-", "piece03-")
        if len(seen) == 17:  # at the third: the fourth is parsed, the sixth waits
            ahead("piece03-", "piece05-")

    with open(path, "rb") as fh:
        passed, _ = pipeline.parse_in_pieces(fh.fileno(), plan, _Logged(log), lambda line, before: before or _Logged(log),
                                             lambda state: None, 8, take, None, 2)
    assert passed == 384 and [e.decode() for e in seen] == [f"piece{k:02d}-" for k in range(6) for _ in range(8)]


def _llmc(k0: int, k1: int) -> bytes:
    return b"".join(b"s:%d trl:%.4f lr:%.6f norm:%.2f\n" % (k, 2 + k / 1e5, k / 1e6, 0.5 + k % 7 / 100)
                    + (b"s:%d tel:%.4f\n" % (k, 2.5) if k % 250 == 0 else b"") for k in range(k0, k1))


@pytest.mark.parametrize("workers", [2, 3])
def test_a_grown_file_read_on_from_the_cache_in_pieces_reads_as_in_one_process(pieces, tmp_path, monkeypatch, workers):
    """The parse cache's state after a read in pieces is the read in order's: the grown file, read on from
    it in pieces again, gives the store and the stats (what came from the cache included) of one process."""
    monkeypatch.setattr(pipeline, "PIECE_BYTES", 1 << 15)
    results = []
    for beside, name in ((0, "one"), (workers, "pieces")):
        log = tmp_path / name / "main.log"
        log.parent.mkdir()
        log.write_bytes(_llmc(1, 10_000))
        cache = ParseCache(tmp_path / name / "cache.sqlite3", key="k")
        parse_file_store(log, "main.log", cache=cache, read_size=4096, beside=beside)
        with open(log, "ab") as fh:
            fh.write(_llmc(10_000, 20_000))
        results.append(_store_state(*parse_file_store(log, "main.log", cache=cache, read_size=4096, beside=beside)))
        cache.close()
    assert results[1] == results[0] and "cached=0," not in results[0][-1]
    assert pieces[0] == [True, True]
