"""Allocator tuning for batch parses (``tuimon summary``, ``tuimon events`` and
their worker processes).

A parse allocates and frees several 1 MB objects a block (the read, the complete
lines, the decoded text, numpy masks).  glibc serves them from fresh mmaps or
from the heap top, and gives freed memory back to the kernel as soon as 2 MB sit
free at the top, so the next block faults every page in again: 118,000 page
faults in a 300 MB summary, 0.2 s of kernel time on this kind of machine.  With
higher thresholds freed blocks are reused.  A batch command lives for seconds,
so keeping up to TRIM_THRESHOLD of freed memory costs nothing; the long-running
app does not call this.
"""
from __future__ import annotations

import ctypes
import gc
import sys

MMAP_THRESHOLD = 32 << 20  # glibc's own upper bound for its sliding threshold
TRIM_THRESHOLD = 64 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # from glibc's malloc.h


def keep_freed_memory() -> bool:
    """Let glibc keep freed blocks for reuse; False where that cannot be said
    (another libc: musl's ``mallopt`` is a stub that returns 0, macOS has none)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))


#: container allocations between two of the cyclic collector's young passes in a batch parse
#: (CPython's default: 700)
YOUNG_PASS = 50_000


def collector_for_batch() -> None:
    """The cyclic collector, set for a batch parse.

    - The objects made so far (modules, their tables, the rule sets) are left out of its passes:
      a batch parse allocates millions of objects, and each full pass walked the start-up's too
      (5-7 % of a 30 MB summary's CPU here, the same output).
    - Its young passes come every :data:`YOUNG_PASS` allocations, not 700: a block's rows live
      until the block is folded, and every young pass walked the ones made so far, again and
      again (9-11 % of a 50 MB summary's CPU on three of the bench's shapes, same peak RSS).  The
      older generations keep their ratios.  Only cyclic garbage waits longer; there is little,
      and a batch command ends in seconds.
    """
    gc.freeze()
    gc.set_threshold(YOUNG_PASS, *gc.get_threshold()[1:])
