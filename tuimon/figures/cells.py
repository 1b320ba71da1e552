"""A table's cells: what every rendering of the figures (table, markdown, CSV, the
app) makes of a job name or a log's text, and the compact number texts of narrow cells."""
from __future__ import annotations

import math
from typing import Optional


def safe_cell(text: str) -> str:
    """Cells may hold log-derived text (job names): no control characters, no pipes;
    an undecodable byte of a file name reads ``\\xNN``."""
    return "".join(ch if ch.isprintable() else (f"\\x{ord(ch) - 0xDC00:02x}" if 0xDC80 <= ord(ch) <= 0xDCFF else "?")
                   for ch in str(text)).replace("|", "/")


FORMULA_LEADS = ("=", "+", "-", "@", "\t", "\r")


def csv_text(text: str) -> str:
    """A text cell of a CSV export: :func:`safe_cell`, and one a spreadsheet would read
    as a formula (``=HYPERLINK(...)``, ``+``, ``-``, ``@``) starts with ``'`` so it
    stays text (OWASP's advice for CSV injection)."""
    cell = safe_cell(text)
    # (a lone sign is no formula: "-", a table's empty figure, stays as it reads)
    return "'" + cell if cell.startswith(FORMULA_LEADS) and cell not in ("-", "+") else cell


def num(value: Optional[float], digits: int = 1, suffix: str = "") -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}f}{suffix}"


def short_num(value: Optional[float], digits: int = 1) -> str:
    """A rate in a narrow cell: as :func:`num` below 10,000, else three figures and k, M or G
    (``1.98M`` tokens/s)."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    if abs(value) < 10_000:
        return num(value, digits)
    for scale, unit in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            scaled = value / scale
            return f"{scaled:.{max(0, 2 - int(math.log10(abs(scaled))))}f}{unit}"
    return num(value, digits)


def iter_time(ms: Optional[float]) -> str:
    """An iteration time to three figures: seconds from 1 s, milliseconds below (a 16.8 ms
    step shown as ``0.02s`` would lose a figure a paper needs)."""
    if ms is None or not math.isfinite(ms):
        return "-"
    if abs(ms) >= 1000.0:
        return f"{ms / 1000.0:.2f}s"
    return f"{ms:.{2 if abs(ms) < 10.0 else 1 if abs(ms) < 100.0 else 0}f}ms"


def duration(seconds: Optional[float]) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "-"
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    if seconds < 172800:
        return f"{seconds / 3600:.1f}h"
    return f"{seconds / 86400:.1f}d"
