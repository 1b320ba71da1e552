"""Launcher prefixes and leading stamps of many lines at once, read off their bytes.

For every hit line the dispatcher asks two questions: may it carry a launcher
prefix (:func:`parsers.prefix.may_have_prefix`), and which stamp does it start
with (:func:`parsers.timestamps.line_stamp`).  Asked line by line, that is two
calls of Python a line.  Here both are answered for all hit lines of an ASCII
block with a few array operations over the first bytes of each line; a line
whose answer is not certain from them is marked *unsure* and asked the usual
way.  Tests compare the answers with the two functions on generated lines.
"""
from __future__ import annotations

import numpy as np

from parsers.triggers import Heads

WINDOW = 32  # bytes of each line looked at
_SPAN = 30  # "YYYY-MM-DD HH:MM:SS" and a fraction of up to 9 digits, after its separator
_DIGITS_AT = [0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18]  # of "YYYY-MM-DD HH:MM:SS"
_POW10 = np.array([float(10 ** k) for k in range(10)])
_PLACES = np.array([10 ** k for k in range(8, -1, -1)], dtype=np.int64)
_DEFAULT = np.frombuffer(b"default", dtype=np.uint8)
_RANK = np.frombuffer(b"rank", dtype=np.uint8)
_ASCII_SPACE = np.zeros(256, dtype=bool)
_ASCII_SPACE[[9, 10, 11, 12, 13, 28, 29, 30, 31, 32]] = True  # what str.isspace() holds in ASCII
NEWLINE, SPACE, BRACKET, COLON, CLOSE = 10, 32, 91, 58, 93
_PAD = np.full(WINDOW, NEWLINE, dtype=np.uint8)


def _first(mask: np.ndarray) -> np.ndarray:
    """Per row, the column of the first True (the width where none)."""
    at = mask.argmax(axis=1)
    at[~mask[np.arange(len(mask)), at]] = mask.shape[1]
    return at


def _is_digit(codes: np.ndarray) -> np.ndarray:
    return (codes - np.uint8(48)) < 10  # uint8 wraps: one compare


def _windows(codes: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``codes[at[i]:at[i] + WINDOW]`` as rows, newlines past the end of ``codes``."""
    limit = len(codes) - WINDOW
    if limit < 0:
        codes, limit = np.concatenate((codes, _PAD[:-limit])), 0
    out = _rows(codes, np.minimum(at, limit))
    late = np.flatnonzero(at > limit)
    if len(late):  # the last lines of the block: only they are read from a padded copy of its end
        tail = np.concatenate((codes[limit:], _PAD))
        out[late] = _rows(tail, at[late] - limit)
    return out


def _rows(codes: np.ndarray, at: np.ndarray) -> np.ndarray:
    """``codes[at[i]:at[i] + WINDOW]`` as rows (all within ``codes``), copied as
    one WINDOW-byte item each: three times faster than gathering a sliding window
    view's rows byte by byte."""
    return runs(codes, WINDOW)[at].view(codes.dtype).reshape(-1, WINDOW)


def runs(codes: np.ndarray, width: int) -> np.ndarray:
    """Every run of ``width`` codes of ``codes`` (contiguous, at least that long)
    as one item, by its start: picked or compared as a whole, not code by code."""
    return np.ndarray(shape=(len(codes) - width + 1,), dtype=np.dtype(("V", width * codes.itemsize)),
                      buffer=codes, strides=(codes.itemsize,))


def read_heads(codes: np.ndarray, starts: np.ndarray) -> Heads:
    """The :class:`~parsers.triggers.Heads` of the lines starting at ``starts``
    (``codes``: the block's bytes as uint8, each line ending in a newline or at the
    end).  Each line's first WINDOW bytes are read as they lie in the block: past a
    line's end they are the next line's, so every search below stops at a newline
    (or only ever concludes less)."""
    n = len(starts)
    win = _windows(codes, starts)
    c0, c1, c2 = win[:, 0], win[:, 1], win[:, 2]
    digit0, digit1, digit2 = _is_digit(c0), _is_digit(c1), _is_digit(c2)

    # launcher prefixes: a label or host ("12: ", "nid001: ") has a colon before its
    # first space (or its end; none within the window: maybe); torchrun's start
    # "[default" or "[rank"
    prefixed = np.zeros(n, dtype=bool)
    named = np.flatnonzero(digit0 | ((c0 >= 97) & (c0 <= 122)))
    if len(named):
        head = win[named]
        space = _first((head == SPACE) | (head == NEWLINE))
        colon = _first(head[:, 1:] == COLON) + 1
        prefixed[named] = (colon < space) | ((space == WINDOW) & (colon == WINDOW))
    maybe = np.flatnonzero((c0 == BRACKET) & ((c1 == 100) | (c1 == 114)))
    if len(maybe):
        head = win[maybe]
        prefixed[maybe] |= (head[:, 1:8] == _DEFAULT).all(axis=1) | (head[:, 1:5] == _RANK).all(axis=1)

    # where a stamp would start: "[YYYY-", "YYYY-", " [YYYY-", " YYYY-"
    offset = np.full(n, -1)
    offset[(c0 == BRACKET) & digit1] = 1
    offset[digit0] = 0
    offset[(c0 == SPACE) & (c1 == BRACKET) & digit2] = 2
    offset[(c0 == SPACE) & digit1] = 1
    # every other line certainly has no stamp (None), but for these: other white
    # space first, " [" and no digit, a "[word]" the stamp may follow, a prefix
    unsure = (_ASCII_SPACE[c0] & (c0 != SPACE)) | ((c0 == SPACE) & _ASCII_SPACE[c1]) \
        | ((c0 == SPACE) & (c1 == BRACKET) & ~digit2) | prefixed
    words = np.flatnonzero((c0 == BRACKET) & ~digit1)  # "[titan] 2026-..." may still have one
    if len(words):
        head = win[words, 1:]
        close = _first((head == CLOSE) | (head == NEWLINE)) + 1
        first_digit = _first(_is_digit(head)) + 1
        closed = close < WINDOW
        closed[closed] = win[words[closed], close[closed]] == CLOSE
        unsure[words] |= closed & (close >= 2) & (close <= 17) & (first_digit > close)

    stamps = np.full(n, np.nan)
    has = np.flatnonzero(offset >= 0)
    if len(has):
        sub = _windows(codes, starts[has] + offset[has])[:, :_SPAN]
        d = sub.astype(np.int64) - 48
        shaped = _is_digit(sub[:, _DIGITS_AT]).all(axis=1) \
            & (sub[:, 4] == 45) & (sub[:, 7] == 45) & ((sub[:, 10] == SPACE) | (sub[:, 10] == 84)) \
            & (sub[:, 13] == COLON) & (sub[:, 16] == COLON)
        year = d[:, 0] * 1000 + d[:, 1] * 100 + d[:, 2] * 10 + d[:, 3]
        month, day = d[:, 5] * 10 + d[:, 6], d[:, 8] * 10 + d[:, 9]
        hour, minute, second = d[:, 11] * 10 + d[:, 12], d[:, 14] * 10 + d[:, 15], d[:, 17] * 10 + d[:, 18]
        valid = shaped & (year >= 1) & (month >= 1) & (month <= 12) & (day >= 1) & (day <= 31) \
            & (hour < 24) & (minute < 60) & (second < 62)
        # what calendar.timegm does: days to the 1st of the month, plus the day (even past the month's end)
        y = year - (month <= 2)
        era = y // 400
        yoe = y - era * 400
        doy = (153 * ((month + 9) % 12) + 2) // 5
        days = era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468 + day - 1
        seconds = (days * 86400 + hour * 3600 + minute * 60 + second).astype(np.float64)
        frac_digits = _is_digit(sub[:, 20:29])
        places = np.where(frac_digits.all(axis=1), 9, frac_digits.argmin(axis=1))
        fraction = ((sub[:, 19] == 46) | (sub[:, 19] == 44)) & (places > 0)
        kept = np.where(np.arange(9) < places[:, None], d[:, 20:29], 0)
        numerator = (kept * _PLACES).sum(axis=1) // (10 ** (9 - places))
        value = np.where(fraction, seconds + numerator / _POW10[places], seconds)
        stamps[has[valid]] = value[valid]
        unsure[has[shaped & ~valid]] = True  # a stamp-shaped date the calendar refuses: let line_stamp say
    out = stamps.astype(object)
    out[np.isnan(stamps)] = None
    return Heads(np.flatnonzero(prefixed).tolist(), out.tolist(), np.flatnonzero(unsure).tolist())
