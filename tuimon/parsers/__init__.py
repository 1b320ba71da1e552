"""Pure, incremental parsers for deep-learning training logs.

Standard library only: no I/O, no terminal, no UI.  Feed text with
the engine (``tuimon.engine``); get typed records from :mod:`parsers.events`.
"""
from __future__ import annotations

from .base import LineContext, LineParser, Sample
from .deepspeed import DeepSpeedParser
from .evals import EvalParser
from .failures import FailureParser
from .hf_trainer import HFTrainerParser
from .launcher import LauncherParser
from .megatron import MegatronParser
from .mlperf import MLPerfParser
from .progress import ProgressParser
from .resume import ResumeParser
from .timers import TimerParser
from .torchtitan import TorchTitanParser
from .warns import WarningParser

#: Specific before generic; order is also the order events of one line come out in.
ALL_PARSERS: tuple[type[LineParser], ...] = (
    MegatronParser,
    DeepSpeedParser,
    TimerParser,
    HFTrainerParser,
    TorchTitanParser,
    MLPerfParser,
    LauncherParser,
    ProgressParser,
    EvalParser,
    ResumeParser,
    WarningParser,
    FailureParser,
)


__all__ = ["ALL_PARSERS", "LineContext", "LineParser", "Sample"]
