"""The help overlay (``?``)."""
from __future__ import annotations

from typing import Sequence

from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

NOTES = """Status: training, finished, starting, FAILED <kind>, NO ITERATIONS, NAN
(the latest loss or grad norm is not finite), STUCK IN STARTUP (no step
after --startup-timeout), STALLED (seen writing, then no line for 5x the
usual iteration time and at least 60 s), ended (a log never seen growing
that stopped short).  MFU ends in ! when a figure is doubtful: the job
screen says why.  TFLOPs rep is what the log reports; TFLOPs calc is
size * k * 2 * seq * batch / (time * gpus), k = 4 with activation
checkpointing, 3 without; TFLOPs (narrow screens) is calc, else rep (r).

ctrl+p opens the command palette (sorts, filter, themes).
Keys are remapped in the config file by the names on the right:
[keymap] filter = "f"   (tuimon config show names the file)
Press any key to close; ↑ ↓ scroll."""


def help_text(key_lines: Sequence[str]) -> str:
    """The help: every screen's keys as they are bound now (:func:`.keys.help_lines`), then what the
    statuses and figures mean."""
    return "tuimon keys (name for [keymap] on the right)\n" + "\n".join(key_lines) + "\n\n" + NOTES


class HelpScreen(ModalScreen[None]):
    BINDINGS = [Binding("escape,question_mark,q,enter", "dismiss_help", "Close", id="close-help")]

    def __init__(self, key_lines: Sequence[str] = ()) -> None:
        super().__init__()
        self.key_lines = list(key_lines)

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-scroll"):
            yield Static(Text(help_text(self.key_lines)), id="help")

    def action_dismiss_help(self) -> None:
        self.dismiss(None)

    def on_key(self, event: events.Key) -> None:
        if event.key in ("up", "down", "pageup", "pagedown", "j", "k"):  # they scroll the help
            return
        self.dismiss(None)
