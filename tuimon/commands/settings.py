"""The settings of one run of tuimon, built once: the config file's values, then the
environment's, then the flags (argparse falls back on the file's values as defaults:
:func:`tuimon.commands.config.apply`).  Every verb takes this typed, frozen record;
no ``argparse.Namespace`` goes past :func:`Settings.from_args`, and no option is read by
name with a fallback: an option a verb lacks has its default here.
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..figures.thresholds import STARTUP_TIMEOUT_S

#: argparse's own bookkeeping, not settings
_NOT_SETTINGS = frozenset({"version", "help", "debug", "log_file", "config"})


@dataclass(frozen=True)
class Settings:
    verb: Optional[str] = None
    # what to read
    paths: list[str] = field(default_factory=list)
    include: Optional[list[str]] = None
    exclude: Optional[list[str]] = None
    follow_links: bool = False
    formats: list[str] = field(default_factory=list)
    ssh_config: Optional[str] = None
    jobs: Optional[int] = None
    no_cache: bool = False
    #: the parse cache's directory: ``$TUIMON_CACHE_DIR``, else the config file's ``cache_dir``
    #: (no flag); None: the default (``$XDG_CACHE_HOME/tuimon``)
    cache_dir: Optional[str] = None
    #: the config file's ``[keymap]``: (binding id, keys) pairs for the dashboard (no flag)
    keymap: tuple[tuple[str, str], ...] = ()
    poll: Optional[float] = None
    follow: bool = False
    state: Optional[str] = None
    # figures
    gpu: Optional[str] = None
    gpu_peak: Optional[float] = None
    startup_timeout: float = STARTUP_TIMEOUT_S
    format: str = "table"
    columns: Optional[str] = None
    # alerts
    alert: list[str] = field(default_factory=list)
    on_alert: Optional[str] = None
    notify: bool = False
    no_bell: bool = False
    # the app, serve and its /metrics
    theme: str = "dark"
    metrics: Optional[str] = None
    listen: str = "127.0.0.1:9464"
    retain: float = 86400.0
    max_jobs: int = 1000
    # demo
    headless: bool = False
    seconds: Optional[float] = None
    # tflops
    params: Optional[str] = None
    seq: Optional[int] = None
    gbs: Optional[float] = None
    gpus: Optional[int] = None
    iter_time: Optional[float] = None
    no_activation_checkpointing: bool = False
    # sub-verbs and their arguments
    cache_verb: Optional[str] = None
    config_verb: Optional[str] = None
    formats_verb: Optional[str] = None
    files: Optional[list[str]] = None
    shell: Optional[str] = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> "Settings":
        """The flags parsed (with the config file's values as their defaults).  A flag with
        no setting here is a bug caught at once (and by the test of every verb's options)."""
        given = {k: v for k, v in vars(args).items() if k not in _NOT_SETTINGS}
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(given) - known)
        if unknown:
            raise TypeError(f"options with no setting: {', '.join(unknown)}")
        # an option a verb lacks is None in argparse only when it was given no default: keep ours then
        return cls(**{k: v for k, v in given.items() if v is not None or _optional(k)})

    @property
    def cache_db(self) -> Path:
        """Where the parse cache database is (``tuimon cache`` looks there even with ``--no-cache``)."""
        from ..engine.cache import db_path

        return db_path(Path(self.cache_dir) if self.cache_dir else None)

    @property
    def cache_path(self) -> Optional[Path]:
        """The parse cache database this run reads and writes; None with ``--no-cache``."""
        return None if self.no_cache else self.cache_db

    def with_(self, **changes: Any) -> "Settings":
        return dataclasses.replace(self, **changes)


def _optional(name: str) -> bool:
    default = next(f for f in dataclasses.fields(Settings) if f.name == name).default
    return default is None
