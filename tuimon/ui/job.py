"""The job screen: charts, the time ledger, breakdowns, startup timeline, ranks and the log tail."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Optional

import numpy as np
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Log, Static

from ..live.session import Curve, JobDetail
from ..text import sanitize
from .chart import FULL, LineChart, XView, in_view
from .messages import OpenLog, OpenRank
from .palette import Palette, of
from .panels import BreakdownPanel, FailuresPanel, LedgerPanel, Panel, RunPanel, StartupPanel
from .render import Fitted, num, plain, status_text
from .view import WatchesSnapshot

if TYPE_CHECKING:  # (a type only: the view is the app's session)
    from ..live.session import Snapshot
    from .view import SessionView

TAIL_SHOWN = 500


CHART_POINTS = 2000  # the latest points charted (a column of the chart averages its points)


def chart_xs(iterations: np.ndarray, n: int) -> np.ndarray:
    """The x of ``n`` points: their iterations, or their order when those are not known
    for each of them (a series of another length, or points without a number)."""
    if len(iterations) == n and (n == 0 or iterations.min() >= 0):
        return iterations.astype(np.float64)
    return np.arange(1, n + 1, dtype=np.float64)


def curve_xy(curve: Curve, view: XView) -> tuple[np.ndarray, np.ndarray]:
    """The x (iterations or wall times, as ``view`` says) and y of a curve's latest points."""
    n = len(curve.values)
    xs = curve.walls if view.wall and len(curve.walls) == n else chart_xs(curve.iterations, n)
    return xs[-CHART_POINTS:], curve.values[-CHART_POINTS:]


class ZoomChart(Message):
    """The mouse wheel over a chart: zoom the job's charts in (``factor`` < 1) or out,
    keeping the point under the mouse (``at``, a fraction of the plot's width) in place."""

    def __init__(self, factor: float, at: float) -> None:
        super().__init__()
        self.factor = factor
        self.at = at


class Chart(Vertical):
    """A titled line chart with axes (:mod:`tuimon.ui.chart`): x the iteration or the wall
    time, y ticks in its unit, warm-up dimmed and out of the y range, NaN marked, zoomed
    by its screen's :class:`XView`.  Our own renderable: a plotting widget would add a
    dependency and its own markup handling of labels."""

    COMPONENT_CLASSES = {"chart--line", "chart--axis", "chart--nan"}
    DEFAULT_CSS = """
    Chart > .chart--line { color: $primary; }
    Chart > .chart--axis { color: $text-muted; }
    Chart > .chart--nan { color: $error; text-style: bold; }
    """

    def __init__(self, title: str, chart_id: str, unit: str = "", warmup: bool = True) -> None:
        super().__init__(classes="chart")
        self.warmup = warmup
        self.title = title
        self.chart_id = chart_id
        self.unit = unit
        self.xs: list[float] = []
        self.values: list[float] = []  # the points shown (NaN included)

    def compose(self) -> ComposeResult:
        yield Static(Text(self.title), id=f"{self.chart_id}-label")
        yield Static(Text(""), id=self.chart_id, classes="plot")

    def show(self, curve: Curve, fmt: str, view: XView = FULL) -> None:
        xs, ys = curve_xy(curve, view)
        self.xs, self.values = [float(v) for v in xs], [float(v) for v in ys]
        plot = self.query_one(f"#{self.chart_id}", Static)
        palette = self._palette()
        plot.update(LineChart(self.xs, self.values, unit=self.unit, palette=palette,
                              height=lambda: max(3, plot.size.height), warmup=self.warmup, view=view))
        shown, _, _ = in_view(np.asarray(xs, dtype=np.float64), view)
        finite = [v for v, ok in zip(self.values, shown) if ok and math.isfinite(v)]
        title = self.title + (" (zoomed)" if view.zoomed else "")
        if not finite:
            self.query_one(f"#{self.chart_id}-label", Static).update(Text(title))
            return
        figures = [f"last {finite[-1]:{fmt}}", f"min {min(finite):{fmt}}", f"max {max(finite):{fmt}}"]

        def label(width: int) -> Text:
            """One line: the figures that fit after the title (a wrapped label pushed the chart down)."""
            parts = [title] + figures
            while len(parts) > 1 and len("  ".join(parts)) > width:
                parts.pop()
            return Text("  ".join(parts), no_wrap=True, overflow="ellipsis")

        self.query_one(f"#{self.chart_id}-label", Static).update(Fitted(label))

    def _palette(self) -> Palette:
        if not self.is_attached:  # not in an app yet (its styles are not computed): the theme's defaults
            return of(self)
        style = self.get_component_rich_style
        return Palette(bar=style("chart--line"), dim=style("chart--axis"), alert=style("chart--nan"))

    def _wheel(self, event: events.MouseScrollDown | events.MouseScrollUp, factor: float) -> None:
        event.stop()
        plot = self.query_one(f"#{self.chart_id}", Static)
        at = min(1.0, max(0.0, event.x / max(1, plot.size.width)))
        self.post_message(ZoomChart(factor, at))

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self._wheel(event, 0.5)

    def on_mouse_scroll_down(self, event: events.MouseScrollDown) -> None:
        self._wheel(event, 2.0)


def show_charts(node: Widget, prefix: str, d: Optional[JobDetail], view: XView = FULL,
                evals: Optional[bool] = None) -> None:
    """A job's TFLOPs, iteration-time and loss on the charts ``#{prefix}-tflops``, ``-iter``
    and ``-loss`` under ``node`` (none: empty charts); with ``evals`` true, the loss chart shows
    the job's evaluation metric instead (when it has one); None: no switch offered (a preview)."""
    for name, fmt in (("tflops", ".1f"), ("iter", ".2f"), ("loss", ".3f")):
        chart = node.query_one(f"#{prefix}-{name}", Static).parent
        assert isinstance(chart, Chart)
        if name == "loss" and evals is not None and d is not None and d.eval_metric is not None:
            metric = sanitize(d.eval_metric, 40)  # a user format's pairs may name it anything
            chart.title = f"{metric} (v: loss)" if evals else f"loss (v: {metric})"
            if evals:
                name = "eval"
        elif name == "loss":
            chart.title = "loss"
        chart.show(d.curve(name) if d is not None else Curve.empty(), fmt, view)


class ExportSeries(Message):
    """The job screen asks for its job's series as CSV (the app writes the file)."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key


class JobScreen(WatchesSnapshot, Screen):
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="back"),
        Binding("enter", "open_rank", "Open rank", id="open-rank"),
        Binding("l", "log", "Log", id="log"),
        Binding("slash", "log(True)", "Search log", id="search"),
        Binding("e", "export", "Export CSV", id="export"),
        Binding("b", "breakdown", "Breakdown", id="breakdown"),
        Binding("x", "x_axis", "x: iter/time", id="x-axis"),
        Binding("v", "evals", "v: loss/eval", show=False, id="evals"),
        Binding("plus,equals_sign", "zoom(0.5)", "Zoom in", id="zoom-in"),
        Binding("minus", "zoom(2.0)", "Zoom out", show=False, id="zoom-out"),
        Binding("less_than_sign", "pan(-0.5)", "Pan back", show=False, id="pan-back"),
        Binding("greater_than_sign", "pan(0.5)", "Pan on", show=False, id="pan-on"),
        Binding("0", "zoom_reset", "Reset zoom", show=False, id="zoom-reset"),
        Binding("j", "cursor_down", "Down", show=False, id="down"),
        Binding("k", "cursor_up", "Up", show=False, id="up"),
    ]

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key
        self._tail_shown: list[str] = []
        self._rank_keys: list[str] = []
        self._ready = False  # the timer may fire between push and mount
        self.view = FULL  # the charts' x axis and zoom
        self.evals = False  # the loss chart shows the evaluation metric
        self._detail: Optional[JobDetail] = None

    def compose(self) -> ComposeResult:
        yield Static(Text("loading…"), id="job-title", classes="title")
        with Horizontal(classes="charts"):
            yield Chart("TFLOPs/GPU", "chart-tflops")
            yield Chart("iteration time (s)", "chart-iter", unit="s")
            yield Chart("loss", "chart-loss", warmup=False)
        yield LedgerPanel(id="ledger")
        with Horizontal(classes="panels"):
            yield BreakdownPanel(id="breakdown")
            yield StartupPanel(id="startup")
        with Horizontal(classes="panels"):
            yield RunPanel(id="config")
            yield FailuresPanel(id="failures")
        yield DataTable(id="ranks", cursor_type="row")
        yield Log(id="tail", max_lines=TAIL_SHOWN, auto_scroll=True)
        yield Footer()

    def on_mount(self) -> None:
        ranks = self.query_one("#ranks", DataTable)
        for name in ("Rank", "Points", "Median iter (s)", "Last iteration", "Straggler"):
            ranks.add_column(name, key=name)
        ranks.focus()
        self._ready = True
        # nested widgets (the charts) finish mounting after this handler: fill on the next refresh
        self.call_after_refresh(self.first_draw)

    def show_from(self, view: "SessionView", snap: "Snapshot") -> None:
        detail = view.job_detail(self.key)
        if detail is not None:
            self.update_detail(detail)

    def update_detail(self, d: JobDetail) -> None:
        if not self._ready or not self.query("#chart-tflops"):
            return  # still mounting
        s = d.row.summary
        title = Text.assemble(plain(s.job, "bold"), "  ", status_text(s, d.row.stalled, palette=of(self)), "  ",
                              plain(s.framework))
        self.query_one("#job-title", Static).update(title)
        self._detail = d
        show_charts(self, "chart", d, self.view, self.evals)
        for panel in self.query(Panel):
            panel.detail = d
        self._ranks(d)
        self._tail(d.tail)

    def _ranks(self, d: JobDetail) -> None:
        table = self.query_one("#ranks", DataTable)
        keys = [r.rank for r in d.ranks]
        if keys != self._rank_keys:
            table.clear()
            for r in d.ranks:
                table.add_row(plain(r.rank), str(r.points), num(r.median_ms / 1000 if r.median_ms else None, 3),
                              str(r.last_iteration if r.last_iteration is not None else "-"),
                              Text("STRAGGLER", style=of(self).warn) if r.straggler else Text(""), key=r.rank)
            self._rank_keys = keys
        else:
            for r in d.ranks:
                table.update_cell(r.rank, "Points", str(r.points))
                table.update_cell(r.rank, "Median iter (s)", num(r.median_ms / 1000 if r.median_ms else None, 3))
                table.update_cell(r.rank, "Last iteration", str(r.last_iteration if r.last_iteration is not None
                                                                else "-"))
                table.update_cell(r.rank, "Straggler", Text("STRAGGLER", style=of(self).warn) if r.straggler
                                  else Text(""))

    def _tail(self, lines: list[str]) -> None:
        lines = lines[-TAIL_SHOWN:]
        if lines == self._tail_shown:
            return
        log = self.query_one("#tail", Log)
        shown = self._tail_shown
        if shown and len(lines) >= len(shown) and lines[: len(shown)] == shown:
            new = lines[len(shown):]
        else:
            log.clear()
            new = lines
        log.write_lines([sanitize(ln) for ln in new])
        self._tail_shown = lines

    # -- actions ----------------------------------------------------------------------------
    def action_back(self) -> None:
        if self.maximized is not None:  # the breakdown filled the screen: back to the job's
            self.action_breakdown()
            return
        self.app.pop_screen()

    def action_open_rank(self) -> None:
        table = self.query_one("#ranks", DataTable)
        if self._rank_keys and table.cursor_row is not None and table.cursor_row < len(self._rank_keys):
            self.post_message(OpenRank(self.key, self._rank_keys[table.cursor_row]))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_rank()

    def action_cursor_down(self) -> None:
        self.query_one("#ranks", DataTable).action_cursor_down()

    def action_cursor_up(self) -> None:
        self.query_one("#ranks", DataTable).action_cursor_up()

    def _set_view(self, view: XView) -> None:
        self.view = view
        if self._detail is not None:
            show_charts(self, "chart", self._detail, view, self.evals)

    def action_evals(self) -> None:
        self.evals = not self.evals
        self._set_view(self.view)

    def action_x_axis(self) -> None:
        self._set_view(self.view.toggled())

    def action_zoom(self, factor: float) -> None:
        self._set_view(self.view.zoom(factor, at=1.0 if self.view.hi >= 1.0 else 0.5))  # keep the latest in view

    def action_pan(self, step: float) -> None:
        self._set_view(self.view.pan(step))

    def action_zoom_reset(self) -> None:
        self._set_view(XView(wall=self.view.wall))

    def on_zoom_chart(self, message: ZoomChart) -> None:
        self._set_view(self.view.zoom(message.factor, at=message.at))

    def action_breakdown(self) -> None:
        """The timer breakdown fills the screen (its every row), or goes back to its place."""
        panel = self.query_one("#breakdown", BreakdownPanel)
        if self.maximized is not None:
            self.minimize()
            self.query_one("#ranks", DataTable).focus()
        else:
            self.maximize(panel, container=False)
            panel.focus()

    def action_export(self) -> None:
        self.post_message(ExportSeries(self.key))

    def action_log(self, search: bool = False) -> None:
        self.post_message(OpenLog(self.key, search=search))
