"""Filters as people type them: ``status:failed fw:megatron host:jz llama`` on the jobs table,
``kind:nan rank:3 llama`` on any other table.

Jobs: each term narrows: ``status:`` (also ``stalled``), ``fw:``/``framework:``, ``host:``
(``local`` or the SSH alias), ``job:``, and bare words, which match the job name.
Other tables (:func:`compile_row_filter`): ``column:value`` matches that column's text, a bare word
any column's. Matching is by substring, case-insensitive; every term must match.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional, Sequence

from .record import Summary

FIELDS = {"status": "status", "fw": "framework", "framework": "framework", "host": "host", "job": "job"}


def host_of(summary: Summary) -> str:
    """``local``, or the SSH alias of a job whose file labels are ``alias:path``."""
    from ..sources.specs import host_and_path

    files = summary.files
    return host_and_path(files[0])[0] if files else "local"


def compile_filter(text: str) -> Callable[[Summary, bool], bool]:
    """A predicate over (summary, stalled) for the filter ``text``."""
    terms: list[tuple[str, str]] = []
    for word in text.split():
        name, sep, value = word.partition(":")
        if sep and name.lower() in FIELDS:
            terms.append((FIELDS[name.lower()], value.lower()))
        else:
            terms.append(("job", word.lower()))

    def matches(summary: Summary, stalled: bool = False) -> bool:
        for field, value in terms:
            if field == "status":
                status = "stalled" if stalled else summary.status
                if value not in status.lower() and not (value == "stalled" and stalled):
                    return False
            elif field == "host":
                if value not in host_of(summary).lower():
                    return False
            elif value not in str(getattr(summary, field) or "").lower():
                return False
        return True
    return matches


def compile_row_filter(text: str, columns: Iterable[str]) -> Callable[[Sequence[str]], bool]:
    """A predicate over a table row's cells (their text, in the order of ``columns``, the headers) for the
    filter ``text``: ``kind:nan`` narrows to rows whose Kind holds ``nan``; a bare word (or a ``name:`` that
    is no column's) must be in one of the cells."""
    index = {name.lower(): i for i, name in enumerate(columns)}
    terms: list[tuple[Optional[int], str]] = []
    for word in text.lower().split():
        name, sep, value = word.partition(":")
        if sep and name in index:
            terms.append((index[name], value))
        else:
            terms.append((None, word))

    def matches(cells: Sequence[str]) -> bool:
        low = [c.lower() for c in cells]
        return all(value in low[at] if at is not None else any(value in c for c in low) for at, value in terms)
    return matches
