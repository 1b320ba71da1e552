"""The comparison screen (``space`` marks jobs, ``c`` opens it): their TFLOPs,
iteration-time and loss curves overlaid, aligned by iteration, with a legend, and
below them one row per job in the columns of seed 001's tables."""
from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from ..figures.columns import BY_NAME, DEFAULT, ColumnError, parse_columns
from ..figures.columns import text as column_text
from ..live.session import JobDetail
from .chart import FULL, OverlayChart
from .job import curve_xy
from .palette import of
from .render import plain
from .tablefilter import TableFilter
from .view import WatchesSnapshot

if TYPE_CHECKING:  # (a type only: the view is the app's session)
    from ..live.session import Snapshot
    from .view import SessionView

CHARTS = (("compare-tflops", "TFLOPs/GPU", "", True), ("compare-iter", "iteration time (s)", "s", True),
          ("compare-loss", "loss", "", False))


class CompareScreen(WatchesSnapshot, TableFilter, Screen):
    BINDINGS = [Binding("escape,backspace", "back", "Back", id="back"),
                Binding("o", "columns", "Columns", id="columns"),
                Binding("slash", "filter", "Filter", id="filter")]
    TABLE_ID = "compare-table"

    def __init__(self, keys: list[str]) -> None:
        super().__init__()
        self.keys = keys
        self.details: list[JobDetail] = []
        self.columns: tuple[str, ...] = DEFAULT  # seed 001's table; `o` chooses others, as --columns does

    def compose(self) -> ComposeResult:
        yield Static(Text(f"Comparing {len(self.keys)} jobs", style="bold"), classes="title")
        with Horizontal(classes="charts compare-charts"):
            for chart_id, title, _, _ in CHARTS:
                with Vertical(classes="chart"):
                    yield Static(Text(title), classes="chart-title")
                    yield Static(Text(""), id=chart_id, classes="plot")
        yield DataTable(id="compare-table", cursor_type="row")
        yield Input(id="compare-columns", placeholder="columns, as summary --columns takes them")
        yield self.filter_box("filter: words in any column, or column:value (status:failed)")
        yield Footer()

    def on_mount(self) -> None:
        # the charts finish mounting after this handler: drawn from the next refresh
        self.call_after_refresh(self.first_draw)

    def show_from(self, view: "SessionView", snap: "Snapshot") -> None:
        self.show([d for d in (view.job_detail(k) for k in self.keys) if d is not None])

    def show(self, details: list[JobDetail]) -> None:
        """The marked jobs' curves and rows (called on every refresh)."""
        self.details = details
        palette = of(self)
        styles = [palette.bar, palette.warn, palette.alert, palette.phase, palette.status.get("finished", "")]
        for chart_id, _, unit, warmup in CHARTS:
            series = []
            for d in details:
                xs, ys = curve_xy(d.curve(chart_id.removeprefix("compare-")), FULL)
                series.append((d.row.summary.job, xs, ys))
            self.query_one(f"#{chart_id}", Static).update(OverlayChart(series, styles, unit=unit, palette=palette,
                                                                        warmup=warmup))
        table = self.query_one("#compare-table", DataTable)
        if [c.value for c in table.columns] != list(self.columns):
            table.clear(columns=True)
            for name in self.columns:
                table.add_column(BY_NAME[name].header, key=name)
        table.clear()
        matches = self.row_filter(self.columns)
        for d in details:
            cells = [column_text(BY_NAME[name], d.row.summary) for name in self.columns]
            if matches(cells):
                table.add_row(*map(plain, cells))

    def refilter(self) -> None:
        self.show(self.details)

    def action_columns(self) -> None:
        box = self.query_one("#compare-columns", Input)
        box.value = ",".join(self.columns)
        box.add_class("visible")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if self.filter_submitted(event):
            return
        event.stop()
        try:
            chosen = parse_columns(event.value) if event.value.strip() else tuple(BY_NAME[n] for n in DEFAULT)
        except ColumnError as exc:
            self.notify(str(exc), severity="error", markup=False)
            return
        self.columns = tuple(c.name for c in chosen)
        event.input.remove_class("visible")
        self.query_one("#compare-table", DataTable).focus()
        self.show(self.details)

    def action_back(self) -> None:
        if self.clear_filter():
            return
        box = self.query_one("#compare-columns", Input)
        if box.has_class("visible"):
            box.remove_class("visible")
            self.query_one("#compare-table", DataTable).focus()
            return
        self.app.pop_screen()
