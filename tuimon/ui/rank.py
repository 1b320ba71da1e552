"""One rank of a job: its iteration times against the median of the other ranks, with
the numbers, and its own log lines."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Log, Static

from tuimon.parsers.prefix import rank_line_pattern

from ..figures.metrics import warmup_count
from ..live.session import Curve, JobDetail
from ..text import sanitize
from .chart import FULL, OverlayChart
from .job import curve_xy
from .messages import OpenLog
from .palette import of
from .render import num, plain
from .view import WatchesSnapshot

if TYPE_CHECKING:  # (a type only: the view is the app's session)
    from ..live.session import Snapshot
    from .view import SessionView


def lines_of_rank(tail: list[str], rank: str) -> list[str]:
    """Lines a rank wrote (:func:`parsers.prefix.rank_line_pattern`); a rank from a
    per-rank file owns every line of it (no prefix to match)."""
    pattern = rank_line_pattern(rank)
    return [ln for ln in tail if pattern.search(ln)] or tail


class RankScreen(WatchesSnapshot, Screen):
    BINDINGS = [Binding("escape,backspace", "back", "Back", id="back"),
                Binding("l", "log", "Log of this rank", id="log"),
                Binding("slash", "log(True)", "Search its log", id="search")]

    def __init__(self, key: str, rank: str) -> None:
        super().__init__()
        self.key = key
        self.rank = rank
        self._shown: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static(Text(""), id="rank-title", classes="title")
        yield Static(Text(""), id="rank-figures")
        yield Static(Text(""), id="rank-chart", classes="plot")
        yield Log(id="rank-tail", max_lines=500)
        yield Footer()

    def on_mount(self) -> None:
        self.first_draw()

    def show_from(self, view: "SessionView", snap: "Snapshot") -> None:
        detail = view.job_detail(self.key)
        if detail is not None:
            self.update_detail(detail, *view.rank_vs_others(self.key, self.rank))

    def update_detail(self, d: JobDetail, mine: Curve, others: Curve) -> None:
        row = next((r for r in d.ranks if r.rank == self.rank), None)
        title = Text.assemble(plain(d.row.summary.job, "bold"), plain(f"  rank {self.rank}  "),
                              Text(f"{row.points if row else 0} points, median "
                                   f"{num(row.median_ms / 1000 if row and row.median_ms else None, 3)} s"),
                              Text("  STRAGGLER", style=of(self).warn) if row and row.straggler else Text(""))
        self.query_one("#rank-title", Static).update(title)
        self.query_one("#rank-figures", Static).update(rank_figures(self.rank, mine, others))
        palette = of(self)
        series = [(f"rank {self.rank}", *curve_xy(Curve(mine.iterations, mine.walls, mine.values / 1000.0), FULL)),
                  ("median of the other ranks", *curve_xy(Curve(others.iterations, others.walls,
                                                                others.values / 1000.0), FULL))]
        self.query_one("#rank-chart", Static).update(
            OverlayChart(series if len(others.values) and np.isfinite(others.values).any() else series[:1],
                         [palette.warn, palette.bar], unit="s", palette=palette))
        lines = lines_of_rank(d.tail, self.rank)[-500:]
        if lines != self._shown:
            log = self.query_one("#rank-tail", Log)
            log.clear()
            log.write_lines([sanitize(ln) for ln in lines])
            self._shown = lines

    def action_log(self, search: bool = False) -> None:
        """This rank's lines of the job's log; with ``/``, its search box open (the screen's table is
        its log: ``/`` searches it, as on the job screen)."""
        self.post_message(OpenLog(self.key, search=search, rank=self.rank))

    def action_back(self) -> None:
        self.app.pop_screen()


def rank_figures(rank: str, mine: Curve, others: Curve) -> Text:
    """The numbers behind the chart: the rank's steady median iteration time, the other
    ranks' at the same iterations, how much slower or faster, and its worst iteration."""
    a, b = mine.values, others.values
    steady = np.arange(len(a)) >= warmup_count(len(a))
    both = steady & np.isfinite(a) & np.isfinite(b)
    own = a[steady & np.isfinite(a)]
    if not own.size:
        return Text(f"rank {rank}: no iteration time logged yet", style="dim")
    text = Text(f"iteration time: rank {rank} median {np.median(own) / 1000:.3f} s")
    if not both.any():
        text.append("; no other rank logged the same iterations", style="dim")
        return text
    mine_med, others_med = float(np.median(a[both])), float(np.median(b[both]))
    text.append(f"; other ranks {others_med / 1000:.3f} s at the same {int(both.sum())} iterations")
    if others_med > 0 and math.isfinite(others_med):
        text.append(f"; {100.0 * (mine_med / others_med - 1):+.1f}%")
    gaps = np.where(both, a - b, -np.inf)
    worst = int(np.argmax(gaps))
    if gaps[worst] > 0:
        text.append(f"; worst at iteration {int(mine.iterations[worst])}: "
                    f"{a[worst] / 1000:.3f} s against {b[worst] / 1000:.3f} s")
    return text
