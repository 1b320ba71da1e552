"""Which of many literals a block holds, in one pass for all of them.

Every rule of the engine skips a block that holds none of its anchors.  Asked one
literal at a time (``lit in text``), a block is scanned whole for each literal it
does not hold: with the ninety-odd anchors of the built-in formats, that was half
the parse of a log made of a few line kinds (30 ms of 60 a MB).

One pass marks the byte pairs (bigrams) the block holds; a literal can be in the
block only if all of its pairs are, and most absent ones have a pair the block
lacks.  Only the literals that pass are looked for, exactly.  The answer is the
same as asking each literal; it only costs less.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Optional

import numpy as np

#: below this many characters, asking each literal costs less than the pass
SMALL = 16_384


@lru_cache(maxsize=4096)
def _pairs(literal: str) -> Optional[np.ndarray]:
    """The byte pairs of ``literal`` (UTF-8), as the pass numbers them; None for a one-byte literal."""
    b = np.frombuffer(literal.encode("utf-8", "surrogatepass"), np.uint8).astype(np.uint16)
    if len(b) < 2:
        return None
    return np.unique((b[:-1] << 8) | b[1:])


class Presence:
    """The literals of a rule set, asked about a block at a time."""

    __slots__ = ("literals", "_pairs")

    def __init__(self, literals: Iterable[str]) -> None:
        self.literals = tuple(sorted({lit for lit in literals if lit}))
        self._pairs = [(lit, _pairs(lit)) for lit in self.literals]

    def of(self, text: str) -> frozenset[str]:
        """The literals ``text`` holds."""
        if len(text) < SMALL or not self.literals:
            return frozenset(lit for lit in self.literals if lit in text)
        raw = np.frombuffer(text.encode("utf-8", "surrogatepass"), np.uint8)
        seen = np.zeros(1 << 16, dtype=bool)
        seen[(raw[:-1].astype(np.uint16) << 8) | raw[1:]] = True
        return frozenset(lit for lit, pairs in self._pairs if (pairs is None or seen[pairs].all()) and lit in text)
