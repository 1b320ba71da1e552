"""Making untrusted log text safe to show in a terminal.

Log lines and file names can hold anything: ESC/CSI/OSC sequences, the 8-bit CSI
(0x9b), bidi overrides that reorder what is displayed, NULs.  Every control or
format character is replaced by a visible placeholder, so nothing reaches the
terminal as a command and nothing is hidden.  Markup is a separate concern: the
UI shows sanitized text as plain ``rich.text.Text``, never parses it.
"""
from __future__ import annotations

import re
import unicodedata

# C0 (but tab), DEL, C1 (0x80-0x9f, incl. CSI 0x9b), bidi embeddings/overrides/isolates,
# line/paragraph separators, zero-width and BOM characters.
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff\ufff9-\ufffb"
                     "\udc80-\udcff]")


def _placeholder(m: re.Match) -> str:
    ch = m.group(0)
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)  # ␀..␟ control pictures
    if code == 0x7F:
        return "\u2421"  # ␡
    if 0xDC80 <= code <= 0xDCFF:  # an undecodable byte of a file name (surrogateescape)
        return f"\\x{code - 0xDC00:02x}"
    return f"<U+{code:04X}>"


def sanitize(text: str, max_len: int = 4000) -> str:
    """Printable, single-line text: controls shown as placeholders, tabs as spaces."""
    if len(text) > max_len:
        text = text[:max_len] + "…"
    text = text.replace("\t", "    ")
    if _UNSAFE.search(text):
        text = _UNSAFE.sub(_placeholder, text)
    return text


def is_safe(text: str) -> bool:
    return not any(unicodedata.category(ch) in ("Cc", "Cf") for ch in text)
