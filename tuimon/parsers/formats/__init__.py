"""Built-in line formats, declared as data in the schema users write (:mod:`parsers.schema`).

Each module holds one framework's ``FORMAT``: plain dicts, compiled here once.
What cannot be a line pattern stays a hook: a stateful parser class in
:mod:`parsers` (argument blocks, tracebacks, the startup sequence...).
"""
from __future__ import annotations

from ..schema import Format, format_from_dict
from . import hardware, launcher, loops, megatron

_DECLARED: tuple[dict, ...] = (megatron.FORMAT, launcher.FORMAT, hardware.FORMAT, loops.LLMC, loops.MODDED_NANOGPT)

BUILTIN_FORMATS: tuple[Format, ...] = tuple(format_from_dict(d) for d in _DECLARED)
