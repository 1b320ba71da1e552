"""``tuimon summary`` over files read before takes their jobs' summaries back
(:mod:`tuimon.commands.reuse`): the output is the one a summary made now gives, in every
format and at every clock; a file that changed, another option, a forged entry or names
that let one file's runs join another's job make the summaries again."""
from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time

import pytest

from tests.conftest import FIXTURES, SHARED
from tuimon.commands import reuse
from tuimon.engine.ingest import parse_file
from tuimon.figures.record import from_dict
from tuimon.figures.summary import summarize_timeless
from tuimon.store.job_store import JobStore


@pytest.fixture
def counted(monkeypatch):
    """How many groups were taken back, and how many made (and kept), per run."""
    seen = {"kept": 0, "made": 0}
    real_load, real_save = reuse.load, reuse.save

    def load(cache, g):
        real_load(cache, g)
        seen["kept"] += g.kept is not None

    def save(cache, g, kept, stats):
        seen["made"] += 1
        real_save(cache, g, kept, stats)

    monkeypatch.setattr(reuse, "load", load)
    monkeypatch.setattr(reuse, "save", save)
    return seen


def _logs(tmp_path):
    d = tmp_path / "runs"
    d.mkdir()
    for src in sorted(FIXTURES.iterdir()):
        shutil.copy(src, d / src.name)
    return d


def _both(run_cli, d, *extra):
    """(a summary made now with no cache, the run with it): their outputs."""
    plain = run_cli("summary", "--no-cache", *extra, str(d))
    cached = run_cli("summary", *extra, str(d))
    assert plain[0] == cached[0] == 0, cached[2]
    return plain[1], cached[1]


@pytest.mark.parametrize("fmt", ["json", "csv", "markdown", "table"])
def test_kept_summaries_give_what_a_summary_made_now_gives(tmp_path, run_cli, counted, fmt):
    d = _logs(tmp_path)
    plain, first = _both(run_cli, d, "--format", fmt)
    assert counted == {"kept": 0, "made": len(list(d.iterdir()))}, "each fixture is a job of its own"
    plain, again = _both(run_cli, d, "--format", fmt)
    assert counted["kept"] == len(list(d.iterdir()))
    assert plain == first == again


def test_a_file_that_grew_is_summarised_again_and_the_others_are_taken_back(tmp_path, run_cli, counted):
    d = _logs(tmp_path)
    run_cli("summary", str(d))
    grown = d / "stronghold-run.log"
    lines = grown.read_text().splitlines(keepends=True)
    with open(grown, "a") as fh:
        fh.write("".join(line for line in lines if " iteration " in line)[-2000:])
    made = counted["made"]
    plain, again = _both(run_cli, d, "--format", "json")
    assert counted["made"] == made + 1 and counted["kept"] == len(list(d.iterdir())) - 1
    assert plain == again


def test_another_option_is_another_summary(tmp_path, run_cli, counted):
    d = _logs(tmp_path)
    run_cli("summary", "--format", "json", str(d))
    plain, cached = _both(run_cli, d, "--format", "json", "--gpu-peak", "123")
    assert counted["kept"] == 0
    assert plain == cached
    assert any(r["gpu_peak_tflops"] == 123 for r in json.loads(cached))


def test_the_status_is_read_on_the_clock_of_each_run(tmp_path, run_cli, monkeypatch, counted):
    """A job quiet since its last write ends on the clock, kept or not (and a job with no
    step yet goes from starting to stuck)."""
    d = _logs(tmp_path)
    (d / "starting-55501.out").write_text("Job started at 2024-05-01T10:00:00\n"
                                          "[2024-05-01 10:00:05] > building GPT model ...\n"
                                          "> initializing torch distributed ...\n")
    assert json.loads(run_cli("summary", "--no-cache", "--format", "json", str(d / "starting-55501.out"))[1])[0][
        "status"] == "starting"
    run_cli("summary", "--format", "json", str(d))
    later = time.time() + 3 * 86400
    monkeypatch.setattr(time, "time", lambda: later)
    plain, cached = _both(run_cli, d, "--format", "json")
    assert counted["kept"] == len(list(d.iterdir()))
    assert plain == cached
    statuses = {r["job"]: r["status"] for r in json.loads(cached)}
    assert statuses["starting-55501"] == "stuck-in-startup"
    assert "ended" in statuses.values()


def test_a_forged_entry_is_not_taken(tmp_path, run_cli, counted):
    d = _logs(tmp_path)
    run_cli("summary", "--format", "json", str(d))
    db = sqlite3.connect(os.path.join(os.environ["XDG_CACHE_HOME"], "tuimon", "parse-cache.sqlite3"))
    rows = db.execute("SELECT slot, blob FROM results").fetchall()
    assert rows
    for slot, blob in rows:  # the job's name changed, the tag left as it was
        db.execute("UPDATE results SET blob = ? WHERE slot = ?", (blob.replace(b'"job": "', b'"job": "X'), slot))
    db.commit()
    db.close()
    plain, cached = _both(run_cli, d, "--format", "json")
    assert counted["kept"] == 0 and plain == cached


def test_names_that_let_a_run_join_another_file_s_job_keep_nothing(tmp_path, run_cli, counted):
    """``a.log`` holding two runs makes job ``a#2``, the job ``a#2.log`` names too: the two
    files are one job's then, whatever their names group."""
    d = tmp_path / "runs"
    d.mkdir()
    log = (FIXTURES / "stronghold-run.log").read_text()
    (d / "a.log").write_text(log + log)
    (d / "a#2.log").write_text(log)
    plain, first = _both(run_cli, d, "--format", "json")
    plain, again = _both(run_cli, d, "--format", "json")
    assert counted == {"kept": 0, "made": 0}
    assert plain == first == again


def test_corpus_summaries_come_back_from_their_json_form():
    corpus = SHARED / "corpus"
    if not corpus.exists():
        pytest.skip(f"SKIPPED: {corpus} not found -- the corpus round trip needs ../shared")
    store = JobStore()
    for path in sorted(corpus.rglob("*.log")):
        store.add(parse_file(path)[0])
    assert len(store.jobs) > 100
    for job in store.jobs.values():
        row, _ = summarize_timeless(job)
        assert from_dict(json.loads(json.dumps(row.as_dict()))) == row, job.name


def test_a_rewrite_a_coarse_clock_cannot_tell_is_told_by_its_bytes(tmp_path, run_cli, monkeypatch, counted):
    """On a file system whose times tick by the second, a file rewritten at its size within
    the tick keeps its stat: its first and last bytes tell it apart."""
    import collections

    d = _logs(tmp_path)
    real = reuse.open_regular
    Stat = collections.namedtuple("Stat", "st_dev st_ino st_size st_mtime_ns st_ctime_ns")

    def frozen_clock(path):
        fd, st = real(path)
        return fd, Stat(st.st_dev, st.st_ino, st.st_size, 1_000_000_000, 1_000_000_000)

    monkeypatch.setattr(reuse, "open_regular", frozen_clock)
    run_cli("summary", "--format", "json", str(d))
    log = d / "stronghold-run.log"
    text = log.read_text()
    log.write_text(text.replace("lm loss: 1.0", "lm loss: 1.9"))  # the losses, at the same length
    assert len(log.read_text()) == len(text) and log.read_text() != text
    plain, cached = _both(run_cli, d, "--format", "json")
    assert counted["kept"] == len(list(d.iterdir())) - 1
    assert plain == cached


def test_groups_that_share_a_job_keep_nothing(tmp_path, run_cli, monkeypatch, counted):
    """Should two groups' files ever make one job (a grouping that missed a way jobs join),
    no summary is kept, and every file is read as without the cache."""
    d = tmp_path / "runs"
    d.mkdir()
    lines = (FIXTURES / "stronghold-run.log").read_text().splitlines(keepends=True)
    (d / "slurm-7770001.out").write_text("".join(lines[:len(lines) // 2]))
    (d / "slurm-7770001.err").write_text("".join(lines[len(lines) // 2:]))
    monkeypatch.setattr(reuse, "file_groups", lambda store, files: [[str(f)] for f in files])  # one job, split
    plain, first = _both(run_cli, d, "--format", "json")
    assert counted == {"kept": 0, "made": 0}
    assert plain == first and len(json.loads(first)) == 1
