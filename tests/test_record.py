"""The summary record: typed, versioned, its JSON schema documented and checked
against real output; every aggregation the field registry declares implemented; the
column registry the one source of every table, the jobs screen and /metrics."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import numpy as np
import pytest

from tests.conftest import shared_or_skip
from tuimon.figures import columns as cols
from tuimon.figures.metrics import AGGREGATES, aggregate
from tuimon.figures.record import SCHEMA_VERSION, Summary, from_dict, json_schema
from tuimon.store.fields import AGGS, FIELDS, Field

ROOT = Path(__file__).resolve().parents[1]
SCHEMA_DOC = ROOT / "docs" / "summary.schema.json"
FIXTURES = ROOT / "tests" / "fixtures"
FORMATS = ROOT / "tests" / "formats"


def test_the_documented_schema_is_the_one_the_code_derives():
    derived = json.dumps(json_schema(), indent=2) + "\n"
    if os.environ.get("TUIMON_UPDATE_GOLDEN"):
        SCHEMA_DOC.write_text(derived)
    assert SCHEMA_DOC.read_text() == derived, \
        "docs/summary.schema.json is stale: TUIMON_UPDATE_GOLDEN=1 pytest tests/test_record.py, review, commit"


def _summary_json(*paths: Path) -> list[dict]:
    out = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--format", "json", "--no-cache",
                          *map(str, paths)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _validate(rows: list[dict]) -> None:
    jsonschema.validate(rows, json.loads(SCHEMA_DOC.read_text()))
    assert rows and all(r["schema_version"] == SCHEMA_VERSION for r in rows)


def test_fixture_and_format_summaries_match_the_schema():
    rows = _summary_json(FIXTURES, FORMATS)
    _validate(rows)
    assert len(rows) >= 10 and {r["status"] for r in rows} >= {"failed", "finished"}


def test_corpus_summaries_match_the_schema():
    rows = _summary_json(shared_or_skip("corpus"))
    _validate(rows)
    assert len(rows) > 100


def test_the_schema_refuses_what_it_should():
    rows = _summary_json(FIXTURES / "stronghold-run.log")
    schema = json.loads(SCHEMA_DOC.read_text())
    for broken in ({**rows[0], "schema_version": SCHEMA_VERSION + 1}, {**rows[0], "mfu": "high"},
                   {k: v for k, v in rows[0].items() if k != "status"}, {**rows[0], "surprise": 1}):
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate([broken], schema)


def test_the_json_reads_back_into_the_same_record():
    rows = _summary_json(FIXTURES, FORMATS)
    for row in rows:
        record = from_dict(row)
        assert isinstance(record, Summary) and record.as_dict() == row
    with pytest.raises(ValueError, match="schema version"):
        from_dict({**rows[0], "schema_version": 0})


def test_every_aggregation_a_field_may_declare_is_implemented():
    assert set(AGGS) == set(AGGREGATES)
    assert all(f.agg in AGGREGATES for f in FIELDS)
    nan = float("nan")
    # warm-up (the first points) left out of the median only: a rate, not a total
    values = np.array([100.0, nan, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, nan])
    assert aggregate("last", values) == 10.0
    assert aggregate("max", values) == 100.0
    assert aggregate("sum", values) == 155.0
    assert aggregate("median", values) not in (None, 100.0) and aggregate("median", values) <= 10.0
    for agg in AGGS:
        assert aggregate(agg, np.array([nan, nan])) is None
    with pytest.raises(ValueError, match="agg"):
        Field("x", "<f4", {}, "mean", "", "X")


def test_every_registry_metric_is_a_column_a_screen_choice_and_a_prometheus_family():
    names = {f.metric_name for f in FIELDS if f.summary}
    assert {"tuimon_job_tokens_per_gpu_per_second", "tuimon_job_mfu_reported_ratio"} <= names
    for f in FIELDS:
        if f.summary:
            assert f.key in cols.NAMES and f.key in cols.CSV
            assert (cols.BY_NAME[f.key].screen is not None) == f.shown
    # the screen, its drop order and its sorts are the registry's
    screen = [c.screen for c in cols.SCREEN]
    assert sorted(cols.SCREEN_PRIORITY) == sorted(screen) and cols.SCREEN_PRIORITY[0] == "Job"
    assert set(cols.HEADER_SORTS.values()) == set(cols.SORTS)
    assert all(c.compact is not None or c.live or c.name in ("job", "framework", "status") for c in cols.SCREEN)


def test_summary_table_is_the_column_renderer_with_notes(tmp_path):
    rows = [from_dict(r) for r in _summary_json(FIXTURES)]
    table = cols.render_summary(rows, "table")
    head = table.splitlines()[0]
    for name in cols.SUMMARY:
        assert cols.BY_NAME[name].header in head
    assert cols.render(rows, cols.columns_named(cols.SUMMARY), "table") == table
