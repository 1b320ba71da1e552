"""Job filters as people type them: ``status:failed fw:megatron host:jz llama``.

Each term narrows: ``status:`` (also ``stalled``), ``fw:``/``framework:``, ``host:``
(``local`` or the SSH alias), ``job:``, and bare words, which match the job name.
Matching is by substring, case-insensitive; every term must match.
"""
from __future__ import annotations

from typing import Callable

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
