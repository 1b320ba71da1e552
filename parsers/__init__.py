"""Pure, incremental parsers for deep-learning training logs.

Standard library only: no I/O, no terminal, no UI.  Feed text with
:class:`ParserSet`; get typed records from :mod:`parsers.events`.
"""
from __future__ import annotations

from typing import Optional

from .base import LineContext, LineParser, Sample
from .deepspeed import DeepSpeedParser
from .dispatch import ParserSet
from .failures import FailureParser
from .hf_trainer import HFTrainerParser
from .launcher import LauncherParser
from .megatron import MegatronParser
from .mlperf import MLPerfParser
from .progress import ProgressParser
from .timers import TimerParser
from .torchtitan import TorchTitanParser
from .triggers import ScannerFactory

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
    FailureParser,
)


def parser_set(file: str, scanner: Optional[ScannerFactory] = None, lanes: bool = False) -> ParserSet:
    return ParserSet(file, ALL_PARSERS, scanner=scanner, lanes=lanes)


__all__ = ["ALL_PARSERS", "LineContext", "LineParser", "ParserSet", "Sample", "parser_set"]
