"""tuimon's look: Textual themes (as data) and the stylesheet beside this file.

Status is always written in words as well as coloured, so every theme,
including high-contrast and monochrome terminals, stays readable.
"""
from __future__ import annotations

from pathlib import Path

THEMES_DIR = Path(__file__).parent
STYLESHEET = THEMES_DIR / "tuimon.tcss"

#: name -> Theme keyword arguments (kept as plain data so listing themes imports no UI code)
THEME_SPECS: dict[str, dict] = {
    "tuimon-dark": dict(primary="#4EA1FF", secondary="#8B5CF6", accent="#F5A524", warning="#F5A524",
                        error="#FF5C5C", success="#3DD68C", foreground="#E6E6E6", background="#101418",
                        surface="#161B22", panel="#1F2630", dark=True),
    "tuimon-light": dict(primary="#0B5CD5", secondary="#6D28D9", accent="#B45309", warning="#B45309",
                         error="#C62828", success="#1B7F46", foreground="#1A1A1A", background="#FAFAFA",
                         surface="#FFFFFF", panel="#ECEFF3", dark=False),
    "tuimon-high-contrast": dict(primary="#FFFF00", secondary="#00FFFF", accent="#FFFFFF", warning="#FFFF00",
                                 error="#FF4040", success="#00FF00", foreground="#FFFFFF", background="#000000",
                                 surface="#000000", panel="#000000", dark=True),
}
THEME_ALIASES = {"dark": "tuimon-dark", "light": "tuimon-light", "high-contrast": "tuimon-high-contrast"}


def textual_themes():
    """The Theme objects (imports Textual: call from UI code only)."""
    from textual.theme import Theme

    return [Theme(name=name, **spec) for name, spec in THEME_SPECS.items()]
