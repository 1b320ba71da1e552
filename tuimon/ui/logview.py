"""The log view's widget: one file's lines (or one rank's), numbered, with a search's
matches highlighted, drawn a line at a time from a :class:`~tuimon.sources.logfile.Lines`
(indexed as it is paged, read only where shown); and the search it runs."""
from __future__ import annotations

from typing import Optional

import numpy as np
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..sources.logfile import Lines

PAGE = 256  # lines read from the file at a time
SEARCH_ROWS = 4096  # a rank's lines searched a window at a time


class LogView(ScrollView, can_focus=True):
    """The lines of one file (or those of one rank), numbered, with the search's matches
    highlighted.  Its colours are component classes, so they follow the theme."""

    COMPONENT_CLASSES = {"logview--gutter", "logview--match", "logview--current", "logview--marked"}
    DEFAULT_CSS = """
    LogView { background: $surface; }
    LogView > .logview--gutter { color: $text-muted; }
    LogView > .logview--match { background: $warning 50%; color: $text; }
    LogView > .logview--current { background: $accent; color: $text; text-style: bold; }
    LogView > .logview--marked { color: $secondary; }
    """
    BINDINGS = [
        Binding("j,down", "scroll_down", "Down", show=False),
        Binding("k,up", "scroll_up", "Up", show=False),
        Binding("space,pagedown,f", "page_down", "Page down", show=False),
        Binding("b,pageup", "page_up", "Page up", show=False),
        # long lines: in the footer, so that a reader knows there is more to the right
        Binding("right", "sideways(8)", "→ ← sideways"),
        Binding("left", "sideways(-8)", "Sideways back", show=False),
    ]

    def action_sideways(self, columns: int) -> None:
        # force: the scroll range is the lines' (virtual size); the horizontal scrollbar that permits it comes
        # with the next layout, which a key pressed as the view opens would beat
        self.scroll_to(x=max(0, min(self.max_scroll_x, self.scroll_x + columns)), animate=False, immediate=True,
                       force=True)

    def __init__(self, source: Lines, **kw) -> None:
        super().__init__(**kw)
        self.source = source
        self.rows: Optional[np.ndarray] = None  # the file's line numbers shown (a rank filter), else all
        self.needle = ""
        self.current: Optional[int] = None  # the line of the match the search is at
        self.marked: set[int] = set()
        self._pages: dict[int, list[str]] = {}
        self._widest = 0

    # -- what is shown ------------------------------------------------------------------------
    def row_count(self) -> int:
        return len(self.rows) if self.rows is not None else len(self.source)

    def line_of(self, row: int) -> int:
        return int(self.rows[row]) if self.rows is not None else row

    def row_of(self, line: int) -> int:
        """The row showing ``line`` (or the nearest after it, under a filter)."""
        if self.rows is None:
            return line
        return min(int(np.searchsorted(self.rows, line)), max(0, len(self.rows) - 1))

    def text(self, line: int) -> str:
        page = self._pages.get(line // PAGE)
        if page is None or (line % PAGE >= len(page) and not self.source.complete):
            page = self._pages[line // PAGE] = self.source.lines(line // PAGE * PAGE, PAGE)
            if len(self._pages) > 64:
                self._pages.pop(next(iter(self._pages)))
            self._widest = max(self._widest, max((len(t) for t in page), default=0))
        return page[line % PAGE] if line % PAGE < len(page) else ""

    def sync(self) -> None:
        """After the source grew or the rows changed: the scroll range, and the last page
        (which may have gained lines) read again."""
        n = len(self.source)
        self._pages.pop((n - 1) // PAGE if n else 0, None)
        gutter = len(str(max(1, n))) + 1
        size = Size(max(self._widest + gutter + 1, self.size.width), self.row_count())
        if size != self.virtual_size:
            self.virtual_size = size
            # the scrollbars follow a virtual size set here only on a new layout: until one, → did nothing
            self.refresh(layout=True)
        self.refresh()

    def reset(self) -> None:
        self._pages.clear()
        self._widest = 0
        self.sync()

    @property
    def top(self) -> int:
        return int(self.scroll_offset.y)

    def go(self, row: int, center: bool = False) -> None:
        row = max(0, min(row, self.row_count() - 1))
        y = row - self.size.height // 2 if center else row
        self.scroll_to(y=max(0, y), animate=False, immediate=True)

    # -- drawing -------------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        row = scroll_y + y
        width = self.size.width
        base = self.rich_style
        if row >= self.row_count():
            return Strip.blank(width, base)
        line = self.line_of(row)
        gutter_w = len(str(max(1, len(self.source)))) + 1
        text = Text(no_wrap=True, style=base)
        mark_style = self.get_component_rich_style("logview--marked")
        gutter = self.get_component_rich_style("logview--gutter")
        text.append(f"{line + 1:>{gutter_w - 1}}", style=mark_style if line in self.marked else gutter)
        text.append("▌" if line in self.marked else " ", style=mark_style)
        # the gutter stays put as the lines scroll sideways; only what fits is styled (a line may be 64 KB)
        body = Text(self.text(line)[scroll_x:scroll_x + width + len(self.needle)])
        if self.needle:
            style = self.get_component_rich_style("logview--current" if line == self.current else "logview--match")
            body.highlight_words([self.needle], style=style, case_sensitive=False)
        text.append_text(body)
        return Strip(list(text.render(self.app.console))).crop_extend(0, width, base)

    def show_column(self, column: int, width: int) -> None:
        """Scroll sideways just enough to show ``width`` characters from ``column`` (a match
        beyond the right edge), or back to the left edge when they fit there."""
        room = self.size.width - (len(str(max(1, len(self.source)))) + 1) - 1
        self.sync()  # the scroll range, with the width of the line just read
        if column < 0 or column + width <= room:
            self.scroll_to(x=0, animate=False, immediate=True)
        else:
            self.scroll_to(x=column + width - room + 8, animate=False, immediate=True)

    def on_resize(self, event: events.Resize) -> None:
        self.sync()


def search(source: Lines, rows: Optional[np.ndarray], needle: str, line: int, forward: bool) -> Optional[int]:
    """The next line from ``line`` (on or back) that holds ``needle``, any case: over the
    whole file, or among ``rows`` (a rank's lines), read a window of lines at a time."""
    if rows is None:
        return source.find(needle, line, forward)
    key = needle.lower()
    at = int(np.searchsorted(rows, line, side="left" if forward else "right")) - (0 if forward else 1)
    while 0 <= at < len(rows):
        chunk = rows[at:at + SEARCH_ROWS] if forward else rows[max(0, at - SEARCH_ROWS + 1):at + 1][::-1]
        lo, hi = int(chunk.min()), int(chunk.max())
        if hi - lo < 16 * len(chunk):  # close together: one read for the window
            texts = source.lines(lo, hi - lo + 1)
            found = next((int(n) for n in chunk if n - lo < len(texts) and key in texts[n - lo].lower()), None)
        else:  # a few lines far apart: each on its own
            found = next((int(n) for n in chunk if key in "".join(source.lines(int(n), 1)).lower()), None)
        if found is not None:
            return found
        at += len(chunk) if forward else -len(chunk)
    return None
