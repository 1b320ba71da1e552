"""What a screen reads of the live session: an immutable snapshot it watches, and a read-only view.

The app holds the latest :class:`Snapshot` in a Textual reactive (``TuimonApp.snapshot``), set on
the UI thread when the session says new figures were made and on the app's timer.  A screen that
draws the session is bound to it (:class:`WatchesSnapshot`, Textual's ``data_bind``) and draws
what its own reactive is given: the app dispatches into no screen.  What a screen draws besides the rows (a job's
detail, its alerts, a rank's curves) it pulls from the read-only :class:`SessionView` (copies
made under the session's lock), and it writes nothing back.  What the UI is to say once (the
session's error, its warnings, new alerts) is handed over by :meth:`SessionView.take_notices`,
never popped by the UI.
"""
from __future__ import annotations

from typing import Any, Optional, Protocol, cast, runtime_checkable

from textual.app import ScreenStackError
from textual.css.query import NoMatches
from textual.reactive import reactive

from ..figures.alerts import Alert
from ..live.session import Curve, JobDetail, Notices, Snapshot
from .messages import RefreshRequest


class SessionView(Protocol):
    """The reading side of :class:`tuimon.live.session.LiveSession`."""

    def snapshot(self) -> Snapshot: ...

    def job_detail(self, key: str) -> Optional[JobDetail]: ...

    def latest_alert(self, key: str) -> Optional[Alert]: ...

    def alerts(self) -> list[Alert]: ...

    def rank_vs_others(self, key: str, rank: str) -> tuple[Curve, Curve]: ...

    def take_notices(self) -> Notices: ...


@runtime_checkable
class ShowsSession(Protocol):
    """A screen that draws the session: the snapshot watched, and what else it shows from ``view``."""

    def show_from(self, view: SessionView, snap: Snapshot) -> None: ...


class WatchesSnapshot:
    """Mixed into a screen that draws the session (before ``Screen`` in its bases).  The app opens
    it bound to its snapshot (``screen.data_bind(TuimonApp.snapshot)``: Textual's data binding), so
    the screen's own ``snapshot`` follows the app's; it draws each one while it is the screen on
    top, the latest at once when it is shown again (:meth:`on_screen_resume`), and again from the
    same snapshot when its own state changes (:meth:`redraw`: a filter, a sort, a mark)."""

    #: the app's latest figures, bound (every one is news: ages and ETAs move each tick)
    snapshot: reactive[Optional[Snapshot]] = reactive(None, always_update=True, repaint=False, init=False)

    def watch_snapshot(self, snap: Optional[Snapshot]) -> None:
        self._draw(snap)

    def first_draw(self) -> None:
        """The widgets are mounted: draw the latest snapshot (the binding may not have set it yet), or
        ask the app for its first (the first screen, before the first tick: filled before the first key)."""
        screen = cast(Any, self)  # (a Screen: the descriptor's owner, to the type checker, is not)
        snap = screen.snapshot or screen.app.snapshot
        if snap is None:
            screen.post_message(RefreshRequest())
        else:
            self._draw(snap)

    def redraw(self) -> None:
        """Draw again from the snapshot shown (this screen's own state changed, not the figures)."""
        self._draw(cast(Any, self).snapshot)

    def on_screen_resume(self) -> None:
        """Shown again (a screen above it closed): the latest figures at once, not at the next tick."""
        self.redraw()

    def _draw(self, snap: Optional[Snapshot]) -> None:
        screen = cast(Any, self)
        try:
            # the screen on top alone (Textual's is_current holds the one beneath it too, drawn or not)
            if snap is not None and screen.is_attached and screen.app.screen is screen:
                cast(ShowsSession, self).show_from(screen.app.session, snap)
        except (NoMatches, ScreenStackError):
            return  # being built or torn down (a key may come as the app closes): the next snapshot draws it
