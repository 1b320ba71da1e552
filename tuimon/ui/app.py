"""The tuimon Textual app: a thin shell that pulls snapshots from a LiveSession on
a throttled timer and hands them to the visible screen.  No I/O here."""
from __future__ import annotations

import gc
import logging
import os
import time
from functools import partial
from typing import Callable, Iterable, Mapping, Optional, TypeVar

from textual.app import App, ScreenStackError, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.screen import Screen

from tuimon.themes import STYLESHEET, THEME_ALIASES, textual_themes

from ..figures.alerts import Alert
from ..live.session import LiveSession, Snapshot
from ..text import sanitize
from .alerts import AlertsScreen
from .compare import CompareScreen
from .help import HelpScreen
from .job import ExportSeries, JobScreen
from .jobs import SORTS, CompareJobs, JobsScreen
from .keys import help_lines
from .logscreen import LogScreen
from .messages import FiguresChanged, OpenJob, OpenLog, OpenRank, RefreshRequest
from .rank import RankScreen

ScreenT = TypeVar("ScreenT", bound=Screen)

MAX_HZ = 10.0
#: new figures are drawn at most this often (and twice a frame's time apart)
MIN_FRAME_GAP_S = 0.03


class TuimonApp(App[int]):
    CSS_PATH = [str(STYLESHEET)]
    TITLE = "tuimon"
    ENABLE_COMMAND_PALETTE = True
    BINDINGS = [
        Binding("q", "quit", "Quit", id="quit"),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("a", "alerts", "Alerts", id="alerts"),
        Binding("R", "retry_hosts", "Retry hosts", show=False, id="retry-hosts"),
    ]
    TOASTS_PER_TICK = 3  # a burst of alerts shows as a few toasts and a count, not a wall of them
    #: the latest figures (immutable), set on the UI thread on new figures and on the timer; the screens
    #: that draw the session watch it (ui/view.WatchesSnapshot).  Every tick is news (ages, ETAs move)
    snapshot: reactive[Optional[Snapshot]] = reactive(None, always_update=True, repaint=False, init=False)

    def __init__(self, session: LiveSession, *, theme: str = "tuimon-dark", refresh_hz: float = 1.0,
                 quit_after: Optional[float] = None, on_quit: Optional[Callable[[], None]] = None,
                 bell: bool = True, keymap: Optional[Mapping[str, str]] = None) -> None:
        super().__init__()
        self.keymap = dict(keymap or {})  # the config file's [keymap]: binding id -> keys
        if self.keymap:
            self.set_keymap(self.keymap)
        self.ring_bell = bell
        self.session = session
        self._theme_name = THEME_ALIASES.get(theme, theme)
        self.refresh_interval = 1.0 / min(refresh_hz, MAX_HZ)
        self.quit_after = quit_after
        self._on_quit = on_quit
        self.frames = 0
        self.frame_ms: list[float] = []
        self._frame_at = float("-inf")  # when the last refresh began (monotonic)
        self._posted = False  # a FiguresChanged is on its way: the figures thread posts no other
        self._deferred = False  # a refresh is set for when the debounce gap has passed

    def on_mount(self) -> None:
        for theme in textual_themes():
            self.register_theme(theme)
        self.theme = self._theme_name
        self.push_screen(self._bound(JobsScreen()))
        # what exists by now (modules, classes, themes, the app) lives as long as the app: full
        # collections need not walk it again.  Each one took 20 ms longer with it, on the UI thread.
        gc.freeze()
        # new figures are drawn when they are made (the session says so, debounced below); the interval
        # is the fallback for what changes without them (the session's warnings, a screen's own state)
        self.session.on_figures(self._figures_made)
        self.set_interval(self.refresh_interval, self.refresh_now)
        if self.quit_after:
            self.set_timer(self.quit_after, lambda: self.exit(0))

    def _figures_made(self) -> None:
        """The figures thread: new figures. One message in flight at most (a burst of ticks is one redraw)."""
        if not self._posted:
            self._posted = True
            self.post_message(FiguresChanged())

    def on_figures_changed(self, _message: FiguresChanged) -> None:
        """Draw the new figures now, or once MIN_FRAME_GAP_S (and twice the last frame's time) has passed
        since the last frame: under a flood of lines the UI thread keeps most of its time for keys."""
        self._posted = False
        gap = max(MIN_FRAME_GAP_S, 2.0 * (self.frame_ms[-1] / 1000.0 if self.frame_ms else 0.0))
        wait = self._frame_at + gap - time.monotonic()
        if wait <= 0:
            self.refresh_now()
        elif not self._deferred:
            self._deferred = True
            self.set_timer(wait, self._deferred_refresh)

    def _deferred_refresh(self) -> None:
        self._deferred = False
        self.refresh_now()

    def refresh_now(self) -> None:
        """Take the session's latest snapshot: the screen on top, watching it, draws it.
        UI thread; the session copies what it needs under its lock."""
        self._frame_at = time.monotonic()
        t0 = time.perf_counter()
        try:
            self.snapshot = self.session.snapshot()
        except (NoMatches, ScreenStackError):
            return  # the screen is being built or torn down (a request may arrive as the app closes)
        self.frames += 1
        self.frame_ms.append((time.perf_counter() - t0) * 1000.0)
        del self.frame_ms[:-1000]
        notices = self.session.take_notices()
        if notices.error:
            self.notify(sanitize(notices.error), severity="error", timeout=10, markup=False)
        for warning in notices.warnings:
            self.notify(sanitize(warning), severity="warning", timeout=8, markup=False)
        self._toast_alerts(notices.alerts)

    def _toast_alerts(self, fresh: tuple[Alert, ...]) -> None:
        """New alerts: a toast each (a few, then how many more), and the bell once."""
        if not fresh:
            return
        for alert in fresh[:self.TOASTS_PER_TICK]:
            self.notify(sanitize(f"{alert.job}: {alert.message}")[:300], title=f"alert: {alert.kind}",
                        severity="error", timeout=10, markup=False)
        if len(fresh) > self.TOASTS_PER_TICK:
            self.notify(f"and {len(fresh) - self.TOASTS_PER_TICK} more alerts: press a to list them",
                        severity="error", timeout=10, markup=False)
        if self.ring_bell:
            self.bell()

    # -- navigation ------------------------------------------------------------------------
    def _bound(self, screen: ScreenT) -> ScreenT:
        """``screen`` with its ``snapshot`` bound to the app's (Textual's data binding: called here,
        the app is the node that binds)."""
        return screen.data_bind(TuimonApp.snapshot)

    def open_job(self, key: str) -> None:
        self.push_screen(self._bound(JobScreen(key)))

    def open_rank(self, key: str, rank: str) -> None:
        self.push_screen(self._bound(RankScreen(key, rank)))

    def action_screenshot(self, filename: Optional[str] = None, path: Optional[str] = None) -> None:
        """Textual's screenshot, saved to the current directory when there is no Downloads
        directory to save it in (it failed there); the toast says where it went."""
        if path is None:
            from platformdirs import user_downloads_path

            downloads = user_downloads_path()
            path = str(downloads) if downloads.is_dir() else os.getcwd()
        self.deliver_screenshot(filename, path)

    def on_refresh_request(self, _message: RefreshRequest) -> None:
        self.refresh_now()

    def on_open_job(self, message: OpenJob) -> None:
        self.open_job(message.key)

    def on_open_rank(self, message: OpenRank) -> None:
        self.open_rank(message.key, message.rank)

    def on_open_log(self, message: OpenLog) -> None:
        detail = self.session.job_detail(message.key)
        name = detail.row.summary.job if detail is not None else message.key
        files = detail.row.summary.files if detail is not None else []
        at = (files.index(message.file), message.line - 1) if message.file in files and message.line > 0 else None
        self.push_screen(LogScreen(name, self.session.log_sources(message.key), search=message.search,
                                   rank=message.rank, at=at))

    def on_compare_jobs(self, message: CompareJobs) -> None:
        self.push_screen(self._bound(CompareScreen(message.keys)))

    def on_export_series(self, message: ExportSeries) -> None:
        """``e`` on a job screen: its series to ``<job>-series.csv`` in the current directory."""
        got = self.session.series_csv(message.key)
        if got is None:
            return
        name, text = got
        safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:100] or "job"
        path = os.path.join(os.getcwd(), f"{safe}-series.csv")
        try:
            with open(path, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            self.notify(sanitize(f"cannot write {path}: {exc.strerror or exc}"), severity="error", markup=False)
            return
        self.notify(sanitize(f"series written to {path} ({text.count(chr(10)) - 1} points)"), markup=False)

    def action_alerts(self) -> None:
        if not isinstance(self.screen, AlertsScreen):
            self.push_screen(self._bound(AlertsScreen()))

    def action_retry_hosts(self) -> None:
        """Remote hosts waiting to reconnect try now, rather than at the end of their backoff."""
        self.session.retry_hosts()
        waiting = [name[4:] for name, state in self.session.host_statuses().items()
                   if name.startswith("ssh ") and state.startswith("retrying")]
        self.notify(f"retrying now: {', '.join(waiting)}" if waiting else "no host is waiting to reconnect",
                    markup=False)

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(help_lines(key_screens(), self.keymap)))

    async def action_quit(self) -> None:
        self.exit(0)

    def on_unmount(self) -> None:
        if self._on_quit is not None:
            self._on_quit()

    # -- command palette --------------------------------------------------------------------
    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        # one theme system: ours (dark, light, high contrast, restyling every panel), not Textual's
        # picker of its own themes beside it
        yield from (c for c in super().get_system_commands(screen) if c.callback != self.action_change_theme)
        yield SystemCommand("Help", "Keys and what the columns mean", self.action_help)
        yield SystemCommand("Alerts", "Every alert so far, with its log line", self.action_alerts)
        jobs = self._jobs_screen()
        if jobs is not None:
            for name in SORTS:
                yield SystemCommand(f"Sort jobs by {name}", "Order the jobs table", partial(jobs.set_sort, name))
            yield SystemCommand("Filter jobs", "Show only jobs whose name contains a text", jobs.action_filter)
        for name, label in (("tuimon-dark", "dark"), ("tuimon-light", "light"),
                            ("tuimon-high-contrast", "high contrast")):
            yield SystemCommand(f"Theme: {label}", f"Switch to the {label} theme", partial(self._set_theme, name))

    def notify(self, message, *args, **kwargs) -> None:  # type: ignore[override]
        """A toast, and the same line in tuimon's log (``--debug``/``--log-file``)."""
        logging.getLogger("tuimon.app").info("toast: %s%s", f"{kwargs['title']}: " if kwargs.get("title") else "",
                                             message)
        super().notify(message, *args, **kwargs)

    def _set_theme(self, name: str) -> None:
        self.theme = name

    def _jobs_screen(self) -> Optional[JobsScreen]:
        for screen in self.screen_stack:
            if isinstance(screen, JobsScreen):
                return screen
        return None


def key_screens() -> list[tuple[str, type]]:
    """Every screen with keys of its own, as help lists them (``[keymap]`` names their bindings)."""
    return [("Everywhere", TuimonApp), ("Jobs", JobsScreen), ("Job screen", JobScreen), ("Rank screen", RankScreen),
            ("Log view", LogScreen), ("Alerts", AlertsScreen), ("Compare", CompareScreen)]
