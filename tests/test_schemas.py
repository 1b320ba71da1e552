"""Every machine-readable output is versioned and checked against its published JSON Schema (docs/*.schema.json):
the chosen columns of ``summary --columns``, the JSON lines of ``events``, the alerts of ``alerts --format json``
and ``--follow``; on the fixtures, the format samples and the corpus."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from tests.conftest import FIXTURES, FORMATS, ROOT, shared_or_skip
from tuimon.figures.alerts import ALERTS_SCHEMA_VERSION
from tuimon.figures.columns import COLUMNS
from tuimon.figures.schemas import EVENTS_SCHEMA_VERSION, SCHEMAS
from tuimon.parsers.events import EVENT_TYPES

DOCS = ROOT / "docs"


def _schema(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((DOCS / name).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _tuimon(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tuimon", *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=900)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_published_schemas_are_the_ones_the_code_derives(name):
    derived = json.dumps(SCHEMAS[name](), indent=2) + "\n"
    if os.environ.get("TUIMON_UPDATE_GOLDEN"):
        (DOCS / name).write_text(derived)
    assert (DOCS / name).read_text() == derived, \
        f"docs/{name} is stale: TUIMON_UPDATE_GOLDEN=1 pytest tests/test_schemas.py, review, commit"


def _every_column() -> str:
    return ",".join(c.name for c in COLUMNS if not c.live)


@pytest.mark.parametrize("where", ["fixtures", "corpus"])
def test_summary_columns_match_their_schema(where):
    paths = [str(FIXTURES), str(FORMATS)] if where == "fixtures" else [str(shared_or_skip("corpus"))]
    validator = _schema("summary-columns.schema.json")
    for columns in (_every_column(), "job,tflops,mfu", "status,gpus,speed,loss,progress"):
        r = _tuimon("summary", *paths, "--no-cache", "--columns", columns, "--format", "json")
        assert r.returncode == 0, r.stderr
        rows = json.loads(r.stdout)
        assert len(rows) >= 10
        for row in rows:
            validator.validate([row])
            assert list(row) == ["schema_version", *columns.split(",")]
    # figures, not only nulls: the schema's types are checked on values
    assert sum(v is not None for row in rows for k, v in row.items() if k != "schema_version") > len(rows)


def test_the_columns_schema_refuses_what_it_should():
    validator = _schema("summary-columns.schema.json")
    good = {"schema_version": 2, "job": "a", "mfu": 0.41}
    validator.validate([good])
    for broken in ({**good, "schema_version": 99}, {**good, "mfu": "41%"}, {**good, "surprise": 1},
                   {"schema_version": 2}, {"job": "a"}):
        with pytest.raises(jsonschema.ValidationError):
            validator.validate([broken])


def _events(paths: list[str]) -> list[dict]:
    r = _tuimon("events", *paths, "--no-cache")
    assert r.returncode == 0, r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def test_events_match_their_schema_on_fixtures_and_formats():
    validator = _schema("events.schema.json")
    events = _events([str(FIXTURES), str(FORMATS)])
    for event in events:
        errors = list(validator.iter_errors(event))
        assert not errors, (event, [e.message for e in errors][:3])
    assert all(e["schema_version"] == EVENTS_SCHEMA_VERSION for e in events)
    # most kinds of event show up (the schema is checked on them, not only on its own words)
    assert len({e["type"] for e in events}) >= 10, {e["type"] for e in events}


def test_events_match_their_schema_on_the_corpus():
    corpus = shared_or_skip("corpus")
    validator = _schema("events.schema.json")
    # one file of each framework directory (the whole corpus is millions of lines)
    files = sorted({p.parent: p for p in sorted(corpus.rglob("*")) if p.is_file() and p.suffix in (".log", ".out",
                                                                                                     ".txt")}.values())
    events = _events([str(p) for p in files])
    assert len(events) > 1000
    seen = set()
    for event in events:
        if event["type"] in seen and event["type"] in ("iteration", "step", "timers"):
            continue  # the frequent kinds: a few of each is enough to check their shape
        errors = list(validator.iter_errors(event))
        assert not errors, (event, [e.message for e in errors][:3])
        seen.add(event["type"])


def test_an_event_with_inf_and_nan_keeps_them_as_the_schema_says(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(" iteration        1/     100 | consumed samples:           32 | elapsed time per iteration (ms): "
                   "1000.0 | learning rate: 1.000E-04 | global batch size:    32 | lm loss: nan | loss scale: inf "
                   "| grad norm: inf | number of skipped iterations:   0 | number of nan iterations:   1 |\n")
    (event,) = [e for e in _events([str(log)]) if e["type"] == "iteration"]
    assert event["losses"] == {"lm loss": "nan"} and event["loss_scale"] == "inf"
    _schema("events.schema.json").validate(event)
    with pytest.raises(jsonschema.ValidationError):
        _schema("events.schema.json").validate({**event, "loss_scale": "huge"})
    kinds = json.loads((DOCS / "events.schema.json").read_text())["oneOf"]
    assert set(EVENT_TYPES) | {"alert"} == {s["title"] for s in kinds}


def test_alerts_match_their_schema(tmp_path):
    validator = _schema("alerts.schema.json")
    import shutil
    import time
    logs = tmp_path / "logs"
    for src in (FIXTURES, FORMATS):
        shutil.copytree(src, logs / src.name)
    for path in logs.rglob("*"):  # written an hour ago (a fresh clone's are minutes old): no run is starting
        os.utime(path, (time.time() - 3600, time.time() - 3600))
    r = _tuimon("alerts", str(logs), "--no-cache", "--format", "json")
    assert r.returncode == 1, r.stderr  # it found some (as grep, 1)
    alerts = json.loads(r.stdout)
    assert len(alerts) >= 3 and len({a["kind"] for a in alerts}) >= 2
    for alert in alerts:
        validator.validate(alert)
        assert alert["schema_version"] == ALERTS_SCHEMA_VERSION
    with pytest.raises(jsonschema.ValidationError):
        validator.validate({**alerts[0], "job_key": "x"})


def test_corpus_alerts_match_their_schema():
    corpus = shared_or_skip("corpus")
    r = _tuimon("alerts", str(corpus), "--no-cache", "--format", "json")
    assert r.returncode == 1, r.stderr
    alerts = json.loads(r.stdout)
    validator = _schema("alerts.schema.json")
    for alert in alerts:
        validator.validate(alert)
    assert len({a["kind"] for a in alerts}) >= 3


def test_the_schemas_are_documented():
    readme = (ROOT / "README.md").read_text()
    for name in SCHEMAS:
        assert f"docs/{name}" in readme, name
    assert Path(DOCS / "summary.schema.json").exists()
