"""``tuimon events``' lines written by the compiled core (``core/src/jsonline.rs``) against
Python's ``json`` encoder, its definition: the same text, byte for byte, for every event type,
every kind of value an event holds (floats to the last digit, ties included; strings with
quotes, control characters, escapes, text past ASCII and past the BMP), and the values the core
leaves to Python (a key that is no string, a subclass of str or int, a lone surrogate)."""
from __future__ import annotations

import enum
import json
import math
import random
import struct
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURE_LOGS, shared_or_skip
from tuimon.engine import native
from tuimon.engine.ingest import parse_file
from tuimon.parsers.events import EVENT_TYPES, FLAT_TYPES, FrozenDict

if native.core is None:  # loud: the README's test command builds it; a test that cannot compare must not pass
    pytest.skip(f"the compiled core is not importable ({native.name()}): "
                "pip install -e '.[test]' builds it (cargo and maturin)", allow_module_level=True)

_ENCODE = json.JSONEncoder(allow_nan=False, check_circular=False).encode


def _one(event: Any) -> str:
    """The line Python writes (commands.cli._json_lines)."""
    return _ENCODE({"schema_version": 1, **event.to_dict()}) + "\n"


def _python(events: list) -> str:
    return "".join(map(_one, events))


class _Kind(enum.IntEnum):
    A = 7


class _Text(str):
    pass


_TIES = [-1113178120592002.25, 2.5, 0.125, 1e16 + 2, 9007199254740993.0 / 2, 1234567890123456.75]
_FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1e16, 1e15, 1e-4, 1e-5, 5e-324, 1.7976931348623157e308, *_TIES]),
    st.integers(min_value=0, max_value=(1 << 64) - 1).map(lambda b: struct.unpack("<d", struct.pack("<Q", b))[0]),
    st.integers(min_value=1, max_value=1 << 53).map(lambda m: m / 8),  # (halfway cases live among these)
)
_TEXT = st.text(st.characters(codec="utf-8"), max_size=12) | st.sampled_from(
    ['a"b\\c', "\x1b[31mred\x1b[0m", "\x00\x08\x0c\n\r\t\x7f", "é€😀", "\ud800", "~ ", ""])
_PLAIN = st.one_of(st.none(), st.booleans(), st.integers(min_value=-(1 << 70), max_value=1 << 70), _FLOATS, _TEXT,
                   _FLOATS.map(np.float64))
_VALUES = st.recursive(_PLAIN, lambda inner: st.one_of(
    st.dictionaries(_TEXT, inner, max_size=4),
    st.dictionaries(_TEXT, inner, max_size=4).map(FrozenDict),
    st.lists(inner, max_size=4),
    st.lists(inner, max_size=4).map(tuple),
), max_leaves=8)
_LEFT_TO_PYTHON = st.sampled_from([{1: 2.0}, {None: "x"}, _Text("sub"), _Kind.A, [_Kind.A], {"k": _Text("v")}])


@st.composite
def _events(draw: Any, values: Any = _VALUES) -> Any:
    kind = draw(st.sampled_from(FLAT_TYPES))
    fields = kind._fields
    drawn = {name: draw(values) for name in draw(st.lists(st.sampled_from(fields), max_size=len(fields), unique=True))}
    return kind(**{"file": "f.log", "line": 1, **drawn})


@settings(max_examples=600, deadline=None)
@given(st.lists(_events(), max_size=6))
def test_the_core_writes_each_event_as_python_s_encoder_does(events):
    assert native.json_lines(events, 1, _one) == _python(events)


@settings(max_examples=200, deadline=None)
@given(st.lists(_events(st.one_of(_VALUES, _LEFT_TO_PYTHON)), max_size=6))
def test_values_the_core_leaves_are_written_by_python(events):
    assert native.json_lines(events, 1, _one) == _python(events)


def test_floats_to_the_last_digit():
    """Random doubles, and those halfway between two shortest candidates (Python takes the even)."""
    rng = random.Random(46)
    values = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(100_000)]
    values += [rng.randrange(1, 1 << 53) / rng.choice([1, 2, 4, 8, 16, 1024]) * rng.choice([1, 2, 4, 1 << 20])
               for _ in range(100_000)]
    values += _TIES
    kind = EVENT_TYPES["step"]
    events = [kind(file="f", line=1, loss=v) for v in values]
    got, want = native.json_lines(events, 1, _one).splitlines(), _python(events).splitlines()
    wrong = [(v, a, b) for v, a, b in zip(values, got, want) if a != b]
    assert not wrong, wrong[:5]
    assert '"loss": -1113178120592002.2,' in native.json_lines([kind(file="f", line=1, loss=_TIES[0])], 1, _one)
    assert any(math.isnan(v) for v in values)


def test_events_of_the_fixtures_read_the_same():
    """Every fixture's events, as ``tuimon events`` writes them, by the core and by Python."""
    events = [ev for path in FIXTURE_LOGS for ev in parse_file(path)[0]]
    assert len(events) > 300
    assert native.json_lines(events, 1, _one) == _python(events)


def test_events_of_the_corpus_read_the_same():
    """Every corpus log's events (67,000 of them), by the core and by Python."""
    corpus = shared_or_skip("corpus")
    events = [ev for path in sorted(corpus.rglob("*")) if path.is_file() and path.suffix != ".tsv"
              for ev in parse_file(path)[0]]
    assert len(events) > 50_000
    assert native.json_lines(events, 1, _one) == _python(events)


def test_an_event_the_core_does_not_know_goes_to_python():
    class Other:
        type = "other"

        def to_dict(self) -> dict:
            return {"type": self.type, "x": 1}

    assert native.json_lines([Other()], 1, _one) == _one(Other())
