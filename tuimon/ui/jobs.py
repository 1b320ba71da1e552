"""The jobs screen: one row per job, updated in place from session snapshots."""
from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from ..figures.alerts import Alert
from ..figures.columns import HEADER_SORTS as HEADER_SORTS
from ..figures.columns import SCREEN, SCREEN_PRIORITY, Column, progress_text
from ..figures.columns import SORTS as SORTS
from ..figures.filters import compile_filter
from ..figures.names import distinct_labels
from ..figures.record import achieved_tflops
from ..live.session import JobDetail, JobRow, Snapshot
from .job import Chart, show_charts
from .messages import OpenJob
from .palette import DEFAULT, Palette, of
from .render import duration, plain, spark, status_text
from .view import WatchesSnapshot

if TYPE_CHECKING:  # (a type only: the view is the app's session)
    from .view import SessionView

#: the screen's columns, left to right: the column registry's (tuimon.figures.columns)
COLUMNS = tuple(c.screen for c in SCREEN if c.screen)
MAX_ROWS = 300
BEHIND_SAID_S = 2.0  # the header says the reading is behind once it has been for this long
JOB_WIDTH = 34
#: which columns stay as the terminal narrows, first the longest (the registry's ``keep``).
#: "TFLOPs" (computed, else as reported, marked r) stands for both where they do not both fit: a run that
#: only reports TFLOPs still shows its throughput at 100 columns
PRIORITY = SCREEN_PRIORITY


def _sort_key(name: str):
    def key(row: JobRow):
        s = row.summary
        if name == "status":
            return (s.status != "failed", not row.stalled, s.status, s.job)
        if name == "tflops":
            t = achieved_tflops(s.tflops_per_gpu)[0] or 0.0
            return (-t, s.job)
        if name == "mfu":
            return (-(s.mfu or 0.0), s.job)
        if name == "iter time":
            return (-(s.iter_time_ms.median if s.iter_time_ms else 0.0), s.job)
        if name == "updated":
            return (row.age_s if row.age_s is not None else 1e18, s.job)
        return (s.job,)
    return key


AGE = COLUMNS.index("Updated")
TFLOPS = COLUMNS.index("TFLOPs")  # the combined column: its figure ends in r where the log reported it


def age_text(row: JobRow) -> Text:
    return Text(duration(row.age_s) + " ago" if row.age_s is not None else "-", justify="right")


def _cell(column: Column, row: JobRow, palette: Palette, label: Optional[str]) -> Text:
    """One cell: the registry's compact text; the live view's own columns and the styled ones here."""
    s = row.summary
    name = column.name
    if name == "job":
        return plain(label if label is not None else s.job)
    if name == "framework":
        return plain(s.framework)
    if name == "status":
        return status_text(s, row.stalled, row.alerts, palette)
    if name == "eta":
        return Text(duration(row.eta_s), justify="right")
    if name == "updated":
        return age_text(row)
    if name == "trend":
        return spark(row.tflops_series, palette=palette)
    assert column.compact is not None, f"screen column {name} has no compact text"
    style = palette.alert if name == "mfu" and s.checks else ""
    return Text(column.compact(s), justify="right", style=style)


def cells(row: JobRow, palette: Palette = DEFAULT, label: Optional[str] = None) -> tuple:
    """``label``: the job's name as the table shows it (:func:`distinct_label`)."""
    return tuple(_cell(c, row, palette, label) for c in SCREEN)


class CompareJobs(Message):
    """The jobs screen asks for a comparison of the marked jobs."""

    def __init__(self, keys: list[str]) -> None:
        super().__init__()
        self.keys = keys


class JobsScreen(WatchesSnapshot, Screen):
    BINDINGS = [
        Binding("enter", "open_job", "Open job", id="open"),
        Binding("j", "cursor_down", "Down", show=False, id="down"),
        Binding("k", "cursor_up", "Up", show=False, id="up"),
        Binding("slash", "filter", "Filter", id="filter"),
        Binding("space", "mark", "Mark", id="mark"),
        Binding("c", "compare", "Compare", id="compare"),
        Binding("s", "cycle_sort", "Sort", id="sort"),
        Binding("S", "cycle_sort_back", "Sort back", show=False, id="sort-back"),
        Binding("escape", "clear_filter", "Clear filter", show=False, id="clear-filter"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.sort = "job"
        self.filter_text = ""
        self._shown: dict[str, tuple] = {}
        self._last_view: Optional[tuple] = None  # (generation, filter, sort, marks, size, theme) last shown
        self._progress_text = ""
        self._counted: tuple[int, int, int] = (-1, 0, 0)  # (generation, failed, stalled)
        self._preview_shown: Optional[tuple] = None
        self._last_count = 0
        self._order: Optional[list[str]] = None  # None: rebuild the table (a new filter or sort)
        self._order_sort = ""  # the sort the order shown was made by
        self._legend_text = ""
        self._rows: dict[str, JobRow] = {}
        self._ready = False  # the timer may fire between push and mount
        self._matching = 0
        self._cell_cache: dict[str, tuple[tuple, str, tuple]] = {}
        self._visible: tuple[str, ...] = ()
        self._job_width = JOB_WIDTH
        self._widest: dict[str, int] = {}  # column -> the widest it has been (see _fit_columns)
        self._labels: dict[str, str] = {}  # job name -> its label in the table
        self._label_names: dict[str, str] = {}  # and back (the table sorts by the name)
        self._labelled: tuple = ()  # (names, width) the labels are of
        self.marked: set[str] = set()  # jobs marked for the comparison (space)
        self._selected_after_rebuild: Optional[str] = None
        self._typing_filter = False  # "/" was pressed and the filter box has no focus yet

    def compose(self) -> ComposeResult:
        yield Static(Text("tuimon: waiting for logs…"), id="progress")
        table: DataTable = DataTable(id="jobs", cursor_type="row", zebra_stripes=True)
        yield table
        yield Static(Text(""), id="legend")  # what a mark in the table means, where one is shown
        with Vertical(id="preview"):  # the selected job at a glance
            yield Static(Text(""), id="preview-status")
            with Horizontal(classes="preview-charts"):
                yield Chart("TFLOPs/GPU", "preview-tflops")
                yield Chart("iteration time (s)", "preview-iter", unit="s")
                yield Chart("loss", "preview-loss", warmup=False)
        yield Input(placeholder="filter: words in the job name, status:failed fw:megatron host:jz (Enter keeps, Esc clears)",
                    id="filter", select_on_focus=False)  # what was typed before it took the focus stays
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#jobs", DataTable)
        self._set_columns(table, COLUMNS)
        table.focus()
        self._ready = True
        self.first_draw()

    # -- data ---------------------------------------------------------------------------------
    def show_from(self, view: "SessionView", snap: Snapshot) -> None:
        """The rows, then the selected job's preview (the selection may have moved with the rows)."""
        self.update_snapshot(snap)
        key = self.selected_key()
        detail = view.job_detail(key) if key is not None else None
        self.update_preview(detail, view.latest_alert(detail.row.key) if detail is not None else None)

    def update_snapshot(self, snap: Snapshot) -> None:
        if not self._ready:
            return
        table = self.query_one("#jobs", DataTable)
        # the table's own width too: a resize reaches the screen before the table, and columns fitted
        # to the table's old width must be fitted again when its width follows
        view = (snap.generation, self.filter_text, self.sort, frozenset(self.marked), self.size, table.size.width,
                self.app.theme)
        if view == self._last_view:  # the same rows shown the same way: only the progress line
            self._progress(snap, self._last_count)
            return
        self._rows = {r.key: r for r in snap.rows}
        matches = compile_filter(self.filter_text)
        rows = [r for r in snap.rows if matches(r.summary, r.stalled)]
        rows.sort(key=_sort_key(self.sort))
        if self.marked and self._order and self._order_sort == self.sort:
            # jobs are being marked for a comparison: the rows hold their places (a re-sort would move
            # them under the cursor between two presses of space); new jobs come at the end. A sort asked for
            # (s, a header) still sorts
            place = {key: k for k, key in enumerate(self._order)}
            rows.sort(key=lambda r: place.get(r.key, len(place)))
        self._matching = len(rows)
        rows = rows[:MAX_ROWS]  # a table of thousands is unreadable and slow: filter to narrow it
        order = [r.key for r in rows]
        self._order_sort = self.sort
        width = self._job_width
        visible = self._fit_columns(table, rows)
        self._label_jobs(snap.rows)
        if visible != self._visible or width != self._job_width:  # resized, or the figures grew: by priority
            selected = self.selected_key()
            self._set_columns(table, visible)
            if selected is not None and selected in order:
                self._selected_after_rebuild = selected
        if order != self._order:
            old = set(self._order or ())
            if self._order and old <= set(order) and self.sort == "job":
                # jobs only appeared (backfill, new files): add them and let the table re-sort
                for r in rows:
                    if r.key not in old:
                        c = self._cells(r)
                        table.add_row(*self._pick(c, r.key), key=r.key)
                        self._shown[r.key] = c
                table.sort("Job", key=lambda cell: self._label_names.get(cell.plain.removeprefix("● "), cell.plain))
                self._order = [str(row.key.value) for row in table.ordered_rows]
            else:
                selected = self._selected_after_rebuild or self.selected_key()
                self._selected_after_rebuild = None
                table.clear()
                self._shown = {}
                for r in rows:
                    c = self._cells(r)
                    table.add_row(*self._pick(c, r.key), key=r.key)
                    self._shown[r.key] = c
                self._order = order
                if selected in order:
                    table.move_cursor(row=order.index(selected))
        for r in rows:
            c = self._cells(r)
            old_cells = self._shown.get(r.key)
            if old_cells is c:
                continue
            picked = dict(zip(self._visible, self._pick(c, r.key)))
            for name, new_cell, before in zip(COLUMNS, c, old_cells or (None,) * len(c)):
                if name in self._visible and (new_cell is not before and new_cell != before or name == "Job"):
                    table.update_cell(r.key, name, picked[name], update_width=True)
            self._shown[r.key] = c
        self._legend(rows)
        self._last_view, self._last_count = view, len(rows)
        self._progress(snap, len(rows))

    def _legend(self, rows: list[JobRow]) -> None:
        """The line under the table: what the ``r`` after a TFLOPs figure means, while one is shown."""
        shown = self._shown
        marked = "TFLOPs" in self._visible and any(
            r.key in shown and str(shown[r.key][TFLOPS]).endswith("r") for r in rows)
        text = "TFLOPs 123.4r: the rate the log reports; without r: computed from the model" if marked else ""
        legend = self.query_one("#legend", Static)
        legend.display = bool(text)
        if text != self._legend_text:
            self._legend_text = text
            legend.update(Text(text, style="dim"))

    def _set_columns(self, table: DataTable, names: tuple[str, ...]) -> None:
        table.clear(columns=True)
        for name in names:
            # the job column keeps its width (long names are cut where they tell nothing apart): the
            # figures stay on screen
            table.add_column(name, key=name, width=self._job_width if name == "Job" else None)
        self._visible = names
        self._order = None
        self._shown = {}
        self._last_view = None

    def _pick(self, cells: tuple, key: Optional[str] = None) -> tuple:
        picked = [c for name, c in zip(COLUMNS, cells) if name in self._visible]
        if key is not None and key in self.marked:  # a marked job, for the comparison: its name leads with ●
            picked[0] = Text.assemble(Text("● ", style=of(self).warn), picked[0])
        return tuple(picked)

    def _fit_columns(self, table: DataTable, rows: list[JobRow]) -> tuple[str, ...]:
        """The columns that fit the table's width, by priority, in their usual order."""
        width = table.size.width or self.app.size.width
        if width <= 0:
            return COLUMNS
        sample = [self._cells(r) for r in rows[:50]]
        need = {}
        for i, name in enumerate(COLUMNS):
            cell_w = max((len(c[i].plain) if hasattr(c[i], "plain") else len(str(c[i])) for c in sample), default=0)
            need[name] = (JOB_WIDTH if name == "Job" else max(len(name), cell_w)) + 2  # cell padding
        # a column's width is the widest it has been: columns do not come and go as a status text
        # ("STALLED (training)") or a figure changes width
        for name, w in need.items():
            need[name] = self._widest[name] = max(w, self._widest.get(name, 0))
        # a column that is "-" on every row says nothing: it gives its room first (ETA and Eval of runs that
        # state neither before Loss and MFU)
        def empty(i: int) -> bool:
            return bool(sample) and all((c[i].plain if hasattr(c[i], "plain") else str(c[i])).strip() in ("", "-")
                                        for c in sample)
        blank = {name for i, name in enumerate(COLUMNS) if name not in ("Job", "Status") and empty(i)}
        kept: set[str] = set()
        used = 1  # the scrollbar's room
        for name in [n for n in PRIORITY if n not in blank] + [n for n in PRIORITY if n in blank]:
            if used + need[name] <= width:
                kept.add(name)
                used += need[name]
        if {"TFLOPs rep", "TFLOPs calc"} <= kept:  # both fit: the combined one gives its room back
            kept.discard("TFLOPs")
            used -= need["TFLOPs"]
        # the job column takes the room left, up to the longest name
        longest = max((len(r.summary.job) for r in rows), default=JOB_WIDTH)
        self._job_width = max(min(JOB_WIDTH, width - 3), min(longest, JOB_WIDTH + max(0, width - used)))
        return tuple(name for name in COLUMNS if name in kept)

    def _label_jobs(self, rows) -> None:
        """Labels for every job's name at the job column's width, each told apart from the others."""
        names = tuple(sorted({r.summary.job for r in rows}))
        if (names, self._job_width) != self._labelled:
            self._labels = distinct_labels(names, self._job_width)
            self._label_names = {label: name for name, label in self._labels.items()}
            self._labelled = (names, self._job_width)

    def _cells(self, row: JobRow) -> tuple:
        """Cells of a row, rebuilt only when the job changed; the age cell when its text does."""
        cached = self._cell_cache.get(row.key)
        palette = of(self)
        label = self._labels.get(row.summary.job)
        state = (row.version, row.stalled, row.summary.status, row.alerts, palette, label)
        age = duration(row.age_s) + " ago" if row.age_s is not None else "-"
        if cached is not None and cached[0] == state:
            if cached[1] == age:
                return cached[2]
            c = cached[2][:AGE] + (Text(age, justify="right"),) + cached[2][AGE + 1:]
        else:
            c = cells(row, palette, label)
        self._cell_cache[row.key] = (state, age, c)
        return c

    def _progress(self, snap: Snapshot, shown: int) -> None:
        if self._counted[0] != snap.generation:  # counted once per generation, not a frame
            self._counted = (snap.generation, sum(1 for r in snap.rows if r.summary.status == "failed"),
                             sum(1 for r in snap.rows if r.stalled))
        _, failed, stalled = self._counted
        parts = [f"{len(snap.rows)} jobs", f"{snap.files} files"]
        if shown != len(snap.rows):
            why = f"filter: {self.filter_text}" if self.filter_text else "/ to filter"
            parts.append(f"{shown} shown of {self._matching} matching ({why})")
        if failed:
            parts.append(f"{failed} failed")
        if stalled:
            parts.append(f"{stalled} stalled")
        if snap.alerts:
            parts.append(f"{snap.alerts} alert{'s' if snap.alerts != 1 else ''} (a to list)")
        if snap.bytes_total and snap.bytes_done < snap.bytes_total:
            pct = 100.0 * snap.bytes_done / snap.bytes_total
            parts.append(f"reading history {pct:.0f}% ({snap.bytes_done / 1e6:.0f}/{snap.bytes_total / 1e6:.0f} MB)")
        elif snap.lag_s >= BEHIND_SAID_S:  # writers faster than the reading: how far behind it is
            parts.append(f"behind {snap.lag_s:.0f} s ({snap.backlog_bytes / 1e6:.1f} MB unread)")
        for name, state in sorted(snap.statuses.items()):  # the hosts' and the ingest's
            if name.startswith("ssh "):
                parts.append(f"{name[4:]}: {state}")
            elif name == "ingest":
                parts.append(f"ingest {state}")
        parts.append(f"sort: {self.sort}" + (" (held while jobs are marked)" if self.marked else ""))
        text = "tuimon | " + " | ".join(parts)
        if text != self._progress_text:  # an unchanged line is not drawn again
            self._progress_text = text
            self.query_one("#progress", Static).update(plain(text))

    def update_preview(self, detail: Optional[JobDetail], alert: Optional[Alert]) -> None:
        """The selected job's charts, its status line and its latest alert."""
        if not self._ready or not self.query("#preview-tflops"):
            return
        shown = (detail.row.version if detail is not None else None, detail.row.key if detail is not None else None,
                 detail.row.alerts if detail is not None else None, alert, self.size, self.app.theme)
        if shown == self._preview_shown:  # the same job, figures and alert: nothing to draw again
            return
        self._preview_shown = shown
        status = self.query_one("#preview-status", Static)
        if detail is None:
            status.update(Text("no job selected", style="dim"))
            show_charts(self, "preview", None)
            return
        s = detail.row.summary
        line = Text.assemble(plain(s.job, "bold"), "  ", status_text(s, detail.row.stalled, detail.row.alerts,
                                                                           of(self)), "  ", plain(progress_text(s)))
        if alert is not None:
            line.append("  latest alert: ", style="dim")
            line.append(alert.kind, style=of(self).alert)
            line.append_text(plain(f" {alert.message[:120]}"))
        status.update(line)
        show_charts(self, "preview", detail)

    def selected_key(self) -> Optional[str]:
        table = self.query_one("#jobs", DataTable)
        if not self._order or table.cursor_row is None or table.cursor_row >= len(self._order):
            return None
        return self._order[table.cursor_row]

    # -- actions ------------------------------------------------------------------------------
    def action_open_job(self) -> None:
        key = self.selected_key()
        if key is not None:
            self.post_message(OpenJob(key))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_job()

    def action_cursor_down(self) -> None:
        self.query_one("#jobs", DataTable).action_cursor_down()

    def action_cursor_up(self) -> None:
        self.query_one("#jobs", DataTable).action_cursor_up()

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        box.add_class("visible")
        box.focus()

    def on_key(self, event: events.Key) -> None:
        """Keys typed right behind "/" (a paste, a fast typist: "/stro" at once) reach the screen
        before "/" has opened the filter and focused its box: they are the filter's, not commands
        ("s" would re-sort).  Keys bubble here before the app runs the screen's bindings."""
        box = self.query_one("#filter", Input)
        if event.key == "slash" and self.focused is not box:
            self._typing_filter = True
        elif self._typing_filter and event.is_printable and event.character:
            # a printable key reaching the screen was not the box's, even if the box took the focus
            # meanwhile (the box stops those it types): dispatched before the focus moved
            event.stop()
            event.prevent_default()
            box.insert_text_at_cursor(event.character)
        elif self._typing_filter:
            self._typing_filter = False  # Enter, Escape, arrows: theirs as ever

    def action_clear_filter(self) -> None:
        self._typing_filter = False
        box = self.query_one("#filter", Input)
        box.value = ""
        box.remove_class("visible")
        self.filter_text = ""
        self._order = None
        self.query_one("#jobs", DataTable).focus()
        self.redraw()

    def on_input_changed(self, event: Input.Changed) -> None:
        if event.input.id == "filter":
            self.filter_text = event.value
            self._order = None
            self.redraw()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id == "filter":
            self._typing_filter = False
            if not event.value:
                event.input.remove_class("visible")
            self.query_one("#jobs", DataTable).focus()

    def action_cycle_sort(self) -> None:
        self.set_sort(SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)])

    def action_mark(self) -> None:
        key = self.selected_key()
        if key is None:
            return
        self.marked ^= {key}
        self._shown.pop(key, None)
        self._last_view = None  # its row is redrawn with (or without) the mark
        self.redraw()

    def action_compare(self) -> None:
        keys = [k for k in self._order or () if k in self.marked]
        if len(keys) < 2:
            self.notify("mark two jobs or more with space, then press c", severity="warning")
            return
        self.post_message(CompareJobs(keys))

    def action_cycle_sort_back(self) -> None:
        self.set_sort(SORTS[(SORTS.index(self.sort) - 1) % len(SORTS)])

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        """A click on a header sorts by it (where it has a sort)."""
        event.stop()
        name = HEADER_SORTS.get(str(event.column_key.value))
        if name is not None:
            self.set_sort(name)

    def set_sort(self, name: str) -> None:
        self.sort = name
        self._order = None
        self.redraw()
