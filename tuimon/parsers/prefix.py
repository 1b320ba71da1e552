"""Launcher prefixes that wrap the real log line.

``srun --label`` adds ``12: ``, torchrun adds ``[default3]:`` (local rank) or
``[rank3]:`` (global rank, sometimes twice), pdsh/deepspeed multi-node runners add
``hostname: ``.  They stack (``0: [default0]: ...``).  Stripping them once, before
any format parser looks at the line, keeps every format parser prefix-agnostic.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from .patterns import lazy

_PREFIX = lazy(
    r"""^(?:
        \ {0,6}(?P<label>\d{1,6}):\                            # srun --label (padded: " 0: " beside "10: ")
      | (?P<host>(?:\d{1,3}(?:\.\d{1,3}){3}|[a-z][a-z0-9-]*\d[a-z0-9-]*(?:\.[a-z0-9-]+)*|localhost)):\   # pdsh host
    )?
    (?:\[default(?P<local>\d{1,5})\]:\ ?)?
    (?:\[rank(?P<rank>\d{1,6})\]:\ ?)*
    """,
    re.VERBOSE,
)


@dataclass(slots=True)
class Prefix:
    body: str
    rank: Optional[int]
    local_rank: Optional[int]
    node: Optional[str]


_PREFIX_START = frozenset("0123456789abcdefghijklmnopqrstuvwxyz")  # what a prefix can start with,
_BRACKET_PREFIXES = ("[default", "[rank")  # ... besides these
_PAD = 6  # spaces srun pads a label with, at most

#: The reader as the compiled core is handed it (it holds no prefix of its own): the pattern
#: (named groups label, host, local, rank: read as in :func:`split_prefix`) and the quick
#: test's data (:func:`may_have_prefix`).  The core reads ASCII lines alone, where its ``\d``
#: is Python's.
CORE = {
    "pattern": "(?x)" + _PREFIX.pattern,
    "starts": "".join(sorted(_PREFIX_START)),
    "brackets": list(_BRACKET_PREFIXES),
    "pad": _PAD,
}


def may_have_prefix(line: str) -> bool:
    """False for most lines: no launcher prefix can start there.  A label or host
    prefix holds no space and ends in a colon and a space: the line's first space comes
    right after a colon."""
    if line[:1] == " ":  # srun pads its labels to the widest: " 0: " when there are ten tasks or more
        stripped = line.lstrip(" ")
        return len(line) - len(stripped) <= _PAD and stripped[:1].isdigit() and may_have_prefix(stripped)
    if line[:1] in _PREFIX_START:
        space = line.find(" ")
        return space > 1 and line[space - 1] == ":"
    return line.startswith(_BRACKET_PREFIXES)


def split_prefix(line: str) -> Prefix:
    if not may_have_prefix(line):
        return Prefix(line, None, None, None)
    m = _PREFIX.match(line)
    if m is None or m.end() == 0:
        return Prefix(line, None, None, None)
    label, host, local, rank = m.group("label", "host", "local", "rank")
    rank_i = int(rank) if rank is not None else None
    local_i = int(local) if local is not None else None
    node = host
    if label is not None:
        if local_i is None and rank_i is None:
            # srun task id is the global rank when each task is one process
            rank_i = int(label)
        else:
            node = label
    return Prefix(line[m.end():], rank_i, local_i, node)


def rank_line_pattern(rank: str) -> "re.Pattern[str]":
    """The lines a rank wrote in a shared log: ``N: `` (srun --label, padded or not),
    ``[rankN]:`` (torchrun) or ``[Rank N]`` (DeepSpeed, Megatron-Core); a rank that is
    not a number (a per-rank file's label) owns the lines labelled ``rank: ``."""
    if not rank.isdigit():
        return re.compile(rf"^{re.escape(rank)}: ")
    return re.compile(rf"^ {{0,6}}{rank}: |^(?:\S+: )?(?:\[default\d+\]: ?)?\[rank{rank}\]:|\[Rank {rank}\]")
