"""Which of many literals a block holds, in one pass for all of them.

Every rule of the engine skips a block that holds none of its anchors.  Asked one
literal at a time (``lit in text``), a block is scanned whole for each literal it
does not hold: with the ninety-odd anchors of the built-in formats, that was half
the parse of a log made of a few line kinds (30 ms of 60 a MB).

One pass marks the byte quadruples the block holds (each hashed into a table of
2^22); a literal of four bytes or more can be in the block only if all of its
quadruples are, and most absent ones have one the block lacks.  Byte pairs, as
this pass first used, let through 87 of the 147 built-in literals a 1 MB Megatron
block lacks (English words share their pairs), each then a scan of the whole
block: 46 ms a MB; quadruples let through 8 to 16 of them, for 10 ms of marking.
Only the literals that pass (and those under four bytes) are looked for, exactly.
The answer is the same as asking each literal; it only costs less.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Mapping, Optional

import numpy as np

from . import native

#: below this many characters, asking each literal costs less than the pass
SMALL = 16_384


_BITS = 22
_SHIFT = np.uint32(32 - _BITS)
_GOLDEN = np.uint32(2654435761)  # Knuth's multiplicative hash: the top bits mix all four bytes


def _hash4(data: bytes) -> np.ndarray:
    """Hashed quadruples of ``data``, one per position but the last three: each window of
    four bytes read in place as a big-endian uint32 (a stride of one byte), no copies."""
    quads = np.ndarray(shape=(len(data) - 3,), dtype=">u4", buffer=data, strides=(1,))
    hashed = quads * _GOLDEN  # native uint32, wrapping modulo 2^32 as the hash wants
    hashed >>= _SHIFT
    return hashed


@lru_cache(maxsize=4096)
def _grams(literal: str) -> Optional[np.ndarray]:
    """The hashed quadruples of ``literal`` (UTF-8); None under four bytes (asked exactly)."""
    data = literal.encode("utf-8", "surrogatepass")
    # (not np.unique: its first call imports numpy.ma, 20-45 ms of every start)
    return np.array(sorted(set(_hash4(data).tolist())), dtype=np.uint32) if len(data) >= 4 else None


def presence_of(literals: Iterable[str]) -> "Presence":
    """The Presence of a rule set, shared by every file read with the same rules: its compiled
    automaton is the biggest thing a file's engine holds (about 1 MB with the core: 4,096 followed
    files held 3.7 GB, one each).  It is never changed once made (the grams made on first use
    are the same for every user of it), and the core's scan takes it read-only."""
    return _shared(tuple(sorted({lit for lit in literals if lit})), native.core)


@lru_cache(maxsize=64)
def _shared(literals: tuple[str, ...], core: object) -> "Presence":
    """(``core``: the engine in use, which the Presence is made with, is part of the key)"""
    return Presence(literals)


class Presence:
    """The literals of a rule set, asked about a block at a time."""

    __slots__ = ("literals", "_grams", "_core")

    def __init__(self, literals: Iterable[str]) -> None:
        self.literals = tuple(sorted({lit for lit in literals if lit}))
        self._grams: Optional[list] = None  # (literal, its grams): made when a large block is asked without the core
        # the compiled core: one Aho-Corasick pass gives the literals and the lines holding each
        self._core = native.core.Literals(list(self.literals)) if native.core is not None and self.literals else None

    def scan(self, text: str) -> tuple[frozenset[str], Optional[Mapping[str, list[int]]]]:
        """(the literals ``text`` holds, and with the compiled core the starts of the lines
        holding each: ascending, each once; None without it)."""
        if self._core is None:
            return self.of(text), None
        lits = self.literals
        lines = {lits[k]: starts for k, starts in self._core.scan(text)}
        return frozenset(lines), lines

    def of(self, text: str) -> frozenset[str]:
        """The literals ``text`` holds."""
        if len(text) < SMALL or not self.literals:
            return frozenset(lit for lit in self.literals if lit in text)
        if self._grams is None:
            self._grams = [(lit, _grams(lit)) for lit in self.literals]
        seen = np.zeros(1 << _BITS, dtype=bool)
        seen[_hash4(text.encode("utf-8", "surrogatepass"))] = True
        return frozenset(lit for lit, grams in self._grams if (grams is None or seen[grams].all()) and lit in text)
