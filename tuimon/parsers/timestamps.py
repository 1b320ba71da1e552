"""Wall-clock timestamps as they appear in training logs.

All stamps in these logs are naive local times.  They are converted to POSIX
seconds as if they were UTC: only differences between stamps of one job are
used, so the zone does not matter, and date arithmetic stays correct across
minutes, hours and midnight.
"""
from __future__ import annotations

import calendar
import re
import time
from typing import Optional

from .patterns import lazy

# 2022-06-29 01:36:30,237 | 2026-04-15 11:19:02.524672 | 2023-12-19 13:33:24 | 2021-05-27T21:42:11
_ISO = lazy(
    r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})[ T](?P<h>\d{2}):(?P<mi>\d{2}):(?P<s>\d{2})(?:[.,](?P<f>\d{1,9}))?"
)
# 2023-11-02-183323 (the ALCF "Job started at" stamp)
_COMPACT = lazy(r"(?P<y>\d{4})-(?P<mo>\d{2})-(?P<d>\d{2})-(?P<h>\d{2})(?P<mi>\d{2})(?P<s>\d{2})\b")
# Leading stamp of a line: "[2022-06-29 01:36:30,237] ...", "[2023-12-19 13:33:24][INFO]...",
# " [2026-04-15 11:19:02.524672] iteration ...", "[titan] 2026-05-19 23:02:48,804 - root"
#: as data: spaces; a label between ``opener`` and ``closer`` (at most ``label`` characters, no digit) and
#: spaces; the opener (a stamped line's bracket: the quick test of :func:`line_stamp` looks for it or a
#: digit); an ISO stamp, its date and time apart by one of ``between``, then one of ``fraction`` and at most
#: ``digits`` digits.  The compiled core reads lines by the shape itself (core/src/stamp.rs, in a pass: a
#: regex's captures cost 0.4 us a stamped line), re by :data:`LEADING`, made of it here
STAMP_SHAPE = {"opener": "[", "closer": "]", "label": 16, "between": " T", "fraction": ".,", "digits": 9}


def stamp_regex(shape: dict) -> str:
    """The regex of a leading stamp's shape (:data:`STAMP_SHAPE`), its first group the stamp."""
    opener, closer, between, fraction = (re.escape(shape[k]) for k in ("opener", "closer", "between", "fraction"))
    return (rf"^\s*(?:{opener}[^{closer}\d]{{1,{shape['label']}}}{closer}\s*)?{opener}?"
            rf"(\d{{4}}-\d{{2}}-\d{{2}}[{between}]\d{{2}}:\d{{2}}:\d{{2}}(?:[{fraction}]\d{{1,{shape['digits']}}})?)")


LEADING = lazy(stamp_regex(STAMP_SHAPE))
_OPENER = STAMP_SHAPE["opener"]
_REACH = 40  # a line's stamp starts within this many characters

#: The reader as the compiled core is handed it (it holds no stamp pattern of its own): the
#: shape, and how far into a line its stamp may start (:func:`line_stamp`).  The core reads
#: ASCII lines without \x1c-\x1f alone, where its ``\s`` and ``\d`` are Python's.
CORE = {"shape": STAMP_SHAPE, "reach": _REACH}


def _to_epoch(m: re.Match) -> Optional[float]:
    try:
        y, mo, d = int(m["y"]), int(m["mo"]), int(m["d"])
        h, mi, s = int(m["h"]), int(m["mi"]), int(m["s"])
        if not (1 <= mo <= 12 and 1 <= d <= 31 and h < 24 and mi < 60 and s < 62):
            return None
        frac = m["f"] if "f" in m.groupdict() else None
        base = calendar.timegm((y, mo, d, h, mi, s, 0, 0, 0))
        if frac:
            base += int(frac) / (10 ** len(frac))
        return float(base)
    except (ValueError, OverflowError, TypeError):
        return None


def parse_iso(text: str) -> Optional[float]:
    m = _ISO.search(text)
    return _to_epoch(m) if m else None


def parse_compact(text: str) -> Optional[float]:
    m = _COMPACT.search(text)
    return _to_epoch(m) if m else None


_seconds_cache: dict[str, Optional[float]] = {}
_FRACTION = lazy(r"[.,](\d{1,9})")


def _cached_stamp(line: str, at: int) -> Optional[float]:
    """The stamp at ``at`` when its second was read before, else None.  Lines of one
    second share their stamp: a stamp already read at the very start (after at most
    a "[") is what the full pattern would find there."""
    base = _seconds_cache.get(line[at:at + 19])
    if base is None:
        return None
    m = _FRACTION.match(line, at + 19)
    return base if m is None else base + int(m.group(1)) / 10 ** len(m.group(1))


def line_stamp(body: str) -> Optional[float]:
    """The stamp a log line starts with (within its first :data:`_REACH` characters), as
    :func:`leading_timestamp`, after a quick test that rules out most lines."""
    head = body[:1]
    if head == _OPENER:  # most stamped lines: a second already read needs no other test
        known = _cached_stamp(body, 1)
        if known is not None:
            return known
    elif head == " ":
        head = body[1:2]
    if head != _OPENER and not (head.isdigit() or head.isspace()):
        return None  # after white space, a leading stamp starts with the opener or a digit
    dash = body.find("-", 4, _REACH)
    while dash > 0 and not body[dash - 4:dash].isdigit():  # a stamp starts "YYYY-"
        dash = body.find("-", dash + 1, _REACH)
    return leading_timestamp(body) if dash > 0 else None


def leading_timestamp(line: str) -> Optional[float]:
    known = _cached_stamp(line, 1 if line[:1] == "[" else 0)
    if known is not None:
        return known
    m = LEADING.match(line)
    if not m:
        return None
    stamp = m.group(1)
    # consecutive lines share their second: convert "YYYY-MM-DD HH:MM:SS" once, add the fraction
    base = _seconds_cache.get(stamp[:19], 0.0)
    if base == 0.0:
        base = parse_iso(stamp[:19])
        if len(_seconds_cache) > 4096:
            _seconds_cache.clear()
        _seconds_cache[stamp[:19]] = base
    if base is None:
        return None
    frac = stamp[20:]
    return base + (int(frac) / 10 ** len(frac) if frac.isdigit() else 0.0)


# -- the output of ``date`` (and nvidia-smi's header) in the locales clusters run in -------------
# ``Wed Apr 15 11:16:53 CEST 2026`` (C), ``Tue Aug 18 07:53:33 PM CEST 2026`` (en_US),
# ``Wed 15 Apr 11:16:53 CEST 2026`` (en_GB), ``mer. 15 avril 2026 11:16:53 CEST`` (fr_FR),
# ``Mi 15. Apr 11:16:53 CEST 2026`` (de_DE), ``Tue May 25 06:29:21 2021`` (nvidia-smi).
# The zone name is left out, as every stamp's is (see the module's note).
_MONTHS = {
    **{m: i for i, m in enumerate(("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov",
                                     "dec"), 1)},
    # French, German, Spanish, Italian spellings where their first letters differ from English
    "janv": 1, "jän": 1, "ene": 1, "gen": 1, "févr": 2, "fevr": 2, "fév": 2, "mär": 3, "mrz": 3, "mars": 3,
    "avr": 4, "abr": 4, "mai": 5, "mag": 5, "juin": 6, "giu": 6, "juil": 7, "lug": 7, "août": 8, "aout": 8,
    "ago": 8, "sept": 9, "set": 9, "okt": 10, "ott": 10, "dez": 12, "déc": 12, "dic": 12,
}
_DATE_TOKEN = lazy(r"(\d{1,2}):(\d{2})(?::(\d{2}))?|(\d+)|([^\W\d_]+)")


def _month(word: str) -> Optional[int]:
    w = word.lower()
    for n in (len(w), 5, 4, 3):  # the word itself, then its first letters ("avril" -> "avr")
        month = _MONTHS.get(w[:n])
        if month is not None:
            return month
    return None


def parse_date_text(text: str) -> Optional[float]:
    """A date written out in words, as ``date`` prints it in any of the locales above,
    to POSIX seconds (naive, as every stamp here), or None."""
    hms: Optional[tuple[int, int, int]] = None
    numbers: list[int] = []
    months: list[tuple[int, int]] = []  # (position, month)
    pm: Optional[bool] = None
    for k, m in enumerate(_DATE_TOKEN.finditer(text[:80])):
        if m.group(1) is not None:
            if hms is None:
                hms = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
        elif m.group(4) is not None:
            numbers.append(int(m.group(4)))
        else:
            word = m.group(5).lower()
            if word in ("am", "pm"):
                pm = word == "pm"
            elif (month := _month(word)) is not None:
                months.append((k, month))
    years = [n for n in numbers if 1970 <= n <= 2200]
    days = [n for n in numbers if 1 <= n <= 31]
    if hms is None or len(years) != 1 or not days or not months:
        return None
    # a weekday first can read as a month (French "mar." is Tuesday): the later month word wins
    month = months[-1][1] if len(months) > 1 else months[0][1]
    h, mi, s = hms
    if pm is not None:
        if not 1 <= h <= 12:
            return None
        h = (h % 12) + (12 if pm else 0)
    if not (h < 24 and mi < 60 and s < 62):
        return None
    try:
        return float(calendar.timegm((years[0], month, days[0], h, mi, s, 0, 0, 0)))
    except (ValueError, OverflowError):
        return None


def glog_wall(stamp: str, near: float) -> Optional[float]:
    """A glog stamp (``0519 20:23:14.721000``: no year) as POSIX seconds in the year that puts it
    nearest ``near`` (the log's first full stamp): a launch on New Year's Eve stays in its year."""
    try:
        month, day = int(stamp[:2]), int(stamp[2:4])
        hour, minute, second = (int(x) for x in stamp[5:13].split(":"))
        fraction = float("0" + stamp[13:]) if len(stamp) > 13 else 0.0
        if not (1 <= month <= 12 and 1 <= day <= 31 and hour < 24 and minute < 60 and second < 62):
            return None
        year = time.gmtime(near).tm_year
        candidates = [calendar.timegm((y, month, day, hour, minute, second, 0, 0, 0)) + fraction
                      for y in (year - 1, year, year + 1)]
    except (ValueError, OverflowError):
        return None
    return min(candidates, key=lambda t: abs(t - near))
