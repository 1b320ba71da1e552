"""The parse cache: an unchanged file is not parsed again, one that grew is parsed
from where it was left, anything else from the start, always with the events a
fresh parse gives; the database survives concurrency and corruption."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES
from tuimon.engine import catalog
from tuimon.engine.cache import ParseCache, db_path
from tuimon.engine.ingest import FileParser, parse_file
from tuimon.parsers.columns import expand

ROOT = Path(__file__).resolve().parent.parent
MEGATRON = (" iteration {i:8d}/    1000 | consumed samples: {s:12d} | elapsed time per iteration (ms): 2500.{d} | "
            "learning rate: 3.000E-04 | global batch size:    64 | lm loss: 2.{d}00000E+00 | loss scale: 4096.0 |\n")


def _lines(start: int, stop: int) -> str:
    return "".join(MEGATRON.format(i=i, s=i * 64, d=i % 10) for i in range(start, stop))


def _dicts(events) -> list[dict]:
    return [e.to_dict() for e in expand(events)]  # (the core's rows as their events)


@pytest.fixture
def counted(monkeypatch):
    """Bytes handed to FileParser.feed (what was parsed) in this process."""
    fed = [0]
    original = FileParser.feed

    def feed(self, data):
        fed[0] += len(data)
        return original(self, data)

    monkeypatch.setattr(FileParser, "feed", feed)
    return fed


def _cache(tmp_path, key="k") -> ParseCache:
    return ParseCache(tmp_path / "cache" / "parse-cache.sqlite3", key=key)


def _parse(path: Path, cache):
    events, _ = parse_file(path, str(path), cache=cache)
    return _dicts(events)


def test_unchanged_file_is_not_parsed_again(tmp_path, counted):
    log = tmp_path / "run.log"
    log.write_bytes((FIXTURES / "stronghold-run.log").read_bytes())
    fresh = _parse(log, None)
    first = _parse(log, _cache(tmp_path))
    assert first == fresh and counted[0] == 2 * log.stat().st_size
    counted[0] = 0
    cache = _cache(tmp_path)
    assert _parse(log, cache) == fresh
    assert counted[0] == 0 and cache.hits == 1 and cache.misses == 0


def test_grown_file_is_parsed_from_the_saved_offset(tmp_path, counted):
    log = tmp_path / "run.log"
    log.write_text(_lines(1, 200) + " iteration      200/    1000 | consumed sam")  # a partial last line
    _parse(log, _cache(tmp_path))
    before = log.stat().st_size
    with open(log, "a") as fh:
        fh.write("ples:        12800 | elapsed time per iteration (ms): 2500.0 | lm loss: 2.0 |\n" + _lines(201, 300))
    counted[0] = 0
    cache = _cache(tmp_path)
    got = _parse(log, cache)
    assert cache.grown == 1 and counted[0] == log.stat().st_size - before
    assert got == _parse(log, None)
    assert [e["iteration"] for e in got if e["type"] == "iteration"] == list(range(1, 300))
    counted[0] = 0
    assert _parse(log, _cache(tmp_path)) == got and counted[0] == 0


@pytest.mark.parametrize("change", ["truncated", "rewritten", "rotated", "same-size-edit"])
def test_truncated_rotated_or_replaced_files_are_parsed_from_the_start(tmp_path, change, counted):
    log = tmp_path / "run.log"
    log.write_text(_lines(1, 100))
    _parse(log, _cache(tmp_path))
    if change == "truncated":
        log.write_text(_lines(500, 520))
    elif change == "rewritten":
        log.write_text(_lines(1, 50) + _lines(700, 800))
    elif change == "rotated":
        os.rename(log, tmp_path / "run.log.1")
        log.write_text(_lines(1, 100).replace("lm loss: 2.", "lm loss: 3."))
    else:
        text = log.read_text()
        log.write_text(text[:100] + ("X" if text[100] != "X" else "Y") + text[101:])
    counted[0] = 0
    cache = _cache(tmp_path)
    assert _parse(log, cache) == _parse(log, None)
    assert cache.hits == 0 and cache.grown == 0
    assert counted[0] == 2 * log.stat().st_size  # parsed whole, by the cache run and by the fresh one


def test_a_new_format_set_invalidates(tmp_path, counted):
    log = tmp_path / "run.log"
    log.write_text(_lines(1, 50))
    _parse(log, _cache(tmp_path, key="one"))
    counted[0] = 0
    cache = _cache(tmp_path, key="two")
    _parse(log, cache)
    assert cache.misses == 1 and counted[0] == log.stat().st_size
    assert catalog.load([]).key != catalog.from_spec([("x.toml", 'name = "x"')]).key


def test_a_new_build_of_the_parsers_invalidates_at_the_same_version(tmp_path, monkeypatch):
    """The key holds a digest of the parsers', engine's and store's code, so an entry saved
    by another build (whose parser objects may lack what this one reads) is not restored."""
    from tuimon import parsers
    from tuimon.engine.catalog import code_digest

    timers = Path(parsers.__file__).parent / "timers.py"
    before = catalog.load([]).key
    real = Path.read_bytes
    monkeypatch.setattr(Path, "read_bytes", lambda self: real(self) + (b"# changed" if self == timers else b""))
    code_digest.cache_clear()
    try:
        assert catalog.load([]).key != before
    finally:
        monkeypatch.undo()
        code_digest.cache_clear()
    assert catalog.load([]).key == before


def _run(*args, cache_home, env=None, check=True):
    full = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(cache_home),
                XDG_CONFIG_HOME=str(cache_home / "no-config"), **(env or {}))
    r = subprocess.run([sys.executable, "-m", "tuimon", *args], capture_output=True, text=True, env=full, timeout=120)
    if check:
        assert r.returncode == 0, r.stderr
    return r


def _logs(tmp_path, n=6) -> Path:
    d = tmp_path / "runs"
    d.mkdir()
    for k, src in enumerate(sorted(FIXTURES.iterdir())):
        shutil.copy(src, d / src.name)
    for k in range(n):
        (d / f"gen-{k}.log").write_text(_lines(1, 300 + k))
    return d


def test_summary_and_events_use_it_and_no_cache_bypasses_it(tmp_path):
    d = _logs(tmp_path)
    home = tmp_path / "home"
    plain = _run("summary", "--format", "json", "--no-cache", str(d), cache_home=home)
    assert not (home / "tuimon").exists(), "--no-cache leaves the cache alone"
    first = _run("summary", "--format", "json", str(d), cache_home=home)
    db = home / "tuimon" / "parse-cache.sqlite3"
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    again = _run("summary", "--format", "json", str(d), cache_home=home)
    assert json.loads(plain.stdout) == json.loads(first.stdout) == json.loads(again.stdout)
    ev_plain = _run("events", "--no-cache", str(d), cache_home=home).stdout
    assert _run("events", str(d), cache_home=home).stdout == ev_plain
    assert _run("events", str(d), cache_home=home).stdout == ev_plain
    info = _run("cache", "info", cache_home=home).stdout
    assert f"files: {len(list(d.iterdir()))}" in info
    assert "forgotten" in _run("cache", "clear", cache_home=home).stdout
    assert "files: 0 " in _run("cache", "info", cache_home=home).stdout


def test_two_processes_at_once(tmp_path):
    d = _logs(tmp_path, n=12)
    home = tmp_path / "home"
    want = json.loads(_run("summary", "--format", "json", "--no-cache", str(d), cache_home=home).stdout)
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(home), XDG_CONFIG_HOME=str(home / "nc"))
    for _ in range(3):
        procs = [subprocess.Popen([sys.executable, "-m", "tuimon", "summary", "--format", "json", *jobs, str(d)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                 for jobs in ([], ["--jobs", "1"], [])]
        for p in procs:
            out, err = p.communicate(timeout=120)
            assert p.returncode == 0 and "warning" not in err, err
            assert json.loads(out) == want
        with open(d / "gen-0.log", "a") as fh:
            fh.write(_lines(1000, 1010))
        want = json.loads(_run("summary", "--format", "json", "--no-cache", str(d), cache_home=home).stdout)


@pytest.mark.parametrize("damage", ["garbage", "half-written"])
def test_a_corrupt_database_is_moved_aside_with_one_warning(tmp_path, damage):
    d = _logs(tmp_path, n=2)
    home = tmp_path / "home"
    want = _run("summary", "--format", "json", str(d), cache_home=home).stdout
    db = home / "tuimon" / "parse-cache.sqlite3"
    subprocess.run([sys.executable, "-c", f"import sqlite3; sqlite3.connect({str(db)!r}).execute("
                    "'PRAGMA wal_checkpoint(TRUNCATE)')"], check=True)
    data = db.read_bytes()
    if damage == "garbage":
        db.write_bytes(os.urandom(len(data)))
    else:
        db.write_bytes(data[: len(data) // 2])
    r = _run("summary", "--format", "json", str(d), cache_home=home)
    assert json.loads(r.stdout) == json.loads(want)
    warnings = [line for line in r.stderr.splitlines() if "warning" in line]
    assert len(warnings) == 1 and "moved to" in warnings[0], r.stderr
    assert list(db.parent.glob("parse-cache.sqlite3.corrupt-*"))
    r = _run("summary", "--format", "json", str(d), cache_home=home)
    assert json.loads(r.stdout) == json.loads(want) and "warning" not in r.stderr


def test_an_unusable_cache_directory_costs_a_warning_not_the_run(tmp_path):
    d = _logs(tmp_path, n=1)
    home = tmp_path / "home"
    home.mkdir()
    (home / "tuimon").write_text("a file where the directory should be")
    r = _run("summary", "--format", "json", str(d), cache_home=home)
    assert json.loads(r.stdout) and r.stderr.count("parse cache off") == 1


def _follow_once(root: Path, **kw) -> list:
    """Follow ``root`` until every file in it is read to its end (polled here, no thread:
    what is waited on is the reading, not a time), then close (which saves the cache)."""
    import time

    from tuimon.follow.local import LocalFollower

    got: list = []
    follower = LocalFollower([str(root)], got.extend, poll=0.05, **kw)
    files = [p for p in root.rglob("*") if p.is_file()]
    deadline = time.monotonic() + 120

    def read_all() -> bool:
        streams = {str(p): follower.followed.get(str(p)) for p in files}
        return all(f is not None and f.stream is not None and f.stream.offset == p.stat().st_size
                   for p, f in zip(files, streams.values()))
    try:
        follower.poll()
        while not read_all() and time.monotonic() < deadline:
            follower.sleep(0.05)
            follower.poll()
    finally:
        follower.close()
    return expand(got)  # (the core's rows as their events)


def test_following_starts_from_the_cache_and_saves_to_it(tmp_path, counted):
    root = tmp_path / "runs"
    root.mkdir()
    log = root / "a.log"
    log.write_text(_lines(1, 3000))
    first = _follow_once(root, cache=db_path())
    assert counted[0] == log.stat().st_size
    with open(log, "a") as fh:
        fh.write(_lines(3000, 3100))
    counted[0] = 0
    again = _follow_once(root, cache=db_path())
    assert counted[0] == len(_lines(3000, 3100)), "only the appended lines are parsed"
    fresh = _follow_once(root)
    assert _dicts(again) == _dicts(fresh) and _dicts(first) == _dicts(fresh)[:len(first)]
    its = [e.iteration for e in again if e.type == "iteration"]
    assert its == list(range(1, 3100))
    summary = _run("summary", "--format", "json", str(root), cache_home=Path(os.environ["XDG_CACHE_HOME"]))
    assert "parse cache" in summary.stderr and json.loads(summary.stdout)[0]["last_iteration"] == 3099


def test_a_truncated_followed_file_restarts_its_entry(tmp_path):
    root = tmp_path / "runs"
    root.mkdir()
    log = root / "a.log"
    log.write_text(_lines(1, 500))
    _follow_once(root, cache=db_path())
    log.write_text(_lines(1, 20))
    assert [e.iteration for e in _follow_once(root, cache=db_path()) if e.type == "iteration"] == list(range(1, 20))
    assert [e.iteration for e in _follow_once(root, cache=db_path()) if e.type == "iteration"] == list(range(1, 20))


def test_the_cache_stays_under_its_size_limit_dropping_the_oldest(tmp_path, monkeypatch):
    from tuimon.engine.ingest import parse_file_store

    monkeypatch.setenv("TUIMON_CACHE_MAX_MB", "1")  # the least it takes
    cache = _cache(tmp_path)
    logs = []

    def cached(log) -> bool:
        with open(log, "rb") as fh:
            return cache.load(str(log), fh.fileno()) is not None

    # logs of a few thousand records each (an entry's size is the store's: it shrinks as the store does)
    # until the oldest goes, then five more
    gone_at = None
    for k in range(200):
        log = tmp_path / f"run-{k}.log"
        log.write_text(_lines(1, 1500 + k))
        logs.append(log)
        parse_file_store(log, str(log), cache=cache)
        assert cache.used_bytes() <= 1e6 + 200_000  # at most one entry over, until the next commit
        if gone_at is None and not cached(logs[0]):
            gone_at = k
        if gone_at is not None and k >= gone_at + 5:
            break
    assert gone_at is not None and gone_at > 5, "the oldest went, once the entries filled the limit"
    assert cached(logs[-1]), "the newest entry stays"
    assert not cached(logs[0]), "the oldest went"
    assert 5 < cache.info()["files"] < len(logs)


# -- trust: a cache someone else can write is not used; nothing in it runs code -----------------------

def test_a_cache_directory_others_can_write_is_not_used(tmp_path):
    d = _logs(tmp_path, n=1)
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # a sticky world-writable directory, as /tmp is
    want = json.loads(_run("summary", "--format", "json", "--no-cache", str(d), cache_home=tmp_path / "h").stdout)
    env_dir = shared / "tuimon"
    env_dir.mkdir()
    os.chmod(env_dir, 0o777)
    r = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--format", "json", str(d)],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT), TUIMON_CACHE_DIR=str(env_dir),
                                XDG_CONFIG_HOME=str(tmp_path / "nc")))
    assert r.returncode == 0 and json.loads(r.stdout) == want
    assert r.stderr.count("parse cache off") == 1 and "writable by others" in r.stderr, r.stderr
    assert not (env_dir / "parse-cache.sqlite3").exists(), "nothing is written into it"


def test_a_cache_owned_by_another_user_is_not_used(tmp_path, monkeypatch):
    log = tmp_path / "run.log"
    log.write_text(_lines(1, 50))
    _parse(log, _cache(tmp_path))  # the victim's own cache, made by them
    warned: list = []
    monkeypatch.setattr(os, "geteuid", lambda: os.getuid() + 4242)  # now it is someone else's
    cache = ParseCache(tmp_path / "cache" / "parse-cache.sqlite3", key="k", on_warning=warned.append)
    assert not cache.usable()
    assert len(warned) == 1 and "is not yours" in warned[0], warned


class _Payload:
    """Unpickling this runs code (as a planted database would)."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_a_planted_blob_is_never_unpickled(tmp_path):
    """Another user's entry (or one written with another key) matching the log: the
    blobs fail their tags, the file is parsed again, no code runs."""
    import pickle
    import sqlite3
    import zlib

    log = tmp_path / "run.log"
    log.write_text(_lines(1, 80))
    fresh = _parse(log, None)
    assert _parse(log, _cache(tmp_path)) == fresh
    marker = tmp_path / "pwned"
    evil = zlib.compress(pickle.dumps(_Payload(str(marker))))
    db = sqlite3.connect(tmp_path / "cache" / "parse-cache.sqlite3")
    db.execute("UPDATE files SET state = ?, partial = ?", (evil, pickle.dumps(_Payload(str(marker)))))
    db.execute("UPDATE chunks SET events = ?", (evil,))
    db.commit()
    db.close()
    cache = _cache(tmp_path)
    assert _parse(log, cache) == fresh
    assert not marker.exists(), "a blob not sealed with the user's key was unpickled"
    assert cache.misses == 1 and cache.hits == 0
    # signed with another user's key: the same
    (tmp_path / "cache" / "key").chmod(0o600)
    (tmp_path / "cache" / "key").write_bytes(os.urandom(32))
    cache = _cache(tmp_path)
    assert _parse(log, cache) == fresh and cache.hits == 0 and not marker.exists()


def test_a_key_others_can_read_turns_the_cache_off(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(_lines(1, 20))
    _parse(log, _cache(tmp_path))
    key = tmp_path / "cache" / "key"
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    key.chmod(0o644)
    warned: list = []
    assert not ParseCache(tmp_path / "cache" / "parse-cache.sqlite3", key="k", on_warning=warned.append).usable()
    assert len(warned) == 1 and "key" in warned[0]


@pytest.mark.parametrize("target", ["empty file", "another application's database"])
def test_a_database_path_that_is_a_symlink_is_not_followed(tmp_path, target):
    import sqlite3

    other = tmp_path / "other.db"
    if target == "empty file":
        other.write_bytes(b"")
        other.chmod(0o644)
    else:
        db = sqlite3.connect(other)
        db.execute("CREATE TABLE files (name TEXT)")
        db.execute("INSERT INTO files VALUES ('theirs')")
        db.commit()
        db.close()
    before = (other.read_bytes(), stat.S_IMODE(other.stat().st_mode))
    (tmp_path / "cache").mkdir(mode=0o700)
    (tmp_path / "cache" / "parse-cache.sqlite3").symlink_to(other)
    warned: list = []
    log = tmp_path / "run.log"
    log.write_text(_lines(1, 20))
    cache = ParseCache(tmp_path / "cache" / "parse-cache.sqlite3", key="k", on_warning=warned.append)
    assert _parse(log, cache) == _parse(log, None)
    assert len(warned) == 1 and "symlink" in warned[0], warned
    assert (other.read_bytes(), stat.S_IMODE(other.stat().st_mode)) == before


def test_a_file_rewritten_in_place_is_parsed_again(tmp_path, counted):
    """Same inode, same size, same first and last bytes; a middle line changed: the
    mtime and ctime tell (they are part of the entry's identity)."""
    log = tmp_path / "run.log"
    text = _lines(1, 400)
    log.write_text(text)
    assert _parse(log, _cache(tmp_path)) == _parse(log, None)
    ino = log.stat().st_ino
    lines = text.splitlines(keepends=True)
    lines[204] = lines[204].replace("(ms): 2500.5", "(ms): 9500.5")  # iteration 205, mid-file
    changed = "".join(lines)
    assert len(changed) == len(text) and changed[:5000] == text[:5000] and changed[-5000:] == text[-5000:]
    with open(log, "r+") as fh:  # in place: the inode stays
        fh.write(changed)
    assert log.stat().st_ino == ino and log.stat().st_size == len(text)
    counted[0] = 0
    cache = _cache(tmp_path)
    got = _parse(log, cache)
    assert got == _parse(log, None) and cache.hits == 0 and cache.misses == 1
    assert any(e.get("elapsed_ms") == 9500.5 for e in got if e.get("type") == "iteration")


# -- a full disk, and databases moved aside ---------------------------------------------------------

def _full_disk_run(*args, cache_home):
    """tuimon with no room to write files (RLIMIT_FSIZE 0: every write past 0 bytes fails, as on a
    full disk; SIGXFSZ ignored, so the write says so rather than killing the process)."""
    code = ("import resource, signal, sys, runpy; signal.signal(signal.SIGXFSZ, signal.SIG_IGN); "
            "resource.setrlimit(resource.RLIMIT_FSIZE, (0, resource.RLIM_INFINITY)); "
            "sys.argv = ['tuimon', *sys.argv[1:]]; runpy.run_module('tuimon', run_name='__main__')")
    full = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(cache_home),
                XDG_CONFIG_HOME=str(cache_home / "no-config"))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=full, timeout=120)


def test_a_full_disk_on_first_use_leaves_no_empty_key(tmp_path):
    """A full disk when the cache is first made: the run goes on without it (one line), leaves no
    0-byte key, and once there is room the cache works (it stayed off for good, saying the key was
    too short)."""
    d = _logs(tmp_path, n=1)
    home = tmp_path / "home"
    want = _run("summary", "--format", "json", "--no-cache", str(d), cache_home=home).stdout
    r = _full_disk_run("summary", "--format", "json", str(d), cache_home=home)
    assert r.returncode == 0 and json.loads(r.stdout) == json.loads(want), r.stderr
    assert r.stderr.count("parse cache off") == 1, r.stderr
    assert not (home / "tuimon" / "key").exists(), "no key, rather than an empty one"
    assert not [p for p in (home / "tuimon").iterdir() if p.name.startswith(".key-")], "no temporary key left"
    again = _run("summary", "--format", "json", str(d), cache_home=home)
    assert json.loads(again.stdout) == json.loads(want) and "warning" not in again.stderr, again.stderr
    assert len((home / "tuimon" / "key").read_bytes()) == 32
    third = _run("summary", "--format", "json", str(d), cache_home=home)
    assert "MB read from the parse cache" in third.stderr, third.stderr


def test_an_empty_key_left_by_an_older_version_is_made_again(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(_lines(1, 20))
    (tmp_path / "cache").mkdir(mode=0o700)
    key = tmp_path / "cache" / "key"
    key.touch(mode=0o600)
    warned: list = []
    cache = ParseCache(tmp_path / "cache" / "parse-cache.sqlite3", key="k", on_warning=warned.append)
    assert cache.usable() and not warned
    assert len(key.read_bytes()) == 32


def test_databases_moved_aside_count_in_the_limit_and_are_pruned(tmp_path, monkeypatch):
    monkeypatch.setenv("TUIMON_CACHE_MAX_MB", "1")
    cache = _cache(tmp_path)
    assert cache.usable()
    directory = tmp_path / "cache"
    old = [directory / f"parse-cache.sqlite3.corrupt-{t}" for t in (1700000000, 1700000100, 1700000200)]
    for p, size in zip(old, (300_000, 300_000, 400_000)):
        p.write_bytes(os.urandom(size))
    assert cache.info()["moved_aside_bytes"] == 1_000_000
    cache.evict()
    assert [p.exists() for p in old] == [False, False, True], "only the latest is kept, while it fits"
    log = tmp_path / "run.log"
    log.write_text(_lines(1, 3000))
    from tuimon.engine.ingest import parse_file_store

    parse_file_store(log, str(log), cache=cache)
    assert cache.used_bytes() + cache.info()["moved_aside_bytes"] <= 1_000_000 + 200_000
    (directory / "parse-cache.sqlite3.corrupt-1700000300").write_bytes(os.urandom(1_100_000))
    cache.evict()
    assert cache.info()["moved_aside_bytes"] == 0, "one bigger than the room left goes too"


def test_a_followers_entry_writer_holds_a_bounded_number_of_events(tmp_path):
    """Rows count one event each: a follower at 20,000 lines/s hands a block's iteration lines as one
    item, and a writer that counted items held millions of rows before writing a chunk (serve: 750 MB)."""
    from tuimon.engine.cache import CHUNK_EVENTS
    from tuimon.parsers.columns import IterationRows

    cache = _cache(tmp_path)
    assert cache.usable()
    writer = cache.writer(str(tmp_path / "run.log"), None, keep_store=False)
    n = 1000
    for block in range(60):
        first = block * n
        rows = IterationRows("run.log", range(first + 1, first + n + 1), [None] * n, [None] * n, [None] * n,
                             range(first + 1, first + n + 1), [None] * n, {})
        writer.add([rows])
        held = sum(len(item) for item in writer.buffer)
        assert held < CHUNK_EVENTS + n, f"{held:,} rows held after {block + 1} blocks"
    assert writer.seq >= 60 * n // CHUNK_EVENTS - 1, "chunks were written as the rows came"
