"""The colours of the app's own renderables (statuses, bars, badges), taken from the
theme: a Rich ``Text`` carries literal styles, so they are resolved from the theme's
colours here rather than written in the code.  Every status is also a word: a
monochrome terminal loses nothing but colour."""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Mapping

from rich.style import StyleType

from tuimon.themes import THEME_SPECS


@dataclass(frozen=True)
class Palette:
    """Styles by role: strings here, or a widget's component-class styles (a panel's)."""

    status: Mapping[str, StyleType] = field(default_factory=dict)  # status -> style
    alert: StyleType = "bold red"  # badges, alert kinds, failures, doubtful figures
    warn: StyleType = "bold yellow"  # stragglers
    bar: StyleType = "cyan"  # timer bars, sparklines
    phase: StyleType = "magenta"  # startup phases
    dim: StyleType = "dim"


def _from_colours(c: Mapping[str, Any]) -> Palette:
    error, success, primary = c["error"], c["success"], c["primary"]
    warning, secondary = c["warning"], c["secondary"]
    return Palette(
        status={"failed": f"bold {error}", "nan": f"bold {error}", "finished": success, "training": primary,
                "starting": warning, "stalled": f"bold {warning}", "no-iterations": secondary,
                "stuck-in-startup": f"bold {secondary}", "ended": secondary},
        alert=f"bold {error}", warn=f"bold {warning}", bar=primary, phase=secondary)


@lru_cache(maxsize=16)
def for_theme(name: str) -> Palette:
    """The palette of a theme of ours by name (the dark one for any other)."""
    return _from_colours(THEME_SPECS.get(name, THEME_SPECS["tuimon-dark"]))


def from_theme(theme: Any) -> Palette:
    """The palette of a Textual ``Theme`` (any theme, ours or Textual's own)."""
    if getattr(theme, "name", None) in THEME_SPECS:
        return for_theme(theme.name)
    colours = {k: getattr(theme, k, None) or default for k, default in THEME_SPECS["tuimon-dark"].items()
               if k in ("error", "success", "primary", "warning", "secondary")}
    return _from_colours(colours)


DEFAULT = for_theme("tuimon-dark")


def of(node: Any) -> Palette:
    """The palette of the current theme of ``node``'s app (``node``: a widget or screen)."""
    try:
        return from_theme(node.app.current_theme)
    except Exception:  # not mounted, not running, or no theme: the default colours
        return DEFAULT
