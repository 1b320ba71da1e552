"""User formats turned off while running: one whose regex ran over its time bound on
some line is off for every file of the process, with one warning; the rest go on.

The set is per process (a pool worker reports its own back in ``ParseStats.disabled``).
Readers of warnings take the new ones with :func:`take_new`.
"""
from __future__ import annotations

import threading

_lock = threading.Lock()
_disabled: dict[str, str] = {}  # format name -> why
_untold: list[str] = []


def disable(name: str, reason: str) -> None:
    with _lock:
        if name in _disabled:
            return
        _disabled[name] = reason
        _untold.append(f"format {name!r} turned off: {reason}; the other formats go on")


def is_disabled(name: str) -> bool:
    return name in _disabled


def disabled() -> dict[str, str]:
    with _lock:
        return dict(_disabled)


def take_new() -> list[str]:
    """Warnings not taken yet (each once)."""
    with _lock:
        out, _untold[:] = list(_untold), []
        return out


def adopt(reasons: dict[str, str]) -> None:
    """Formats another process turned off (a pool worker's)."""
    for name, reason in reasons.items():
        disable(name, reason)
