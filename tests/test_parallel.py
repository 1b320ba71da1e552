"""A log parsed in pieces on several processes gives exactly the events and the
summary of one pass, whatever the cut points."""
from __future__ import annotations

import json
import os
import pickle
import random

import pytest

from parsers.events import expand
from tests.conftest import FIXTURE_LOGS, FIXTURES, SHARED
from tests.test_lanes import make_line, ITER_KEYS
from tuimon.ingest import parse_file
from tuimon.parallel import cut_points, parse_file_parallel
from tuimon.store import JobStore
from tuimon.summary import summarize

CORPUS = sorted((SHARED / "corpus").rglob("*.log")) if (SHARED / "corpus").exists() else []


def run(path, parallel: bool, pieces: int = 3, read_size: int = 4096):
    events: list = []
    store = JobStore()

    def sink(batch):
        events.extend(batch)
        store.add(batch)

    if parallel:
        stats, info = parse_file_parallel(path, "job-42.log", sink, pieces=pieces, read_size=read_size)
    else:
        info = None
        _, stats = parse_file(path, "job-42.log", sink=sink, read_size=read_size)
    recs = [json.dumps(e.to_dict(), sort_keys=True) for e in sorted(expand(events), key=lambda e: e.line)]
    summary = json.dumps([summarize(j, now=0.0) for j in store.jobs.values()], sort_keys=True, default=str)
    return recs, summary, stats, info


def assert_same(path, pieces=3, read_size=4096):
    fast = run(path, True, pieces, read_size)
    slow = run(path, False, read_size=read_size)
    assert fast[0] == slow[0]
    assert fast[1] == slow[1]
    assert fast[2] == slow[2]
    return fast[3]


def test_cut_points_start_lines(tmp_path):
    p = tmp_path / "a.log"
    p.write_bytes(b"".join(b"x" * (i % 37) + b"\n" for i in range(2000)))
    data = p.read_bytes()
    points = cut_points(p, len(data), 5)
    assert points[0] == 0 and points[-1] == len(data) and points == sorted(set(points))
    assert all(data[k - 1:k] == b"\n" for k in points[1:-1])


@pytest.mark.parametrize("path", FIXTURE_LOGS, ids=lambda p: p.name)
def test_fixtures_in_pieces(path):
    assert_same(path, pieces=3, read_size=512)


def test_corpus_in_pieces():
    if not CORPUS:
        pytest.skip(f"SKIPPED: {SHARED / 'corpus'} not found")
    taken = 0
    for path in CORPUS:
        if path.stat().st_size > 20_000:
            info = assert_same(path, pieces=3, read_size=8192)
            taken += info["pieces_taken"]
    assert taken > 0  # the workers' pieces are used, not parsed again here


@pytest.mark.parametrize("seed", range(int(__import__("os").environ.get("PIECE_SEEDS", "12"))))
def test_generated_logs_in_pieces(tmp_path, seed):
    rng = random.Random(seed)
    shapes = [rng.sample(ITER_KEYS, rng.randrange(1, 8)) for _ in range(2)]
    lines = [make_line(rng, rng.choice(shapes), 0.05) for _ in range(1500)]
    p = tmp_path / "gen.log"
    p.write_text("".join(line + "\n" for line in lines))
    assert_same(p, pieces=rng.randrange(2, 6), read_size=rng.choice([700, 4096, 20000]))


def test_no_newline_at_end_and_huge_lines(tmp_path):
    p = tmp_path / "odd.log"
    body = b"".join(b" iteration %d/ 100 | elapsed time per iteration (ms): 5.0 | lm loss: 1.0 |\n" % i
                    for i in range(1, 400))
    p.write_bytes(body[:9000] + b"z" * 50_000 + b"\n" + body[9000:] + b" iteration 400/ 100 | lm loss: 2.0 |")
    assert_same(p, pieces=4, read_size=3000)


def test_many_files_on_several_processes(tmp_path):
    """Small files each go to a worker; the store sees them in the same order."""
    from tuimon.parallel import parse_files

    files = []
    for i, src in enumerate(sorted(FIXTURES.iterdir()) * 2):
        dst = tmp_path / f"r{i:02d}-{src.name}"
        dst.write_bytes(src.read_bytes())
        files.append(dst)
    files.append(tmp_path / "missing.log")
    results = []
    for jobs in (1, 2):
        store = JobStore()
        errors: list = []
        stats = parse_files(files, store.add, jobs=jobs, on_error=lambda p, e: errors.append(p.name))
        summary = json.dumps([summarize(j, now=0.0) for j in store.jobs.values()], sort_keys=True, default=str)
        results.append((summary, stats, errors))
    assert results[0] == results[1]
    assert results[0][2] == ["missing.log"]


def test_graded_pieces_shrink_at_the_end(tmp_path):
    from tuimon.parallel import piece_weights
    assert piece_weights(8, 2) == [4, 4, 4, 4, 4, 3, 2, 1]
    assert piece_weights(3, 2) == [3, 2, 1]
    p = tmp_path / "a.log"
    p.write_bytes(b"".join(b"y" * (i % 53) + b"\n" for i in range(40000)))
    points = cut_points(p, p.stat().st_size, 8, 4096, piece_weights(8, 2))
    sizes = [b - a for a, b in zip(points, points[1:])]
    assert len(sizes) == 8 and sizes[-1] < sizes[-2] < sizes[-3] < sizes[0]
    assert all(abs(size / sizes[0] - w / 4) < 0.1 for size, w in zip(sizes, piece_weights(8, 2)))


def test_default_pieces_give_one_pass(tmp_path, monkeypatch):
    """The default cut (graded pieces, lines counted as pieces are handed out)."""
    import tuimon.parallel as parallel
    monkeypatch.setattr(parallel, "MIN_PIECE", 20_000)
    rng = random.Random(7)
    shapes = [rng.sample(ITER_KEYS, 4) for _ in range(2)]
    p = tmp_path / "gen.log"
    p.write_text("".join(make_line(rng, rng.choice(shapes), 0.02) + "\n" for _ in range(3000)))
    events, store = [], JobStore()

    def sink(batch):
        events.extend(batch)
        store.add(batch)

    for workers in (2, 3):
        events.clear()
        stats, info = parallel.parse_file_parallel(p, "job-42.log", sink, read_size=4096, workers=workers)
        if workers == 2:  # this process parses every other piece, the worker the ones between
            assert info["pieces"] == parallel.SHARED_PIECES and info["pieces_parsed_here"] == 2
        else:
            assert info["pieces"] == parallel.PIECES_PER_WORKER * workers and info["pieces_parsed_here"] == 0
        assert info["pieces_taken"] > 0
        slow = run(p, False)
        assert [json.dumps(e.to_dict(), sort_keys=True)
                for e in sorted(expand(events), key=lambda e: e.line)] == slow[0]
        assert stats == slow[2]


def test_pieces_shared_with_one_worker_follow_their_weights(tmp_path):
    """On two cores the pieces alternate between this process and the worker, sized
    by WORKER_SHARE, and the last piece is the worker's."""
    from tuimon.parallel import SHARED_PIECES, WORKER_SHARE, shared_weights
    weights = shared_weights(SHARED_PIECES)
    assert weights[0] == 1.0 and weights[-1] == WORKER_SHARE and len(weights) % 2 == 0
    p = tmp_path / "a.log"
    p.write_bytes(b"".join(b"y" * (i % 53) + b"\n" for i in range(40000)))
    points = cut_points(p, p.stat().st_size, len(weights), 4096, weights)
    sizes = [b - a for a, b in zip(points, points[1:])]
    assert all(abs(size / sizes[0] - w) < 0.05 for size, w in zip(sizes, weights))


def _generated(tmp_path, lines=3000):
    rng = random.Random(11)
    shapes = [rng.sample(ITER_KEYS, 4) for _ in range(2)]
    p = tmp_path / "gen.log"
    p.write_text("".join(make_line(rng, rng.choice(shapes), 0.02) + "\n" for _ in range(lines)))
    return p


def test_results_spooled_in_files_that_are_removed(tmp_path, monkeypatch):
    """Workers leave their results in files of a spool directory; none is left
    behind, whether the parse ends or the sink fails half-way."""
    import tuimon.parallel as parallel
    made = []

    def spool(need):
        assert need > 0
        made.append(tmp_path / f"spool-{len(made)}")
        made[-1].mkdir()
        return str(made[-1])

    monkeypatch.setattr(parallel, "spool_dir", spool)
    seen = []
    original = parallel._unspooled
    monkeypatch.setattr(parallel, "_unspooled", lambda result: seen.append(type(result)) or original(result))
    p = _generated(tmp_path)
    assert_same(p, pieces=4)
    assert seen and set(seen) == {str}  # every result came as a file
    assert made and not made[0].exists()

    def failing(batch):
        raise RuntimeError("sink")

    with pytest.raises(RuntimeError):
        parallel.parse_file_parallel(p, "job-42.log", failing, pieces=4, read_size=4096)
    assert len(made) == 2 and not made[1].exists()


def test_unwritable_spool_hands_results_back_directly(tmp_path, monkeypatch):
    import tuimon.parallel as parallel
    monkeypatch.setattr(parallel, "spool_dir", lambda need: str(tmp_path / "missing"))  # writes fail: no such directory
    seen = []
    original = parallel._unspooled
    monkeypatch.setattr(parallel, "_unspooled", lambda result: seen.append(type(result)) or original(result))
    assert_same(_generated(tmp_path), pieces=4)
    assert seen and set(seen) == {bytes}


@pytest.mark.parametrize("ahead", [1, 2, 5])
def test_blocks_read_before_waiting_give_one_pass(tmp_path, monkeypatch, ahead):
    """However many steps of a piece this process reads before it waits for the
    worker (and whether the worker is done by then), the events are one pass's."""
    import tuimon.parallel as parallel
    monkeypatch.setattr(parallel, "SETTLE_STEPS", ahead)
    info = assert_same(_generated(tmp_path), pieces=4, read_size=2048)
    assert info["pieces_taken"] > 0 and info["blocks_reread"] >= 3 * min(ahead, 2)


@pytest.mark.parametrize("parts", [1, 2, 7, 16, 1000])
def test_a_block_fed_in_parts_gives_the_records_of_one_feed(parts):
    """FileParser.feed_parts: a parser switched on by a line late in the block
    still reads the block's first lines, as with one feed (sniffing reads the whole
    block first); records do not depend on where the parts end."""
    from tuimon.ingest import FileParser
    lines = ["[Rank 0] (after 10 iterations) memory (MB) | allocated: 10.5 | max allocated: 20.0 | "
             "reserved: 30.0 | max reserved: 31.0"]  # Megatron's, but no sign of Megatron yet
    rng = random.Random(parts)
    shapes = [rng.sample(ITER_KEYS, 4) for _ in range(2)]
    lines += ["some chatter %d" % i for i in range(300)]
    lines += [make_line(rng, rng.choice(shapes), 0.05) for _ in range(300)]  # now Megatron shows
    data = ("\n".join(lines) + "\npartial li").encode()

    def records(events):
        return [json.dumps(e.to_dict(), sort_keys=True) for e in sorted(expand(events), key=lambda e: e.line)]

    whole = FileParser("job-42.log")
    expected = records(whole.feed(data) + whole.finish())
    split = FileParser("job-42.log")
    got = [e for events in split.feed_parts(data, parts) for e in events] + split.finish()
    assert records(got) == expected
    assert any('"type": "memory"' in r and '"line": 1,' in r for r in expected)
    assert split.stats == whole.stats


def test_no_room_to_spool_hands_results_back_directly(tmp_path, monkeypatch):
    """Shared memory and the temporary directory both too full (or absent): the
    results come through the pool's pipe."""
    import tuimon.parallel as parallel
    assert parallel.spool_dir(1 << 62) is None  # no file system has 4 EiB free
    made = parallel.spool_dir(1)
    assert made is not None and os.path.isdir(made)
    os.rmdir(made)
    monkeypatch.setattr(parallel, "spool_dir", lambda need: None)
    seen = []
    original = parallel._unspooled
    monkeypatch.setattr(parallel, "_unspooled", lambda result: seen.append(type(result)) or original(result))
    assert_same(_generated(tmp_path), pieces=4)
    assert seen and set(seen) == {bytes}


def test_spawned_workers_give_one_pass(tmp_path, monkeypatch):
    """Where fork is unsafe (threads running) the workers are spawned: they start
    from nothing (no inherited allocator setting, scanner or state) and give the same."""
    import multiprocessing

    import tuimon.parallel as parallel
    monkeypatch.setattr(parallel, "process_context", lambda: multiprocessing.get_context("spawn"))
    info = assert_same(_generated(tmp_path), pieces=3)
    assert info["pieces_taken"] > 0


def _store_state(events):
    """What the job store keeps, as text: the summary and the facts it derives it from."""
    store = JobStore()
    for e in events:
        store.add([e])
    out = []
    for job in store.jobs.values():
        out.append(json.dumps(summarize(job, now=0.0), sort_keys=True, default=str))
        out.append(repr((job.last_progress, job.last_lr, job.last_iteration, job.last_losses, job.config,
                         job.memory, job.first_wall, job.last_wall, job.first_step_wall, job.events,
                         sorted((k, v.total_ms.hex(), v.count, v.last_ms) for k, v in job.timers.items()))))
        for key, series in job.ranks.items():
            out.append(f"{key}: {series.points.tobytes().hex()}")
        out.append(job.steps.points.tobytes().hex())
    return out


def _steps_of(path, read_size):
    from tuimon.ingest import FileParser, read_chunks
    fp = FileParser(path.name)
    steps = [fp.feed(chunk) for chunk in read_chunks(path, read_size)]
    return steps + [fp.finish()]


def _mixed_log(tmp_path, seed, records=600):
    """Megatron iteration, timer and memory lines and DeepSpeed step and timer lines,
    as a run prints them, with now and then an odd line (tests.test_lanes.make_line)
    or a record of another kind (a checkpoint, a failure) between them."""
    rng = random.Random(seed)
    shapes = [rng.sample(ITER_KEYS, rng.randrange(2, 6)) for _ in range(2)]
    extra = ["  successfully saved checkpoint at iteration      50 to checkpoints/gpt2",
             "time (ms) | save-checkpoint: 12.5", "RuntimeError: CUDA out of memory. Tried to allocate 2 GiB"]
    out = []
    for i in range(1, records + 1):
        stamp = f"[2024-05-01 10:{i // 60 % 60:02d}:{i % 60:02d},{i % 1000:03d}]"
        out += [f"{stamp} [INFO] [logging.py:96:log_dist] [Rank 0] step={i}, skipped=0, lr=[0.0003], "
                "mom=[(0.9, 0.95)]",
                f"{stamp} [INFO] [logging.py:96:log_dist] [Rank {i % 2}] rank={i % 2} time (ms) | "
                f"forward_microstep: {rng.uniform(1, 900):.2f} | backward_microstep: {rng.uniform(1, 900):.2f}",
                f" iteration {i:8d}/ 100000 | consumed samples: {i * 64:10d} | elapsed time per iteration (ms): "
                f"{rng.uniform(100, 3000):.1f} | learning rate: {rng.choice(['3.000E-04', '2.000E-04'])} | "
                f"lm loss: {rng.uniform(1, 9):.6E} | number of skipped iterations:   0 |",
                f"time (ms) | forward-compute: {rng.uniform(1, 900):.2f} | optimizer: {rng.uniform(1, 90):.2f} | "
                f"offloading-fwd-overhead: {rng.uniform(1, 90):.2f}",
                f"[Rank {i % 4}] (after {i} iterations) memory (MB) | allocated: {rng.uniform(1, 9e4):.1f} | "
                f"max allocated: {rng.uniform(1, 9e4):.1f} | reserved: 26762.0 | max reserved: 26762.0",
                "NCCL INFO chatter no parser reads"]
        if rng.random() < 0.03:
            out.append(make_line(rng, rng.choice(shapes), 0.05))
        if rng.random() < 0.01:
            out.append(rng.choice(extra))
    p = tmp_path / f"mixed-{seed}.log"
    p.write_text("".join(line + "\n" for line in out))
    return p


@pytest.mark.parametrize("seed", range(6))
def test_joined_steps_leave_the_store_as_the_steps_do(tmp_path, seed):
    """A worker joins its steps' batches (tuimon.parallel._joined_steps): the job
    store ends in the same state, to the bit, and expanding gives the same records."""
    from tuimon.parallel import _joined_steps
    path = _mixed_log(tmp_path, seed)
    steps = _steps_of(path, read_size=random.Random(seed).choice([1500, 2048, 4096]))
    events = [e for step in steps for e in step]
    joined = _joined_steps(steps)
    assert len(joined) < len(events) / 2  # joining happened
    assert _store_state(joined) == _store_state(events)
    assert sorted(json.dumps(e.to_dict(), sort_keys=True) for e in expand(joined)) == \
        sorted(json.dumps(e.to_dict(), sort_keys=True) for e in expand(events))


@pytest.mark.parametrize("path", [p for p in FIXTURE_LOGS if p.stat().st_size > 3000],
                         ids=lambda p: p.name)
def test_joined_steps_of_fixtures(path):
    from tuimon.parallel import _joined_steps
    steps = _steps_of(path, read_size=700)
    assert _store_state(_joined_steps(steps)) == _store_state([e for step in steps for e in step])


def test_what_ends_a_run_of_joined_steps():
    """Within a run each kind has one shape (timers: no name in two shapes); a record
    ends the run; batches are joined in line order and made together."""
    from array import array
    from parsers.events import Batch, Failure, Iteration, Timers
    from tuimon.parallel import _joined_steps

    def its(first, n, keys=("elapsed_ms",), flush=0):
        lines = array("q", range(first, first + n))
        cols = {k: array("d", [1.0] * n) for k in keys}
        cols["iteration"] = array("q", range(first, first + n))
        return Batch(Iteration, "f", lines, cols, flush=flush)

    def timers(first, n, names, flush=0):
        return Batch(Timers, "f", array("q", range(first, first + n)), {},
                     maps={"timers": {k: array("d", [2.0] * n) for k in names}}, flush=flush)

    steps = [[its(1, 3, flush=1), timers(10, 2, ["a"], flush=1)], [its(20, 3, flush=2), timers(30, 2, ["a"], flush=2)],
             [timers(40, 2, ["b"], flush=3)], [timers(50, 2, ["b", "a"], flush=4)],
             [its(60, 2, ("elapsed_ms", "lr"), flush=5)], [its(65, 2, flush=8)],
             [Failure(file="f", line=70, kind="oom")], [its(80, 2, flush=6)], [its(90, 2, flush=7)]]
    out = _joined_steps(steps)
    assert [(type(e).__name__, list(e.lines) if type(e) is Batch else e.line, getattr(e, "flush", None))
            for e in out] == [
        ("Batch", [1, 2, 3, 20, 21, 22], 1), ("Batch", [10, 11, 30, 31], 1), ("Batch", [40, 41], 1),
        ("Batch", [50, 51], 4),  # "a" is in another timers shape already: a new run
        ("Batch", [60, 61], 4),  # an iteration of another shape, the first of this run
        ("Batch", [65, 66], 8),  # back to the first shape: iterations of two shapes would not keep line order
        ("Failure", 70, None),
        ("Batch", [80, 81, 90, 91], 6)]
    assert type(out[0].columns["elapsed_ms"]) is array and list(out[0].columns["iteration"]) == [1, 2, 3, 20, 21, 22]


@pytest.mark.parametrize("join_from", [0, 1, 2, 5])
def test_pieces_settling_where_steps_are_joined_give_one_pass(tmp_path, monkeypatch, join_from):
    """Where this process settles on a step the worker joined with later ones, it
    cannot take the worker's events from there: it reads on (or the whole piece)."""
    import tuimon.parallel as parallel
    monkeypatch.setattr(parallel, "JOIN_FROM", join_from)
    assert_same(_mixed_log(tmp_path, 3, records=1500), pieces=4, read_size=4096)


def _counted_starts(tmp_path, monkeypatch):
    """Has the workers' _count_lines write (pid, start) of each count to a file,
    whose path it returns."""
    import tuimon.parallel as parallel
    if parallel.process_context().get_start_method() != "fork":
        pytest.skip("SKIPPED: workers are not forked here, so they do not see this test's wrapper")
    calls = tmp_path / "calls.txt"
    calls.touch()
    real = parallel._count_lines

    def counting(path, start, end):
        with open(calls, "a") as fh:
            fh.write(f"{os.getpid()} {start}\n")
        return real(path, start, end)

    monkeypatch.setattr(parallel, "_count_lines", counting)
    return calls


def test_lines_are_counted_by_the_workers(tmp_path, monkeypatch):
    """The first line number of each piece comes from counts the workers make and
    share (tuimon.parallel._first_line): this process, which takes in results
    while they parse, counts nothing, and a piece is counted by one worker (two,
    at most, when both find it missing at once), unless its worker was done first."""
    calls = _counted_starts(tmp_path, monkeypatch)
    path = _mixed_log(tmp_path, 4, records=1500)
    assert_same(path, pieces=5, read_size=4096)
    seen = [line.split() for line in calls.read_text().splitlines()]
    assert seen and str(os.getpid()) not in {pid for pid, _ in seen}
    points = cut_points(path, path.stat().st_size, 5, 4096)
    starts = [start for _, start in seen]
    assert set(starts) <= {str(p) for p in points[:-2]}  # the last piece: no later one needs it
    assert str(points[0]) in starts  # the second piece starts with the first: it counts it
    assert all(starts.count(s) <= 2 for s in set(starts))


def test_a_piece_parsed_before_it_is_needed_is_not_counted(tmp_path, monkeypatch):
    """One worker parses the pieces in turn: each piece's lines are known from its
    parse by the time the next one starts, so nothing is counted, and the line
    numbers are one pass's."""
    calls = _counted_starts(tmp_path, monkeypatch)
    path = _mixed_log(tmp_path, 4, records=1500)
    events: list = []
    parse_file_parallel(path, "job-42.log", events.extend, pieces=5, read_size=4096, workers=1)
    one_pass: list = []
    parse_file(path, "job-42.log", sink=one_pass.extend, read_size=4096)
    assert calls.read_text() == ""
    lines = sorted(e.line for e in expand(events))
    assert lines == sorted(e.line for e in expand(one_pass)) and len(set(lines)) > 1000


def test_line_counts_of_any_range(tmp_path):
    """A range's newlines, counted over its map, whatever its alignment: starts
    within a page and across the map's granularity, ends mid-line, empty ranges."""
    import mmap

    from tuimon.parallel import _count_lines
    rng = random.Random(7)
    data = b"".join(b"x" * rng.randrange(0, 300) + b"\n" for _ in range(3000)) + b"tail"
    path = tmp_path / "lines.log"
    path.write_bytes(data)
    grain = mmap.ALLOCATIONGRANULARITY
    cuts = [0, 1, grain - 1, grain, grain + 1, 3 * grain + 17, len(data) - 4, len(data)]
    cuts += [rng.randrange(0, len(data)) for _ in range(20)]
    for start in cuts:
        for end in cuts:
            assert _count_lines(str(path), start, end) == max(0, data[start:end].count(b"\n")), (start, end)


def test_spooled_results_come_back_equal(tmp_path):
    """A piece's results through the spool file, arrays apart from the pickle: the
    same objects (arrays of each type, empty ones, lists with None, events),
    and the file is removed."""
    from array import array

    from parsers.events import Batch, Iteration
    import tuimon.parallel as parallel
    batch = Batch(Iteration, "f.log", array("q", [3, 4]), {"elapsed_ms": array("d", [1.5, float("nan")]),
                                                           "rank": [None, 2]},
                  maps={"losses": {"lm loss": array("d", [2.0, float("inf")])}})
    result = ([([batch], ("a", "b"), None)], {"empty": array("d"), "ints": array("q", range(-5, 5)),
                                              "bytes": array("B", b"\x00\xff"), "text": "é", "none": None})
    path = parallel._spooled(result, str(tmp_path), "piece-0")
    back = parallel._unspooled(path)
    assert not os.path.exists(path)
    assert pickle.dumps(back) == pickle.dumps(result)  # nan compares unequal; their pickles do not
    assert type(back[1]["ints"]) is array and back[1]["ints"].typecode == "q"


def _dies_on_piece_one(path, label, points, index, *args):
    import signal
    import tuimon.parallel as parallel
    if index == 1:
        os.kill(os.getpid(), signal.SIGKILL)  # what the host's OOM killer does
    return parallel._real_parse_piece(path, label, points, index, *args)


@pytest.mark.parametrize("workers", [2, 3])
def test_a_worker_killed_mid_parse_costs_time_not_events(tmp_path, monkeypatch, workers):
    """A worker that dies (the OOM killer, a signal) breaks the pool: its piece and
    every later one are read in this process, and the events are still one pass's."""
    import tuimon.parallel as parallel
    if parallel.process_context().get_start_method() != "fork":
        pytest.skip("SKIPPED: workers are not forked here, so they do not see this test's wrapper")
    monkeypatch.setattr(parallel, "_real_parse_piece", parallel._parse_piece, raising=False)
    monkeypatch.setattr(parallel, "_parse_piece", _dies_on_piece_one)
    path = _generated(tmp_path)
    events: list = []
    stats, info = parse_file_parallel(path, "job-42.log", events.extend, pieces=5, read_size=2048, workers=workers)
    assert info["pieces_lost"] >= 1
    slow = run(path, False, read_size=2048)
    assert [json.dumps(e.to_dict(), sort_keys=True) for e in sorted(expand(events), key=lambda e: e.line)] == slow[0]
    assert stats == slow[2]


def test_small_files_whose_worker_dies_are_read_here(tmp_path, monkeypatch):
    import tuimon.parallel as parallel
    from tuimon.parallel import parse_files
    if parallel.process_context().get_start_method() != "fork":
        pytest.skip("SKIPPED: workers are not forked here, so they do not see this test's wrapper")

    def dies(path):
        import signal
        os.kill(os.getpid(), signal.SIGKILL)

    monkeypatch.setattr(parallel, "_parse_whole", dies)
    files = []
    for i, src in enumerate(sorted(FIXTURES.iterdir())[:4]):
        dst = tmp_path / f"r{i}-{src.name}"
        dst.write_bytes(src.read_bytes())
        files.append(dst)
    got, want = JobStore(), JobStore()
    stats = parse_files(files, got.add, jobs=2, on_error=lambda p, e: None)
    expected = parse_files(files, want.add, jobs=1, on_error=lambda p, e: None)
    assert stats == expected
    assert _summaries(got) == _summaries(want)


def _summaries(store: JobStore) -> str:
    return json.dumps([summarize(j, now=0.0) for j in store.jobs.values()], sort_keys=True, default=str)
