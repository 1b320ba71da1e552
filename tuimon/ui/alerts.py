"""The Alerts screen (``a``): every alert so far, newest first, a job's alerts folded into one row with
their count (Enter unfolds it, ``f`` every job), ``/`` to filter, and the log line of the one under the
cursor (read by the session off the UI thread)."""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Static

from ..figures.alerts import Alert
from ..figures.names import distinct_labels
from .messages import OpenLog
from .palette import of
from .render import plain
from .tablefilter import TableFilter
from .view import WatchesSnapshot

if TYPE_CHECKING:  # (a type only: the view is the app's session)
    from ..live.session import Snapshot
    from .view import SessionView

COLUMNS = ("Time", "Job", "Kind", "N", "Rank", "Iter", "Where", "Message")
#: the columns ``/`` reads (N is the folded row's own)
FILTERED = tuple(c for c in COLUMNS if c != "N")


def _clock(wall: float | None) -> str:
    import time

    return time.strftime("%m-%d %H:%M:%S", time.localtime(wall)) if wall is not None else "-"


def _where(alert: Alert) -> str:
    """``file:line`` by the file's name (the table's Where; ``tuimon alerts --format json``
    gives the whole path)."""
    return f"{os.path.basename(alert.file or '-')}:{alert.line or '-'}"


#: the job column's width: room for the message, names cut where they tell nothing apart
ALERT_JOB_WIDTH = 34
#: the file:line column's: the message comes first (the panel below names the whole file)
WHERE_WIDTH = 28


@dataclass(frozen=True)
class Entry:
    """A row of the table: one alert, or a job's alerts folded (``alerts`` newest first, the row shows
    the newest and the count by kind)."""

    key: str
    alerts: tuple[Alert, ...]
    folded: bool

    @property
    def newest(self) -> Alert:
        return self.alerts[0]


def _job_of(alert: Alert) -> str:
    return alert.job_key or alert.job


def _cells(alert: Alert, label: str) -> list[str]:
    name = os.path.basename(alert.file or "-")
    where = f"{name}:{alert.line}" if alert.file and alert.line else name
    return [_clock(alert.wall_time), label, alert.kind, alert.rank or "-",
            "-" if alert.iteration is None else str(alert.iteration), where, alert.message[:160]]


def entries(alerts: list[Alert], unfolded: set[str], matches: Callable[[Alert], bool]) -> list[Entry]:
    """The rows: the matching alerts, newest first, a job's alerts folded into one row where it has more
    than one (unless it is in ``unfolded``: then its row, then each alert)."""
    def when(a: Alert) -> tuple:
        # by time, then (undated, or at one time) by iteration: a run's later alert is newer
        return (a.wall_time if a.wall_time is not None else float("-inf"), a.iteration or 0, a.job, a.kind)

    by_job: dict[str, list[Alert]] = {}
    for a in sorted((a for a in alerts if matches(a)), key=when, reverse=True):
        by_job.setdefault(_job_of(a), []).append(a)
    out: list[Entry] = []
    for job, group in by_job.items():  # jobs in the order of their newest alert
        if len(group) == 1:
            out.append(Entry(f"a:{job}:0", (group[0],), False))
            continue
        out.append(Entry(f"j:{job}", tuple(group), job not in unfolded))
        if job in unfolded:
            out += [Entry(f"a:{job}:{n}", (a,), False) for n, a in enumerate(group)]
    return out


def kinds_counted(alerts: tuple[Alert, ...]) -> str:
    """``loss-spike 8, failed``: the kinds of a job's folded alerts, most first, each with its count where
    there are several kinds (one kind's count is the row's N)."""
    counts = Counter(a.kind for a in alerts)
    if len(counts) == 1:
        return next(iter(counts))
    return ", ".join(f"{kind} {n}" if n > 1 else kind for kind, n in counts.most_common())


class AlertsScreen(WatchesSnapshot, TableFilter, Screen):
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="back"),
        Binding("j", "cursor_down", "Down", show=False, id="down"),
        Binding("k", "cursor_up", "Up", show=False, id="up"),
        Binding("enter", "open_log", "Log at the line / unfold", id="open-log"),
        Binding("f", "fold_all", "Fold/unfold all", id="fold-all"),
        Binding("slash", "filter", "Filter", id="filter"),
    ]
    TABLE_ID = "alerts"

    def __init__(self) -> None:
        super().__init__()
        self._alerts: list[Alert] = []
        self._rows: list[Entry] = []
        self._unfolded: set[str] = set()

    def compose(self) -> ComposeResult:
        yield Static(Text("Alerts", style="bold"), id="alerts-title", classes="title")
        yield DataTable(id="alerts", cursor_type="row")
        yield Static(Text(""), id="alert-line", classes="panel")
        yield self.filter_box("filter: kind:nan rank:3 job:llama, or words in any column")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#alerts", DataTable)
        for name in COLUMNS:
            table.add_column(name, key=name, width={"Job": ALERT_JOB_WIDTH, "Where": WHERE_WIDTH}.get(name))
        table.focus()
        self.first_draw()

    def show_from(self, view: "SessionView", snap: "Snapshot") -> None:
        self.show(view.alerts())

    def show(self, alerts: list[Alert]) -> None:
        """The alerts (new ones are added as the screen stays open)."""
        table = self.query_one("#alerts", DataTable)
        if not table.columns:
            return  # the app's timer came before on_mount: the rows wait for their columns
        if len(alerts) == len(self._alerts):
            return
        self._alerts = list(alerts)
        self.refilter()

    def refilter(self) -> None:
        """The rows again (new alerts, a filter, a fold), the cursor kept on its entry."""
        table = self.query_one("#alerts", DataTable)
        before = self._rows[table.cursor_row].key if self._rows and 0 <= table.cursor_row < len(self._rows) else None
        labels = distinct_labels((a.job for a in self._alerts), ALERT_JOB_WIDTH)  # told apart where they differ
        row_matches = self.row_filter(FILTERED)

        def matches(a: Alert) -> bool:
            return row_matches(_cells(a, labels[a.job]))
        self._rows = entries(self._alerts, self._unfolded, matches)
        table.clear()
        alert_style = of(self).alert
        for entry in self._rows:
            a = entry.newest
            time_, job, kind, rank, it, where, message = _cells(a, labels[a.job])
            if len(entry.alerts) > 1:  # a job's row: its count, its kinds, its newest alert
                count = f"{len(entry.alerts)} {'▸' if entry.folded else '▾'}"
                kind = kinds_counted(entry.alerts)
            else:
                count = ""
                job = ("  " + job) if entry.key.startswith("a:") and _job_of(a) in self._unfolded else job
            table.add_row(time_, plain(job), Text(kind, style=alert_style), count, plain(rank), it, plain(where),
                          plain(message), key=entry.key)
        shown = sum(map(matches, self._alerts)) if self.filter_text else len(self._alerts)
        title = f"Alerts ({len(self._alerts)})" if not self.filter_text else \
            f"Alerts ({shown} of {len(self._alerts)} match {self.filter_text!r})"
        self.query_one("#alerts-title", Static).update(plain(title, "bold"))
        keys = [e.key for e in self._rows]
        if before in keys:
            table.move_cursor(row=keys.index(before))
        if self._rows:
            self._show_line(table.cursor_row if 0 <= table.cursor_row < len(self._rows) else 0)
        else:
            self.query_one("#alert-line", Static).update(Text("no alert matches" if self.filter_text else "",
                                                              style="dim"))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row is not None and 0 <= event.cursor_row < len(self._rows):
            self._show_line(event.cursor_row)

    def _show_line(self, row: int) -> None:
        alert = self._rows[row].newest
        self.query_one("#alert-line", Static).update(Text(f"{_where(alert)}", style="dim"))
        if alert.file and alert.line:
            self._read_line(alert)

    @work(thread=True, exclusive=True)
    def _read_line(self, alert: Alert) -> None:
        from ..sources.files import line_at

        text = line_at(alert.file or "", alert.line or 0)
        self.app.call_from_thread(self._set_line, alert, text)

    def _set_line(self, alert: Alert, text: str | None) -> None:
        out = Text(f"{_where(alert)}\n", style="dim")
        out.append_text(plain(text if text is not None else "(the line cannot be read)"))
        out.append("\n")
        out.append_text(plain(alert.message))
        self.query_one("#alert-line", Static).update(out)

    def action_back(self) -> None:
        if self.clear_filter():
            return
        self.app.pop_screen()

    def action_open_log(self) -> None:
        """A job's row folds or unfolds its alerts; an alert's opens the job's log at its line."""
        row = self.query_one("#alerts", DataTable).cursor_row
        if row is None or not 0 <= row < len(self._rows):
            return
        entry = self._rows[row]
        if len(entry.alerts) > 1:
            self._unfolded ^= {_job_of(entry.newest)}
            self.refilter()
            return
        alert = entry.newest
        self.post_message(OpenLog(alert.job_key, file=alert.file or "", line=alert.line or 0))

    def action_fold_all(self) -> None:
        jobs = {_job_of(a) for a in self._alerts}
        self._unfolded = set() if self._unfolded else jobs
        self.refilter()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_log()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.filter_submitted(event)

    def action_cursor_down(self) -> None:
        self.query_one("#alerts", DataTable).action_cursor_down()

    def action_cursor_up(self) -> None:
        self.query_one("#alerts", DataTable).action_cursor_up()
