"""``tuimon serve``: a headless, long-lived exporter of the figures at /metrics, and the
``--metrics ADDR`` of ``watch`` and ``ssh``."""
from __future__ import annotations

import argparse
import math
import signal
import sys
import threading
from typing import Any, Callable, Optional

from ..exports.listen import DEFAULT_LISTEN, ListenError
from .settings import Settings

WARN_EVERY_S = 1.0  # how often the ingest's warnings and errors are said


class RetainError(ValueError):
    """A --retain the user gave that cannot be read (one line, exit status 2)."""


def duration_seconds(text: str) -> float:
    """``90``, ``90s``, ``30m``, ``24h``, ``7d`` -> seconds."""
    units = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
    t = text.strip().lower()
    scale = units.get(t[-1:], None)
    number = t[:-1] if scale is not None else t
    try:
        value = float(number) * (scale or 1.0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (such as 90s, 30m, 24h, 7d)") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a duration must be positive")
    if not math.isfinite(value) or value > 1e10:
        raise argparse.ArgumentTypeError(f"{text!r}: too long a duration")
    return value


def add_serve_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT",
                   help=f"where to serve /metrics (default {DEFAULT_LISTEN}; another address must be given)")
    add_retention_options(p)


def add_retention_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--retain", type=duration_seconds, default=86400.0, metavar="DURATION",
                   help="drop jobs that ended longer ago than this from the metrics (default 24h)")
    p.add_argument("--max-jobs", type=int, default=1000, metavar="N",
                   help="export at most N jobs, the most recently updated (default 1000)")


def start_metrics(session: Any, listen: str, settings: Settings) -> Any:
    """Serve ``session``'s figures at ``listen`` (a started MetricsServer); raises :class:`ListenError`."""
    from ..exports.prometheus import MetricsServer, registry_for

    registry = registry_for(session, retain_s=settings.retain,
                            max_jobs=max(1, settings.max_jobs))
    return MetricsServer(registry, listen).start()


def cmd_serve(settings: Settings, *, make_session: Callable[[], Any], warn: Callable[[str], None]) -> int:
    session = make_session()
    try:
        server = start_metrics(session, settings.listen, settings)
    except ListenError:
        session.stop()
        raise
    print(f"tuimon: serving http://{server.address}/metrics (Ctrl-C to stop)", file=sys.stderr, flush=True)
    stop = threading.Event()

    def on_term(signum: int, frame: Optional[Any]) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_term)  # systemd stops a unit with SIGTERM
    interrupted = False
    try:
        while not stop.wait(WARN_EVERY_S):  # the session's figures thread judges alerts (--on-alert)
            notices = session.take_notices()  # (its new alerts go to --on-alert hooks, not here)
            for warning in notices.warnings:
                warn(warning)
            if notices.error:
                warn(notices.error)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        server.close()
        session.stop(wait=0.4 if interrupted else 5.0)
    return 0
