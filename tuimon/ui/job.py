"""The job screen: charts, breakdowns, startup timeline, ranks and the log tail."""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import DataTable, Footer, Input, Log, Static

from ..live.session import JobDetail
from .chart import LineChart
from .messages import OpenRank, RefreshRequest
from .palette import of
from .render import Fitted, num, plain, status_text, timeline, tree_bars

TAIL_SHOWN = 500


CHART_POINTS = 2000  # the latest points charted (a column of the chart averages its points)


def chart_xs(iterations: np.ndarray, n: int) -> np.ndarray:
    """The x of ``n`` points: their iterations, or their order when those are not known
    for each of them (a series of another length, or points without a number)."""
    if len(iterations) == n and (n == 0 or iterations.min() >= 0):
        return iterations.astype(np.float64)
    return np.arange(1, n + 1, dtype=np.float64)


class Chart(Vertical):
    """A titled line chart with axes (:mod:`tuimon.ui.chart`): x the iteration, y ticks in
    its unit, warm-up dimmed and out of the y range, NaN marked.  Our own renderable: a
    plotting widget would add a dependency and its own markup handling of labels."""

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

    def show(self, xs: np.ndarray, ys: np.ndarray, fmt: str) -> None:
        n = min(len(xs), len(ys))
        self.xs, self.values = [float(v) for v in xs[:n]], [float(v) for v in ys[:n]]
        plot = self.query_one(f"#{self.chart_id}", Static)
        palette = of(self)
        plot.update(LineChart(self.xs, self.values, unit=self.unit, palette=palette,
                              height=lambda: max(3, plot.size.height), warmup=self.warmup))
        finite = [v for v in self.values if math.isfinite(v)]
        if not finite:
            self.query_one(f"#{self.chart_id}-label", Static).update(Text(self.title))
            return
        figures = [f"last {finite[-1]:{fmt}}", f"min {min(finite):{fmt}}", f"max {max(finite):{fmt}}"]
        title = self.title

        def label(width: int) -> Text:
            """One line: the figures that fit after the title (a wrapped label pushed the chart down)."""
            parts = [title] + figures
            while len(parts) > 1 and len("  ".join(parts)) > width:
                parts.pop()
            return Text("  ".join(parts), no_wrap=True, overflow="ellipsis")

        self.query_one(f"#{self.chart_id}-label", Static).update(Fitted(label))


def show_charts(node: Widget, prefix: str, d: Optional[JobDetail]) -> None:
    """A job's TFLOPs, iteration-time and loss on the charts ``#{prefix}-tflops``, ``-iter``
    and ``-loss`` under ``node`` (none: empty charts)."""
    empty = np.zeros(0)
    its = d.iterations if d is not None else empty
    for name, ys, fmt in (("tflops", d.tflops if d is not None else empty, ".1f"),
                          ("iter", d.iter_ms / 1000.0 if d is not None else empty, ".2f"),
                          ("loss", d.loss if d is not None else empty, ".3f")):
        chart = node.query_one(f"#{prefix}-{name}", Static).parent
        assert isinstance(chart, Chart)
        chart.show(chart_xs(its, len(ys))[-CHART_POINTS:], ys[-CHART_POINTS:], fmt)


class ExportSeries(Message):
    """The job screen asks for its job's series as CSV (the app writes the file)."""

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key


class JobScreen(Screen):
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="back"),
        Binding("enter", "open_rank", "Open rank", id="open-rank"),
        Binding("slash", "search", "Search log", id="search"),
        Binding("e", "export", "Export CSV", id="export"),
        Binding("j", "cursor_down", "Down", show=False, id="down"),
        Binding("k", "cursor_up", "Up", show=False, id="up"),
    ]

    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key
        self.search_text = ""
        self._tail_shown: list[str] = []
        self._rank_keys: list[str] = []
        self._ready = False  # the timer may fire between push and mount

    def compose(self) -> ComposeResult:
        yield Static(Text("loading…"), id="job-title", classes="title")
        with Horizontal(classes="charts"):
            yield Chart("TFLOPs/GPU", "chart-tflops")
            yield Chart("iteration time (s)", "chart-iter", unit="s")
            yield Chart("loss", "chart-loss", warmup=False)
        with Horizontal(classes="panels"):
            yield Static(Text(""), id="breakdown", classes="panel")
            yield Static(Text(""), id="startup", classes="panel")
        with Horizontal(classes="panels"):
            yield Static(Text(""), id="config", classes="panel")
            yield Static(Text(""), id="failures", classes="panel")
        yield DataTable(id="ranks", cursor_type="row")
        yield Log(id="tail", max_lines=TAIL_SHOWN, auto_scroll=True)
        yield Input(placeholder="search the log tail (Esc to clear)", id="search")
        yield Footer()

    def on_mount(self) -> None:
        ranks = self.query_one("#ranks", DataTable)
        for name in ("Rank", "Points", "Median iter (s)", "Last iteration", "Straggler"):
            ranks.add_column(name, key=name)
        ranks.focus()
        self._ready = True
        # nested widgets (the charts) finish mounting after this handler: fill on the next refresh
        self.call_after_refresh(self.post_message, RefreshRequest(self))

    def update_detail(self, d: JobDetail) -> None:
        if not self._ready or not self.query("#chart-tflops"):
            return  # still mounting
        s = d.row.summary
        title = Text.assemble(plain(s["job"], "bold"), "  ", status_text(s, d.row.stalled, palette=of(self)), "  ",
                              plain(s["framework"]))
        self.query_one("#job-title", Static).update(title)
        show_charts(self, "chart", d)
        self._breakdown(d)
        self._startup(d)
        self._config(d)
        self._failures(d)
        self._ranks(d)
        self._tail(d.tail)

    def _breakdown(self, d: JobDetail) -> None:
        s = d.row.summary
        parts, whole = s["breakdown"], s["breakdown_whole_ms"]
        title = f"Timers per iteration ({whole:.1f} ms = 100%)\n" if whole else "Timers per iteration\n"
        palette = of(self)

        def build(line_width: int) -> Text:
            text = Text(title, style="bold")
            text.append_text(tree_bars(parts, line_width=line_width, limit=14, palette=palette))
            return text

        self.query_one("#breakdown", Static).update(Fitted(build))

    def _startup(self, d: JobDetail) -> None:
        s = d.row.summary
        phases, one_off = s["startup"], s["startup_timers"]
        palette = of(self)

        def build(line_width: int) -> Text:
            text = Text.assemble(Text("Startup timeline\n", style="bold"),
                                 timeline(phases, line_width=line_width, palette=palette))
            if one_off:
                text.append("\nSetup and checkpoint timers", style="bold")
                for t in one_off[:6]:
                    text.append("\n")
                    text.append_text(plain(f"{t['name'][:40]:40s} {t['ms']:10.1f} ms"))
            return text

        self.query_one("#startup", Static).update(Fitted(build))

    def _config(self, d: JobDetail) -> None:
        s, c = d.row.summary, d.config
        lines = [
            f"model      {num(s['params_billion'], 3)} B params, {c.get('num_layers', '-')} layers, "
            f"hidden {c.get('hidden_size', '-')}, seq {c.get('seq_length', '-')}",
            f"parallel   TP {c.get('tp', '-')}  PP {c.get('pp', '-')}  DP {c.get('dp', '-')}  "
            f"world {s['world_size'] or '-'}",
            f"batch      global {s['global_batch'] or '-'}  micro {c.get('micro_batch', '-')}  "
            f"act. ckpt {s['activation_checkpointing']}",
            f"memory     GPU max alloc {num(s['memory']['gpu_max_allocated_mb'], 0)} MB, "
            f"reserved {num(s['memory']['gpu_max_reserved_mb'], 0)} MB, CPU {num(s['memory']['cpu_used_gb'], 1)} GB",
            "checkpoint " + (", ".join(f"{ck['iteration']}: {num(ck['save_ms'], 0)} ms"
                                       for ck in s["checkpoints"][-3:]) or "-"),
        ]
        text = Text("Run", style="bold")
        for line in lines:
            text.append("\n")
            text.append_text(plain(line))
        self.query_one("#config", Static).update(text)

    def _failures(self, d: JobDetail) -> None:
        text = Text("Failures and checks\n", style="bold")
        palette = of(self)
        for check in d.row.summary["checks"]:  # doubtful figures: both numbers and what to check
            text.append("! ", style=palette.alert)
            text.append_text(plain(check))
            text.append("\n")
        if not d.failures and not d.row.summary["checks"]:
            text.append("none", style="dim")
        for f in d.failures[-5:]:
            text.append(f"{f['kind']:9s} line {f['line']}: ", style=palette.alert)
            text.append_text(plain(f["message"][:160]))
            text.append("\n")
        self.query_one("#failures", Static).update(text)

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
        from ..text import sanitize

        if self.search_text:
            needle = self.search_text.lower()
            lines = [ln for ln in lines if needle in ln.lower()]
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

    def action_export(self) -> None:
        self.post_message(ExportSeries(self.key))

    def action_search(self) -> None:
        box = self.query_one("#search", Input)
        box.add_class("visible")
        box.focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        self.search_text = event.value
        self._tail_shown = []
        self.post_message(RefreshRequest())

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if not event.value:
            event.input.remove_class("visible")
        self.query_one("#ranks", DataTable).focus()
