"""Which formats a run reads with: the built-ins and the user's TOML files.

User formats are found in, in this order:
  * ``$XDG_CONFIG_HOME/tuimon/formats/`` (``~/.config/tuimon/formats/``);
  * the directories in ``TUIMON_FORMATS`` (a ``:``-separated path list);
  * the directories (or files) given with ``--formats``.
A later file with a format name already seen replaces it.  A file that cannot
be read or compiled is left out with one line saying why; the others are used.

The catalog is chosen once per process by the command (:func:`use`); worker
processes receive its :attr:`Catalog.spec` and compile it again.
"""
from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Optional, Sequence

from tuimon.parsers import ALL_PARSERS
from tuimon.parsers.formats import BUILTIN_FORMATS
from tuimon.parsers.schema import Format, FormatError, sample_errors

from .. import __version__
from ..paths import config_home
from .user_regex import load_user_format

MAX_FORMAT_FILE = 1 << 20  # a format file is a few kB: anything bigger is not one


@dataclass(frozen=True)
class Catalog:
    user: tuple[Format, ...] = ()
    builtin: tuple[Format, ...] = BUILTIN_FORMATS
    errors: tuple[str, ...] = ()
    #: (origin, TOML text) of each user format, for worker processes
    spec: tuple[tuple[str, str], ...] = ()
    key: str = field(default="")

    @property
    def parsers(self) -> tuple:
        return ALL_PARSERS


def config_dir() -> Path:
    return config_home()


def default_dirs() -> list[Path]:
    dirs = [config_dir() / "formats"]
    for part in os.environ.get("TUIMON_FORMATS", "").split(os.pathsep):
        if part:
            dirs.append(Path(part).expanduser())
    return dirs


def format_files(places: Iterable[Path]) -> list[Path]:
    """``*.toml`` files of each place (a directory, or a file), in name order."""
    out: list[Path] = []
    for place in places:
        if place.is_dir():
            out.extend(sorted(p for p in place.iterdir() if p.suffix == ".toml" and p.is_file()))
        elif place.is_file():
            out.append(place)
    return out


def read_format(path: Path) -> tuple[Optional[Format], str, list[str]]:
    """(format or None, its text, errors) for one file; sample mismatches are errors too."""
    try:
        with open(path, "rb") as fh:
            data = fh.read(MAX_FORMAT_FILE + 1)
    except OSError as exc:
        return None, "", [f"{path}: cannot read: {exc.strerror or exc}"]
    if len(data) > MAX_FORMAT_FILE:
        return None, "", [f"{path}: larger than {MAX_FORMAT_FILE} bytes: not a format file"]
    text = data.decode("utf-8", "replace")
    try:
        fmt = load_user_format(text, str(path))
    except FormatError as exc:
        return None, text, [str(exc)]
    return fmt, text, sample_errors(fmt)


def load(extra: Sequence[Path] = (), defaults: bool = True) -> Catalog:
    places = (default_dirs() if defaults else []) + list(extra)
    chosen: dict[str, tuple[Format, str]] = {}
    errors: list[str] = []
    for path in format_files(places):
        fmt, text, problems = read_format(path)
        errors.extend(problems)
        if fmt is not None and not problems:
            chosen[fmt.name] = (fmt, text)
    return _catalog([f for f, _ in chosen.values()], [(f.origin, t) for f, t in chosen.values()], errors)


@lru_cache(maxsize=1)
def code_digest() -> bytes:
    """A digest of the code whose state and results the parse cache keeps: the parsers,
    the engine and the store.  A build that changes any of them reads its files again,
    even at the same version (a parser restored from an older build may lack state the
    new code reads, and its events are not the new code's)."""
    from tuimon import parsers

    from .. import store

    digest = hashlib.sha256()
    for package in (parsers, sys.modules[__package__ or "tuimon.engine"], store):
        root = Path(package.__file__ or "").parent
        for path in sorted(root.rglob("*")):
            if path.suffix in (".py", ".toml") and path.is_file():
                try:
                    digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes())
                except OSError:
                    digest.update(path.name.encode())
    return digest.digest()


def _catalog(user: list[Format], spec: list[tuple[str, str]], errors: list[str]) -> Catalog:
    digest = hashlib.sha256(__version__.encode())
    digest.update(code_digest())
    for origin, text in spec:
        digest.update(origin.encode() + b"\0" + text.encode() + b"\0")
    return Catalog(tuple(user), BUILTIN_FORMATS, tuple(errors), tuple(spec), digest.hexdigest()[:16])


def from_spec(spec: Sequence[tuple[str, str]]) -> Catalog:
    """The catalog a worker process gets from its parent (already checked there)."""
    user = []
    for origin, text in spec:
        try:
            user.append(load_user_format(text, origin))
        except FormatError:
            continue
    return _catalog(user, list(spec), [])


_current: Optional[Catalog] = None


def use(catalog: Catalog) -> None:
    global _current
    _current = catalog


def current() -> Catalog:
    """The catalog chosen by :func:`use`; the built-ins alone until then."""
    global _current
    if _current is None:
        _current = _catalog([], [], [])
    return _current
