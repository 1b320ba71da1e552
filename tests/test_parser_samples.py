"""Every sample line a parser declares yields the declared event, field by field."""
from __future__ import annotations

import math
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuimon.parsers import ALL_PARSERS, LineContext
from tuimon.parsers.formats import BUILTIN_FORMATS
from tuimon.parsers.schema import sample_errors
from tuimon.engine.blocks import BlockEngine
from tuimon.engine.ingest import parse_file

CASES = [(cls, i, s) for cls in ALL_PARSERS for i, s in enumerate(cls.SAMPLES)]


def _same(want, got) -> bool:
    if isinstance(want, float) and isinstance(got, float):
        if math.isnan(want):
            return math.isnan(got)
        return got == want or math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9)
    if isinstance(want, Mapping):
        return isinstance(got, Mapping) and set(want) == set(got) and all(_same(v, got[k]) for k, v in want.items())
    return want == got


@pytest.mark.parametrize("fmt", BUILTIN_FORMATS, ids=lambda f: f.name)
def test_builtin_data_formats_check_their_samples(fmt):
    """Built-in line formats are data in the users' schema: every entry has samples,
    each gives what it expects, read alone and through the engine."""
    assert fmt.lines and all(entry.samples for entry in fmt.lines)
    assert sample_errors(fmt) == []
    from tuimon.parsers.schema import _expected_view

    for entry in fmt.lines:
        for sample in entry.samples:
            engine = BlockEngine("sample.log", (), builtin_formats=[fmt])
            for n, line in enumerate(sample.context, 1):
                engine.feed_line(line, n)
            events = engine.feed_line(sample.line, len(sample.context) + 1)
            got = [e for e in events if e.type == entry.event]
            assert got, sample.line
            # (a line two entries read, a launch line that is also a date line, gives one event each:
            # the entry's is one of them)
            views = [_expected_view(entry.event, e._asdict()) for e in got]
            assert any(all(_same(want, view[name]) for name, want in sample.expect.items()) for view in views), \
                (sample.line, sample.expect, views)


def test_every_parser_declares_samples():
    for cls in ALL_PARSERS:
        assert len(cls.SAMPLES) >= 3, cls.name


@pytest.mark.parametrize("cls,index,sample", CASES, ids=[f"{c.name}-{i}" for c, i, _ in CASES])
def test_sample(cls, index, sample):
    ps = BlockEngine("sample.log", [cls], sniff=False)
    for n, line in enumerate(sample.context, 1):
        ps.feed_line(line, n)
    events = ps.feed_line(sample.line, len(sample.context) + 1)
    if sample.type is None:
        assert events == [], f"{cls.name} should ignore {sample.line!r}"
        return
    matching = [e for e in events if e.type == sample.type]
    assert matching, f"no {sample.type} event from {sample.line!r}: got {[e.type for e in events]}"
    event = matching[0]
    assert event.file == "sample.log" and 1 <= event.line <= len(sample.context) + 1
    for name, want in sample.fields.items():
        got = getattr(event, name)
        assert _same(want, got), f"{name}: want {want!r}, got {got!r}"


@pytest.mark.parametrize("cls", ALL_PARSERS, ids=lambda c: c.name)
def test_samples_are_sniffed(cls):
    """A file made of a parser's samples switches that parser on."""
    if cls.SNIFF is None:
        return
    text = "\n".join(line for s in cls.SAMPLES for line in (*s.context, s.line))
    assert cls.SNIFF.search(text), cls.name


def test_events_are_immutable_and_typed():
    from tuimon.parsers.events import EVENT_TYPES, Iteration

    ev = Iteration(file="f", line=3, iteration=7, losses={"lm loss": 1.0})
    with pytest.raises(AttributeError):
        ev.iteration = 8  # type: ignore[misc]
    assert ev.to_dict()["type"] == "iteration" and ev.to_dict()["iteration"] == 7
    assert set(EVENT_TYPES) == {"run_config", "iteration", "step", "throughput", "timers", "memory", "milestone",
                                "checkpoint", "resume", "eval", "warning", "failure", "exit", "truncated"}
    for name, cls in EVENT_TYPES.items():
        d = cls(file="x", line=1).to_dict()
        assert d["type"] == name and d["file"] == "x" and d["line"] == 1


def test_every_event_starts_with_the_common_fields():
    from tuimon.parsers.events import EVENT_TYPES

    for cls in EVENT_TYPES.values():
        assert cls._fields[:5] == ("file", "line", "rank", "node", "wall_time"), cls.__name__


_SAMPLE_LINES = sorted({line for cls in ALL_PARSERS for s in cls.SAMPLES for line in (*s.context, s.line)})
_NOISE = st.sampled_from(["", "nan", "inf", "-", "1e999", "|", ":", "=", "/", " ", "[", "]", "\x1b[31m", "\ufffd",
                          "9" * 30, "loss", "step", ",", "%", "(", ")", "é", "\t"])


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(_SAMPLE_LINES), st.lists(st.tuples(st.integers(0, 400), st.integers(0, 12), _NOISE),
                                                 max_size=6))
def test_handlers_never_raise_on_mangled_samples(line, edits):
    """Every parser, fed a sample line of any parser with parts cut out and
    numbers or separators put in, returns events or nothing, and never raises
    (the dispatcher would drop the line: a bug that loses data quietly)."""
    for at, cut, noise in edits:
        at = min(at, len(line))
        line = line[:at] + noise + line[at + cut:]
    ctx = LineContext("fuzz.log", 1, None, None, None, None)
    for cls in ALL_PARSERS:
        parser = cls("fuzz.log")
        out = parser.feed(line, ctx)
        assert isinstance(out, list)


def test_command_flags_split_as_the_shell_would():
    """A launcher's command line is split by shlex's rules; the fast split of a line
    without quotes or backslashes gives the same words (random lines, and \\x0b, \\xa0
    that str.split would take for spaces)."""
    import random
    import shlex

    from tuimon.parsers.common import flags_from_command

    def reference(command: str) -> dict[str, str]:
        words = shlex.split(command, posix=True)
        out, i = {}, 0
        while i < len(words):
            w = words[i]
            if w.startswith("--") and len(w) > 2:
                name, eq, value = w[2:].partition("=")
                if not eq and i + 1 < len(words) and words[i + 1] and not words[i + 1].startswith("--"):
                    value = words[i + 1]
                    i += 1
                out[name.replace("-", "_")] = value
            i += 1
        return out

    rng = random.Random(17)
    alphabet = ["--num-layers", "--bf16", "=", "32", " ", "  ", "\t", "\x0b", "\xa0", "-", "#", "a", "é", "\n", "--",
                "---x", "\r", "--a=", "="]
    for _ in range(20000):
        command = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 14)))
        assert list(flags_from_command(command).items()) == list(reference(command).items()), repr(command)
    assert flags_from_command("--a 'x y' --b=\"1 2\" --c") == {"a": "x y", "b": "1 2", "c": ""}


_SHELL_PIECES = st.sampled_from(["a", "--x", "=", "1", " ", "  ", "\t", "\n", "\r", "\x0b", "'", '"', "\\", "\\\\",
                                 "\\'", '\\"', "$", "`", "é", "#", "'a b'", '"c d"', '"e\\"f"', "''"])


@settings(max_examples=4000, deadline=None)
@given(pieces=st.lists(_SHELL_PIECES, max_size=20))
def test_shell_words_are_shlex_words(pieces):
    """The fast split of a quoted launch command gives shlex's (POSIX) words, and raises
    where shlex raises (an open quote, a lone last backslash)."""
    import shlex

    from tuimon.parsers.common import shell_words

    command = "".join(pieces)
    try:
        want: object = shlex.split(command, posix=True)
    except ValueError as exc:
        want = ("ValueError", str(exc))
    try:
        got: object = shell_words(command)
    except ValueError as exc:
        got = ("ValueError", str(exc))
    assert got == want, repr(command)


_PROGRESS_PIECES = st.sampled_from(["step", "STEP", "Step", "iter", "ITERATION", "batch", "Epoch", "num_updates",
                                    "global_step", "global step", "steps: ", "loss: ", "=", ": ", " ", "1", "/", "10",
                                    "|", "%|", "{'loss'", "[titan]", "]", "iter=", "reduced_train_loss", "x", "-",
                                    ".", "\t", "ste", "p", "ſtep", "İter"])


_STEP_KEYS = st.sampled_from(["step", "num_updates", "global_step", "global step", "iteration", "iter", "batch",
                              "epoch", "iteration 3/ 9 |", "steps: 2 loss: ", "1%|"])


@settings(max_examples=4000, deadline=None)
@given(before=st.lists(_PROGRESS_PIECES, max_size=5), key=_STEP_KEYS, upper=st.booleans(),
       sep=st.sampled_from(["=", ": ", " ", "='", "\": "]), after=st.lists(_PROGRESS_PIECES, max_size=5))
def test_the_progress_parsers_quick_tests_never_skip_a_match(before, key, upper, sep, after):
    """The progress parser searches a line for a step, or for another parser's line, only
    where the words those regexes need are in it: every line they match holds them."""
    from tuimon.parsers import progress

    body = "".join(before) + (key.upper() if upper else key) + sep + "12" + "".join(after)
    if progress._OTHERS.search(body):
        assert any(n in body for n in progress._OTHERS_NEEDLES), body
    if progress._STEP.search(body) and body.isascii():
        assert any(w in body.lower() for w in progress._STEP_WORDS), body


def test_a_torchtitan_log_from_before_its_titan_tag_is_read_as_torchtitan(tmp_path):
    """Until 2025 torchtitan's lines had no ``[titan]`` tag, and until 2024-08 it said
    ``wps``: such a log gives its throughput, MFU and memory, not a generic step only."""
    path = tmp_path / "llama3_8b.log"
    path.write_text("[rank0]:2024-05-15 10:00:00,000 - root - INFO - Starting job: Llama 3 8B training\n"
                    "[rank0]:2024-05-15 10:00:10,000 - root - INFO - step:  1  loss: 12.2345  "
                    "memory: 30.12GiB(31.70%)  wps: 1,234  mfu: 7.50%\n"
                    "[rank0]:2024-05-15 10:00:20,000 - root - INFO - step: 10  loss:  7.1234  "
                    "memory: 30.12GiB(31.70%)  wps: 5,678  mfu: 39.57%\n")
    events, _ = parse_file(path)
    assert [e.framework for e in events if e.type == "run_config" and e.framework] == ["torchtitan"]
    assert [(e.iteration, e.tokens_per_gpu_per_sec, e.mfu) for e in events if e.type == "throughput"] == \
        [(1, 1234.0, 7.5), (10, 5678.0, 39.57)]
    assert [e.gpu_max_reserved_mb for e in events if e.type == "memory"] == [30.12 * 1024] * 2


from tuimon.parsers.prefix import split_prefix  # noqa: E402

PREFIXES = ("0: ", " 3: ", "[rank0]: ", "[default0]:", "nid001234: ")


@pytest.mark.parametrize("prefix", PREFIXES)
def test_samples_read_the_same_behind_a_launcher_prefix(prefix):
    """srun --label, torchrun and pdsh put a prefix before every line; what a line
    gives must not depend on it (a trigger anchored at the line's start missed the
    DeepSpeed config's closing brace behind "0: ")."""
    missed = []
    for cls, index, sample in CASES:
        if sample.type is None or split_prefix(sample.line).body != sample.line:
            continue  # a sample with a prefix of its own
        ps = BlockEngine("sample.log", [cls], sniff=False)
        for n, line in enumerate(sample.context, 1):
            ps.feed_line(prefix + line, n)
        events = ps.feed_line(prefix + sample.line, len(sample.context) + 1)
        if not any(e.type == sample.type for e in events):
            missed.append(f"{cls.name}-{index}: {sample.line[:80]!r}")
    assert missed == []


_NEOX_PIECES = st.sampled_from(["True", "1024", ".", "....", "default", "updated", "defaul", "pdated", " ", "{'a': 1}",
                                "x" * 40, "é", "d", "u"])


@settings(max_examples=3000, deadline=None)
@given(name=st.sampled_from(["lr", "num_layers", "a_very_long_argument_name_over_32_chars"]),
       pieces=st.lists(_NEOX_PIECES, max_size=8))
def test_an_argument_value_loses_the_neox_note_as_the_regex_and_the_width_say(name, pieces):
    """The quick return (a value ending in neither note word) gives what the full reading gives."""
    from tuimon.parsers.formats.megatron import _neox_value, _without_note

    value = "".join(pieces).strip()  # (a pair's value: the block's pattern leaves no white space around it)
    assert _neox_value(name, value) == _without_note(name, value), value
