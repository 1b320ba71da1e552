"""The dashboard's keys: every screen's bindings by their ids (the names a config file's ``[keymap]``
remaps, as posting and k9s let users do), and the help (``?``) made from them, so that it shows the
keys in use."""
from __future__ import annotations

from typing import Iterable, Mapping, Optional, Sequence

from textual.binding import Binding
from textual.keys import format_key

#: what help says of a binding, where its footer word is too short to explain it
EXPLAINED = {
    "filter": "filter: words, column:value (status:failed fw:megatron)",
    "open": "open the job", "open-rank": "open the rank under the cursor",
    "open-log": "the log at the alert's line; a job's row unfolds",
    "fold-all": "fold / unfold every job's alerts",
    "mark": "mark a job (then compare)", "compare": "compare the marked jobs",
    "sort": "cycle the sort (or click a header)", "alerts": "alerts, with their log lines",
    "search": "search the log", "log": "the log (a rank's screen: its lines)",
    "export": "series to ./<job>-series.csv", "breakdown": "the timer breakdown fills the screen",
    "x-axis": "x: iterations / wall time", "evals": "the loss chart shows the evaluation metric",
    "columns": "the table's columns, as summary --columns names them",
    "retry-hosts": "hosts waiting to reconnect try now",
    "follow": "follow the end", "rank": "one rank's lines", "log-mark": "mark the line (then a letter)",
    "log-jump": "back to a mark (then its letter)", "back": "back (clears a search or filter first)",
}
_NAMES = {"escape": "Esc", "enter": "Enter", "backspace": "⌫", "space": "space"}


Screens = Sequence[tuple[str, type]]  # (heading, class), the app first: what help lists, in its order


def bindings_of(cls: type) -> list[Binding]:
    return [b for b in getattr(cls, "BINDINGS", []) if isinstance(b, Binding) and b.id]


def binding_ids(screens: Screens) -> list[str]:
    return sorted({b.id for _, cls in screens for b in bindings_of(cls) if b.id})


def unknown_ids(screens: Screens, names: Iterable[str]) -> list[str]:
    known = set(binding_ids(screens))
    return [n for n in names if n not in known]


def _keys(keys: str) -> list[str]:
    return [k.strip() for k in keys.split(",") if k.strip()]


def clash(screens: Screens, keymap: Mapping[str, str]) -> Optional[str]:
    """What a keymap makes ambiguous: a remapped binding on the key of another of its screen (or of the
    app's own: the log view's ``?`` searching back, not opening help, is by design, not the user's
    doing); None when there is no such pair."""
    everywhere = bindings_of(screens[0][1])
    for heading, cls in screens[1:]:
        owner: dict[str, str] = {}
        for b in [*everywhere, *bindings_of(cls)]:
            for key in _keys(keymap.get(b.id or "", b.key)):
                if key in owner and owner[key] != b.id and (b.id in keymap or owner[key] in keymap):
                    return f"{key_text(key)} would be both {owner[key]} and {b.id} on the {heading} screen"
                owner[key] = b.id or ""
    return None


def key_text(keys: str) -> str:
    """``escape,backspace`` as people read it: ``Esc ⌫``."""
    return " ".join(_NAMES.get(k.strip(), format_key(k.strip())) for k in keys.split(",") if k.strip())


def help_lines(screens: Screens, keymap: Mapping[str, str]) -> list[str]:
    """The key part of the help: per screen, each binding's keys (the keymap's where it remaps one), its
    name for the keymap, and what it does."""
    out: list[str] = []
    for heading, cls in screens:
        out.append(heading)
        for b in bindings_of(cls):
            keys = key_text(keymap.get(b.id or "", b.key))
            out.append(f"  {keys:<10} {EXPLAINED.get(b.id or '', b.description.lower()):<58} {b.id}")
    return out
