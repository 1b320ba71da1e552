"""Finding log files under the paths a user names (headless, one-shot walk), by the one scope
rule every verb follows (:mod:`.scope`)."""
from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Callable, Iterable, Optional, Sequence

from .scope import DEFAULT_EXCLUDE, DEFAULT_INCLUDE, SNIFF_BYTES, Scope, looks_binary, matches, refusal, refused_encoding
from .scope import LOG as SCOPE_LOG

__all__ = ["DEFAULT_EXCLUDE", "DEFAULT_INCLUDE", "PathError", "discover", "matches"]


class PathError(Exception):
    """A path the user named cannot be read; the message is one line for the user."""


def discover(paths: Iterable[str], include: Sequence[str] = DEFAULT_INCLUDE,
             exclude: Sequence[str] = DEFAULT_EXCLUDE,
             on_skip: Callable[[str], None] = lambda message: None, follow_links: bool = False,
             scope: Optional[Scope] = None) -> list[Path]:
    """Files named directly are always taken; directories are walked recursively (each real
    directory once; a link leaving the tree only with ``follow_links``) for files matching
    ``include`` and not ``exclude`` whose first bytes are text.  Only regular files are taken:
    a FIFO or a device would block or never end; each one skipped is told to ``on_skip``.
    Raises :class:`PathError`."""
    from .walk import DirectoryWalker

    scope = scope or Scope(tuple(include), tuple(exclude), follow_links)
    walker = DirectoryWalker(scope.wants, on_skip, time.monotonic, scope.enters, retries=False)
    found: list[Path] = []
    seen: set[str] = set()
    for raw in paths:
        path = Path(os.path.expanduser(raw))
        if not path.exists():
            raise PathError(f"no such file or directory: {raw}")
        if path.is_dir():
            if not os.access(path, os.R_OK | os.X_OK):
                raise PathError(f"permission denied: {raw}")
            for name in walker.walk(str(path)):
                _add(found, seen, Path(name), on_skip, sniff=True)
        else:
            if not os.access(path, os.R_OK):
                raise PathError(f"permission denied: {raw}")
            _add(found, seen, path, on_skip, sniff=False)
    return found


def _add(found: list[Path], seen: set[str], path: Path, on_skip: Callable[[str], None], sniff: bool) -> None:
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
    head = _head(path)
    encoding = refused_encoding(head)
    if encoding:
        on_skip(refusal(str(path), encoding))
        return
    if sniff and looks_binary(head):
        SCOPE_LOG.debug("skipped %s: not text (its name matches, its first bytes are binary)", path)
        return
    found.append(path)


def _head(path: Path) -> bytes:
    from .files import open_regular

    try:
        fd, _ = open_regular(str(path))
    except OSError:
        return b""  # reading it will say why
    try:
        return os.pread(fd, SNIFF_BYTES * 2, 0)
    except OSError:
        return b""
    finally:
        os.close(fd)
