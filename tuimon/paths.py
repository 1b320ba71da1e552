"""Where tuimon keeps its files, by the XDG base directory rules, in one place:
``$XDG_CONFIG_HOME/tuimon`` (the config file and user formats) and ``$XDG_CACHE_HOME/tuimon``
(the parse cache), each ``~/.config`` and ``~/.cache`` when the variable is unset or empty."""
from __future__ import annotations

import os
from pathlib import Path


def _base(variable: str, fallback: str) -> Path:
    # an empty or relative value is to be ignored (the XDG base directory specification)
    value = os.environ.get(variable, "")
    return Path(value) if os.path.isabs(value) else Path(os.path.expanduser("~")) / fallback


def config_home() -> Path:
    """``$XDG_CONFIG_HOME/tuimon``."""
    return _base("XDG_CONFIG_HOME", ".config") / "tuimon"


def cache_home() -> Path:
    """``$XDG_CACHE_HOME/tuimon``."""
    return _base("XDG_CACHE_HOME", ".cache") / "tuimon"
