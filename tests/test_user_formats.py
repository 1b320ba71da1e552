"""User-defined formats: the TOML schema, where they are found, how they are
checked, and that their events count as a built-in's do."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tuimon.engine import native
from tuimon.engine.blocks import BlockEngine
from tuimon.parsers import ALL_PARSERS
from tuimon.parsers.columns import expand
from tuimon.parsers.schema import FormatError, format_from_toml, sample_errors

ROOT = Path(__file__).resolve().parent.parent

NANOTRON = r"""
name = "nanotron"
description = "Hugging Face nanotron trainer"

[[lines]]
event = "iteration"
anchor = "iteration: "
regex = '''iteration: (?P<iteration>\d+) / (?P<train_iters>\d+) \| .*?time_per_iteration_ms: (?P<elapsed_ms>\S+) \| tokens_per_sec: (?P<tokens_per_sec>\S+) \| tokens_per_sec_per_gpu: (?P<tokens_per_gpu_per_sec>\S+) \| .*?lm_loss: (?P<loss>\S+) \| lr: (?P<lr>\S+) \| model_tflops_per_gpu: (?P<tflops_reported>\S+)'''
types = { elapsed_ms = "si", tokens_per_sec = "si", tokens_per_gpu_per_sec = "si", tflops_reported = "si" }

[[lines.samples]]
line = "12/05 14:03:11 [INFO|DP=0|PP=0|TP=0|nid001234]: iteration: 10 / 100 | consumed_tokens: 1.31M | time_per_iteration_ms: 1.23K | tokens_per_sec: 107K | tokens_per_sec_per_gpu: 13.3K | global_batch_size: 131K | lm_loss: 9.51 | lr: 0.0003 | model_tflops_per_gpu: 104 | eta: 1:02:03"
expect = { iteration = 10, train_iters = 100, elapsed_ms = 1230.0, tokens_per_gpu_per_sec = 13300.0, loss = 9.51, tflops_reported = 104.0 }
"""

LINE = ("12/05 14:03:{s:02d} [INFO|DP=0|PP=0|TP=0|nid001234]: iteration: {i} / 100 | consumed_tokens: 1.31M | "
        "time_per_iteration_ms: 1.{ms}K | tokens_per_sec: 107K | tokens_per_sec_per_gpu: 13.3K | global_batch_size: "
        "131K | lm_loss: {loss} | lr: 0.0003 | model_tflops_per_gpu: 104 | eta: 1:02:03")


def _run(*args, env=None, cwd=None, timeout=60):
    full = {k: v for k, v in os.environ.items() if k != "TUIMON_FORMATS"}
    full.update(PYTHONPATH=str(ROOT), XDG_CONFIG_HOME="/nonexistent/tuimon-tests")
    full.update(env or {})
    return subprocess.run([sys.executable, "-m", "tuimon", *args], capture_output=True, text=True, env=full,
                          timeout=timeout, cwd=cwd)


def _engine(toml: str, parsers=ALL_PARSERS) -> BlockEngine:
    """An engine of one file with the built-in parsers and the user format ``toml``."""
    return BlockEngine("f.log", parsers, [format_from_toml(toml, "user.toml")])


def _log(path: Path, n: int = 30) -> Path:
    path.write_text("".join(LINE.format(s=i % 60, i=i, ms=200 + i, loss=f"9.{i:02d}") + "\n" for i in range(1, n + 1)))
    return path


def test_the_readme_example_compiles_and_its_sample_checks():
    fmt = format_from_toml(NANOTRON, "nanotron.toml")
    assert fmt.name == "nanotron" and len(fmt.lines) == 1
    assert sample_errors(fmt) == []
    readme = (ROOT / "README.md").read_text()
    assert 'name = "nanotron"' in readme and "[[lines.samples]]" in readme, "the README documents the schema"
    # the README's own block, as a user copies it: it compiles, its cumulative sample checks
    block = readme.split("```toml\n", 1)[1].split("```", 1)[0]
    mine = format_from_toml(block, "README.md")
    assert mine.lines[0].cumulative == ("consumed_tokens",) and len(mine.lines[0].samples) == 2
    assert sample_errors(mine) == []


@pytest.mark.parametrize("text,where", [
    ("1.23K", 1230.0), ("107K", 107000.0), ("1.31M", 1.31e6), ("2B", 2e9), ("1.5T", 1.5e12), ("3P", 3e15),
    ("42", 42.0), ("nan", "nan"),
])
def test_si_numbers(text, where):
    from tuimon.parsers.schema import CONVERTERS
    got = CONVERTERS["si"](text)
    assert (got != got) if where == "nan" else got == pytest.approx(where)


def test_percent_int_and_str_types():
    from tuimon.parsers.schema import CONVERTERS
    assert CONVERTERS["percent"]("15.38%") == pytest.approx(15.38)
    assert CONVERTERS["int"]("1,024") == 1024
    assert CONVERTERS["str"](" x ") == " x "


@pytest.mark.parametrize("change,message", [
    (("(?P<iteration>\\d+) / ", "(?P<iteration>\\d+ / "), "lines[0]: bad regex"),
    (("(?P<lr>\\S+)", "(?P<learning>\\S+)"), "lines[0]: unknown field 'learning'"),
    (('tflops_reported = "si" }', 'tflops_reported = "bytes" }'), "lines[0]: unknown type 'bytes'"),
    (('event = "iteration"', 'event = "epoch"'), "lines[0]: unknown event 'epoch'"),
    (("loss = 9.51", "loss = 9.52"), "lines[0].samples[0]: loss = 9.51, expected 9.52"),
    (("iteration: 10 / 100", "iteration: ten / 100"), "lines[0].samples[0]: the line does not match"),
    (('name = "nanotron"', 'name = "nano tron"'), "name must be a word"),
    (('[[lines.samples]]', '[[lines.samples]]\nline = 1\nline = 2'), "bad TOML"),
])
def test_a_broken_format_gets_one_line_naming_file_and_entry(tmp_path, change, message):
    bad = tmp_path / "bad.toml"
    bad.write_text(NANOTRON.replace(*change))
    r = _run("formats", "check", str(bad), str(tmp_path / "missing.toml"))
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert any(str(bad) in line and message in line for line in lines), r.stderr
    assert "Traceback" not in r.stderr


def test_check_says_ok_with_counts(tmp_path):
    good = tmp_path / "nanotron.toml"
    good.write_text(NANOTRON)
    r = _run("formats", "check", str(good))
    assert r.returncode == 0, r.stderr
    assert "ok: format 'nanotron', 1 line entries, 1 samples checked" in r.stdout


def test_a_catastrophic_regex_is_refused_at_check_time(tmp_path):
    fmt = tmp_path / "slow.toml"
    fmt.write_text('name = "slow"\n[[lines]]\nevent = "step"\nregex = \'\'\'^(\\w+\\s?)+$(?P<step>\\d)\'\'\'\n')
    t0 = time.monotonic()
    python = {"TUIMON_ENGINE": "python"}  # the Python engine's regexes backtrack: refused
    r = _run("formats", "check", str(fmt), env=python)
    assert r.returncode == 2 and "unbounded repeat inside another" in r.stderr, r.stderr
    # and a run with it in the format dirs reads the other formats, said once, without hanging
    log = tmp_path / "x.log"
    log.write_text("a" * 5000 + "!\n" + " iteration 1/ 10 | elapsed time per iteration (ms): 5.0 | lm loss: 1.0 |\n")
    r = _run("summary", "--format", "json", "--formats", str(tmp_path), str(log), env=python)
    assert r.returncode == 0 and "format left out" in r.stderr and json.loads(r.stdout)[0]["last_iteration"] == 1
    assert time.monotonic() - t0 < 30
    if native.core is not None:  # the compiled core runs it in linear time: accepted, and the run reads it
        r = _run("formats", "check", str(fmt))
        assert r.returncode == 0 and "run by the compiled core" in r.stdout, r.stdout + r.stderr
        r = _run("summary", "--format", "json", "--formats", str(tmp_path), str(log))
        assert r.returncode == 0 and "format left out" not in r.stderr, r.stderr
        assert json.loads(r.stdout)[0]["last_iteration"] == 1


def test_bounded_inner_repeats_are_accepted():
    fmt = format_from_toml('name = "ok"\n[[lines]]\nevent = "step"\nregex = \'\'\'(?:\\w{1,64} )+step (?P<step>\\d+)\'\'\'\n',
                           "ok.toml")
    assert fmt.lines[0].parse("a b step 7") == [{"step": 7}]


def test_summary_events_and_list_with_a_user_format(tmp_path):
    formats = tmp_path / "fmts"
    formats.mkdir()
    (formats / "nanotron.toml").write_text(NANOTRON)
    log = _log(tmp_path / "nano-run.log")
    r = _run("summary", "--format", "json", "--formats", str(formats), str(log))
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert row["framework"] == "nanotron" and row["last_iteration"] == 30 and row["train_iters"] == 100
    assert row["tokens_per_sec"] == 107000.0 and row["tokens_per_gpu_per_sec"] == 13300.0
    assert row["tflops_per_gpu"]["reported"] == 104.0 and row["loss_last"] == 9.3
    assert 1200 < row["iter_time_ms"]["median"] < 1231
    events = [json.loads(x) for x in _run("events", "--formats", str(formats), str(log)).stdout.splitlines()]
    its = [e for e in events if e["type"] == "iteration"]
    assert [e["iteration"] for e in its] == list(range(1, 31)) and its[0]["losses"] == {"loss": 9.01}
    assert [e["line"] for e in its] == list(range(1, 31))
    assert not [e for e in events if e["type"] == "step"], "the fallback reader stays off"
    r = _run("formats", "list", env={"TUIMON_FORMATS": str(formats)})
    assert any(line.startswith("nanotron") and str(formats / "nanotron.toml") in line for line in r.stdout.splitlines())
    assert any(line.startswith("megatron") and "built-in" in line for line in r.stdout.splitlines())
    # one row per reader: the launcher, data and a hook, once; every reader says what it reads
    kinds = [tuple(line.split()[:2]) for line in r.stdout.splitlines()[1:]]
    names = [name for name, _ in kinds if name != "nanotron"]
    assert len(names) == len(set(names)) and ("launcher", "data+hook") in kinds, r.stdout
    for family in ("STRONGHOLD", "NeMo", "GPT-NeoX", "ezpz", "ZeRO-Offload", "torchtitan", "MLPerf"):
        assert family in r.stdout, family
    assert all(len(line.split()) > 4 for line in r.stdout.splitlines()[1:]), r.stdout


def test_formats_are_found_in_config_dir_and_env(tmp_path):
    log = _log(tmp_path / "run.log", 5)
    home = tmp_path / "cfg"
    (home / "tuimon" / "formats").mkdir(parents=True)
    (home / "tuimon" / "formats" / "nanotron.toml").write_text(NANOTRON)
    r = _run("summary", "--format", "json", str(log), env={"XDG_CONFIG_HOME": str(home)})
    assert json.loads(r.stdout)[0]["framework"] == "nanotron"
    other = tmp_path / "other"
    other.mkdir()
    (other / "n.toml").write_text(NANOTRON)
    r = _run("summary", "--format", "json", str(log), env={"TUIMON_FORMATS": f"/nonexistent{os.pathsep}{other}"})
    assert json.loads(r.stdout)[0]["framework"] == "nanotron"
    r = _run("summary", str(log))
    assert "nanotron" not in r.stdout
    r = _run("summary", "--formats", str(tmp_path / "nope"), str(log))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "nope" in r.stderr


MEGATRON = (" iteration       30/      50 | elapsed time per iteration (ms): 6051.8 | learning rate: 1.406E-06 | "
            "global batch size:     4 | lm loss: 1.052111E+01 | loss scale: 1.0 |")


def test_a_user_format_overrides_built_ins_for_its_event_type_only():
    engine = _engine(r"""
name = "mine"
[[lines]]
event = "iteration"
regex = 'iteration +(?P<iteration>\d+)/ *(?P<train_iters>\d+) \| elapsed time per iteration \(ms\): (?P<elapsed_ms>\S+)'
""")
    events = expand(engine.feed_block(MEGATRON + "\n" + "Effective Tera Flops per GPU: 41.9 and total parameters 52.0 B\n",
                                      1))
    its = [e for e in events if e.type == "iteration"]
    assert len(its) == 1 and its[0].elapsed_ms == 6051.8 and its[0].losses == {}, "the user's, not Megatron's"
    assert [e for e in events if e.type == "throughput"], "other types still come from the built-ins"


def test_timers_pairs_and_failure_constants():
    fmt = format_from_toml(r"""
name = "mytimers"
[[lines]]
event = "timers"
anchor = "TIMERS"
regex = 'TIMERS step (?P<iteration>\d+):'
pairs = '(?P<name>[a-z_]+)=(?P<value>[\d.]+)ms'
[[lines.samples]]
line = "TIMERS step 5: fwd=10.5ms bwd=20ms"
expect = { iteration = 5, timers = { fwd = 10.5, bwd = 20.0 } }
[[lines]]
event = "failure"
regex = 'GPU fell off the bus: (?P<message>.*)'
set = { kind = "killed" }
""", "t.toml")
    assert sample_errors(fmt) == []
    engine = BlockEngine("f.log", ALL_PARSERS, [fmt])
    events = engine.feed_block("TIMERS step 5: fwd=10.5ms bwd=20ms\nxid 79: GPU fell off the bus: node3\n", 1)
    timers = next(e for e in events if e.type == "timers")
    assert dict(timers.timers) == {"fwd": 10.5, "bwd": 20.0} and timers.groups["fwd"] == "forward"
    failure = next(e for e in events if e.type == "failure")
    assert failure.kind == "killed" and failure.message == "node3" and failure.line == 2


def test_matches_never_cross_lines_and_blocks_do_not_matter():
    fmt = format_from_toml(r"""
name = "steps"
[[lines]]
event = "step"
regex = 'step (?P<step>\d+)\s+loss (?P<loss>\S+)'
""", "s.toml")
    text = "step 1\nloss 2.0\nstep 2 loss 3.0\nxx step 3  loss 4.0 step 4 loss 5.0\n"
    whole = [e for e in BlockEngine("f", (), [fmt]).feed_block(text, 1) if e.type == "step"]
    assert [(e.step, e.loss, e.line) for e in whole] == [(2, 3.0, 3), (3, 4.0, 4), (4, 5.0, 4)]
    engine = BlockEngine("f", (), [fmt])
    lines = text.splitlines(keepends=True)
    split = [e for n, line in enumerate(lines, 1) for e in engine.feed_block(line, n) if e.type == "step"]
    assert [(e.step, e.loss, e.line) for e in split] == [(e.step, e.loss, e.line) for e in whole]


def test_hostile_input_through_a_user_format():
    engine = _engine(r"""
name = "h"
[[lines]]
event = "iteration"
regex = 'it (?P<iteration>\S+) loss (?P<loss>\S+) tf (?P<tflops_reported>\S+)'
""")
    text = ("it 99999999999999999999999 loss nan tf inf\n" + "it \ufffd loss 1e999 tf -\n" + "x" * 10_000_000 + "\n"
            + "it 3 loss 1.5 tf 12\n")
    events = [e for e in engine.feed_block(text, 1) if e.type == "iteration"]
    assert events[-1].iteration == 3 and events[-1].losses == {"loss": 1.5}
    assert events[0].iteration is None and events[0].losses["loss"] != events[0].losses["loss"]


def test_a_watch_ingest_process_reads_user_formats_even_when_spawned(tmp_path, monkeypatch):
    """``tuimon watch`` parses in a process of its own; a spawned one starts from
    nothing, so the user's formats are handed to it (as the command line found them)."""
    import multiprocessing

    from tuimon.engine import catalog, pool
    from tuimon.live.session import LiveSession

    fmt = tmp_path / "nanotron.toml"
    fmt.write_text(NANOTRON)
    logs = tmp_path / "logs"
    logs.mkdir()
    _log(logs / "nano-run.log", 12)
    monkeypatch.setattr(pool, "process_context", lambda: multiprocessing.get_context("spawn"))
    cat = catalog.load([fmt], defaults=False)
    own_cache = tmp_path / "own-cache" / "parse-cache.sqlite3"  # the settings' cache, not the environment's
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # where the default would be
    session = LiveSession([str(logs)], poll=0.1, process=True, catalog_spec=cat.spec, cache=own_cache)
    session.start()
    try:
        deadline = time.monotonic() + 30
        row = None
        while time.monotonic() < deadline:
            rows = session.snapshot().rows
            row = next((r.summary.as_dict() for r in rows if r.summary.job == "nano-run"), None)
            if row and row["last_iteration"] == 12:
                break
            time.sleep(0.2)
        assert row is not None and row["framework"] == "nanotron" and row["last_iteration"] == 12, row
        assert row["tokens_per_gpu_per_sec"] == 13300.0
    finally:
        session.stop()
    assert own_cache.exists() and not (tmp_path / "xdg").exists(), "the spawned process used the cache it was given"


def test_a_regex_that_backtracks_without_end_is_refused_by_check(tmp_path):
    """No nested repeat (the static test passes it), yet exponential: the probe runs it
    on long lines with a time bound, and refuses it in bounded time, at check and at load."""
    from tuimon.engine.regex_safety import unbounded_nesting

    fmt = tmp_path / "slow.toml"
    fmt.write_text('name = "slow"\n[[lines]]\nevent = "step"\nregex = \'\'\'^(?:a|aa)+$(?P<step>\\d)\'\'\'\n')
    assert unbounded_nesting(r"^(?:a|aa)+$(?P<step>\d)") is None, "the static test lets it through"
    from tuimon.engine.user_regex import load_user_format

    before = native.use(None)  # the probe guards the Python engine's regexes
    try:
        with pytest.raises(FormatError, match="took over 2 s"):
            load_user_format(fmt.read_text(), "slow.toml")
    finally:
        native.use(before)
    t0 = time.monotonic()
    r = _run("formats", "check", str(fmt), env={"TUIMON_ENGINE": "python"})
    assert r.returncode == 2 and "took over 2 s" in r.stderr and str(fmt) in r.stderr, r.stderr
    assert time.monotonic() - t0 < 20
    if native.core is not None:  # linear in the core: no probe to fail
        r = _run("formats", "check", str(fmt))
        assert r.returncode == 0 and "run by the compiled core" in r.stdout, r.stdout + r.stderr
    good = tmp_path / "nanotron.toml"
    good.write_text(NANOTRON)
    assert _run("formats", "check", str(good)).returncode == 0


def test_a_line_s_own_time_and_host_in_the_log_s_words():
    engine = _engine(r"""
name = "stamped"
[[lines]]
event = "step"
regex = '^(?P<wall_time>\S+ \S+) @(?P<node>\w+) step (?P<step>\d+)'
types = { wall_time = "time" }
""")
    (ev,) = [e for e in engine.feed_block("2024-05-01 10:00:00 @gpu7 step 3\n", 1) if e.type == "step"]
    assert ev.step == 3 and ev.node == "gpu7" and ev.wall_time == 1714557600.0
    (ev,) = [e for e in engine.feed_block("garbage time @gpu8 step 4\n", 2) if e.type == "step"]
    assert ev.step == 4 and ev.node == "gpu8" and ev.wall_time == 1714557600.0, \
        "an unreadable time leaves the line the stamp of the line before"
    with pytest.raises(FormatError, match="cannot fill 'wall_time'"):
        format_from_toml('name = "x"\n[[lines]]\nevent = "step"\nregex = \'\'\'(?P<wall_time>\\S+)\'\'\'\n'
                         'types = { wall_time = "str" }\n', "x.toml")


SLOW_B = 'name = "slowb"\n[[lines]]\nevent = "step"\nregex = \'\'\'^(?:b|bb)+$(?P<step>\\d)\'\'\'\n'


def test_a_format_dropped_in_the_directory_gets_the_check_of_formats_check(tmp_path):
    """Loaded at run time, a format `formats check` refuses is left out with one warning."""
    fmts, logs = tmp_path / "fmts", tmp_path / "logs"
    fmts.mkdir()
    logs.mkdir()
    (fmts / "slowa.toml").write_text(
        'name = "slowa"\n[[lines]]\nevent = "step"\nregex = \'\'\'(?:a|aa)+$(?P<step>\\d)\'\'\'\n')
    (logs / "run.log").write_text("a" * 20000 + "\n")
    t0 = time.monotonic()
    r = _run("summary", "--no-cache", "--formats", str(fmts), str(logs), env={"TUIMON_ENGINE": "python"})
    assert r.returncode == 0 and time.monotonic() - t0 < 30, r.stderr
    assert r.stderr.count("format left out") == 1 and "slowa.toml" in r.stderr, r.stderr
    if native.core is not None:  # the core's check takes it (linear time): nothing left out
        r = _run("summary", "--no-cache", "--formats", str(fmts), str(logs))
        assert r.returncode == 0 and "format left out" not in r.stderr, r.stderr


def test_a_regex_that_hangs_at_run_time_turns_its_format_off_and_the_rest_go_on(tmp_path):
    """A regex the probe lets through (its slow lines are runs of b, which the probe
    does not try) meets a 20,000-character line: bounded, one warning, the other files'
    figures whole."""
    fmts, logs = tmp_path / "fmts", tmp_path / "logs"
    fmts.mkdir()
    logs.mkdir()
    (fmts / "slowb.toml").write_text(SLOW_B)
    (logs / "bbb.log").write_text("b" * 20000 + "!\n" + "b" * 5000 + "!\n")
    (logs / "meg.log").write_bytes((Path(__file__).parent / "fixtures" / "megatron-deepspeed-8gpu-1234567.log")
                                   .read_bytes())
    for verb in (["summary", "--format", "json"], ["events"]):
        t0 = time.monotonic()
        r = _run(*verb, "--no-cache", "--formats", str(fmts), str(logs), env={"TUIMON_ENGINE": "python"})
        assert r.returncode == 0 and time.monotonic() - t0 < 30, r.stderr
        assert r.stderr.count("format 'slowb' turned off") == 1, r.stderr
        if verb[0] == "summary":
            rows = {row["job"]: row for row in json.loads(r.stdout)}
            assert rows["meg"]["last_iteration"] == 20
        else:
            assert sum('"type": "iteration"' in line for line in r.stdout.splitlines()) == 20
    if native.core is not None:  # the core runs it on these ASCII lines in linear time: nothing to turn off
        r = _run("summary", "--format", "json", "--no-cache", "--formats", str(fmts), str(logs))
        assert r.returncode == 0 and "turned off" not in r.stderr, r.stderr
        assert {row["job"]: row for row in json.loads(r.stdout)}["meg"]["last_iteration"] == 20


def test_following_goes_on_past_a_regex_that_hangs(tmp_path):
    """events --follow: the file a user regex hangs on costs a second, the other file's
    lines keep coming, and Ctrl-C stops it at once."""
    import signal

    fmts, logs = tmp_path / "fmts", tmp_path / "logs"
    fmts.mkdir()
    logs.mkdir()
    (fmts / "slowb.toml").write_text(SLOW_B)
    (logs / "bbb.log").write_text("b" * 20000 + "!\n")
    other = logs / "other.log"
    other.write_text("")
    import threading

    proc = subprocess.Popen([sys.executable, "-m", "tuimon", "events", "--follow", "--no-cache", "--poll", "0.1",
                             "--formats", str(fmts), str(logs)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "TUIMON_ENGINE": "python"})
    steps: set = set()

    def read() -> None:  # drained as it comes: a full pipe would stall the writer, not tuimon
        for line in proc.stdout:  # type: ignore[union-attr]
            if '"type": "iteration"' in line:
                steps.add(json.loads(line)["iteration"])
    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        for i in range(1, 211):
            with open(other, "a") as fh:
                fh.write(f" iteration {i:8d}/    1000 | consumed samples: {i * 8:12d} | elapsed time per iteration "
                         f"(ms): 1000.0 | global batch size:     8 | lm loss: 2.500000E+00 | loss scale: 1.0 |\n")
            time.sleep(0.01)
        deadline = time.monotonic() + 20
        while len(steps) < 210 and time.monotonic() < deadline:
            time.sleep(0.1)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=10)
        assert time.monotonic() - t0 < 2, "Ctrl-C stops it within a second or so"
        reader.join(5)
        err = proc.stderr.read()  # type: ignore[union-attr]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        reader.join(5)
        proc.stdout.close()  # type: ignore[union-attr]  # (left open, the pipes warned when collected: an error here)
        proc.stderr.close()  # type: ignore[union-attr]
    assert steps == set(range(1, 211)), f"{len(steps)} of 210 lines of the other file came out; {err}"
    assert err.count("format 'slowb' turned off") == 1, err


def test_a_regex_is_judged_the_same_whatever_was_imported_before():
    """A user's regex has one compiler and one safety check (tuimon.engine.user_regex.compile_user),
    handed to the schema by whoever loads the file; the parsers compile their own (built-in) formats
    with `re` and judge no regex.  Nothing is rebound at import: the answers are the same before and
    after the engine and the catalog are imported, in a fresh interpreter."""
    code = r"""
import sys
from tuimon.parsers.schema import FormatError, format_from_toml
TOML = 'name = "n"\n[[lines]]\nevent = "step"\nregex = \'\'\'(?:\\w+ )+step (?P<step>\\d+)\'\'\'\n'
def said(load):
    try:
        load(TOML, "n.toml")
        return "accepted"
    except FormatError as exc:
        return "refused" if "exponential" in str(exc) else str(exc)
before = said(format_from_toml)
from tuimon.engine.user_regex import load_user_format
user = said(load_user_format)
import tuimon.engine.catalog, tuimon.engine.blocks  # noqa
print(before, said(format_from_toml), user, said(load_user_format))
"""
    for engine, user in (("python", "refused"), ("core", "accepted")):
        if engine == "core" and native.core is None:
            continue
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=60,
                             env={**os.environ, "TUIMON_ENGINE": engine})
        assert out.returncode == 0, out.stderr
        # the schema's own compiler (re, for the built-ins) judges nothing; a user's format is refused
        # where Python's regex would run the nested repeat, accepted where the core runs it (linear)
        assert out.stdout.split() == ["accepted", "accepted", user, user], (engine, out.stdout)


def test_a_user_regex_is_compiled_once_a_load():
    """A line regex the core runs is compiled there alone (the regex package only when a line the core
    does not read comes); a block's begin regex, which the core does not run, by the regex package."""
    from tuimon.engine.user_regex import CorePattern, TimedPattern, load_user_format

    if native.core is None:
        pytest.skip(f"the compiled core is not importable ({native.name()})")
    fmt = load_user_format(NANOTRON, "nanotron.toml")
    line = fmt.lines[0].pattern
    assert isinstance(line, CorePattern) and line._regex is None
    assert line.groupindex and fmt.lines[0].parse(fmt.lines[0].samples[0].line)
    assert line._regex is None, "an ASCII line was read by the core alone"
    assert line.search("é " + fmt.lines[0].samples[0].line) is not None and line._regex is not None
    begin = TimedPattern(r"^=+ (?P<x>\w)", False)  # a regex the core does not run: the regex package's alone
    assert begin._regex is not None and begin.groupindex == {"x": 1}
