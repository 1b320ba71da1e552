"""The help overlay (``?``)."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import ModalScreen
from textual.widgets import Static

HELP = """tuimon keys
  ↑ ↓  j k   move            Enter  open the job / rank      Esc ⌫  back
  /          filter jobs: words, status:failed fw:megatron host:jz
  s  S       cycle the sort (or click a header)   space c  mark, compare
  a          alerts, with their log lines (Enter: the log at the line)
  ctrl+p     palette (sorts, filter, themes)   q  quit
Compare:     o  the table's columns, as summary --columns names them
Job screen:  x  iterations / wall time   + -  zoom (or the mouse wheel)
             < >  pan   0  reset zoom    e  series to ./<job>-series.csv
             b  the timer breakdown fills the screen (↑ ↓, wheel: scroll)
             l  the log   /  search it   (a rank's screen: l, its lines)
             v  the loss chart shows the evaluation metric, and back
Log view:    / ?  search on / back       n N  next / previous match
             g G  top / bottom   F  follow the end   r  one rank's lines
             ← →  sideways   m<x> mark   '<x> back to it   [ ]  other files
             Esc clears the search, then the rank, then goes back

Status: training, finished, starting, FAILED <kind>, NO ITERATIONS, NAN
(the latest loss or grad norm is not finite), STUCK IN STARTUP (no step
after --startup-timeout), STALLED (seen writing, then no line for 5x the
usual iteration time and at least 60 s), ended (a log never seen growing
that stopped short).  MFU ends in ! when a figure is doubtful: the job
screen says why.  TFLOPs rep is what the log reports; TFLOPs calc is
size * k * 2 * seq * batch / (time * gpus), k = 4 with activation
checkpointing, 3 without; TFLOPs (narrow screens) is calc, else rep (r).

Press any key to close."""


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q,enter", "dismiss_help", "Close", id="close-help")]

    def compose(self) -> ComposeResult:
        yield Static(Text(HELP), id="help")

    def action_dismiss_help(self) -> None:
        self.dismiss(None)

    def on_key(self) -> None:
        self.dismiss(None)
