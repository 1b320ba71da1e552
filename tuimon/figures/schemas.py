"""The JSON Schemas of every machine-readable output, derived from the types that make the output.

``summary --format json`` (the typed record, :func:`.record.json_schema`), ``summary --columns ...
--format json`` (the chosen columns of the column registry), ``events`` (one JSON object a line, one
kind of object per event type) and ``alerts --format json`` / ``alerts --follow`` / alert hooks.  Each
object carries ``schema_version``; ``docs/*.schema.json`` are these schemas written out (a test holds
the files to this module and real outputs to the files).  A version is bumped when a key changes
meaning or goes away; a new key keeps it.
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Any

from ..parsers.events import EVENT_TYPES
from .alerts import ALERTS_SCHEMA_VERSION, Alert
from .columns import COLUMNS
from .record import SCHEMA_VERSION, _schema_of, json_schema

EVENTS_SCHEMA_VERSION = 1
DRAFT = "https://json-schema.org/draft/2020-12/schema"
#: a float an event carries: JSON has no inf or nan, so events keep them as these strings (never lost)
_FLOAT = {"anyOf": [{"type": "number"}, {"enum": ["nan", "inf", "-inf"]}]}
#: how the events write a float (see _FLOAT); every other type as the summary's schema does
_EVENT_SCALARS: dict[Any, dict[str, Any]] = {float: _FLOAT}


def _of(tp: Any) -> dict[str, Any]:
    return _schema_of(tp, _EVENT_SCALARS)


def _event_schema(name: str, cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    props: dict[str, Any] = {"schema_version": {"const": EVENTS_SCHEMA_VERSION}, "type": {"const": name}}
    props.update({field: _of(hints[field]) for field in cls._fields})  # type: ignore[attr-defined]
    return {"title": name, "type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


def events_schema() -> dict[str, Any]:
    """One line of ``tuimon events`` (JSON lines): an object of one of the event types, by its ``type``, or an
    alert (``--alert`` rules; the alert carries its own schema's version)."""
    return {"$schema": DRAFT, "title": "tuimon event",
            "description": "One line of `tuimon events`: a typed event read from a log line, or an alert. Fields a "
                           "line does not give are null; floats that are not finite are the strings nan, inf, -inf.",
            "oneOf": [*(_event_schema(name, cls) for name, cls in EVENT_TYPES.items()), _alert_object()]}


def _alert_object() -> dict[str, Any]:
    hints = typing.get_type_hints(Alert)
    props: dict[str, Any] = {"schema_version": {"const": ALERTS_SCHEMA_VERSION}, "type": {"const": "alert"}}
    for f in dataclasses.fields(Alert):
        if f.name in Alert.PRIVATE:
            continue
        props[f.name] = _schema_of(hints[f.name])  # (an alert's figures are finite: plain numbers)
    return {"title": "alert", "type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


def alerts_schema() -> dict[str, Any]:
    """``tuimon alerts --format json`` (an array of these) and each line of ``--follow`` and of a hook's body."""
    return {"$schema": DRAFT, "title": "tuimon alert",
            "description": "An alert: `tuimon alerts --format json` prints an array of them; `--follow`, "
                           "`--format json` and the hooks' bodies one object each.", **_alert_object()}


def columns_schema() -> dict[str, Any]:
    """``tuimon summary --columns A,B,... --format json``: an array of objects holding the chosen columns."""
    props: dict[str, Any] = {"schema_version": {"const": SCHEMA_VERSION}}
    for c in COLUMNS:
        if c.live:  # the live view's own figures are not columns of a summary
            continue
        kind = "string" if c.digits is None else "number"
        props[c.name] = {"type": [kind, "null"], "description": c.header + (" (a fraction)" if c.percent else "")}
    return {"$schema": DRAFT, "title": "tuimon summary columns",
            "description": "`tuimon summary --columns A,B,... --format json`: per job, schema_version and the "
                           "columns asked for.",
            "type": "array",
            "items": {"type": "object", "properties": props, "required": ["schema_version"],
                      "additionalProperties": False, "minProperties": 2}}


#: file name under docs/ -> the schema
SCHEMAS = {"summary.schema.json": json_schema, "summary-columns.schema.json": columns_schema,
           "events.schema.json": events_schema, "alerts.schema.json": alerts_schema}

