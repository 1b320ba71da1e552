"""A line chart with axes, as a pure renderable (no plotting dependency: a column of
block characters per x bucket reads well in a terminal, and Rich text needs no markup).

* x is the iteration (the points' own numbers) or the wall time since the first point,
  labelled at both ends and the middle; an :class:`XView` zooms to a part of it;
* y has ticks (top, middle, bottom) in the series' unit;
* warm-up points are drawn dimmed and kept out of the y range (the first iterations
  of a run are slow: with them in the range the steady state is a flat line); so are a rate's
  far outliers (a later run's first step, a checkpoint's step: 12.8 s against a steady 1.59 s),
  drawn as ``↑``/``↓`` at the edge they pass;
* a NaN point is marked ``×`` on the axis, in the alert colour;
* no points draws no line at all, only "no data yet": a flat line would read as zeros.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

import numpy as np
from rich.console import Console, ConsoleOptions, RenderResult
from rich.style import StyleType
from rich.text import Text

from ..figures.metrics import warmup_count
from ..figures.names import distinct_labels
from .palette import DEFAULT, Palette

EIGHTHS = " ▁▂▃▄▅▆▇█"


@dataclass(frozen=True)
class XView:
    """What part of the x axis a chart shows, as fractions of the points' x span (so one
    view fits every chart of a job), and whether x is the iteration or the wall time."""

    wall: bool = False
    lo: float = 0.0
    hi: float = 1.0

    MIN_WIDTH = 1 / 256  # a zoom that shows a point or two: further zooming shows nothing more

    @property
    def zoomed(self) -> bool:
        return self.lo > 0.0 or self.hi < 1.0

    def zoom(self, factor: float, at: float = 0.5) -> "XView":
        """``factor`` < 1 zooms in, > 1 out, keeping the fraction ``at`` of the view in place."""
        width = min(1.0, max(self.MIN_WIDTH, (self.hi - self.lo) * factor))
        pivot = self.lo + at * (self.hi - self.lo)
        lo = min(max(0.0, pivot - at * width), 1.0 - width)
        return replace(self, lo=lo, hi=lo + width)

    def pan(self, step: float) -> "XView":
        """Move by ``step`` view widths (negative: back), within the data."""
        width = self.hi - self.lo
        lo = min(max(0.0, self.lo + step * width), 1.0 - width)
        return replace(self, lo=lo, hi=lo + width)

    def toggled(self) -> "XView":
        return replace(self, wall=not self.wall)

    def window(self, xmin: float, xmax: float) -> tuple[float, float]:
        span = xmax - xmin
        return xmin + self.lo * span, xmin + self.hi * span


FULL = XView()


def x_label(value: float, wall: bool) -> str:
    """An x tick: the iteration, or a wall time since the first point to the second or
    minute (``42s``, ``1m39s``, ``3h05m``; days past two days)."""
    if not wall:
        return f"{value:.0f}"
    seconds = int(round(max(0.0, value)))
    if seconds < 60:
        return f"{seconds}s"
    if seconds < 3600:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    if seconds < 172800:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{value / 86400:.1f}d"


def in_view(x: np.ndarray, view: XView) -> tuple[np.ndarray, float, float]:
    """The mask of the points ``view`` shows (NaN x: never), and the x window it shows."""
    ok = np.isfinite(x)
    if not ok.any():
        return ok, 0.0, 0.0
    xmin, xmax = float(x[ok].min()), float(x[ok].max())
    lo, hi = view.window(xmin, xmax)
    with np.errstate(invalid="ignore"):
        return ok & (x >= lo) & (x <= hi), lo, hi


def tick(value: float, unit: str) -> str:
    """A short label: 3 significant figures, k/M for big values."""
    a = abs(value)
    if a >= 1e6:
        text = f"{value / 1e6:.3g}M"
    elif a >= 1e4:
        text = f"{value / 1e3:.3g}k"
    else:
        text = f"{value:.3g}"
    return text + unit


#: a rate's point further than this many MADs from the median of the steady points is out of the y range
_FAR = 8.0
#: the MAD is taken as at least this share of the median: a flat rate would make a 1 % wiggle an outlier
_MAD_FLOOR = 0.02


def steady_range(values: np.ndarray) -> np.ndarray:
    """The values a rate chart's y range is taken from: the finite ``values`` less the far outliers
    (median +- 8 MADs). The range never hides the steady state for a handful of points; the points
    left out are still drawn, clipped, with an arrow. (A loss falls from 11 to 3 for real: its chart
    keeps every point, as it keeps its warm-up.)"""
    v = values[np.isfinite(values)]
    if v.size < 3:
        return v
    med = float(np.median(v))
    mad = max(float(np.median(np.abs(v - med))), _MAD_FLOOR * abs(med))
    if mad == 0.0:
        return v
    kept = v[np.abs(v - med) <= _FAR * mad]
    return kept if kept.size else v


def _y_axis(ranged: np.ndarray, width: int, unit: str) -> tuple[float, float, list[str], int, int]:
    """(low, high, tick labels top/middle/bottom, label width, plot width) for the values
    the y range is taken from; a flat series gets 5% of room either side."""
    lo, hi = float(ranged.min()), float(ranged.max())
    if hi == lo:
        pad = abs(hi) * 0.05 or 1.0
        lo, hi = lo - pad, hi + pad
    labels = [tick(hi, unit), tick((hi + lo) / 2, unit), tick(lo, unit)]
    label_w = max(len(s) for s in labels) + 1
    return lo, hi, labels, label_w, max(4, width - label_w - 1)


def chart_lines(xs: Sequence[float], ys: Sequence[float], width: int, height: int, *, unit: str = "",
                palette: Palette = DEFAULT, warmup: bool = True, view: XView = FULL) -> list[Text]:
    """``height`` lines of ``width`` cells: the plot with its y ticks, then the x axis
    (the part of it ``view`` shows; the y range is that of the points shown)."""
    x = np.asarray(xs, dtype=np.float64)
    y = np.asarray(ys, dtype=np.float64)
    n = min(x.size, y.size)
    x, y = x[:n], y[:n]
    if n == 0 or height < 3 or width < 12:
        return [Text("no data yet", style=palette.dim)]
    if not np.isfinite(y).any():
        return [Text("no finite value yet", style=palette.dim)]
    if not np.isfinite(x).any():
        return [Text("no wall time logged: press x for iterations" if view.wall else "no data yet",
                     style=palette.dim)]
    # a loss starts high for real: only rates have a warm-up (counted on the whole run, not the view)
    is_warm = np.arange(n) < (warmup_count(n) if warmup else 0)
    shown, xmin, xmax = in_view(x, view)
    if not shown.any():
        return [Text("no point in this range: press 0 to reset the zoom", style=palette.dim)]
    x, y, is_warm = x[shown], y[shown], is_warm[shown]
    n = x.size
    warm = int(is_warm.sum())  # the warm-up points come first
    finite = np.isfinite(y)
    if not finite.any():
        return [Text("no finite value in this range", style=palette.dim)]
    steady = finite & ~is_warm
    ranged = y[steady] if steady.any() else y[finite]
    if warmup:  # a rate: its far outliers out of the range too
        ranged = steady_range(ranged)
    lo, hi, labels, label_w, plot_w = _y_axis(ranged, width, unit)
    rows = height - 2  # the x axis line and its labels
    # buckets by x: the mean of the finite points that fall in each column
    span = (xmax - xmin) or 1.0
    col = np.clip(((x - xmin) / span * (plot_w - 1)).round().astype(int), 0, plot_w - 1) if n > 1 else np.zeros(1, int)
    sums = np.zeros(plot_w)
    counts = np.zeros(plot_w)
    warm_col = np.zeros(plot_w, dtype=bool)
    nan_col = np.zeros(plot_w, dtype=bool)
    np.add.at(sums, col[finite], y[finite])
    np.add.at(counts, col[finite], 1)
    warm_col[col[:warm]] = True
    warm_col[col[warm:]] = False  # a column with steady points is drawn as steady
    nan_col[col[~finite]] = True
    values = np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)
    # a line, not dots: a column between two points holds the one before it (a step)
    known = np.flatnonzero(np.isfinite(values))
    if known.size:
        idx = np.maximum.accumulate(np.where(np.isfinite(values), np.arange(plot_w), 0))
        filled = values[idx]
        filled[: known[0]] = np.nan
        filled[known[-1] + 1:] = np.nan
        warm_col = warm_col[idx]
        values = filled
    eighths = rows * 8
    level = np.where(np.isfinite(values), np.clip((values - lo) / (hi - lo), -0.05, 1.05) * eighths, -1)
    lines: list[Text] = []
    for r in range(rows):
        line = Text()
        label = labels[0] if r == 0 else labels[1] if r == rows // 2 else labels[2] if r == rows - 1 else ""
        line.append(label.rjust(label_w - 1) + " ", style=palette.dim)
        line.append("┤" if label else "│", style=palette.dim)
        floor = (rows - 1 - r) * 8  # eighths below this row
        for c in range(plot_w):
            v = level[c]
            if v == -1:
                line.append(" ")
                continue
            fill = int(min(8, max(1 if r == rows - 1 else 0, round(v - floor))))  # the lowest value still drawn
            over = v > eighths and r == 0  # above the range: a warm-up peak or a far outlier, clipped
            under = v < 0 and r == rows - 1  # below it: a far outlier, clipped
            ch = "↑" if over else "↓" if under else EIGHTHS[fill]
            line.append(ch, style=palette.dim if warm_col[c] else palette.bar)
        lines.append(line)
    axis = Text(" " * label_w + "└", style=palette.dim)
    for c in range(plot_w):
        axis.append("×" if nan_col[c] else "─", style=palette.alert if nan_col[c] else palette.dim)
    lines.append(axis)
    first, mid, last = (x_label(v, view.wall) for v in (xmin, (xmin + xmax) / 2, xmax))
    gap = plot_w - len(first) - len(last)
    xl = Text(" " * (label_w + 1) + first, style=palette.dim)
    if gap > len(mid) + 2:
        left = (gap - len(mid)) // 2
        xl.append(" " * left + mid + " " * (gap - len(mid) - left), style=palette.dim)
    else:
        xl.append(" " * max(1, gap), style=palette.dim)
    xl.append(last, style=palette.dim)
    lines.append(xl)
    return lines


class LineChart:
    """:func:`chart_lines` at the size it is drawn (a widget's content region)."""

    def __init__(self, xs: Sequence[float], ys: Sequence[float], *, unit: str = "", palette: Palette = DEFAULT,
                 height: Callable[[], int] = lambda: 6, warmup: bool = True, view: XView = FULL) -> None:
        self.xs, self.ys, self.unit, self.palette, self.height = xs, ys, unit, palette, height
        self.warmup, self.view = warmup, view

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        height = options.height or self.height()
        lines = chart_lines(self.xs, self.ys, options.max_width, max(3, height), unit=self.unit, palette=self.palette,
                            warmup=self.warmup, view=self.view)
        yield Text("\n").join(lines)



#: a series' mark in an overlay: the first series ●, the next ◆, ▲, ■, then ● again
MARKS = "●◆▲■"


def overlay_lines(series: Sequence[tuple[str, Any, Any]], styles: Sequence[StyleType], width: int,
                  height: int, *, unit: str = "", palette: Palette = DEFAULT, warmup: bool = True) -> list[Text]:
    """Several series on one grid, aligned by x (the iteration): each a mark in its own
    style, y ticks shared, warm-up out of the y range; then the x axis and a legend."""
    data = []
    for label, xs, ys in series:
        x = np.asarray(xs, dtype=np.float64)
        y = np.asarray(ys, dtype=np.float64)
        n = min(x.size, y.size)
        data.append((label, x[:n], y[:n]))
    steady = [y[(warmup_count(y.size) if warmup else 0):] for _, _, y in data]
    # rates: each series' far outliers out of the shared range (drawn at its edge); per series, since
    # one run three times slower than the others is what a comparison is for
    ranged = (np.concatenate([steady_range(v) if warmup else v[np.isfinite(v)] for v in steady]) if steady
              else np.zeros(0))
    xs_all = np.concatenate([x for _, x, _ in data]) if data else np.zeros(0)
    if ranged.size == 0 or xs_all.size == 0 or height < 4 or width < 16:
        return [Text("no data yet", style=palette.dim)]
    lo, hi, labels, label_w, plot_w = _y_axis(ranged, width, unit)
    rows = height - 3  # the axis, its labels, the legend
    xmin, xmax = float(xs_all.min()), float(xs_all.max())
    span = (xmax - xmin) or 1.0
    grid: list[list[tuple[str, StyleType]]] = [[(" ", "")] * plot_w for _ in range(rows)]
    for k, (_, x, y) in enumerate(data):
        ok = np.isfinite(y)
        cols = np.clip(((x[ok] - xmin) / span * (plot_w - 1)).round().astype(int), 0, plot_w - 1)
        levels = np.clip((y[ok] - lo) / (hi - lo), 0, 1)
        rws = (rows - 1 - (levels * (rows - 1)).round()).astype(int)
        for c, r in zip(cols, rws):
            grid[r][c] = (MARKS[k % len(MARKS)], styles[k % len(styles)])
    lines = []
    for r in range(rows):
        label = labels[0] if r == 0 else labels[1] if r == rows // 2 else labels[2] if r == rows - 1 else ""
        line = Text(label.rjust(label_w - 1) + " ", style=palette.dim)
        line.append("┤" if label else "│", style=palette.dim)
        for ch, style in grid[r]:
            line.append(ch, style=style)
        lines.append(line)
    lines.append(Text(" " * label_w + "└" + "─" * plot_w, style=palette.dim))
    first, last = f"{xmin:.0f}", f"{xmax:.0f}"
    lines.append(Text(" " * (label_w + 1) + first + " " * max(1, plot_w - len(first) - len(last)) + last,
                      style=palette.dim))
    legend = Text(" " * (label_w + 1))
    room = max(6, plot_w // max(1, len(data)) - 4)  # every series named, however many
    named = distinct_labels((label for label, _, _ in data), room)  # each told apart where it differs
    for k, (label, _, _) in enumerate(data):
        legend.append(f"{MARKS[k % len(MARKS)]} ", style=styles[k % len(styles)])
        legend.append(named[label] + "  ")
    lines.append(legend)
    return lines


class OverlayChart:
    """:func:`overlay_lines` at the size it is drawn."""

    def __init__(self, series: Sequence[tuple[str, Any, Any]], styles: Sequence[StyleType], *,
                 unit: str = "", palette: Palette = DEFAULT, warmup: bool = True) -> None:
        self.series, self.styles, self.unit, self.palette, self.warmup = series, styles, unit, palette, warmup

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = overlay_lines(self.series, self.styles, options.max_width, max(4, options.height or 10),
                              unit=self.unit, palette=self.palette, warmup=self.warmup)
        yield Text("\n").join(lines)
