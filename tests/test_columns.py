"""The application's reader of number columns (fastnumbers) gives exactly the
stdlib reader's arrays and errors, so lanes read the same numbers either way."""
from __future__ import annotations

import math
import struct

import pytest
from hypothesis import example, given, settings, strategies as st

from parsers import lanes
from tests.conftest import FIXTURE_LOGS
from tests.test_lanes import parse, records
from tuimon import columns
from tuimon.ingest import FileParser

pytestmark = pytest.mark.skipif(columns.try_array is None,
                                reason="fastnumbers is not installed: lanes use the stdlib reader only")


@pytest.fixture
def reader():
    """Installs a reader for one test, then the stdlib one again."""
    yield lanes.use_column_reader
    lanes.use_column_reader(None)


def outcome(read, values: list[str], code: str):
    try:
        out = read(values, code)
    except (ValueError, OverflowError):
        return "error"
    # bit for bit, so -0.0 and 0.0 differ; any NaN is a NaN
    return [("nan" if isinstance(v, float) and math.isnan(v) else struct.pack("<" + code, v)) for v in out]


_TEXT = st.text(alphabet="0123456789.eE+- \tinfaINFAy\u00a0\u0663", max_size=14)
_DECIMAL = st.builds(lambda i, f, e: f"{i}.{f}{e}", st.integers(0, 10**20), st.integers(0, 10**20),
                     st.sampled_from(["", "e5", "E-300", "e+308", "e309", "e-330"]))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_TEXT, _DECIMAL), min_size=1, max_size=6))
@example([" 2602.3", "1e500", "-0", "nan", "-inf", "\u00a01.5"])
@example(["1" * 5000, "0." + "0" * 5000 + "1", "9" * 310, "1e99999", "-1e99999", "1.5e-400"])  # RELIABILITY case 31
@example(["1 2"])
@example(["١٢"])
def test_floats_as_float_reads_them(values):
    assert outcome(columns.read_column, values, "d") == outcome(lanes.read_column, values, "d")


@settings(max_examples=400, deadline=None)
@given(st.lists(st.text(alphabet="0123456789 \t+-", max_size=19), min_size=1, max_size=6))
@example(["  64", "00012", "999999999999999999"])
def test_ints_as_int_reads_them(values):
    assert outcome(columns.read_column, values, "q") == outcome(lanes.read_column, values, "q")


def test_a_file_parser_has_lanes_read_columns_in_c(reader):
    FileParser("run.log")
    assert lanes._read_column is columns.read_column
    assert list(lanes.floats(["1.5", " 2.25 ", "3"])) == [1.5, 2.25, 3.0]
    assert lanes.floats(["1.5", "x"]) is None and lanes.floats(["1_0", "2"]) is None
    assert list(lanes.ints(["  12", "7"])) == [12, 7] and lanes.ints(["1 2", "3"]) is None


@pytest.mark.parametrize("path", FIXTURE_LOGS, ids=lambda p: p.name)
def test_lanes_give_the_same_records_with_either_reader(path, reader):
    text = path.read_text(errors="replace")
    reader(None)
    stdlib = records(parse(text, lanes=True, block_lines=64))
    reader(columns.read_column)
    assert records(parse(text, lanes=True, block_lines=64)) == stdlib
