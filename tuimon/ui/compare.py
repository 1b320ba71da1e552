"""The comparison screen (``space`` marks jobs, ``c`` opens it): their TFLOPs,
iteration-time and loss curves overlaid, aligned by iteration, with a legend, and
below them one row per job in the columns of seed 001's tables."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from ..figures.columns import BY_NAME, DEFAULT
from ..figures.columns import text as column_text
from ..live.session import JobDetail
from .chart import FULL, OverlayChart
from .job import curve_xy
from .palette import of
from .render import plain

CHARTS = (("compare-tflops", "TFLOPs/GPU", "", True), ("compare-iter", "iteration time (s)", "s", True),
          ("compare-loss", "loss", "", False))


class CompareScreen(Screen):
    BINDINGS = [Binding("escape,backspace", "back", "Back", id="back")]

    def __init__(self, keys: list[str]) -> None:
        super().__init__()
        self.keys = keys
        self.details: list[JobDetail] = []

    def compose(self) -> ComposeResult:
        yield Static(Text(f"Comparing {len(self.keys)} jobs", style="bold"), classes="title")
        with Horizontal(classes="charts compare-charts"):
            for chart_id, title, _, _ in CHARTS:
                with Vertical(classes="chart"):
                    yield Static(Text(title), classes="chart-title")
                    yield Static(Text(""), id=chart_id, classes="plot")
        yield DataTable(id="compare-table", cursor_type="row")
        yield Footer()

    def show(self, details: list[JobDetail]) -> None:
        """The marked jobs' curves and rows (called on every refresh)."""
        self.details = details
        palette = of(self)
        styles = [palette.bar, palette.warn, palette.alert, palette.phase, palette.status.get("finished", "")]
        for chart_id, _, unit, warmup in CHARTS:
            series = []
            for d in details:
                xs, ys = curve_xy(d.curve(chart_id.removeprefix("compare-")), FULL)
                series.append((d.row.summary["job"], xs, ys))
            self.query_one(f"#{chart_id}", Static).update(OverlayChart(series, styles, unit=unit, palette=palette,
                                                                        warmup=warmup))
        table = self.query_one("#compare-table", DataTable)
        if not table.columns:  # a refresh may come before the screen's own mount handler
            for name in DEFAULT:
                table.add_column(BY_NAME[name].header, key=name)
        table.clear()
        for d in details:
            table.add_row(*(plain(column_text(BY_NAME[name], d.row.summary)) for name in DEFAULT))

    def action_back(self) -> None:
        self.app.pop_screen()
