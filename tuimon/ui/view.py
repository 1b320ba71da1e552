"""What a screen reads of the live session: a read-only view.

The app asks the visible screen to show itself (``screen.show_from(view)``); each screen pulls
the figures it draws (copies made under the session's lock: immutable snapshots and job
details) and writes nothing back.  What the UI is to say once (the session's error, its
warnings, new alerts) is handed over by :meth:`SessionView.take_notices`, never popped by the UI.
"""
from __future__ import annotations

from typing import Optional, Protocol, runtime_checkable

from ..figures.alerts import Alert
from ..live.session import Curve, JobDetail, Notices, Snapshot


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
    """A screen that draws the session: it pulls what it shows from ``view``."""

    def show_from(self, view: SessionView) -> None: ...
