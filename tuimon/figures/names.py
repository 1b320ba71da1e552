"""Job names cut to a width so that each stays told apart from the others.

Runs of one sweep differ in the middle of their names
(``sc22-stronghold_l-32_hs-2048_bs-4_ws-15_2022-07-02.1656734808`` and ``..._ws-2_...``);
cut at the end, every one reads the same.  A name is read as tokens (split at ``-_.:/#``
and spaces); a label keeps, first, the tokens where the name differs from the names most
like it (with the word before a number that differs: ``ws-15``), the leftmost first, then
its first token, then the others from the left while they fit.  Left-out tokens read ``…``.
"""
from __future__ import annotations

from typing import Iterable

from ..parsers.patterns import lazy

ELLIPSIS = "…"
_TOKEN = lazy(r"[^-_.:/# ]*[-_.:/# ]*")


def _tokens(name: str) -> list[str]:
    """``name`` as tokens, each with the separators after it (they join back to ``name``)."""
    return [t for t in _TOKEN.findall(name) if t]


def _core(token: str) -> str:
    return token.rstrip("-_.:/# ")


def _differences(mine: list[str], theirs: list[str]) -> list[int]:
    """The positions of ``mine``'s tokens that differ from ``theirs`` (or that it has beyond them)."""
    return [i for i in range(len(mine)) if i >= len(theirs) or _core(mine[i]) != _core(theirs[i])]


def _render(tokens: list[str], kept: set[int]) -> str:
    out: list[str] = []
    gap = False
    for i, token in enumerate(tokens):
        if i in kept:
            if gap and out:
                out[-1] = out[-1].rstrip("-_.:/# ")
            if gap:
                out.append(ELLIPSIS)
            out.append(token)
            gap = False
        else:
            gap = True
    text = "".join(out)
    if gap:
        text = text.rstrip("-_.:/# ") + ELLIPSIS
    return text


def distinct_label(name: str, others: Iterable[str], width: int) -> str:
    """``name`` within ``width`` characters, keeping what tells it from ``others``."""
    if len(name) <= width:
        return name
    if width <= 1:
        return ELLIPSIS[:max(0, width)]
    tokens = _tokens(name)
    rivals = [_tokens(o) for o in others if o != name]
    essential: list[int] = []
    if rivals:
        # where it differs from the names most like it (fewest tokens apart), all of them
        apart = [_differences(tokens, r) for r in rivals]
        fewest = min(len(a) for a in apart)
        differing = sorted({i for a in apart if len(a) == fewest for i in a})
        for i in differing:
            word = i - 1  # what a number that differs is of: "ws" of "ws-15", the job of "10143818#2"
            if word >= 0 and _core(tokens[i])[:1].isdigit() and word not in essential and (
                    any(c.isalpha() for c in tokens[word]) or tokens[word].endswith("#")):
                essential.append(word)
            essential.append(i)
    if not essential:  # alone, or nothing tells it apart: the plain cut keeps most of it
        return name[:width - 1] + ELLIPSIS
    kept: set[int] = set()
    # what tells it apart, the leftmost first (a sweep's parameter before a run's time stamp),
    # each with its key; then the first token
    def long_number(i: int) -> bool:  # a time stamp or an id: what tells apart last, when it must
        core = _core(tokens[i])
        return core.isdigit() and len(core) >= 6
    ordered = [i for i in essential if not long_number(i)] + [0] + [i for i in essential if long_number(i)]
    for i in dict.fromkeys(ordered):
        with_key = {i, i - 1} if i - 1 in essential and i - 1 not in kept else {i}
        if len(_render(tokens, kept | with_key)) <= width:
            kept |= with_key
    if essential and not kept & set(essential):
        return name[:width - 1] + ELLIPSIS  # nothing that tells it apart fits: a plain cut
    for i in range(len(tokens)):  # then the head, from the left, as far as it goes on fitting
        if i not in kept:
            if len(_render(tokens, kept | {i})) > width:
                # and what is left of the width, from the token it stopped at
                room = width - len(_render(tokens, kept))
                if room > 1 and i - 1 in kept or i == 0:
                    cut = tokens[:i] + [tokens[i][:room], ""] + tokens[i + 1:]
                    shifted = {k if k < i else k + 1 for k in kept} | {i}
                    if len(_render(cut, shifted)) <= width:
                        return _render(cut, shifted)
                break
            kept.add(i)
    return _render(tokens, kept)


def distinct_labels(names: Iterable[str], width: int) -> dict[str, str]:
    """Each name's :func:`distinct_label` among all of them."""
    unique = list(dict.fromkeys(names))
    return {n: distinct_label(n, unique, width) for n in unique}
