"""One rank of a job: its iteration-time series and its own log lines."""
from __future__ import annotations

import re

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Log, Sparkline, Static

from ..live.session import JobDetail
from ..text import sanitize
from .messages import RefreshRequest
from .palette import of
from .render import num, plain


def lines_of_rank(tail: list[str], rank: str) -> list[str]:
    """Lines a rank wrote: ``N: `` (srun --label), ``[rankN]:``, ``[Rank N]``; a
    rank from a per-rank file owns every line of it (no prefix to match)."""
    if not rank.isdigit():
        return [ln for ln in tail if ln.startswith(f"{rank}: ")] or tail
    pattern = re.compile(rf"^(?:{rank}: |\[rank{rank}\]:)|\[Rank {rank}\]")
    mine = [ln for ln in tail if pattern.search(ln)]
    return mine or tail


class RankScreen(Screen):
    BINDINGS = [Binding("escape,backspace", "back", "Back", id="back")]

    def __init__(self, key: str, rank: str) -> None:
        super().__init__()
        self.key = key
        self.rank = rank
        self._shown: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static(Text(""), id="rank-title", classes="title")
        yield Static(Text("iteration time (s)"), id="rank-chart-label")
        yield Sparkline([], id="rank-chart")
        yield Log(id="rank-tail", max_lines=500)
        yield Footer()

    def on_mount(self) -> None:
        self.post_message(RefreshRequest(self))  # filled before the first key or frame

    def update_detail(self, d: JobDetail, rank_ms: list[float]) -> None:
        row = next((r for r in d.ranks if r.rank == self.rank), None)
        title = Text.assemble(plain(d.row.summary["job"], "bold"), plain(f"  rank {self.rank}  "),
                              Text(f"{row.points if row else 0} points, median "
                                   f"{num(row.median_ms / 1000 if row and row.median_ms else None, 3)} s"),
                              Text("  STRAGGLER", style=of(self).warn) if row and row.straggler else Text(""))
        self.query_one("#rank-title", Static).update(title)
        self.query_one("#rank-chart", Sparkline).data = [v / 1000.0 for v in rank_ms]  # none: a flat baseline
        lines = lines_of_rank(d.tail, self.rank)[-500:]
        if lines != self._shown:
            log = self.query_one("#rank-tail", Log)
            log.clear()
            log.write_lines([sanitize(ln) for ln in lines])
            self._shown = lines

    def action_back(self) -> None:
        self.app.pop_screen()
