"""Finding log files under the paths a user names (headless, one-shot walk)."""
from __future__ import annotations

import fnmatch
import os
import stat
from pathlib import Path
from typing import Callable, Iterable, Sequence

#: PBS names a job's streams ``NAME.o<job id>`` and ``NAME.e<job id>`` (Aurora, Polaris)
DEFAULT_INCLUDE = ("*.log", "*.out", "*.err", "*.txt", "*.o[0-9]*", "*.e[0-9]*")
DEFAULT_EXCLUDE = ("*.swp", "*~", ".*")


class PathError(Exception):
    """A path the user named cannot be read; the message is one line for the user."""


def matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def discover(paths: Iterable[str], include: Sequence[str] = DEFAULT_INCLUDE,
             exclude: Sequence[str] = DEFAULT_EXCLUDE,
             on_skip: Callable[[str], None] = lambda message: None) -> list[Path]:
    """Files named directly are always taken; directories are walked recursively
    (symlinked directories are not entered, so no loop) for files matching
    ``include`` and not ``exclude``.  Only regular files are taken: a FIFO or a
    device would block or never end; each one skipped is told to ``on_skip``.
    Raises :class:`PathError`."""
    found: list[Path] = []
    seen: set[str] = set()
    for raw in paths:
        path = Path(os.path.expanduser(raw))
        if not path.exists():
            raise PathError(f"no such file or directory: {raw}")
        if path.is_dir():
            if not os.access(path, os.R_OK | os.X_OK):
                raise PathError(f"permission denied: {raw}")
            for root, dirs, files in os.walk(path, onerror=None):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                for name in sorted(files):
                    if matches(name, include) and not matches(name, exclude):
                        _add(found, seen, Path(root) / name, on_skip)
        else:
            if not os.access(path, os.R_OK):
                raise PathError(f"permission denied: {raw}")
            _add(found, seen, path, on_skip)
    return found


def _add(found: list[Path], seen: set[str], path: Path, on_skip: Callable[[str], None]) -> None:
    key = str(path)
    if key in seen:
        return
    seen.add(key)
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        on_skip(f"{path}: {exc.strerror}: skipped")
        return
    if not stat.S_ISREG(mode):
        from .files import kind_of

        on_skip(f"{path} is {kind_of(mode)}: skipped (only regular files are read)")
        return
    found.append(path)
