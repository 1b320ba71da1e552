"""The help overlay (``?``)."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """tuimon keys

  ↑ ↓  j k      move
  Enter         open the job / the rank under the cursor
  Esc  ⌫        back
  e             export the job's series to <job>-series.csv (job screen)
  /             filter jobs: words of the job name, status:failed fw:megatron host:jz
                (jobs screen); search the log tail (job screen)
  s  S          cycle the sort forward / back: job, status, TFLOPs, MFU, iteration time,
                last update (or click a column's header)
  a             alerts: every alert so far, with the log line it points at
  ctrl+p        command palette: sort, filter, theme, help, quit
  ?             this help
  q             quit

Status words: training, finished, starting, FAILED <kind>, NO ITERATIONS,
NAN (the latest loss or grad norm is not finite), STUCK IN STARTUP (started, no
step after --startup-timeout), STALLED (no iteration for 5x the usual iteration
time, and at least 60 s).  MFU ends in ! when a figure is doubtful: the job screen
says why.  TFLOPs rep is what the
log reports; TFLOPs calc uses size * k * 2 * seq * batch / (time * gpus), k = 4
with activation checkpointing, 3 without.

Press any key to close."""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q,enter", "dismiss_help", "Close", id="close-help")]

    def compose(self) -> ComposeResult:
        yield Static(Text(HELP), id="help")

    def action_dismiss_help(self) -> None:
        self.dismiss(None)

    def on_key(self) -> None:
        self.dismiss(None)
