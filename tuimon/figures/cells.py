"""A table's cells from untrusted text: what every rendering of the figures (table,
markdown, CSV) makes of a job name or a log's text."""
from __future__ import annotations


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
    return "'" + cell if cell.startswith(FORMULA_LEADS) else cell
