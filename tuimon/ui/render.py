"""Pure renderables for the app: plain ``rich.text.Text`` built from numbers and
sanitized strings, never from markup."""
from __future__ import annotations

import math
from typing import Any, Callable, Optional, Sequence

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from tuimon.parsers.timers import timer_group

from ..figures.cells import duration as duration
from ..figures.cells import iter_time as iter_time
from ..figures.cells import num as num
from ..figures.cells import short_num as short_num
from ..figures.names import distinct_label
from ..figures.record import Summary
from ..text import sanitize
from .palette import DEFAULT, Palette

BLOCKS = "▁▂▃▄▅▆▇█"
_MIN_BAR = 4


def plain(text: object, style: str = "") -> Text:
    """Untrusted text as a Text that shows it literally."""
    return Text(sanitize(str(text)), style=style)


def spark(values: Sequence[float], width: int = 16, palette: Palette = DEFAULT) -> Text:
    finite = [v for v in values if v is not None and math.isfinite(v)][-width:]
    if not finite:
        return Text("")
    lo, hi = min(finite), max(finite)
    span = hi - lo or 1.0
    return Text("".join(BLOCKS[min(7, int((v - lo) / span * 7.999))] for v in finite), style=palette.bar)


def status_text(summary: Summary, stalled: bool, alerts: int = 0, palette: Palette = DEFAULT) -> Text:
    status = summary.status
    label = status
    if status == "failed" and summary.failure:
        label = f"FAILED {summary.failure.kind}"
    elif status == "no-iterations":
        label = "NO ITERATIONS"
    elif status == "nan":
        label = "NAN"
    elif status == "stuck-in-startup":
        label = "STUCK IN STARTUP"
    if stalled:
        label = f"STALLED ({status})"
        status = "stalled"
    text = Text(label, style=palette.status.get(status, ""))
    if alerts:  # the badge: how many alerts the job raised (the Alerts screen lists them)
        text.append(f" !{alerts}", style=palette.alert)
    return text


class Fitted:
    """A renderable built for the width it is drawn at: a panel's bars shrink with
    the panel instead of wrapping their figures onto a line of their own."""

    def __init__(self, build: Callable[[int], Text]) -> None:
        self.build = build

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.build(options.max_width)


def _parent_index(parts: Sequence[dict], i: int) -> Optional[int]:
    depth = parts[i]["depth"]
    for j in range(i - 1, -1, -1):
        if parts[j]["depth"] < depth:
            return j
    return None


def _offload(name: str) -> bool:
    return timer_group(name) == "offload"


def breakdown_rows(parts: Sequence[dict], limit: int) -> list[int]:
    """Which rows of a breakdown to show in ``limit`` lines, in tree order: the top level,
    then the offload timers (why an offloading run is watched), then the rest by share,
    each with the rows that hold it; ``other`` rows after named ones of their share."""
    if len(parts) <= limit:
        return list(range(len(parts)))

    def chain(i: int) -> set[int]:
        out = set()
        at: Optional[int] = i
        while at is not None:
            out.add(at)
            at = _parent_index(parts, at)
        return out

    def weight(i: int) -> float:
        return -parts[i]["share"] * (0.5 if parts[i]["name"] == "other" else 1.0)

    tops = sorted((i for i, p in enumerate(parts) if p["depth"] == 0), key=weight)
    # the outermost offload timers first (their copies after), by share
    offload = sorted((i for i, p in enumerate(parts) if p["depth"] and _offload(p["name"])),
                     key=lambda i: (len(chain(i)), -parts[i]["share"]))
    rest = sorted((i for i, p in enumerate(parts) if p["depth"] and not _offload(p["name"])), key=weight)
    kept: set[int] = set()
    for i in tops[:1] + offload + tops[1:] + rest:
        trial = kept | chain(i)
        if len(trial) <= limit:
            kept = trial
    return sorted(kept)


def tree_bars(parts: Sequence[dict], width: int = 30, line_width: Optional[int] = None,
              limit: Optional[int] = None, palette: Palette = DEFAULT, offset: int = 0,
              note_more: bool = True) -> Text:
    """A timer breakdown (``Summary.breakdown``): one line per part, indented under
    its parent, its bar the part's share of the iteration (full width: the whole
    iteration), then its mean and its share; within ``line_width`` columns when given
    (the bars shrink first).  ``limit``: at most so many lines: the rows that matter most
    (:func:`breakdown_rows`) and a last line saying how many more there are (unless not
    ``note_more``: a short panel says it in its title); ``offset``
    > 0: the whole list instead, from that row on (the panel scrolled).  A part marked
    ``overlap`` (it and its siblings add up to more than what holds them) ends in ``*``."""
    if not parts:
        return Text("(nothing logged yet)", style="dim")
    more = 0
    if offset > 0:
        start = min(offset, max(0, len(parts) - (limit or len(parts))))
        shown = list(parts[start:start + limit] if limit is not None else parts[start:])
    elif limit is not None and len(parts) > limit:
        picked = breakdown_rows(parts, max(1, limit - 1) if note_more else limit)
        shown = [parts[i] for i in picked]
        more = len(parts) - len(shown)
    else:
        shown = list(parts)
    labels = ["  " * p["depth"] + sanitize(p["name"]) for p in shown]
    name_w = min(34, max(len(label) for label in labels))
    figures = 1 + 10 + 3 + 7
    spreads = [_spread(p) for p in shown]
    spread_w = max(map(len, spreads))
    if spread_w and line_width is not None and line_width - figures - 1 - min(name_w, 16) - 2 * _MIN_BAR < spread_w:
        spreads, spread_w = [""] * len(shown), 0  # too narrow: the spread goes before the names shrink
    if line_width is not None:
        name_w = max(1, min(name_w, line_width - figures - spread_w - 1 - _MIN_BAR))
        width = max(_MIN_BAR, min(width, line_width - figures - spread_w - 1 - name_w))
    cut = [label[:name_w] for label in labels]
    if len(set(cut)) < len(set(labels)):
        # names that a cut at the width reads alike (offloading-bwd-2cpu and -2gpu) are cut where they tell
        # nothing apart instead, keeping what differs; the others keep their heads (the tree reads from there)
        names = [sanitize(p["name"]) for p in shown]
        alike = {c for c in cut if cut.count(c) > 1}
        labels = ["  " * p["depth"] + distinct_label(name, names, max(1, name_w - 2 * p["depth"]))
                  if c in alike else label for p, name, c, label in zip(shown, names, cut, labels)]
    # a name cut ends in an ellipsis: "offloading-bwd-ov…", not a word that reads whole
    labels = [label if len(label) <= name_w else label[:max(0, name_w - 1)] + "…" for label in labels]
    out = Text()
    for i, (p, label) in enumerate(zip(shown, labels)):
        if i:
            out.append("\n")
        out.append(label[:name_w].ljust(name_w) + " ", style="dim" if p["name"] == "other" else "")
        share = p["share"] if math.isfinite(p["share"]) else 0.0
        filled = min(width, int(round(width * share)))
        out.append("█" * filled, style=palette.dim if p["name"] == "other" else palette.bar)
        out.append("·" * (width - filled), style="dim")
        out.append(f" {p['mean_ms']:10.1f} ms {100.0 * share:5.1f}%" + ("*" if p.get("overlap") else ""))
        if spreads[i]:  # (its two leading spaces part it from the share, or the overlap mark and one)
            out.append(spreads[i].rjust(spread_w)[1 if p.get("overlap") else 0:], style="dim")
    if more and note_more:
        out.append(f"\n… {more} more row{'s' if more != 1 else ''} (b: expand, wheel or ↓: scroll)", style="dim")
    return out


def _spread(part: dict) -> str:
    """`` p10–p90`` of a part's steady reports in ms ('' where not known)."""
    lo, hi = part.get("p10_ms"), part.get("p90_ms")
    if lo is None or hi is None or not (math.isfinite(lo) and math.isfinite(hi)):
        return ""
    return f"  {_ms(lo)}–{_ms(hi)}"


def _ms(value: float) -> str:
    return f"{value:.2f}" if abs(value) < 10 else f"{value:.1f}" if abs(value) < 1000 else f"{value:.0f}"


def timeline(phases: Sequence[dict], width: int = 40, line_width: Optional[int] = None,
             palette: Palette = DEFAULT) -> Text:
    """Startup phases as horizontal bars with their real durations (within
    ``line_width`` columns when given: the bars shrink).  Each bar is labelled with the
    mark it ends at (``→ model-built``: the time from the mark before to it)."""
    if len(phases) < 2:
        return Text("(no job-start mark and first step yet)", style="dim")
    if line_width is not None:
        width = max(_MIN_BAR, min(width, line_width - 36))  # name 24 + space, duration 11
    total = phases[-1]["offset_s"] or 1.0
    out = Text()
    for i in range(len(phases) - 1):
        start, end = phases[i]["offset_s"], phases[i + 1]["offset_s"]
        lead = int(round(width * start / total))
        length = max(1, int(round(width * (end - start) / total)))
        if i:
            out.append("\n")
        out.append(("→ " + sanitize(phases[i + 1]["name"]))[:24].ljust(24) + " ")
        out.append(" " * lead)
        out.append("█" * length, style=palette.phase)
        out.append(" " * max(0, width - lead - length))
        out.append(f" {end - start:8.1f} s")
    out.append(f"\n{'job start to ' + sanitize(phases[-1]['name']):24s} {total:.1f} s", style="bold")
    return out


def failures_text(checks: Sequence[str], alerts: Sequence[Any], failures: Sequence[dict], rows: int,
                  palette: Palette = DEFAULT) -> Text:
    """A job's doubtful figures (``! ...``), its alerts the failures do not already say (a
    stall, a loss spike, a straggler) and its failures with their lines, within ``rows``."""
    text = Text()
    for check in checks:  # doubtful figures: both numbers and what to check
        text.append("! ", style=palette.alert)
        text.append_text(plain(check))
        text.append("\n")
    others = [a for a in alerts if a.kind != "failed"]
    if not failures and not checks and not others:
        text.append("none", style=palette.dim)
    room = max(1, rows - 1 - len(checks))
    for a in others[-max(1, min(3, room // 2)):] if others else ():
        where = f"iteration {a.iteration}" if a.iteration is not None else "alert"
        text.append(f"{a.kind:9s} {where}: ", style=palette.alert)
        text.append_text(plain(a.message[:160]))
        text.append("\n")
    for f in failures[-max(1, min(5, room - min(3, len(others)))):] if failures else ():
        text.append(f"{f['kind']:9s} line {f['line']}: ", style=palette.alert)
        text.append_text(plain(f["message"][:160]))
        text.append("\n")
    return text


#: the ledger's parts on screen: a glyph each (a monochrome terminal still tells them apart) and the role
#: of its colour; startup in the startup timeline's colour
LEDGER_LOOK = {"startup": ("▓", "phase"), "training": ("█", "bar"), "checkpoint": ("▒", "bar"), "eval": ("░", "bar"),
               "stall": ("▚", "alert"), "redone": ("▞", "warn"), "teardown": ("▁", "dim"), "gap": ("·", "dim"),
               "unknown": ("?", "dim")}
_LEDGER_WORDS = {"startup": "startup", "training": "training", "checkpoint": "saves", "eval": "eval",
                 "stall": "stalls", "redone": "redone", "teardown": "teardown", "gap": "between runs"}


def ledger_heading(ledger: Any) -> Text:
    """The panel's title: goodput over the span, the runs, what was redone; or why it is unknown.
    A Text, shown literally: a border title given as a string is read as markup, and a note names
    its run (a file's name)."""
    return plain(_ledger_heading(ledger))


def _ledger_heading(ledger: Any) -> str:
    if ledger is None:
        return "Time ledger"
    runs = len(ledger.runs)
    if ledger.goodput is None or ledger.whole_s is None:
        why = ledger.notes[0].split(": ", 1)[-1] if ledger.notes else "unknown"
        return f"Time ledger: goodput unknown, {why}"
    words = [f"Time ledger: goodput {100 * ledger.goodput:.0f}% of {duration(ledger.whole_s)}"]
    if runs > 1:
        words.append(f"{runs} runs")
    redone = ledger.gpu_hours.get("redone")
    if redone:
        words.append(f"{redone:.1f} GPU-h redone")
    elif ledger.seconds.get("redone"):
        words.append(f"{duration(ledger.seconds['redone'])} redone")
    return ", ".join(words)


def ledger_text(ledger: Any, width: int, palette: Palette = DEFAULT) -> Text:
    """A job's time ledger in two lines of ``width``: its span as a bar (each cell the part that
    took most of its time, a run's start marked ``┃``), then each part's share (and time where
    there is room), largest first."""
    out = Text()
    if ledger is None or not ledger.segments or not ledger.whole_s:
        why = ledger.notes[0] if ledger is not None and ledger.notes else "no run of this job has time stamps to place"
        out.append_text(plain(why[: max(1, width * 2)], "dim"))
        return out
    width = max(10, width)
    span = ledger.whole_s
    cells: list[dict[str, float]] = [{} for _ in range(width)]
    for part, a, b in ledger.segments:
        first, last = int(a / span * width), min(width - 1, int(b / span * width))
        for k in range(max(0, first), last + 1):
            lo, hi = span * k / width, span * (k + 1) / width
            cells[k][part] = cells[k].get(part, 0.0) + max(0.0, min(b, hi) - max(a, lo))
    marks = {min(width - 1, int(at / span * width)) for at in ledger.run_starts}
    for k, share in enumerate(cells):
        if k in marks:
            out.append("┃", style=palette.dim)
            continue
        part = max(share, key=share.__getitem__) if share else "unknown"
        glyph, role = LEDGER_LOOK.get(part, LEDGER_LOOK["unknown"])
        out.append(glyph, style=getattr(palette, role))
    out.append("\n")
    pieces = sorted(((v, p) for p, v in ledger.seconds.items() if v), reverse=True)
    unknown = [p for p, v in ledger.seconds.items() if v is None]
    used = 0
    for v, part in pieces:
        glyph, role = LEDGER_LOOK[part]
        share = ledger.share.get(part)
        label = f"{_LEDGER_WORDS[part]} {100 * share:.0f}%" if share is not None else _LEDGER_WORDS[part]
        long = f"{label} {duration(v)}"
        text = long if used + len(long) + 3 <= width else label
        if used + len(text) + 3 > width:
            break
        out.append(glyph + " ", style=getattr(palette, role))
        out.append(text + "  ")
        used += len(text) + 4
    if unknown and used + 12 < width:
        out.append(f"? {', '.join(_LEDGER_WORDS[p] for p in unknown)} unknown"[: width - used], style=palette.dim)
    return out
