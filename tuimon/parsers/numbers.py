"""Lenient number parsing for metric values found in logs.

Never raises.  Keeps non-finite values (``inf``, ``nan``, ``1e309``) as floats so
that callers can flag them, accepts thousands separators (``9,921``) and unit
suffixes glued to the number (``13.3TFLOPS``), and refuses integers too long for
Python's int-from-string limit instead of raising.
"""
from __future__ import annotations

import re
from typing import Optional

from .patterns import lazy

_NUM = lazy(r"[-+]?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|inf(?:inity)?|nan)",
            re.IGNORECASE)
_MAX_INT_DIGITS = 18


def to_float(text: Optional[str]) -> Optional[float]:
    if text is None:
        return None
    if "_" not in text:  # float() would read "1_000" as 1000
        try:
            return float(text)  # the common case: a plain number, maybe padded
        except (ValueError, OverflowError):
            pass
    m = _NUM.search(text)
    if m is None:
        return None
    token = m.group(0).replace(",", "")
    try:
        return float(token)
    except (ValueError, OverflowError):
        return None


def to_int(text: Optional[str]) -> Optional[int]:
    """Integer value of ``text``; None when absent, non-numeric or absurdly long."""
    if text is None:
        return None
    stripped = text.strip()
    if stripped.isdigit() and len(stripped) <= _MAX_INT_DIGITS:
        return int(stripped)
    m = _NUM.search(text)
    if m is None:
        return None
    token = m.group(0).replace(",", "").lstrip("+")
    digits = token.lstrip("-")
    if digits.isdigit():
        if len(digits) > _MAX_INT_DIGITS:
            return None
        return int(token)
    value = to_float(token)
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return None
    if abs(value) >= 10 ** _MAX_INT_DIGITS:
        return None
    return int(value)
