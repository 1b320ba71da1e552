"""What the figures judge by, without the code that judges: the alert rules' defaults
and the startup timeout.  The command line builds its options from these before it
imports anything heavy (numpy, the parsers): ``tuimon --help`` and a usage error stay
quick."""
from __future__ import annotations

#: each alert rule and its settings (:mod:`tuimon.figures.alerts` says what they mean)
DEFAULTS: dict[str, dict[str, float]] = {
    "failed": {},
    "stalled": {"factor": 5.0, "min_s": 60.0},
    "startup-hang": {},
    "nan": {},
    "loss-spike": {"k": 6.0, "window": 50, "min_points": 20},
    "grad-norm-spike": {"k": 10.0, "window": 50, "min_points": 20},
    "slowdown": {"factor": 1.3, "window": 20, "baseline": 100},
    "straggler": {"factor": 1.2, "min_points": 5},
    # the time ledger (figures.ledger): judged on a job's runs together, once its span is min_h long
    "goodput": {"below": 0.5, "min_h": 1.0},
    "redone": {"gpu_h": 50.0},
}
KINDS = tuple(DEFAULTS)

#: a job that started but logged no first step this long after: stuck in startup (``--startup-timeout``)
STARTUP_TIMEOUT_S = 600.0
