"""tuimon's own diagnostics: the ``tuimon`` logger, quiet unless asked.  ``--debug`` logs
every step worth knowing (files found, cache hits and misses, rotations, connections,
alerts, toasts) to stderr, or with ``--log-file FILE`` to that file; the app's screen
is never written over, so under ``watch`` a log goes to a file (default
``$XDG_CACHE_HOME/tuimon/tuimon.log``).  Warnings reach the log as well as the user."""
from __future__ import annotations

import logging
import os
import sys
from typing import Optional, Sequence

from ..paths import cache_home
from ..text import sanitize

LOG = logging.getLogger("tuimon")
FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class SafeFormatter(logging.Formatter):
    """A log line holds log text (alert messages, file names): no control sequence of it
    reaches a terminal that shows the log, nor a file someone will ``cat``."""

    def format(self, record: logging.LogRecord) -> str:
        return sanitize(super().format(record))


def take_options(argv: Sequence[str]) -> tuple[bool, Optional[str], list[str]]:
    """``--debug`` and ``--log-file FILE`` (anywhere on the line) taken out of ``argv``."""
    debug, path, rest = False, None, []
    words = list(argv)
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--debug":
            debug = True
        elif word == "--log-file" and i + 1 < len(words):
            path = words[i + 1]
            i += 1
        elif word.startswith("--log-file="):
            path = word.split("=", 1)[1]
        else:
            rest.append(word)
        i += 1
    return debug, path, rest


def configure(debug: bool, path: Optional[str], full_screen: bool) -> Optional[str]:
    """Set the ``tuimon`` logger up; returns the file it writes to, if any.  Without either
    option, only warnings, on stderr (as the verbs print them), and nothing under the app."""
    LOG.handlers.clear()
    LOG.propagate = False
    if not debug and path is None:
        LOG.addHandler(logging.NullHandler())
        LOG.setLevel(logging.WARNING)
        return None
    if path is None and full_screen:  # the app owns the terminal: the log goes to a file
        path = str(cache_home() / "tuimon.log")
    if path is not None:
        os.makedirs(os.path.dirname(os.path.abspath(path)) or ".", exist_ok=True)
        handler: logging.Handler = logging.FileHandler(path, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(SafeFormatter(FORMAT))
    LOG.addHandler(handler)
    LOG.setLevel(logging.DEBUG if debug else logging.INFO)
    return path
