"""What screens ask of the app, as messages (a screen does not call the app's methods)."""
from __future__ import annotations

from textual.message import Message


class RefreshRequest(Message):
    """Take the session's latest figures now (the screens watching the app's snapshot draw them)."""


class OpenJob(Message):
    def __init__(self, key: str) -> None:
        super().__init__()
        self.key = key


class OpenRank(Message):
    def __init__(self, key: str, rank: str) -> None:
        super().__init__()
        self.key = key
        self.rank = rank


class OpenLog(Message):
    """Page through a job's log (``search``: with the search box open; ``rank``: only
    that rank's lines; ``file`` and ``line`` (1-based): at that line, as an alert names it)."""

    def __init__(self, key: str, search: bool = False, rank: str = "", file: str = "", line: int = 0) -> None:
        super().__init__()
        self.key = key
        self.search = search
        self.rank = rank
        self.file = file
        self.line = line


class FiguresChanged(Message):
    """The session's figures thread changed what a screen shows (posted from that thread: Textual's
    ``post_message`` is thread-safe); the app redraws at once, debounced."""
