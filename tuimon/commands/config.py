"""The config file: ``$XDG_CONFIG_HOME/tuimon/config.toml`` (or ``--config FILE``).

It holds defaults; flags override it, and it overrides the built-in defaults.  Every
key is declared once in :data:`SETTINGS` with its type and the option it stands for.
A file that cannot be used (bad TOML, an unknown key, a wrong type) is one line naming
the file, the line and the key, and exit status 2: never a silent half-configuration.

    gpu = "a100"                 # or gpu_peak = 312.0
    theme = "light"
    poll = 2.0
    include = ["*.log", "*.out"]
    exclude = ["*.tmp"]
    formats = ["~/lab/formats"]
    ssh_config = "~/.ssh/config"
    cache = true
    cache_dir = "/scratch/me/tuimon-cache"
    startup_timeout = 900

    [alerts]
    bell = false
    notify = true
    on_alert = "notify-lab --channel training"
    loss-spike = { k = 8 }       # any rule's settings, or "off"
    grad-norm-spike = "off"

    [serve]
    listen = "127.0.0.1:9464"
    retain = "48h"
    max_jobs = 500

    [keymap]                     # the dashboard's keys, by the names `?` shows: keys, comma-separated
    filter = "f"
    alerts = "A,ctrl+a"
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

from ..figures.thresholds import DEFAULTS as RULE_DEFAULTS
from ..paths import config_home


class ConfigError(ValueError):
    """A config file that cannot be used (one line for the user, exit status 2)."""


def default_path() -> str:
    return str(config_home() / "config.toml")


def _gpu(v: Any) -> bool:
    from ..figures.gpus import GPU_PEAK_TFLOPS

    return isinstance(v, str) and v.strip().lower() in GPU_PEAK_TFLOPS


def _theme(v: Any) -> bool:
    from tuimon.themes import THEME_ALIASES

    return isinstance(v, str) and (v in THEME_ALIASES or v in THEME_ALIASES.values())


def _str(v: Any) -> bool:
    return isinstance(v, str)


MAX_NUMBER = 1e7  # seconds, TFLOPs or a rule's setting: anything larger is a typo (1e400 is inf)


def _number(v: Any) -> bool:
    # compared as it is: a 400-digit integer is no float (math.isfinite raised on it: a traceback)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    return (isinstance(v, int) or math.isfinite(v)) and 0 < v <= MAX_NUMBER


def _listen(v: Any) -> bool:
    from ..exports.listen import ListenError, parse_listen

    try:
        return isinstance(v, str) and bool(parse_listen(v))
    except ListenError:
        return False


def _command(v: Any) -> bool:
    from ..live.alerting import HookError, split_command

    try:
        return isinstance(v, str) and bool(split_command(v))
    except HookError:
        return False


def _duration(v: Any) -> bool:
    import argparse

    from .serve import duration_seconds

    try:
        return isinstance(v, str) and duration_seconds(v) > 0
    except argparse.ArgumentTypeError:
        return False


def _strings(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _existing_paths(v: Any) -> bool:
    """Format directories (or files) that are there: a missing one is the file's error, said where the file
    is read (config show too), not a failure of every verb that reads logs."""
    return _strings(v) and all(os.path.exists(os.path.expanduser(x)) for x in v)


def _bool(v: Any) -> bool:
    return isinstance(v, bool)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_NUMBER


@dataclass(frozen=True)
class Setting:
    key: str  # as the file spells it ("alerts.bell")
    dest: str  # the argparse destination it sets
    check: Callable[[Any], bool]
    kind: str  # what the check wants, for the error line
    convert: Callable[[Any], Any] = lambda v: v
    help: str = ""


def _expand(v: Any) -> Any:
    return os.path.expanduser(v) if isinstance(v, str) else [os.path.expanduser(x) for x in v]


SETTINGS: tuple[Setting, ...] = (
    Setting("gpu", "gpu", _gpu, "a GPU name (tuimon summary --help lists them)", lambda v: v.strip().lower(),
            help="GPU model for MFU"),
    Setting("gpu_peak", "gpu_peak", _number, "a positive number of TFLOPs (at most 1e7)", help="peak TFLOPs per GPU"),
    Setting("theme", "theme", _theme, "dark, light or high-contrast", help="colour theme"),
    Setting("poll", "poll", _number, "a positive number of seconds (at most 1e7)", help="poll interval"),
    Setting("include", "include", _strings, "a list of globs", help="file name patterns to read"),
    Setting("exclude", "exclude", _strings, "a list of globs", help="file name patterns to skip"),
    Setting("follow_links", "follow_links", _bool, "true or false",
            help="enter directory symlinks that lead out of the directories named"),
    Setting("formats", "formats", _existing_paths, "a list of existing directories or files", _expand,
            help="user format directories"),
    Setting("ssh_config", "ssh_config", _str, "a file name", _expand, help="OpenSSH client config"),
    Setting("cache", "no_cache", _bool, "true or false", lambda v: not v, help="use the parse cache"),
    Setting("cache_dir", "cache_dir", _str, "a directory", _expand, help="where the parse cache lives"),
    Setting("startup_timeout", "startup_timeout", _number, "a positive number of seconds (at most 1e7)",
            help="no step this long after the start: STUCK IN STARTUP"),
    Setting("alerts.bell", "no_bell", _bool, "true or false", lambda v: not v, help="ring the bell on alerts"),
    Setting("alerts.notify", "notify", _bool, "true or false", help="desktop notifications"),
    Setting("alerts.on_alert", "on_alert", _command, "a command (words as a shell splits them)",
            help="command run with each alert"),
    Setting("serve.listen", "listen", _listen, "HOST:PORT with the host named, such as 127.0.0.1:9464",
            help="where serve listens"),
    Setting("serve.retain", "retain", _duration, "a duration such as 24h", help="how long ended jobs stay in metrics"),
    Setting("serve.max_jobs", "max_jobs", _int, "a positive whole number (at most 1e7)", help="most jobs in metrics"),
)
BY_KEY = {s.key: s for s in SETTINGS}
#: a ``[keymap]`` value: Textual key names (``f``, ``ctrl+f``, ``question_mark``, ``F``), comma-separated
KEYS = re.compile(r"[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*(\s*,\s*[A-Za-z0-9_]+(\+[A-Za-z0-9_]+)*)*")


@dataclass
class Config:
    path: Optional[str] = None  # the file read, None when there is none
    values: dict[str, Any] = field(default_factory=dict)  # dest -> value
    origins: dict[str, str] = field(default_factory=dict)  # dest -> "FILE:LINE"
    rules: list[str] = field(default_factory=list)  # --alert entries the file gives
    keymap: dict[str, str] = field(default_factory=dict)  # [keymap]: binding id -> keys
    keymap_origins: dict[str, str] = field(default_factory=dict)  # binding id -> "FILE:LINE"


def load(path: Optional[str] = None, *, explicit: bool = False) -> Config:
    """The config at ``path`` (default: :func:`default_path`; a missing default file is
    no config, a missing ``--config FILE`` an error).  Raises :class:`ConfigError`."""
    path = os.path.expanduser(path) if path else default_path()
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        if explicit:
            raise ConfigError(f"{path}: no such config file") from None
        return Config()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    text = raw.decode("utf-8", "replace")
    import tomllib  # (here: without a config file, a start never needs it)

    try:
        data = tomllib.loads(text)
        flat = _flatten(data)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: bad TOML: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a tuimon config") from None
    config = Config(path=path)
    for key, value in flat:
        where = f"{path}:{_line_of(text, key)}"
        if key.startswith("alerts.") and key.split(".")[1] in RULE_DEFAULTS:
            config.rules.extend(_rule(key.split(".", 2)[1:], value, where))
            continue
        if key.startswith("keymap."):  # which names exist is the dashboard's to say (checked when it starts)
            name = key.split(".", 1)[1]
            if not isinstance(value, str) or not KEYS.fullmatch(value.strip()):
                raise ConfigError(f"{where}: keymap.{name} = {_short(value)}: expected keys such as \"f\", "
                                  f"\"ctrl+f\" or \"f,ctrl+f\"")
            config.keymap[name] = value.strip()
            config.keymap_origins[name] = where
            continue
        setting = BY_KEY.get(key)
        if setting is None:
            known = ", ".join(s.key for s in SETTINGS)
            raise ConfigError(f"{where}: unknown key {key!r} (known: {known}, alerts.<rule> and keymap.<key name>)")
        if not setting.check(value):
            raise ConfigError(f"{where}: {key} = {_short(value)}: expected {setting.kind}")
        config.values[setting.dest] = setting.convert(value)
        config.origins[setting.dest] = where
    return config


def _short(value: Any) -> str:
    """A value for an error line: one line, not a screenful."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _flatten(data: dict, prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and not (prefix == "alerts." and key in RULE_DEFAULTS):
            out.extend(_flatten(value, name + "."))
        else:
            out.append((name, value))
    return out


def _rule(parts: list[str], value: Any, where: str) -> list[str]:
    """``alerts.<rule>`` as --alert entries: "off"/"on", or a table of its settings."""
    kind = parts[0]
    if len(parts) > 1:  # alerts.loss-spike.k = 8 written dotted
        value = {parts[1]: value}
    if isinstance(value, str):
        if value not in ("off", "on"):
            raise ConfigError(f"{where}: alerts.{kind} = {value!r}: expected \"off\", \"on\" or a table of settings")
        return [f"{kind}={value}"]
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: alerts.{kind}: expected \"off\", \"on\" or a table of settings")
    out = []
    for param, number in value.items():
        if param not in RULE_DEFAULTS[kind]:
            known = ", ".join(RULE_DEFAULTS[kind]) or "none"
            raise ConfigError(f"{where}: alerts.{kind}.{param}: unknown setting (settings: {known})")
        if not _number(number):
            raise ConfigError(f"{where}: alerts.{kind}.{param} = {number!r}: expected a positive number "
                              f"(at most 1e7)")
        out.append(f"{kind}.{param}={number}")
    return out


def _line_of(text: str, key: str) -> int:
    """The line a key is set on: its table's header, then the key; 1 when not found."""
    *tables, name = key.split(".")
    start = 0
    if tables:
        header = re.compile(r"^\s*\[\s*" + r"\s*\.\s*".join(re.escape(t) for t in tables) + r"\s*\]", re.M)
        m = header.search(text)
        if m:
            start = m.end()
    m = re.compile(r"^\s*\"?" + re.escape(name) + r"\"?\s*=", re.M).search(text, start)
    if m is None and tables:  # written dotted: alerts.bell = false
        m = re.compile(r"^\s*" + re.escape(key) + r"\s*=", re.M).search(text)
    return text.count("\n", 0, m.start()) + 1 if m else 1


def argv_config(argv: Sequence[str]) -> tuple[Optional[str], list[str]]:
    """``--config FILE`` (anywhere on the line) taken out of ``argv``."""
    rest: list[str] = []
    path = None
    it = iter(range(len(argv)))
    skip = False
    for i in it:
        if skip:
            skip = False
            continue
        word = argv[i]
        if word == "--config" and i + 1 < len(argv):
            path, skip = argv[i + 1], True
        elif word.startswith("--config="):
            path = word.split("=", 1)[1]
        else:
            rest.append(word)
    return path, rest


def apply(parser: Any, config: Config) -> None:
    """Make the file's values the defaults of every verb that has the option (flags given
    on the command line still win: argparse only falls back on defaults)."""
    subparsers = [a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction"]
    for action in subparsers:
        for sub in action.choices.values():
            dests = {a.dest for a in sub._actions}
            values = {d: v for d, v in config.values.items() if d in dests}
            if "alert" in dests and config.rules:
                values["alert"] = list(config.rules)
            if values:
                sub.set_defaults(**values)


def show(parser: Any, config: Config) -> str:
    """Every setting: its effective value and where it came from."""
    defaults: dict[str, Any] = {}
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for sub in action.choices.values():
                for a in sub._actions:
                    defaults.setdefault(a.dest, a.default)
    rows: list[tuple[str, str, str, str]] = []  # key, "=" or ":" (a rule), value, where it came from
    for s in SETTINGS:
        if s.dest in config.values:
            value, origin = config.values[s.dest], config.origins[s.dest]
            if s.dest in ("no_cache", "no_bell"):
                value = not value
        else:
            value, origin = defaults.get(s.dest), "default"
            if s.dest in ("no_cache", "no_bell"):
                value = not value if isinstance(value, bool) else True
        rows.append((s.key, "=", _toml(value), origin))
    for kind, params in RULE_DEFAULTS.items():
        given = [r for r in config.rules if r.split("=")[0].split(".")[0] == kind]
        origin = (config.path or "") if given else "default"
        text = ", ".join(given) if given else ", ".join(f"{k}={v:g}" for k, v in params.items()) or "on"
        rows.append((f"alerts.{kind}", ":", text, origin))
    key_w = max(len(r[0]) for r in rows)  # aligned on the longest name (alerts.grad-norm-spike)
    value_w = max(len(r[2]) for r in rows)
    lines = [f"# config file: {config.path or default_path() + ' (none)'}"]
    lines += [f"{key:{key_w}} {sep} {value:{value_w}}  # {origin}" for key, sep, value, origin in rows]
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    if value is None:
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return f"{value:g}" if isinstance(value, float) else str(value)
