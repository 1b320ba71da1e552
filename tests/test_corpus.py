"""Every real log in ../shared/corpus parses, and yields exactly as many iteration
events as the users' grep counts."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from tests.conftest import SHARED, shared_or_skip
from tuimon.engine.ingest import parse_file

GREP = r"iteration[ =]+[0-9]+/ *[0-9]+ *\|"
CORPUS = sorted((SHARED / "corpus").rglob("*.log")) if (SHARED / "corpus").exists() else []


def grep_count(path) -> int:
    if shutil.which("grep"):
        out = subprocess.run(["grep", "-aoE", GREP, str(path)], capture_output=True)
        return len(out.stdout.splitlines())
    return len(re.findall(GREP.encode(), path.read_bytes()))


def test_corpus_present():
    corpus = shared_or_skip("corpus")
    assert any(corpus.rglob("*.log"))


@pytest.mark.parametrize("path", CORPUS, ids=[str(p.relative_to(SHARED / "corpus")) for p in CORPUS])
def test_corpus_file(path):
    events, stats = parse_file(path)
    iterations = [e for e in events if e.type == "iteration"]
    assert len(iterations) == grep_count(path)
    assert stats.lines > 0
    for e in events:
        assert e.file == str(path) and e.line >= 1
    lines = [e.line for e in iterations]
    assert lines == sorted(lines)


def _all_lines_events(path):
    """Reference: every line fed to every parser that the file switches on, with no
    block regex between them (LineParser.feed tests each route on the line itself)."""
    from tuimon.parsers import ALL_PARSERS, LineContext
    from tuimon.parsers.events import EVENT_TYPES, Milestone
    from tuimon.parsers.formats import BUILTIN_FORMATS
    from tuimon.parsers.prefix import split_prefix
    from tuimon.parsers.timestamps import line_stamp
    from tuimon.engine.blocks import BlockEngine
    from tuimon.sources.framing import Framer

    f = Framer()
    text = f.feed(path.read_bytes()).text + f.flush().text
    engine = BlockEngine(str(path), ALL_PARSERS)
    engine.sniff(text)
    events, last, started = [], None, False
    blocks: dict = {}  # (format, entry) -> (the open block's context, its pairs)
    for n, line in enumerate(text.split("\n")[:-1], 1):
        pre = split_prefix(line)
        wall = line_stamp(pre.body)
        last = wall if wall is not None else last
        ctx = LineContext(str(path), n, pre.rank, pre.local_rank, pre.node, last)
        if wall is not None and not started:  # the log's first stamp, matched or not
            started = True
            events.append(Milestone(file=str(path), line=n, rank=pre.rank, node=pre.node, wall_time=wall,
                                    name="log-start"))
        for fmt in BUILTIN_FORMATS:  # data formats: their regex on the line itself
            for entry in fmt.lines:
                for fields in entry.parse(line):
                    own = {"wall_time": ctx.wall_time, **fields}  # a format's own wall_time wins
                    events.append(EVENT_TYPES[entry.event](file=str(path), line=n, rank=ctx.rank, node=ctx.node,
                                                           **own))
            for k, entry in enumerate(fmt.blocks):  # block entries: a line at a time, as BlockFormat.read does
                key = (fmt.name, k)
                marker = entry.marker(pre.body)
                if marker is False and key in blocks:
                    events.extend(_block_events(path, entry, *blocks.pop(key)))
                elif marker:
                    blocks[key] = (ctx, {})
                elif key in blocks and (entry.anchor is None or entry.anchor in line) and (found := entry.pair_of(pre.body)):
                    blocks[key][1][found[0]] = found[1]
        events.extend(e for parser in engine.active for e in parser.feed(pre.body, ctx))
    for fmt in BUILTIN_FORMATS:
        for k, entry in enumerate(fmt.blocks):
            if (fmt.name, k) in blocks:
                events.extend(_block_events(path, entry, *blocks.pop((fmt.name, k))))
    return events + engine.flush()


def _block_events(path, entry, ctx, pairs):
    from tuimon.parsers.events import EVENT_TYPES

    return [EVENT_TYPES[entry.event](file=str(path), line=ctx.line, rank=ctx.rank, node=ctx.node,
                                     wall_time=ctx.wall_time, **fields) for fields in entry.events(pairs)]


PREFILTER_CASES = sorted((SHARED / "corpus" / "stronghold").glob("*.log"))[:6] + sorted(
    (SHARED / "corpus" / "slurm-errors").glob("*.log"))[:4] if (SHARED / "corpus").exists() else []


@pytest.mark.parametrize("path", PREFILTER_CASES, ids=lambda p: p.name)
def test_prefilter_loses_no_event(path):
    fast, _ = parse_file(path)
    assert [e.to_dict() for e in fast] == [e.to_dict() for e in _all_lines_events(path)]


@pytest.mark.slow
def test_the_live_view_and_the_summary_are_one_model_on_the_corpus(tmp_path):
    """`watch` (a live session that read every file) and `summary` show the same jobs with the same
    statuses on the corpus (a run the live view shows stalled is the summary's `stalled`). Every file is
    dated two days back, so no status hangs on the seconds between the two reads. (The live view had a
    run of a nine-run file `training` that the summary called ended: only a file's last two runs were dated.)"""
    import json
    import os
    import sys
    import time

    from tests.conftest import ROOT
    from tuimon.live.session import LiveSession

    corpus = shared_or_skip("corpus")
    copy = tmp_path / "corpus"
    shutil.copytree(corpus, copy)
    old = time.time() - 2 * 86400
    for path in copy.rglob("*"):
        if path.is_file():
            os.utime(path, (old, old))
    r = subprocess.run([sys.executable, "-m", "tuimon", "summary", str(copy), "--no-cache", "--format", "json"],
                       capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert r.returncode == 0, r.stderr
    batch = sorted((s["job"], s["status"]) for s in json.loads(r.stdout))
    session = LiveSession([str(copy)])
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        session.follower.poll()
        done, total, _, _ = session.progress()
        if total and done >= total:
            break
    live: list[tuple[str, str]] = []
    for _ in range(100):  # rows are built a budget a tick
        session.tick()
        rows = session.snapshot().rows
        live = sorted((row.summary.job, "stalled" if row.stalled else row.summary.status) for row in rows)
        if len(live) == len(batch):
            break
    assert len(batch) > 100
    assert live == batch
