"""A data rule's step lines read by the compiled core into rows (tuimon.engine.data_rows),
against the Python engine, its oracle: the same events, and the same store.

Generated logs mix a declared format's step lines (llm.c's, modded-nanogpt's built-in ones,
and a user's with running totals, a stamp-timed step, a constant and two losses) with what
the core must leave to Python's regex: values only ``to_float``/``to_int`` read, text that is
not ASCII, another rule on the same line, Megatron's iteration lines in the same block (the
rows of one block are of one kind), restarts, launcher prefixes and stamps.
"""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.test_core import _items, _same
from tuimon.engine import blocks, catalog, native
from tuimon.engine.data_rows import data_reader
from tuimon.parsers.columns import IterationRows, KeyMaps, copied, expand, map_values
from tuimon.parsers.events import FrozenDict
from tuimon.parsers.formats.loops import LLMC, MODDED_NANOGPT
from tuimon.parsers.schema import compile_builtin, format_from_dict
from tuimon.store.fields import primary_losses

core = native.core

#: a user's step lines: a launcher prefix and a stamp may lead them; the tokens are a running total,
#: the step's time comes from the stamps, the batch is a constant, and two losses fill one map; and
#: nanotron's (the README's example, not anchored: a line may hold two), its numbers with SI suffixes
USER_FORMAT = """name = "steps"
[[lines]]
event = "iteration"
anchor = " aux "
regex = '^(?:\\d+: )?(?:\\[[-\\d :,]+\\] )?it (?:(?P<iteration>\\d+) )?loss (?P<loss>\\S+) aux (?P<loss_aux>\\S+) tok (?P<consumed_tokens>\\S+)'
cumulative = ["consumed_tokens"]
time_from = "stamp"
set = { global_batch = 8 }

[[lines]]
event = "iteration"
anchor = "iteration: "
regex = 'iteration: (?P<iteration>\\d+) / (?P<train_iters>\\d+) \\| consumed_tokens: (?P<consumed_tokens>\\S+) \\| time_per_iteration_ms: (?P<elapsed_ms>\\S+) \\| .*?lm_loss: (?P<loss>\\S+)'
types = { consumed_tokens = "si", elapsed_ms = "si" }
cumulative = ["consumed_tokens"]
"""


@pytest.fixture
def user_format(tmp_path):
    fmt = tmp_path / "steps.toml"
    fmt.write_text(USER_FORMAT)
    cat = catalog.load([fmt])
    assert not cat.errors, cat.errors
    before = catalog.current()
    catalog.use(cat)
    try:
        yield cat.user[0]
    finally:
        catalog.use(before)


_LOSS = st.sampled_from(["2.5", "2.5", "0.125", "nan", "1,5", "-0.0", "3e-2", "inf", "x"])


@st.composite
def _line(draw, k: int) -> str:
    """One line: mostly step lines of the three formats (step ``k``), some of them odd."""
    kind = draw(st.integers(0, 11))
    loss = draw(_LOSS)
    if kind >= 10:  # nanotron's
        tok = draw(st.sampled_from([f"{k * 1.31:.2f}M", f"{k * 131}K", f"{k * 1000}", "1,5M", "inf", "2.5.1K", "7G"]))
        line = (f"iteration: {k} / 100 | consumed_tokens: {tok} | time_per_iteration_ms: "
                f"{draw(st.sampled_from(['1.23K', '1230', 'x', '1e3', '-5K']))} | global_batch_size: 131K | lm_loss: "
                f"{loss} | lr: 0.0003")
        return draw(st.sampled_from(["", "12/05 14:03:11 [INFO|DP=0|PP=0|TP=0|nid001234]: ", "3: "])) + line + \
            draw(st.sampled_from(["", "", " | " + line.replace(f"iteration: {k} ", f"iteration: {k + 1} ")]))
    if kind <= 3:  # the user's
        prefix = draw(st.sampled_from(["", "", "3: ", "12: ", "x: "]))
        stamp = draw(st.sampled_from(["", f"[2024-05-01 10:{k // 60 % 60:02d}:{k % 60:02d},250] ",
                                      f"[2024-05-01 10:00:{(99 - k) % 60:02d}] "]))
        tok = draw(st.sampled_from([str(1000 * k), str(1000 * k), "1,000", "007", str(10 ** 20), "0"]))
        tail = draw(st.sampled_from(["", "", "", " time (ms) | forward-compute: 1.5", " caf\u00e9", "\x1c"]))
        step = draw(st.sampled_from([f"{k} ", f"{k} ", f"{k} ", ""]))  # (a line without its step makes no row)
        return f"{prefix}{stamp}it {step}loss {loss} aux {draw(_LOSS)} tok {tok}{tail}"
    if kind <= 5:  # llm.c's
        step = draw(st.sampled_from([str(k), str(k), f"0{k}", ""]))
        if draw(st.booleans()):
            return f"s:{step} trl:{loss} lr:0.000{k % 10} norm:{draw(_LOSS)}"
        return f"s:{step} trl:{loss}"
    if kind <= 7:  # modded-nanogpt's (its total restarts after the warm-up steps)
        time = draw(st.sampled_from([150 * k, 150 * k, 3, 10 ** 16]))
        if draw(st.booleans()):
            return f"step:{k}/100 train_loss:{loss} train_time:{time}ms step_avg:nanms"
        return f"step:{k}/100 train_time:{time}ms step_avg:1.5ms"
    return draw(st.sampled_from([
        f" iteration {k}/ 100 | elapsed time per iteration (ms): 2500.5 | lm loss: 2.5E+00 |",
        "num_parameters: 124475904 => bytes: 248951808", "plain noise line", "time (ms) | forward-compute: 2.0",
        # Megatron-DeepSpeed's rate lines name the iteration of the parser's lines before them, not the rows'
        "Effective Tera Flops per GPU: 41.2 and total parameters 52.005 B",
        "NumWorkers: 1; SamplesPerStep: 4; IterationTime: 7.123;  SamplesPerSecond: 0.5512"]))


@st.composite
def _log(draw) -> bytes:
    lines, k = [], 1
    for _ in range(draw(st.integers(1, 120))):
        k = draw(st.sampled_from([k + 1, k + 1, k + 1, k + 2, k, max(1, k - 5)]))  # on, on by two, again, back
        lines.append(draw(_line(k)).encode())
    junk = draw(st.sampled_from([b"", b"", b"\xff", b"\xc3"]))
    if junk:
        at = draw(st.integers(0, len(lines) - 1))
        lines[at] = lines[at][:3] + junk + lines[at][3:]
    end = draw(st.sampled_from([b"\n", b"\n", b"\r\n", b"\r"]))  # (CRLF; a lone CR ends a line too)
    return end.join(lines) + end


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_log(), read_size=st.sampled_from([64, 1000, 1 << 16]), walk=st.sampled_from([1, 48, 1 << 40]))
def test_step_lines_give_the_python_engines_events_and_store(data, read_size, walk, tmp_path, monkeypatch,
                                                              user_format):
    path = tmp_path / "gen.log"
    path.write_bytes(data)
    monkeypatch.setattr(blocks, "BULK_WALK", walk)
    _same(path, monkeypatch, read_size)


def _rows_and_events(path: Path) -> tuple[int, list]:
    items = _items(path, "core", 1 << 20)[0]
    return sum(len(item) for item in items if type(item) is IterationRows), expand(items)


@pytest.mark.parametrize("walk", [1, 1 << 40], ids=["at-once", "line-by-line"])
def test_the_core_reads_a_users_steps_with_running_totals_into_rows(walk, tmp_path, monkeypatch, user_format):
    """The rows are the core's (not events gathered afterwards), and their figures are the format's: the
    tokens a step from the running total, per rank; the step time from the stamps; the constant; the
    two losses; the run named by the format before its first step."""
    monkeypatch.setattr(blocks, "BULK_WALK", walk)
    lines = []
    for k in range(1, 201):
        for rank in (0, 1):
            lines.append(f"{rank}: [2024-05-01 10:{k * 2 // 60:02d}:{k * 2 % 60:02d}] it {k} loss 2.5 aux 0.5 "
                         f"tok {1000 * k * (rank + 1)}")
    path = tmp_path / "run.log"
    path.write_text("\n".join(lines) + "\n")
    rows, events = _rows_and_events(path)
    assert rows == 400, rows
    assert _same(path, monkeypatch) == 403  # (and the log's start, the run's name, the stats)
    assert [e.type for e in events[:2]] == ["milestone", "run_config"]
    first = events[1]
    assert (first.framework, first.line, first.rank) == ("steps", 1, 0)
    steps = [e for e in events if e.type == "iteration"]
    assert [(e.iteration, e.rank) for e in steps[:4]] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert steps[0].consumed_tokens is None and steps[0].elapsed_ms is None  # (no step before them)
    assert {(e.rank, e.consumed_tokens, e.elapsed_ms) for e in steps[2:]} == {(0, 1000, 2000.0), (1, 2000, 2000.0)}
    assert {e.global_batch for e in steps} == {8}
    assert dict(steps[5].losses) == {"loss": 2.5, "aux": 0.5}


@pytest.mark.parametrize("fmt", [LLMC, MODDED_NANOGPT], ids=["llm.c", "modded-nanogpt"])
def test_the_built_in_loops_step_lines_have_a_core_reader(fmt):
    built = format_from_dict(fmt, "built-in", compile_builtin)
    steps = [e for e in built.lines if e.event == "iteration"]
    assert steps and all(data_reader(e, built, False, core) is not None for e in steps)
    assert all(data_reader(e, built, False, None) is None for e in steps)  # (the Python engine: no core)


_STEPS = {"event": "iteration", "anchor": " trl:", "regex": r"^s:(?P<iteration>\d+) trl:(?P<loss>\S+)"}


@pytest.mark.parametrize("change", [
    {"event": "step", "regex": r"^s:(?P<step>\d+) trl:(?P<loss>\S+)"},  # rows stand for iterations alone
    {"regex": r"^(?P<rank>\d+): s:(?P<iteration>\d+) trl:(?P<loss>\S+)"},  # the line's rank: Python reads it
    {"regex": r"^s:(?P<iteration>\d+) trl:(?P<loss>\S++)"},  # the core would read it otherwise than re
    {"types": {"loss": "percent"}},  # a value only Python converts
    {"types": {"iteration": "si"}},  # a step read as another type (then rounded)
    {"types": {"iteration": "float"}},  # a step rounded from a float
    {"set": {"rank": 3}},  # a constant rank
    {"cumulative": ["iteration"]},  # the rows' counter a running total
    {"pairs": r"(?P<name>\w+)=(?P<value>\S+)"},  # pairs are read by Python
], ids=lambda change: repr(change)[:40])
def test_a_rule_the_rows_cannot_stand_for_has_no_core_reader(change):
    fmt = format_from_dict({"name": "x", "lines": [_STEPS]}, "x.toml", compile_builtin)
    assert data_reader(fmt.lines[0], fmt, False, core) is not None
    fmt = format_from_dict({"name": "x", "lines": [{**_STEPS, **change}]}, "x.toml", compile_builtin)
    assert data_reader(fmt.lines[0], fmt, False, core) is None


@pytest.mark.parametrize("bound", [4096, 2], ids=["room", "past-the-bound"])
@pytest.mark.parametrize("read_size", [4096, 1 << 20])
@pytest.mark.parametrize("walk", [1, 1 << 40], ids=["at-once", "line-by-line"])
def test_running_totals_taken_a_rank_at_a_time_are_the_python_engines(bound, read_size, walk, tmp_path, monkeypatch,
                                                                      user_format):
    """Four ranks' totals interleaved over many blocks: a total that stays, one that goes down (a
    restart), a step that comes again, stamps a second apart or the same; with room for every rank's
    base, and with room for two (the other ranks' rows get no step value, never a wrong one)."""
    from tuimon.engine import data_rows
    from tuimon.parsers import schema

    monkeypatch.setattr(blocks, "BULK_WALK", walk)
    monkeypatch.setattr(schema, "MAX_RUNNING", bound)
    monkeypatch.setattr(data_rows, "MAX_RUNNING", bound)
    lines, total = [], [0, 0, 0, 0]
    for k in range(1, 700):
        step = k - 300 if k > 400 else k  # (back by 300 at 400: a restart)
        for rank in range(4):
            total[rank] = 0 if k == 400 else total[rank] + (0 if k % 7 == 0 else 100 * (rank + 1))
            second = (k // 3) % 60 if rank % 2 else k % 60
            lines.append(f"{rank}: [2024-05-01 10:{k // 60 % 60:02d}:{second:02d}] it {step - (k % 11 == 0)} "
                         f"loss 2.5 aux 0.5 tok {total[rank]}")
    path = tmp_path / "ranks.log"
    path.write_text("\n".join(lines) + "\n")
    assert _same(path, monkeypatch, read_size) > 2000
    rows, events = _rows_and_events(path)
    assert rows > 2000, rows
    tokens = {e.consumed_tokens for e in events if e.type == "iteration"}
    assert {100, 200, 300, 400, 0}.issubset(tokens) if bound > 4 else {100, 200}.issubset(tokens), sorted(tokens)[:9]


def test_the_core_reads_nanotrons_lines_si_numbers_and_all(tmp_path, monkeypatch, user_format):
    """The README's example format (not anchored, numbers with SI suffixes, a running total of an int
    field read as SI and rounded): rows, the Python engine's events; a line holding two matches is
    left to Python, which makes two events of it."""
    lines = [f"12/05 14:03:{k % 60:02d} [INFO|DP=0|PP=0|TP=0|nid001234]: iteration: {k} / 300 | consumed_tokens: "
             f"{k * 0.131:.3f}M | time_per_iteration_ms: 1.23K | tokens_per_sec: 107K | lm_loss: 9.51 | lr: 0.0003"
             for k in range(1, 301)]
    lines[150] += " | iteration: 999 / 300 | consumed_tokens: 1K | time_per_iteration_ms: 5 | lm_loss: 1.0"
    path = tmp_path / "nanotron.log"
    path.write_text("\n".join(lines) + "\n")
    rows, events = _rows_and_events(path)
    assert rows == 299, rows  # (the line of two matches: its events are Python's)
    assert _same(path, monkeypatch) > 300
    steps = [e for e in events if e.type == "iteration"]
    assert [e.iteration for e in steps[150:153]] == [151, 999, 152]
    assert (steps[5].consumed_tokens, steps[5].elapsed_ms, steps[5].train_iters) == (131000, 1230.0, 300)


def test_a_one_key_map_column_is_the_list_of_its_rows_maps():
    """A data rule's map field one group fills (llm.c's losses) is a column of values, its rows' maps
    made where asked for: each way the store and the events read a column gives what the list of
    FrozenDicts gives."""
    values = [2.5, None, 3.25, float("nan"), 1.0]
    column = KeyMaps("loss", list(values))
    rows = [None if v is None else FrozenDict({"loss": v}) for v in values]
    assert len(column) == len(rows)
    for k in range(-len(rows), len(rows)):
        assert column[k] == rows[k] and type(column[k]) is type(rows[k])
    assert list(column[1:4]) == rows[1:4] and type(column[1:4]) is KeyMaps
    assert list(column) == rows and list(reversed(column)) == rows[::-1]
    assert None in column and FrozenDict({"loss": 1.0}) in column and {"loss": 9.0} not in column
    assert None not in KeyMaps("loss", [1.0]) and column.count(None) == 1 and column.index(None) == 1
    assert column.count(FrozenDict({"loss": 2.5})) == 1 and column.count({"loss": 7.0}) == 0
    assert column == rows and column != rows[:-1] and column != "loss"
    assert repr(list(pickle.loads(pickle.dumps(column)))) == repr(rows)
    copy = copied(column)
    copy.values[0] = 9.0
    assert column.values[0] == 2.5 and copied(rows) == rows and copied(rows) is not rows
    assert map_values(column) is column.values and map_values(rows) is None
    got = primary_losses(column)
    assert got[:3] + got[4:] == values[:3] + values[4:] and got[3] != got[3] and got is not column.values


@pytest.mark.parametrize("line", ["s:{k} trl:3.2810 lr:0.000002 norm:15.24",
                                  "step:{k}/1390 train_loss:3.2810 train_time:{k}000ms step_avg:1000.00ms"],
                         ids=["llm.c", "modded-nanogpt"])
def test_the_loops_rows_keep_their_losses_as_values(line, tmp_path):
    """The built-in loops' step lines, read by the core, keep their one loss a row as a column of
    values (not a map a row); their events hold the maps the hook makes."""
    path = tmp_path / "run.log"
    path.write_text("".join(line.format(k=k) + "\n" for k in range(1, 301)))
    items = _items(path, "core", 1 << 20)[0]
    rows = [item for item in items if type(item) is IterationRows]
    assert rows and all(type(r.fields["losses"]) is KeyMaps for r in rows)
    steps = [e for e in expand(items) if e.type == "iteration"]
    assert len(steps) == 300 and all(type(e.losses) is FrozenDict and len(e.losses) == 1 for e in steps)
    assert {next(iter(e.losses.values())) for e in steps} == {3.281}
