"""Which engine reads the logs: the compiled core (``tuimon._core``, from ``core/``) or Python.

The core does per block what the Python engine does per line (the literals a block
holds, the lines holding them, each hit line's launcher prefix and stamp); the Python
definitions stay the reference, and ``tests/test_core.py`` holds the two to the same
events.  ``TUIMON_ENGINE=python`` runs the Python engine alone (the oracle, and the
fallback when the extension is missing); ``TUIMON_ENGINE=core`` insists on the core.
"""
from __future__ import annotations

import os
import zlib
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Optional

ENV = "TUIMON_ENGINE"
CHOICES = ("auto", "core", "python")
CHOICE = os.environ.get(ENV, "").strip().lower() or "auto"


def _load() -> tuple[Optional[ModuleType], str, Optional[str]]:
    """(the core or None, the engine's name, what is wrong with the choice or None)."""
    if CHOICE not in CHOICES:
        return None, "python", f"{ENV}={CHOICE!r} is not one of {', '.join(CHOICES)}"
    if CHOICE == "python":
        return None, f"python ({ENV}=python)", None
    try:
        from .. import _core
    except ImportError as exc:
        if _wheel_tag() == "py3-none-any":  # buildsys' pure wheel: built where no cargo was
            missing = "this tuimon was installed without its compiled core (no Rust toolchain where it was built)"
        else:
            missing = f"the compiled core tuimon._core is missing ({exc})"
        return None, f"python ({missing})", missing
    stale = _stale(_core)
    if stale is not None:
        return None, f"python ({stale})", stale
    return _core, f"core {_core.__version__} (compiled, {getattr(_core, 'BUILD', 'release')})", None


def sources_digest(src: Path) -> str:
    """What ``core/build.rs`` names a core's sources by: the CRC-32 of ``src/*.rs`` (each file's
    name, a NUL, its bytes, a NUL), in name order."""
    crc = 0
    for path in sorted(src.glob("*.rs"), key=lambda p: p.name):
        crc = zlib.crc32(path.read_bytes() + b"\0", zlib.crc32(path.name.encode() + b"\0", crc))
    return f"{crc:08x}"


def _stale(module: ModuleType) -> Optional[str]:
    """Why the core cannot be used with this checkout's Python, or None: run from a checkout
    (an editable install, ``python -m tuimon`` in it), the core must be built from its ``core/src``
    (a ``git pull`` without a rebuild hands the old core declarations it does not know).  An
    installed wheel has no ``core/src`` beside it: its core and Python were built together."""
    src = Path(__file__).resolve().parents[2] / "core" / "src"
    if not (src / "lib.rs").is_file():
        return None
    try:
        here = sources_digest(src)
    except OSError:
        return None
    built = getattr(module, "SOURCES", None)
    if built == here:
        return None
    return (f"the compiled core tuimon._core was built from other sources than {src} "
            f"({built or 'unnamed'}, these are {here}): rebuild it (pip install -e .)")


def _installed() -> Any:
    """The installed distribution's metadata, None when run from a checkout never installed."""
    from importlib.metadata import PackageNotFoundError, distribution
    try:
        return distribution("tuimon")
    except PackageNotFoundError:
        return None


def _wheel_tag(dist: Any = None) -> Optional[str]:
    """The installed wheel's tag (``cp311-abi3-manylinux_2_17_x86_64``...), None when unknown."""
    dist = dist if dist is not None else _installed()
    wheel = (dist.read_text("WHEEL") or "") if dist is not None else ""
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    return ".".join(tags) or None


def install() -> str:
    """How this tuimon was installed, for ``--version``: the wheel's tag, and whether it is editable."""
    import json

    dist = _installed()
    if dist is None:
        return "not installed (run from a checkout)"
    try:
        editable = bool(json.loads(dist.read_text("direct_url.json") or "{}").get("dir_info", {}).get("editable"))
    except (ValueError, AttributeError):
        editable = False
    return f"{'editable ' if editable else ''}wheel {_wheel_tag(dist) or 'unknown tag'}"


core, description, _trouble = _load()


def use(module: Optional[ModuleType]) -> Optional[ModuleType]:
    """Read with ``module`` (the compiled core) or, given None, with Python alone; returns
    the one in use before (the tests hold the engines to the same answers this way).  Nothing
    else is rebound: the parsers' hooks read with their Python definitions, and the core's
    readers, built from the same declarations, are looked up by the core they belong to."""
    global core
    before, core = core, module
    return before


def json_indented(obj: Any) -> str:
    """``json.dumps(obj, indent=2, allow_nan=False)``, byte for byte, at C speed: CPython encodes
    with an indent in pure Python (a summary of 4,096 jobs: 0.45 s, 2.2 times its C encoder's
    compact text), so the compact text is laid out by the core (``core/src/jsontext.rs``)."""
    import json

    if core is None:
        return json.dumps(obj, indent=2, allow_nan=False)
    return core.json_indent(json.dumps(obj, separators=(",", ":"), allow_nan=False), 2)


def json_lines(events: list, version: int, one: Callable[[Any], str]) -> str:
    """Each event's JSON line, ``one(event)`` (the line ``{"schema_version": version, **to_dict()}``
    and a newline, as ``json`` encodes it), byte for byte: by the core for the flat event types
    (``core/src/jsonline.rs``), where Python's encoder (a dict and a float repr a value) was five
    times the parse's time of ``tuimon events``; by ``one`` for any other, or without the core."""
    if core is None:
        return "".join(map(one, events))
    from ..parsers.events import FLAT_TYPES

    return core.json_lines(events, version, FLAT_TYPES, one)


def name() -> str:
    """The engine in use, for ``--version`` and the debug log."""
    return description


def problem() -> Optional[tuple[str, bool]]:
    """What to tell the user once, and whether it stops tuimon (a usage error); None if all is well."""
    if _trouble is None:
        return None
    if CHOICE == "auto":  # a missing core: said, and Python reads
        return f"{_trouble}; reading with the Python engine (slower)", False
    return (f"{_trouble} ({ENV}=core)" if CHOICE == "core" else _trouble), True
