"""A job's log, paged like ``less``: the whole file (indexed as it is paged, read only
where shown), ``/`` and ``?`` search with every match highlighted, ``n``/``N``,
``g``/``G``, ``F`` to follow, marks (``m`` then a letter, ``'`` then the letter), a rank
filter (``r``) and the job's other files (``[`` and ``]``).  Esc clears the search, then
the filter, then leaves."""
from __future__ import annotations

import time
from typing import Optional

import numpy as np
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.geometry import Size
from textual.screen import Screen
from textual.scroll_view import ScrollView
from textual.strip import Strip
from textual.widgets import Footer, Input, Static

from parsers.prefix import rank_line_pattern

from ..sources.logfile import Lines

PAGE = 256  # lines read from the file at a time
SEARCH_ROWS = 4096  # a rank's lines searched a window at a time
INDEX_EVERY_S = 0.05  # the index grows each tick: a big file pages at once, and is indexed whole in the background
INDEX_TICK_S = 0.015  # of each tick, at most this long spent indexing (2 GB indexed in about 10 s, keys still answered)


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
    ]

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
        self.virtual_size = Size(max(self._widest + gutter + 1, self.size.width), self.row_count())
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
        self.scroll_to(y=max(0, y), animate=False)

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
            self.scroll_to(x=0, animate=False)
        else:
            self.scroll_to(x=column + width - room + 8, animate=False)

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


class LogScreen(Screen):
    """One job's files, one at a time."""

    BINDINGS = [
        Binding("escape", "escape", "Clear / back", id="back"),
        Binding("slash", "search(True)", "Search", id="search"),
        Binding("question_mark", "search(False)", "Search back", show=False, id="search-back"),
        Binding("n", "next(True)", "Next", id="next"),
        Binding("N", "next(False)", "Previous", id="previous"),
        Binding("g,home", "first", "Top", show=False, id="top"),
        Binding("G,end", "last", "Bottom", show=False, id="bottom"),
        Binding("F", "follow", "Follow", id="follow"),
        Binding("m", "pending('mark')", "Mark", show=False, id="mark"),
        Binding("apostrophe", "pending('jump')", "Go to mark", show=False, id="jump"),
        Binding("r", "rank", "Rank", id="rank"),
        Binding("right_square_bracket", "file(1)", "Next file", show=False, id="next-file"),
        Binding("left_square_bracket", "file(-1)", "Previous file", show=False, id="previous-file"),
    ]

    def __init__(self, job: str, sources: list[Lines], search: bool = False, rank: str = "") -> None:
        super().__init__()
        self.job = job
        self.sources = sources or []
        self.which = 0
        self.following = not search  # opened to read the latest lines, as the tail shows them
        self.rank = rank
        self.marks: dict[str, tuple[int, int]] = {}  # letter -> (file, line)
        self._pending = ""
        self._asking = ""  # what the input box asks for: "search", "search-back" or "rank"
        self._open_search = search
        self.message = ""
        self.searching = False  # a search is running (in a worker thread)

    def compose(self) -> ComposeResult:
        yield Static(Text(""), id="log-title", classes="title")
        if self.sources:
            yield LogView(self.sources[0], id="logview")
        else:
            yield Static(Text("this job has no file to show"), id="logview-empty")
        yield Static(Text(""), id="log-status")
        yield Input(id="log-input")
        yield Footer()

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

    def on_mount(self) -> None:
        if not self.sources:
            return
        self.view.focus()
        if self.rank:
            self._to_rank_file()
            self._filter()  # what is indexed so far; the rest as the index grows
        self._index()
        self.set_interval(INDEX_EVERY_S, self._index)
        if self._open_search:
            self.action_search(True)

    def on_unmount(self) -> None:
        for source in self.sources:
            close = getattr(source, "close", None)  # a remote file's connection
            if close is not None:
                close()

    def _index(self) -> None:
        """Index a block more of the file (or what it gained); follow its end if asked."""
        if self.searching:
            return  # the search reads the index: it grows again afterwards
        view = self.view
        before = len(view.source)
        deadline = time.perf_counter() + INDEX_TICK_S
        while not view.source.index() and time.perf_counter() < deadline:
            pass
        if len(view.source) != before or not view.virtual_size.height:
            if self.rank:
                self._filter(since=max(0, before - 1))  # the lines just indexed (and the last, which may have grown)
            view.sync()
        if self.following:
            view.scroll_end(animate=False)
        self._status()

    def _status(self) -> None:
        """The title names the file; the line under the log says where the view is, what
        filters it, and the last message."""
        view = self.view
        src = view.source
        n = view.row_count()
        top = view.top
        title = f"{self.job}  ·  {src.name}"
        if len(self.sources) > 1:
            title += f"  ·  file {self.which + 1}/{len(self.sources)} ([ and ] for the others)"
        parts = [f"lines {min(n, top + 1)}-{min(n, top + view.size.height)} of {n}"
                 + ("" if src.complete else " (indexing…)")]
        if src.note:
            parts.append(src.note)
        if self.rank:
            parts.append(f"rank {self.rank} only")
        if view.needle:
            parts.append(f"search {view.needle!r}")
        if self.following:
            parts.append("FOLLOW")
        if self.message:
            parts.append(self.message)
        self.query_one("#log-title", Static).update(Text(title, no_wrap=True, overflow="ellipsis"))
        self.query_one("#log-status", Static).update(Text("  ·  ".join(parts), no_wrap=True, overflow="ellipsis"))

    def say(self, message: str) -> None:
        self.message = message
        self._status()

    # -- search ----------------------------------------------------------------------------
    def action_search(self, forward: bool) -> None:
        self._ask("search" if forward else "search-back", "search (Enter; Esc clears)")

    def _ask(self, what: str, placeholder: str) -> None:
        self._asking = what
        box = self.query_one("#log-input", Input)
        box.placeholder = placeholder
        box.value = ""
        box.add_class("visible")
        box.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        event.input.remove_class("visible")
        self.view.focus()
        value = event.value.strip()
        if self._asking == "rank":
            self.rank = value
            self._to_rank_file()
            self._filter()
            self.view.reset()
            self.say(f"rank {value}: {self.view.row_count()} lines" if value else "every rank")
        elif value:
            self.view.needle = value
            self.view.current = None
            self._find(self._asking == "search", first=True)
        self._asking = ""

    def _find(self, forward: bool, first: bool = False) -> None:
        """Search on from the current match (or the top line), in a worker thread: a search
        through gigabytes, or over SSH, never freezes the screen.  The index waits meanwhile."""
        view = self.view
        if not view.needle:
            self.say("no search: press / to search")
            return
        if self.searching:
            return
        self.following = False
        here = view.current if view.current is not None else view.line_of(min(view.top, max(0, view.row_count() - 1)))
        start = here if first and view.current is None else here + (1 if forward else -1)
        needle, source, rows = view.needle, view.source, view.rows
        self.searching = True
        self.say(f"searching for {needle!r}…")

        def work() -> None:
            hit, wrapped = None, False
            try:
                hit = search(source, rows, needle, start, forward)
                if hit is None:
                    hit = search(source, rows, needle, 0 if forward else len(source) - 1, forward)
                    wrapped = hit is not None
            finally:
                self.app.call_from_thread(self._found, needle, forward, hit, wrapped)

        self.run_worker(work, thread=True, group="search", exit_on_error=False)

    def _found(self, needle: str, forward: bool, hit: Optional[int], wrapped: bool) -> None:
        view = self.view
        if needle != view.needle or hit is None:
            self.searching = False
        if needle != view.needle:
            return  # cleared or replaced meanwhile
        if hit is None:
            view.needle, view.current = "", None  # the unfiltered log, as it was
            view.refresh()
            self.say(f"no match for {needle!r}" + (f" in rank {self.rank}'s lines" if self.rank else ""))
            return
        self.message = ("search hit the " + ("bottom, went on from the top" if forward else
                                             "top, went on from the bottom")) if wrapped else ""
        view.current = hit
        view.refresh()

        def show() -> None:
            view.go(view.row_of(hit), center=True)
            view.show_column(view.text(hit).lower().find(needle.lower()), len(needle))
            self.searching = False  # done once the match is in view
            self._status()

        self.call_after_refresh(show)  # centred in the view's final size (the search box just closed)

    def action_next(self, forward: bool) -> None:
        self._find(forward)

    # -- moving ----------------------------------------------------------------------------
    def action_first(self) -> None:
        self.following = False
        self.view.scroll_home(animate=False)
        self._status()

    def action_last(self) -> None:
        self.view.scroll_end(animate=False)
        self._status()

    def action_follow(self) -> None:
        self.following = True
        self.view.scroll_end(animate=False)
        self.say("following the end of the file (scroll up to stop)")

    def on_mouse_scroll_up(self, event: events.MouseScrollUp) -> None:
        self.following = False

    def action_pending(self, what: str) -> None:
        self._pending = what
        self.say("mark this place as: press a letter" if what == "mark" else "go to the mark: press its letter")

    def on_key(self, event: events.Key) -> None:
        if self._pending and not self._asking:
            what, self._pending = self._pending, ""
            event.stop()
            event.prevent_default()
            letter = event.character or ""
            if not (len(letter) == 1 and letter.isalpha()):
                self.say("no mark: a mark is a letter")
                return
            view = self.view
            if what == "mark":
                line = view.line_of(min(view.top, max(0, view.row_count() - 1)))
                self.marks[letter] = (self.which, line)
                view.marked = {ln for f, ln in self.marks.values() if f == self.which}
                view.refresh()
                self.say(f"mark {letter}: line {line + 1}")
            elif letter in self.marks:
                which, line = self.marks[letter]
                if which != self.which:
                    self._switch(which)
                self.following = False
                view = self.view
                view.go(view.row_of(line))
                self.say(f"mark {letter}: line {line + 1}")
            else:
                self.say(f"no mark {letter}")
        elif event.key in ("up", "k", "pageup", "b", "home", "g"):
            self.following = False

    # -- filters and files -----------------------------------------------------------------
    def action_rank(self) -> None:
        self._ask("rank", "show only this rank's lines (a rank number; empty: every rank)")

    def _filter(self, since: int = 0) -> None:
        """One rank's lines: all of the rank's own file, or the lines it labelled in a shared
        one; with ``since``, only lines from there on are read again (the index grew)."""
        view = self.view
        own = view.source.rank is not None and str(view.source.rank) == self.rank
        if not self.rank or own:
            view.rows = None
            return
        found = view.source.matching(rank_line_pattern(self.rank), since)
        if since and view.rows is not None:
            found = np.concatenate([view.rows[view.rows < since], found])
        view.rows = found

    def _to_rank_file(self) -> None:
        """With a file per rank (run-rank3.log), a rank's lines are its file: show that one."""
        own = next((i for i, src in enumerate(self.sources) if src.rank is not None and str(src.rank) == self.rank),
                   None)
        if own is not None and own != self.which:
            self._switch(own)

    def action_file(self, step: int) -> None:
        if len(self.sources) > 1:
            self._switch((self.which + step) % len(self.sources))

    def _switch(self, which: int) -> None:
        self.which = which
        view = self.view
        view.source = self.sources[which]
        view.current = None
        view.marked = {ln for f, ln in self.marks.values() if f == which}
        view.source.index()
        self._filter()
        view.reset()
        view.scroll_home(animate=False)
        self.say(f"file {which + 1} of {len(self.sources)}: {view.source.name}")

    def action_escape(self) -> None:
        box = self.query_one("#log-input", Input)
        if box.has_class("visible"):
            box.remove_class("visible")
            self._asking = ""
            self.view.focus()
        elif self.view.needle:
            self.view.needle, self.view.current = "", None
            self.view.refresh()
            self.say("search cleared")
        elif self.rank:
            self.rank = ""
            self._filter()
            self.view.reset()
            self.say("every rank")
        else:
            self.app.pop_screen()
