"""The Alerts screen (``a``): every alert so far, newest first, and the log line of
the one under the cursor (read by the session off the UI thread)."""
from __future__ import annotations

import os

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from ..figures.alerts import Alert
from ..figures.names import distinct_labels
from .messages import OpenLog, RefreshRequest
from .palette import of
from .render import plain

COLUMNS = ("Time", "Job", "Kind", "Rank", "Iter", "Where", "Message")


def _clock(wall: float | None) -> str:
    import time

    return time.strftime("%m-%d %H:%M:%S", time.localtime(wall)) if wall is not None else "-"


def _where(alert: Alert) -> str:
    """``file:line`` by the file's name (the table's Where; ``tuimon alerts --format json``
    gives the whole path)."""
    return f"{os.path.basename(alert.file or '-')}:{alert.line or '-'}"


#: the job column's width: room for the message, names cut where they tell nothing apart
ALERT_JOB_WIDTH = 34

class AlertsScreen(Screen):
    BINDINGS = [
        Binding("escape,backspace", "back", "Back", id="back"),
        Binding("j", "cursor_down", "Down", show=False, id="down"),
        Binding("k", "cursor_up", "Up", show=False, id="up"),
        Binding("enter", "open_log", "Log at the line", id="open-log"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._alerts: list[Alert] = []

    def compose(self) -> ComposeResult:
        yield Static(Text("Alerts", style="bold"), id="alerts-title", classes="title")
        yield DataTable(id="alerts", cursor_type="row")
        yield Static(Text(""), id="alert-line", classes="panel")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one("#alerts", DataTable)
        for name in COLUMNS:
            table.add_column(name, key=name, width=ALERT_JOB_WIDTH if name == "Job" else None)
        table.focus()
        self.post_message(RefreshRequest(self))

    def show(self, alerts: list[Alert]) -> None:
        """The alerts, newest first (new ones are added as the screen stays open)."""
        table = self.query_one("#alerts", DataTable)
        if not table.columns:
            return  # the app's timer came before on_mount: the rows wait for their columns
        if len(alerts) == len(self._alerts):
            return
        # oldest first by their own time (undated ones first), so that reversed, the newest lead
        self._alerts = sorted(alerts, key=lambda a: (a.wall_time if a.wall_time is not None else float("-inf"),
                                                     a.job, a.kind, a.iteration or 0))
        table.clear()
        labels = distinct_labels((a.job for a in self._alerts), ALERT_JOB_WIDTH)  # told apart where they differ
        for n, a in enumerate(reversed(self._alerts)):
            where = f"{os.path.basename(a.file)}:{a.line}" if a.file and a.line else os.path.basename(a.file or "-")
            table.add_row(_clock(a.wall_time), plain(labels[a.job]), Text(a.kind, style=of(self).alert),
                          plain(a.rank or "-"), "-" if a.iteration is None else str(a.iteration), plain(where),
                          plain(a.message[:160]), key=str(n))
        self.query_one("#alerts-title", Static).update(Text(f"Alerts ({len(alerts)})", style="bold"))
        if self._alerts:
            self._show_line(0)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row is not None and 0 <= event.cursor_row < len(self._alerts):
            self._show_line(event.cursor_row)

    def _show_line(self, row: int) -> None:
        alert = list(reversed(self._alerts))[row]
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
        self.app.pop_screen()

    def action_open_log(self) -> None:
        """The job's log, at the alert's line."""
        row = self.query_one("#alerts", DataTable).cursor_row
        if row is None or not 0 <= row < len(self._alerts):
            return
        alert = list(reversed(self._alerts))[row]
        self.post_message(OpenLog(alert.job_key, file=alert.file or "", line=alert.line or 0))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_log()

    def action_cursor_down(self) -> None:
        self.query_one("#alerts", DataTable).action_cursor_down()

    def action_cursor_up(self) -> None:
        self.query_one("#alerts", DataTable).action_cursor_up()
