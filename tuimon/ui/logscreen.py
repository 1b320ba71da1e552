"""A job's log, paged like ``less`` (:class:`~tuimon.ui.logview.LogView`): ``/`` and ``?``
search with every match highlighted, ``n``/``N``, ``g``/``G``, ``F`` to follow, marks (``m``
then a letter, ``'`` then the letter), a rank filter (``r``) and the job's other files
(``[`` and ``]``).  Esc clears the search, then the filter, then leaves."""
from __future__ import annotations

import time
from typing import Optional

import numpy as np
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Input, Static

from tuimon.parsers.prefix import rank_line_pattern

from ..sources.logfile import KeptLines, Lines
from ..text import sanitize
from .logview import LogView, search

INDEX_EVERY_S = 0.05  # the index grows each tick: a big file pages at once, and is indexed whole in the background
INDEX_TICK_S = 0.015  # of each tick, at most this long spent indexing (2 GB indexed in about 10 s, keys still answered)


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
        Binding("m", "pending('mark')", "Mark", show=False, id="log-mark"),
        Binding("apostrophe", "pending('jump')", "Go to mark", show=False, id="log-jump"),
        Binding("r", "rank", "Rank", id="rank"),
        Binding("right_square_bracket", "file(1)", "Next file", show=False, id="next-file"),
        Binding("left_square_bracket", "file(-1)", "Previous file", show=False, id="previous-file"),
    ]

    def __init__(self, job: str, sources: list[Lines], search: bool = False, rank: str = "",
                 at: Optional[tuple[int, int]] = None) -> None:
        """``at``: (file, 0-based line) to open the log at (an alert's line), once indexed that far."""
        super().__init__()
        self.job = job
        # no file (the job is gone): an empty view, so that every key still has a view to act on
        self.sources = sources or [KeptLines("(no file)", [], note="this job has no file to show")]
        self.which = 0
        self.following = not search and at is None  # opened to read the latest lines, as the tail shows them
        self._at = at if at is not None and 0 <= at[0] < len(self.sources) else None
        self.rank = rank
        self.marks: dict[str, tuple[int, int]] = {}  # letter -> (file, line)
        self._pending = ""
        self._asking = ""  # what the input box asks for: "search", "search-back" or "rank"
        self._open_search = search
        self.message = ""
        self.searching = False  # a search is running (in a worker thread)

    def compose(self) -> ComposeResult:
        yield Static(Text(""), id="log-title", classes="title")
        yield LogView(self.sources[0], id="logview")
        yield Static(Text(""), id="log-status")
        yield Input(id="log-input")
        yield Footer()

    @property
    def view(self) -> LogView:
        return self.query_one(LogView)

    def on_mount(self) -> None:
        self.view.focus()
        if self.rank:
            self._to_rank_file()
            self._filter()  # what is indexed so far; the rest as the index grows
        if self._at is not None and self._at[0] != self.which:
            self._switch(self._at[0])
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
        if self.following and view.scroll_offset.y < view.max_scroll_y:
            # down to the end, where it is: Textual's scroll_end also scrolls back to the left edge, which
            # undid → (sideways) at every tick of a followed file
            view.scroll_to(y=view.max_scroll_y, animate=False, immediate=True)
        if self._at is not None and (len(view.source) > self._at[1] or view.source.complete):
            line = min(self._at[1], max(0, len(view.source) - 1))
            self._at = None
            # after the next refresh: the view's new height (just indexed) is not laid out yet, and a scroll
            # now is clamped to the old one (the log opened at line 1, its status naming the alert's line)
            self.call_after_refresh(view.go, view.row_of(line), True)
            view.current = line
            self.message = f"the alert's line, {line + 1}"
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
        # a file's name, a job's and a search's are untrusted text like the lines: shown literally
        self.query_one("#log-title", Static).update(Text(sanitize(title), no_wrap=True, overflow="ellipsis"))
        self.query_one("#log-status", Static).update(Text(sanitize("  ·  ".join(parts)), no_wrap=True,
                                                          overflow="ellipsis"))

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
        if not self.is_attached:
            return  # the screen closed while its search ran
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
        self.view.scroll_home(animate=False, immediate=True)
        self._status()

    def action_last(self) -> None:
        self.view.scroll_end(animate=False, immediate=True)
        self._status()

    def action_follow(self) -> None:
        self.following = True
        self.view.scroll_end(animate=False, immediate=True)
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
        view.scroll_home(animate=False, immediate=True)
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
