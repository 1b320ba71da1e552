"""The job screen's panels: widgets whose data is reactive and whose ``render()`` builds a
pure renderable (:mod:`tuimon.ui.render`) at the panel's width.  Their colours are
component classes, styled from the theme's variables, so every theme restyles them."""
from __future__ import annotations

from typing import Optional

from rich.console import RenderableType
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget

from ..live.session import JobDetail
from .palette import Palette, of
from .render import (
    Fitted,
    breakdown_rows,
    failures_text,
    ledger_heading,
    ledger_text,
    num,
    plain,
    short_num,
    timeline,
    tree_bars,
)


class Panel(Widget):
    """One panel of a job: set ``detail`` and it draws itself again."""

    COMPONENT_CLASSES = {"panel--title", "panel--bar", "panel--phase", "panel--alert", "panel--muted", "panel--warn"}
    DEFAULT_CSS = """
    Panel { width: 1fr; height: 100%; border: round $secondary 40%; padding: 0 1; }
    Panel > .panel--title { text-style: bold; }
    Panel > .panel--bar { color: $primary; }
    Panel > .panel--phase { color: $secondary; }
    Panel > .panel--alert { color: $error; text-style: bold; }
    Panel > .panel--muted { color: $text-muted; }
    Panel > .panel--warn { color: $warning; text-style: bold; }
    """

    # a detail holds arrays, which do not compare as one value: every assignment redraws
    detail: reactive[Optional[JobDetail]] = reactive(None, layout=True, always_update=True)

    def palette(self) -> Palette:
        style = self.get_component_rich_style
        return Palette(status=of(self).status, alert=style("panel--alert"), bar=style("panel--bar"),
                       phase=style("panel--phase"), dim=style("panel--muted"), warn=style("panel--warn"))

    def title(self, text: str) -> Text:
        return Text(text, style=self.get_component_rich_style("panel--title"))

    def render(self) -> RenderableType:
        detail = self.detail
        if detail is None:
            return Text("")
        return Fitted(lambda width: self.build(detail, width))

    @property
    def rows(self) -> int:
        """Lines the panel can show (its content region; before layout, a screenful)."""
        return self.content_size.height or 24

    def build(self, d: JobDetail, width: int) -> Text:
        raise NotImplementedError


class BreakdownPanel(Panel):
    """Timers per iteration as a tree of bars, each its own time's share of the iteration,
    and the offload overhead's share in the title.  Short of rows, it shows the rows that
    matter most (the top level, then the offload timers); ``b`` (the job screen) fills the
    screen with it, the wheel and the arrow keys scroll the whole list."""

    ALLOW_MAXIMIZE = True
    can_focus = True
    BINDINGS = [("down,j", "scroll_rows(1)", "Down"), ("up,k", "scroll_rows(-1)", "Up"),
                ("pagedown", "scroll_rows(10)", "Page down"), ("pageup", "scroll_rows(-10)", "Page up")]
    first_row = 0  # scrolled to this row of the whole list (0: the rows that matter most)

    def build(self, d: JobDetail, width: int) -> Text:
        s = d.row.summary
        whole = s.breakdown_whole_ms
        parts = s.breakdown
        rows = max(1, self.rows - 1)
        short = rows <= 5  # no line to spare for "N more": the title says it
        hidden = len(parts) - len(breakdown_rows(parts, rows)) if short and not self.first_row else 0
        # one line, what matters first: the iteration, the offload share, what is not shown
        pieces = [f"Timers {whole:.1f} ms/it" if whole else "Timers per iteration"]
        if s.offload_share is not None:
            pieces.append(f"offload {100.0 * s.offload_share:.1f}%")
        if hidden:
            pieces.append(f"+{hidden} rows (b)")
        if any(p.get("overlap") for p in parts):
            pieces.append("*: overlap")
        if any(p.get("p10_ms") is not None for p in parts):
            pieces.append("range: p10–p90 ms")
        head = pieces[0]
        for piece in pieces[1:]:
            if len(head) + 2 + len(piece) <= width:
                head += ", " + piece
        text = self.title(head + "\n")
        self.first_row = min(self.first_row, max(0, len(parts) - rows))
        text.append_text(tree_bars(parts, line_width=width, limit=rows, palette=self.palette(),
                                   offset=self.first_row, note_more=not short))
        return text

    def action_scroll_rows(self, step: int) -> None:
        self.first_row = max(0, self.first_row + step)
        self.refresh(layout=True)

    def on_mouse_scroll_down(self, event) -> None:
        event.stop()
        self.action_scroll_rows(1)

    def on_mouse_scroll_up(self, event) -> None:
        event.stop()
        self.action_scroll_rows(-1)


class StartupPanel(Panel):
    """The startup phases on a time line, then the one-off setup and checkpoint timers."""

    def build(self, d: JobDetail, width: int) -> Text:
        s = d.row.summary
        text = self.title("Startup timeline\n")
        if s.startup_note:
            text.append_text(plain(s.startup_note, "dim"))
        else:
            text.append_text(timeline(s.startup, line_width=width, palette=self.palette()))
        room = self.rows - len(text.plain.split("\n")) - 1
        if s.startup_timers and room > 0:
            text.append_text(self.title("\nSetup and checkpoint timers"))
            for t in s.startup_timers[:min(6, room)]:
                text.append("\n")
                text.append_text(plain(f"{t['name'][:40]:40s} {t['ms']:10.1f} ms"))
        return text


class LedgerPanel(Panel):
    """The job's time ledger (its runs together, :mod:`tuimon.figures.ledger`): its span as a bar
    of parts, each run's start marked, then the parts' shares; the goodput in its border."""

    def build(self, d: JobDetail, width: int) -> Text:
        ledger = d.row.summary.ledger
        self.border_title = ledger_heading(ledger)
        return ledger_text(ledger, width, self.palette())


class RunPanel(Panel):
    """The model, its parallelism, batch, memory and checkpoints."""

    def build(self, d: JobDetail, width: int) -> Text:
        s, c = d.row.summary, d.config
        t, layout = s.tflops_per_gpu, s.config

        def percent(x: Optional[float]) -> str:
            return f"{100 * x:.1f}%" if x is not None else "-"

        lines = [
            f"model      {num(s.params_billion, 3)} B params, {c.get('num_layers', '-')} layers, "
            f"hidden {c.get('hidden_size', '-')}, seq {c.get('seq_length', '-')}",
            f"parallel   TP {layout.tp or '-'}  PP {layout.pp or '-'}  DP {layout.dp or '-'}  "
            f"world {s.world_size or '-'}",
            f"TFLOPs     {num(t.computed, 1)} model, {num(t.hardware, 1)} hw; MFU {percent(s.mfu)}, "
            f"HFU {percent(s.hfu)}",
            f"batch      global {s.global_batch or '-'}  micro {c.get('micro_batch', '-')}  "
            f"act. ckpt {s.activation_checkpointing}",
            f"throughput {short_num(s.metric('tokens_per_sec'), 0)} tokens/s, "
            f"{short_num(s.metric('tokens_per_gpu_per_sec'), 0)} "
            f"/GPU ({s.tokens_per_sec_source or '-'}), {num(s.metric('samples_per_sec'), 2)} samples/s",
            f"memory     GPU max alloc {num(s.memory.gpu_max_allocated_mb, 0)} MB, "
            f"reserved {num(s.memory.gpu_max_reserved_mb, 0)} MB, CPU {num(s.memory.cpu_used_gb, 1)} GB",
            "checkpoint " + (", ".join(f"{ck['iteration']}: {num(ck['save_ms'], 0)} ms"
                                       for ck in s.checkpoints[-3:]) or "-"),
            f"from       size: {s.params_source or '-'}; FLOPs: {s.flops_formula or '-'}",
        ]
        text = self.title("Run")
        for line in lines:
            text.append("\n")
            text.append_text(plain(line))
        return text


class FailuresPanel(Panel):
    """Failures (the last five, with their lines), the job's other alerts, and doubtful figures,
    with what to check."""

    def build(self, d: JobDetail, width: int) -> Text:
        text = self.title("Failures, alerts and checks\n")
        text.append_text(failures_text(d.row.summary.checks, d.alerts, d.failures, self.rows, self.palette()))
        return text
