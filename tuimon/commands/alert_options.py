"""The alert options every reading verb shares, and their error: apart from the alert
code (numpy, the store) so that the command line builds its options without it."""
from __future__ import annotations

import argparse

from ..figures.thresholds import KINDS


class AlertOptionError(ValueError):
    """A bad --alert or --on-alert (one line for the user, exit status 2)."""


def add_alert_options(p: argparse.ArgumentParser, *, hooks: bool = True, app: bool = False) -> None:
    p.add_argument("--alert", action="append", default=[], metavar="RULE",
                   help=f"KIND=off, KIND=on or KIND.PARAM=NUMBER (e.g. loss-spike.k=8); kinds: {', '.join(KINDS)}")
    if hooks:
        p.add_argument("--on-alert", metavar="CMD",
                       help="run CMD (split like a shell would, run without one) with the alerts that arrive together "
                            "as a JSON list on stdin; at most 4 at once, each job and kind once every 10 minutes")
        p.add_argument("--notify", action="store_true", help="also show alerts as desktop notifications (notify-send)")
    if app:
        p.add_argument("--no-bell", action="store_true", help="do not ring the terminal bell on a new alert")
