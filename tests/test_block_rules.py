"""Block rules (``[[blocks]]``): a block of ``name .... value`` lines read as one event.

Megatron's argument list is the built-in one.  Both engines read a block from the same
definition (:class:`tuimon.parsers.schema.BlockFormat`); the engine reads its pair lines
in bulk, when the block closes or the text it was handed ends, and must give what the
definition gives over the lines alone (:meth:`BlockFormat.read`), however the file is cut
into blocks, whichever engine reads it, and across a saved and restored engine.
"""
from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tuimon.engine import block_rules, native
from tuimon.engine.ingest import FileParser, parse_file
from tuimon.parsers.columns import expand
from tuimon.parsers.formats import BUILTIN_FORMATS
from tuimon.parsers.prefix import split_prefix
from tuimon.parsers.schema import FormatError, format_from_toml, sample_errors

ARGS = next(b for f in BUILTIN_FORMATS for b in f.blocks)
BEGIN = "------------------------ arguments ------------------------"
END = "-------------------- end of arguments ---------------------"


def _arg(name: str, value: str) -> str:
    return f"  {name} {'.' * (48 - len(name))} {value}"  # Megatron's print_args


def _configs(path: Path, engine: str, read_size: int = 1 << 20) -> list[str]:
    """The argument blocks' events: the run_config events at a line that opens one."""
    before = native.use(native.core if engine == "core" else None)
    try:
        events, _ = parse_file(path, read_size=read_size)
    finally:
        native.use(before)
    lines = path.read_text().split("\n")  # (not splitlines: \x1c ends a line to it, not to a log)
    opens = {k + 1 for k, line in enumerate(lines) if ARGS.marker(split_prefix(line).body)}
    return [repr(e) for e in events if e.type == "run_config" and e.line in opens]


def test_the_built_in_argument_block_checks_its_samples():
    megatron = next(f for f in BUILTIN_FORMATS if f.blocks)
    assert sample_errors(megatron) == []


def test_an_argument_list_is_one_event_at_its_first_line(tmp_path):
    lines = ["0: [2024-06-01 10:00:00] > initializing torch distributed ...", "0: " + BEGIN,
             "0: " + _arg("num_layers", "24"), "0: " + _arg("hidden_size", "2048"),
             "0: " + _arg("tensor_model_parallel_size", "4"),
             "0: " + _arg("inference_dynamic_batching_buffer_size_gb", "2"), "0: " + END]
    log = tmp_path / "args.log"
    log.write_text("\n".join(lines) + "\n")
    events, _ = parse_file(log)
    config = [e for e in events if e.type == "run_config" and e.num_layers]
    assert [(e.line, e.num_layers, e.hidden_size, e.tp, e.framework, e.wall_time) for e in config] == \
        [(2, 24, 2048, 4, "megatron-lm", 1717236000.0)]  # the begin line's, with the stamp of the hit line before it


def test_min_max_timer_lines_after_the_block_are_not_read_as_its_pairs(tmp_path, monkeypatch):
    """The argument block reads its own lines, once: the ``(min, max)`` timer lines of
    every iteration after it (``name .....: (1.0, 2.0)``), which the old argument route
    was handed one by one, are never pair lines."""
    read = []
    original = block_rules.BlockRule._read

    def counted(self, after, before):
        read.append((after, before))
        return original(self, after, before)

    monkeypatch.setattr(block_rules.BlockRule, "_read", counted)
    timers = ["(min, max) time across ranks (ms):"] + [
        f"    {name} {'.' * (40 - len(name))}: (1000.12, 1100.34)" for name in ("forward-backward", "optimizer")]
    log = tmp_path / "args.log"
    log.write_text("\n".join([BEGIN, _arg("num_layers", "24"), _arg("hidden_size", "2048"), END,
                              " iteration        1/      10 | lm loss: 1.0 |"] + timers * 50) + "\n")
    events, _ = parse_file(log)
    assert len(read) == 1  # when the block closed; no block is open after it
    config = next(e for e in events if e.type == "run_config" and e.num_layers)
    assert (config.num_layers, config.hidden_size) == (24, 2048)
    assert sum(e.type == "timers" for e in events) == 100


def test_a_block_the_file_ends_in_makes_its_event_at_the_end(tmp_path):
    log = tmp_path / "cut.log"
    log.write_text("\n".join([BEGIN, _arg("num_layers", "8"), _arg("seq_length", "4096")]) + "\n")
    for engine in ("core", "python"):
        got = _configs(log, engine)
        assert len(got) == 1 and "num_layers=8" in got[0] and "seq_length=4096" in got[0], (engine, got)


def test_a_second_begin_starts_afresh_and_an_end_alone_gives_nothing(tmp_path):
    log = tmp_path / "twice.log"
    log.write_text("\n".join([END, BEGIN, _arg("num_layers", "8"), BEGIN, _arg("hidden_size", "64"), END]) + "\n")
    got = _configs(log, "core")
    assert len(got) == 1 and "hidden_size=64" in got[0] and "num_layers=None" in got[0], got
    assert got == _configs(log, "python")


# -- the engines against the definition ---------------------------------------------------
_PREFIX = st.sampled_from(["", "0: ", "12: ", "[default3]: ", "[rank5]: ", "gpu-node12: "])
_LINE = st.one_of(
    st.sampled_from([BEGIN, END, "plain noise", "    optimizer ........: (1.0, 2.0)", " iteration 1/ 10 | lm loss: 1.0 |",
                     "  name .. value", "  x ....y", "  é .... ü", "  num_layers ....... ", "  a .... b\x1c c"]),
    st.builds(_arg, st.sampled_from(["num_layers", "hidden_size", "seq_length", "tensor_model_parallel_size",
                                     "enable_l2l", "fp16", "bf16", "global_batch_size", "train_iters"]),
              st.sampled_from(["24", "2048", "True", "False", "1,024", "nan", "-3", "x" * 300, "é"])),
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.tuples(_PREFIX, _LINE), min_size=1, max_size=40), read_size=st.sampled_from([48, 300, 1 << 16]))
def test_both_engines_read_blocks_as_the_definition_does(lines, read_size, tmp_path):
    text = "\n".join(p + line for p, line in lines) + "\n"
    log = tmp_path / "gen.log"
    log.write_text(text)
    want = ARGS.read([split_prefix(p + line).body for p, line in lines])
    for engine in ("core", "python"):
        got = _configs(log, engine, read_size)
        assert len(got) == len(want), (engine, got, want)
        for event, fields in zip(got, want):
            for name, value in fields.items():
                assert f"{name}={value!r}" in event, (engine, name, value, event)
    if native.core is not None:
        assert _configs(log, "core", read_size) == _configs(log, "python", read_size)


def test_a_restored_engine_finishes_the_block_it_was_in():
    text = "\n".join([BEGIN] + [_arg(f"k{k}", str(k)) for k in range(300)] + [_arg("num_layers", "12"), END]) + "\n"
    data = text.encode()
    whole = FileParser("x.log")
    want = [repr(e) for e in expand(whole.feed(data) + whole.finish())]
    for cut in (len(data) // 3, len(data) - 30):
        cut = data.rindex(b"\n", 0, cut) + 1
        first = FileParser("x.log")
        got = first.feed(data[:cut])
        restored = pickle.loads(pickle.dumps(first))
        restored.engine.attach(first.engine.formats, first.engine.builtin_formats)
        got += restored.feed(data[cut:]) + restored.finish()
        assert [repr(e) for e in expand(got)] == want, cut
    assert any("num_layers=12" in e for e in want)


def test_a_block_keeps_4096_pairs_at_most():
    pairs = [f"  k{k} .... {k}" for k in range(5000)]
    seen: dict = {}
    dataclasses.replace(ARGS, hook=lambda p: [seen.update(p) or {}]).read([BEGIN, *pairs, END])
    assert len(seen) == 4096 and "k4095" in seen and "k4096" not in seen


# -- users' blocks --------------------------------------------------------------------------
USER_BLOCK = r"""
name = "myconf"
description = "a trainer's config dump"

[[blocks]]
event = "run_config"
begin = '^=+ config =+$'
end = '^=+ end config =+$'
pair = '^(?P<name>[a-z_]+) *= *(?P<value>.+)$'
keys = { layers = "num_layers", hidden = "hidden_size", seq = "seq_length", recompute = "activation_checkpointing" }

[[blocks.samples]]
lines = ["===== config =====", "layers = 32", "hidden = 4096", "recompute = yes", "===== end config ====="]
expect = { num_layers = 32, hidden_size = 4096, activation_checkpointing = true }
"""


def test_a_user_block_reads_through_its_keys(tmp_path):
    fmt = format_from_toml(USER_BLOCK, "myconf.toml")
    assert sample_errors(fmt) == []
    fmts = tmp_path / "fmts"
    fmts.mkdir()
    (fmts / "myconf.toml").write_text(USER_BLOCK)
    log = tmp_path / "run.log"
    log.write_text("hello\n===== config =====\nlayers = 24\nhidden = 1024\nseq = 2048\nother = 1\n"
                   "===== end config =====\nstep 1\n")
    from tuimon.engine import catalog
    from tuimon.engine.blocks import BlockEngine
    from tuimon.parsers import ALL_PARSERS

    cat = catalog.load([fmts], defaults=False)
    assert not cat.errors
    for engine in ("core", "python"):
        before = native.use(native.core if engine == "core" else None)
        try:
            eng = BlockEngine("run.log", ALL_PARSERS, cat.user, cat.builtin)
            events = eng.feed_block(log.read_text(), 1) + eng.flush()
        finally:
            native.use(before)
        config = [e for e in events if e.type == "run_config" and e.num_layers]
        assert [(e.line, e.num_layers, e.hidden_size, e.seq_length) for e in config] == [(2, 24, 1024, 2048)], engine


@pytest.mark.parametrize("change, message", [
    (("keys = {", "keyz = {"), "unknown key 'keyz'"),
    (('"num_layers"', '"layers_total"'), "unknown field 'layers_total'"),
    (("'^(?P<name>[a-z_]+)", "'^(?P<nom>[a-z_]+)"), "pair needs groups"),
    (("begin = '^=+ config =+$'", "begin = '^(=+ config'"), "bad begin regex"),
    (("event = \"run_config\"", "event = \"nonsense\""), "unknown event"),
    (("keys = {", "hook = \"x\"\nkeys = {"), "hook is for built-in formats"),
    (("\"hidden = 4096\"", "\"hidden = 4095\""), "hidden_size = 4095, expected 4096"),
])
def test_a_broken_user_block_is_named(change, message):
    try:
        errors = sample_errors(format_from_toml(USER_BLOCK.replace(*change), "myconf.toml"))
    except FormatError as exc:
        errors = [str(exc)]
    assert any("myconf.toml" in e and message in e for e in errors), errors


def test_a_user_block_regex_that_runs_over_its_bound_turns_its_format_off(tmp_path, monkeypatch):
    """A user's pair regex that runs over its time bound (on a line the core leaves to
    Python) turns that format off, once, and the file's other events are all there."""
    from tuimon.engine import catalog, guard
    from tuimon.engine.blocks import BlockEngine
    from tuimon.engine.user_regex import RegexTimeout
    from tuimon.parsers import ALL_PARSERS

    fmts = tmp_path / "fmts"
    fmts.mkdir()
    (fmts / "myconf.toml").write_text(USER_BLOCK)
    cat = catalog.load([fmts], defaults=False)
    block = cat.user[0].blocks[0]

    def hangs(body):
        raise RegexTimeout(block.pair)

    monkeypatch.setattr(type(block), "pair_of", lambda self, body: hangs(body))
    monkeypatch.setattr(guard, "_disabled", {}, raising=False)
    before = native.use(None)
    try:
        eng = BlockEngine("run.log", ALL_PARSERS, cat.user, cat.builtin)
        text = "===== config =====\nlayers = 24\n===== end config =====\n" + \
            "".join(f" iteration {i}/ 10 | lm loss: 1.0 |\n" for i in range(1, 4))
        events = eng.feed_block(text, 1) + eng.flush()
    finally:
        native.use(before)
    assert guard.is_disabled("myconf")
    assert not [e for e in events if e.type == "run_config" and e.num_layers]
    assert [e.iteration for e in events if e.type == "iteration"] == [1, 2, 3]


def test_the_later_line_of_a_name_wins_whichever_engine_reads_each(tmp_path):
    """A line that is not ASCII goes to Python's regex, the others to the core's: the
    pairs still take the lines in their order."""
    log = tmp_path / "twice.log"
    log.write_text("\n".join([BEGIN, _arg("num_layers", "é"), _arg("num_layers", "24"), _arg("hidden_size", "64"),
                              _arg("hidden_size", "é"), END]) + "\n")
    for engine in ("core", "python"):
        got = _configs(log, engine)
        assert len(got) == 1 and "num_layers=24" in got[0] and "hidden_size=None" in got[0], (engine, got)
