"""Command line: ``tuimon VERB ...``.  The only module that may import the UI."""
from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Optional, Sequence

# Only what building the options needs is imported here: numpy, the parsers, the store and
# the figures load with the verb that uses them (``tuimon --help`` or a usage error took
# 0.29-0.47 s of CPU, half of it numpy's import; it takes 0.13-0.18 s)
from .. import __version__
from ..engine import native
from ..engine.alloc import collector_for_batch, keep_freed_memory
from ..exports.listen import ListenError
from ..figures.columns import DEFAULT as COLUMN_DEFAULT
from ..figures.columns import NAMES as COLUMN_NAMES
from ..figures.columns import ColumnError, parse_columns, render_summary
from ..figures.columns import render as render_columns
from ..figures.gpus import GPU_PEAK_TFLOPS
from ..figures.thresholds import DEFAULTS as _ALERT_DEFAULTS
from ..figures.thresholds import STARTUP_TIMEOUT_S
from ..sources.discover import DEFAULT_INCLUDE, PathError, discover
from ..sources.files import last_line
from ..sources.specs import split_paths
from ..text import sanitize
from .alert_options import AlertOptionError, add_alert_options
from .diagnostics import LOG
from .serve import add_retention_options, add_serve_options
from .settings import Settings
from .usage import EXIT_USAGE
from .usage import sub_help as _sub_help

if TYPE_CHECKING:
    import threading

    from ..engine.ingest import ParseStats
    from ..store.job_store import JobStore

#: the verbs that read logs (and so take --formats)
READS_LOGS = ("summary", "events", "alerts", "watch", "serve", "ssh")
LAG_SAID_EVERY_S = 5.0  # events --follow --debug: how far behind the reading is, this often
SUMMARY_LOG = logging.getLogger("tuimon.summary")  # what --debug tells of a summary (tuimon.commands.diagnostics)
STALL_DEFAULTS = _ALERT_DEFAULTS["stalled"]  # when a run read once counts as ended (quiet_verdict)


def _err(message: str) -> None:
    print(f"tuimon: error: {sanitize(message)}", file=sys.stderr)


class OneLineParser(argparse.ArgumentParser):
    """Misuse is one line and exit status 2: the error and where help is, not the whole
    usage (which scrolls the error off a small terminal)."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"{self.prog}: error: {sanitize(message)} (see {self.prog} -h)\n")
        sys.exit(EXIT_USAGE)


def _warn(message: str) -> None:
    LOG.info("warning: %s", message)  # in the log too (--debug, --log-file): the user sees it below
    print(f"tuimon: warning: {sanitize(message)}", file=sys.stderr, flush=True)


def _positive_float(text: str) -> float:
    """A finite number above 0 (``nan`` and ``inf`` are not, and would spin or never poll)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    if value > 1e7:  # a sleep or a deadline that long overflows the clock; it is a typo anyway
        raise argparse.ArgumentTypeError(f"{text!r} is too large (at most 1e7)")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _add_paths(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="log files or directories (searched recursively), local or [user@]host[:port]:path "
                        "or ssh://user@host:port/path")
    p.add_argument("--include", action="append", metavar="GLOB",
                   help=f"file name pattern to read in directories (default: {' '.join(DEFAULT_INCLUDE)})")
    p.add_argument("--follow-links", action="store_true",
                   help="enter directory symlinks that lead out of the directories named (not entered by default)")
    p.add_argument("--ssh-config", metavar="FILE", help="OpenSSH client config to use (like ssh -F)")
    p.add_argument("--formats", action="append", metavar="DIR", default=[],
                   help="also read log formats from the TOML files in DIR (or the file DIR); repeatable")
    p.add_argument("--no-cache", action="store_true", help="parse every file from its start; leave the parse cache alone")


def _add_app_options(p: argparse.ArgumentParser) -> None:
    from tuimon.themes import THEME_ALIASES

    p.add_argument("--theme", default="dark", choices=sorted(THEME_ALIASES),
                   help="colour theme (default dark)")
    _add_rate_options(p)


def _add_rate_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--gpu", choices=sorted(GPU_PEAK_TFLOPS),
                   help="GPU model, for MFU (default: the GPU the logs name; its peak at the run's precision)")
    p.add_argument("--gpu-peak", type=_positive_float, metavar="TFLOPS",
                   help="peak TFLOPs per GPU, for MFU (overrides --gpu and the logs)")
    p.add_argument("--jobs", "-j", type=_positive_int, metavar="N",
                   help="processes to parse with (default: one per core)")
    p.add_argument("--startup-timeout", type=_positive_float, metavar="SECONDS", default=STARTUP_TIMEOUT_S,
                   help="a job that started but logged no step this long after is STUCK IN STARTUP "
                        f"(default {STARTUP_TIMEOUT_S:.0f})")


def _complete_columns(prefix: str, **_kw: Any) -> list[str]:
    """``--columns job,gp<TAB>``: the names, after what is typed already."""
    done, _sep, last = prefix.rpartition(",")
    lead = done + "," if done else ""
    return [lead + name for name in COLUMN_NAMES if name.startswith(last)]


def _add_metrics_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--metrics", metavar="HOST:PORT",
                   help="also serve the figures at http://HOST:PORT/metrics for Prometheus (e.g. 127.0.0.1:9464)")
    add_retention_options(p)


class _Version(argparse.Action):
    """``--version``: the install's metadata is read only when asked (every other run skips it), and the
    line is printed whole (argparse's own action wraps it at the terminal's width)."""

    def __call__(self, parser, namespace, values, option_string=None):
        sys.stdout.write(sanitize(f"tuimon {__version__}, engine: {native.name()}, install: {native.install()}") + "\n")
        parser.exit(0)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="tuimon", description="Live monitor for distributed training logs.")
    parser.add_argument("--version", action=_Version, nargs=0, help="name the version, the engine and the install, and exit")
    parser.add_argument("--debug", action="store_true",
                        help="log what tuimon does (files, cache, rotations, connections, alerts) to stderr, or to "
                             "--log-file; under the app to $XDG_CACHE_HOME/tuimon/tuimon.log")
    parser.add_argument("--log-file", metavar="FILE", help="write tuimon's log to FILE (warnings, and with --debug all)")
    parser.add_argument("--config", metavar="FILE",
                        help="settings file (default $XDG_CONFIG_HOME/tuimon/config.toml); flags override it")
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")

    p = verbs.add_parser("summary", help="one row per job: iteration time, TFLOPs, startup, failures")
    _add_paths(p)
    p.add_argument("--format", choices=("csv", "json", "markdown", "table"), default="table")
    columns = p.add_argument("--columns", metavar="A,B,C",
                             help="only these columns, in this order (seed 001's table: "
                                  f"{','.join(COLUMN_DEFAULT)}); names: {', '.join(COLUMN_NAMES)}")
    columns.completer = _complete_columns  # type: ignore[attr-defined]
    _add_rate_options(p)

    p = verbs.add_parser("events", help="every parsed event as one JSON object per line")
    _add_paths(p)
    p.add_argument("--follow", "-f", action="store_true", help="keep following the files (until Ctrl-C)")
    p.add_argument("--poll", type=_positive_float, metavar="SECONDS",
                   help="poll every SECONDS instead of using inotify")
    p.add_argument("--state", metavar="FILE",
                   help="save read positions here and resume from them (one follower per file)")
    p.add_argument("--exclude", action="append", metavar="GLOB", help="file name pattern to skip")
    p.add_argument("--jobs", "-j", type=_positive_int, metavar="N",
                   help="processes to parse with: 1 reads on one core; more (default: one per core) parses a big "
                        "file on them, beside the writing of its events")
    add_alert_options(p, hooks=False)
    p.add_argument("--startup-timeout", type=_positive_float, metavar="SECONDS", default=STARTUP_TIMEOUT_S,
                   help=f"a job with no step this long after it started alerts startup-hang (default "
                        f"{STARTUP_TIMEOUT_S:.0f})")

    p = verbs.add_parser("alerts", help="jobs that failed, hang, stall, diverge or slow down (for scripts and cron)")
    _add_paths(p)
    p.add_argument("--format", choices=("table", "json"), default="table")
    p.add_argument("--follow", "-f", action="store_true",
                   help="keep following the files (local or remote) and print new alerts as they come (until Ctrl-C)")
    p.add_argument("--poll", type=_positive_float, metavar="SECONDS",
                   help="poll every SECONDS instead of using inotify")
    p.add_argument("--state", metavar="FILE",
                   help="with --follow: save read positions (and the alerts delivered) here and resume from them")
    p.add_argument("--exclude", action="append", metavar="GLOB", help="file name pattern to skip")
    _add_rate_options(p)
    add_alert_options(p)

    p = verbs.add_parser("tflops", help="TFLOPs per GPU from model size and iteration time (seed formula)")
    p.add_argument("--params", required=True, help="model size, e.g. 52B or 350M")
    p.add_argument("--seq", type=int, required=True, help="sequence length")
    p.add_argument("--gbs", type=float, required=True, help="global batch size")
    p.add_argument("--iter-time", type=float, required=True, metavar="SECONDS", help="seconds per iteration")
    p.add_argument("--gpus", type=int, required=True, help="total number of GPUs")
    p.add_argument("--no-activation-checkpointing", action="store_true", help="use factor 3 instead of 4")
    p.add_argument("--gpu-peak", type=_positive_float, metavar="TFLOPS", help="also print MFU against this peak")

    p = verbs.add_parser("watch", help="live dashboard of every job under the paths")
    _add_paths(p)
    _add_app_options(p)
    add_alert_options(p, app=True)
    _add_metrics_option(p)
    p.add_argument("--poll", type=_positive_float, metavar="SECONDS",
                   help="poll every SECONDS instead of using inotify")
    p = verbs.add_parser("ssh", help="live dashboard of logs on remote hosts ([user@]host[:port]:path)")
    _add_paths(p)
    _add_app_options(p)
    add_alert_options(p, app=True)
    _add_metrics_option(p)
    p.add_argument("--poll", type=_positive_float, metavar="SECONDS", help="seconds between remote polls (default 1)")
    p = verbs.add_parser("serve", help="serve every job's figures at /metrics for Prometheus (headless)")
    _add_paths(p)
    add_serve_options(p)
    _add_rate_options(p)
    add_alert_options(p)
    p.add_argument("--poll", type=_positive_float, metavar="SECONDS",
                   help="poll every SECONDS instead of using inotify")
    p = verbs.add_parser("formats", help="list the log formats, or check user format files")
    formats = p.add_subparsers(dest="formats_verb", metavar="ACTION")
    q = formats.add_parser("list", help="built-in and user formats, and where each came from")
    q.add_argument("--formats", action="append", metavar="DIR", default=[],
                   help="also read log formats from the TOML files in DIR (or the file DIR); repeatable")
    q = formats.add_parser("check", help="compile format files and check their samples")
    q.add_argument("files", nargs="+", metavar="FILE")
    p = verbs.add_parser("completion", help="print a shell completion script: eval \"$(tuimon completion bash)\"")
    p.add_argument("shell", choices=("bash", "zsh", "fish"))
    p = verbs.add_parser("config", help="show the settings in effect and where each came from")
    config_verbs = p.add_subparsers(dest="config_verb", metavar="ACTION")
    config_verbs.add_parser("show", help="every setting: its value and its origin (default or FILE:LINE)")
    p = verbs.add_parser("cache", help="show or clear the parse cache")
    cache = p.add_subparsers(dest="cache_verb", metavar="ACTION")
    cache.add_parser("info", help="where the cache is, how many files it holds and its size")
    cache.add_parser("clear", help="forget every saved parse")
    p = verbs.add_parser("demo", help="simulate five training jobs and show them live in the dashboard")
    _add_app_options(p)
    p.add_argument("--seconds", type=_positive_float, help="quit by itself after SECONDS")
    p.add_argument("--headless", action="store_true", help="print refreshing summary tables instead of the app")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    parsed = _parse(argv)
    if isinstance(parsed, int):
        return parsed
    return run(*parsed)


def _parse(argv: Optional[Sequence[str]]):
    """(parser, settings, config) with the config file's defaults in place; or an exit status
    when the config file cannot be used (after its one line)."""
    from .config import ConfigError, apply, argv_config, load

    parser = build_parser()
    if "_ARGCOMPLETE" in os.environ:  # the shell asks for completions: answer and exit
        import argcomplete
        argcomplete.autocomplete(parser)
    from .diagnostics import configure, take_options

    debug, log_file, words = take_options(list(sys.argv[1:] if argv is None else argv))
    path, rest = argv_config(words)
    try:
        config = load(path, explicit=path is not None)
    except ConfigError as exc:
        _err(str(exc))
        return EXIT_USAGE
    apply(parser, config)
    try:
        settings = Settings.from_args(parser.parse_args(rest))
        # the cache's directory has no flag: the environment, else the file
        settings = settings.with_(cache_dir=os.environ.get("TUIMON_CACHE_DIR") or config.values.get("cache_dir"),
                                  keymap=tuple(config.keymap.items()))
    except TypeError as exc:  # a flag added without its setting: the developer's bug, said plainly
        _err(f"internal error: {exc}")
        return EXIT_USAGE
    try:
        written = configure(debug, log_file, full_screen=settings.verb in ("watch", "ssh", "demo")
                            and not settings.headless)
    except OSError as exc:
        _err(f"--log-file: cannot write {log_file}: {exc.strerror or exc}")
        return EXIT_USAGE
    if written is not None:
        LOG.info("tuimon %s (engine: %s): %s, logging to %s", __version__, native.name(),
                 " ".join(sys.argv[1:] if argv is None else argv), written)
    if config.keymap and settings.verb in ("watch", "ssh", "demo") and not settings.headless:
        from ..ui.app import key_screens
        from ..ui.keys import binding_ids, clash, unknown_ids
        screens = key_screens()
        unknown = unknown_ids(screens, config.keymap)
        if unknown:  # a key name the dashboard has none of: one line, as any bad config value
            _err(f"{config.keymap_origins[unknown[0]]}: keymap.{unknown[0]}: no such key name "
                 f"(names, as ? lists them: {', '.join(binding_ids(screens))})")
            return EXIT_USAGE
        ambiguous = clash(screens, config.keymap)
        if ambiguous:
            _err(f"{config.path}: [keymap]: {ambiguous}")
            return EXIT_USAGE
    trouble = native.problem() if settings.verb in READS_LOGS or settings.verb == "demo" else None
    if trouble is not None:  # said once, here: a missing core is a note, a bad TUIMON_ENGINE a usage error
        message, fatal = trouble
        (_err if fatal else _warn)(message)
        if fatal:
            return EXIT_USAGE
    return parser, settings, config


def run(parser: argparse.ArgumentParser, settings: Settings, config=None) -> int:
    try:
        if settings.verb == "completion":
            import argcomplete
            sys.stdout.write(argcomplete.shellcode(["tuimon"], shell=settings.shell or "bash"))
            return 0
        if settings.verb == "config":
            from .config import Config, show
            sys.stdout.write(show(parser, config or Config()))
            return 0
        if settings.verb == "cache":
            return cmd_cache(settings, parser)
        if settings.verb == "formats":
            from .formats import cmd_formats
            return cmd_formats(settings, parser)
        if settings.verb in READS_LOGS:
            _use_formats(settings.formats)
        if settings.verb == "summary":
            return cmd_summary(settings)
        if settings.verb == "events":
            return cmd_events(settings)
        if settings.verb == "alerts":
            return _cmd_alerts(settings)
        if settings.verb == "tflops":
            return cmd_tflops(settings)
        if settings.verb == "demo":
            from .demo import run_demo
            return run_demo(settings, run_app)  # the app is run as the CLI runs it: no import back
        if settings.verb == "watch":
            return cmd_watch(settings)
        if settings.verb == "serve":
            return cmd_serve(settings)
        if settings.verb == "ssh":
            local, remote = split_paths(settings.paths)
            if local:
                raise PathError(f"not a remote spec: {local[0]} (use [user@]host[:port]:path, or tuimon watch)")
            return cmd_watch(settings)
        parser.print_help()
        return EXIT_USAGE
    except (PathError, AlertOptionError, ListenError, ColumnError) as exc:
        _err(str(exc))
        return EXIT_USAGE
    except _Reported:
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # the reader (e.g. `| head`) went away: not an error of ours
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 0


class _Reported(Exception):
    """A failure whose one line the user has been given already."""


BATCH_VERBS = ("summary", "events", "alerts", "tflops", "formats", "cache", "config", "completion")


def cmd_cache(settings: Settings, parser) -> int:
    from ..engine.cache import ParseCache

    cache = ParseCache(settings.cache_db, on_warning=_warn)
    if settings.cache_verb == "info":
        info = cache.info()
        print(f"parse cache: {sanitize(info['path'])}")
        print(f"  files: {info['files']:,} ({info['log_bytes'] / 1e6:,.1f} MB of logs)")
        print(f"  saved events, stores and states: {info['stored_bytes'] / 1e6:,.1f} MB; "
              f"database {info['database_bytes'] / 1e6:,.1f} MB (at most {info['limit_bytes'] / 1e6:,.0f} MB: "
              "TUIMON_CACHE_MAX_MB; the least recently saved files go first)")
        if info["moved_aside_bytes"]:
            print(f"  a database that could not be read, moved aside: {info['moved_aside_bytes'] / 1e6:,.1f} MB "
                  "(counted in the limit; removed by `tuimon cache clear`)")
        return 0
    if settings.cache_verb == "clear":
        print(f"parse cache cleared: {cache.clear():,} files forgotten ({sanitize(str(cache.path))})")
        return 0
    return _sub_help(parser, "cache")




def _use_formats(extra: list[str]) -> None:
    """The user's formats for this run: one warning per file that cannot be used."""
    from ..engine import catalog

    for raw in extra:
        if not os.path.exists(os.path.expanduser(raw)):
            raise PathError(f"--formats: no such file or directory: {raw}")
    cat = catalog.load([Path(os.path.expanduser(raw)) for raw in extra])
    for message in cat.errors:
        _warn(f"format left out: {message}")
    catalog.use(cat)


def entry(argv: Optional[Sequence[str]] = None) -> None:
    """The ``tuimon`` command: :func:`main`, then exit.  A batch command (not
    following) leaves without tearing the interpreter down object by object: after
    a big summary that took 40-55 ms of a 3 s run, to free what the OS frees at
    once.  Its output is flushed first, its workers are joined, its files closed."""
    parsed = _parse(argv)
    if isinstance(parsed, int):
        sys.exit(parsed)
    parser, settings, config = parsed
    code = run(parser, settings, config)
    if settings.verb in BATCH_VERBS and not settings.follow:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # the reader went away, or the stream was closed
                pass
        os._exit(code)
    sys.exit(code)


def _include(settings: Settings) -> tuple[str, ...]:
    return tuple(settings.include) if settings.include else DEFAULT_INCLUDE


def _files(settings: Settings, local: Optional[list[str]] = None) -> list[Path]:
    include = _include(settings)
    paths = settings.paths if local is None else local
    if not paths:
        return []
    files = discover(paths, include=include, on_skip=_warn, follow_links=settings.follow_links)
    if not files:
        raise PathError("no log files found under " + " ".join(paths))
    return files


def _read_remote(settings: Settings, specs, sink, seen: Optional[dict] = None, stats: Optional[ParseStats] = None,
                 counted: Optional[list] = None) -> bool:
    """Read every remote spec once into ``sink``; False (after one line each) on errors.
    ``seen`` gets each remote file's (mtime, last line), as local files give theirs;
    ``stats`` and ``counted`` (one entry a file) what was read, for the report."""
    import asyncio

    from ..follow.remote import last_seen, parsed, read_remote

    errors: list[str] = []
    hosts: list = []
    asyncio.run(read_remote(specs, sink, ssh_config=settings.ssh_config, on_error=errors.append,
                            on_warning=_warn, include=_include(settings), cache=settings.cache_path, hosts_out=hosts))
    if seen is not None:
        seen.update(last_seen(hosts))
    files, read = parsed(hosts)
    if stats is not None:
        stats.add(read)
    if counted is not None:
        counted.extend([None] * files)
    for message in errors:
        _err(message)
    return not errors


def _report(stats: ParseStats, files: int, seconds: float) -> None:
    parts = [f"{files} file{'s' if files != 1 else ''}", f"{stats.lines:,} lines",
             f"{stats.bytes / 1e6:.1f} MB", f"{seconds:.2f} s"]
    line = "tuimon: parsed " + ", ".join(parts) + f"; skipped {stats.skipped:,} lines"
    if stats.too_long:
        line += f" ({stats.too_long:,} too long)"
    if stats.invalid_utf8:
        line += f"; {stats.invalid_utf8:,} lines had invalid UTF-8 (replaced)"
    if stats.failed:
        line += f"; {stats.failed:,} lines failed to parse (a parser bug: please report it with the lines)"
    if stats.cached:
        line += f"; {stats.cached / 1e6:.1f} MB read from the parse cache"
    print(line, file=sys.stderr)
    for name, why in sorted(stats.disabled.items()):
        _warn(f"format {name!r} turned off: {why}; the other formats went on")


def _cache(settings: Settings):
    """The parse cache for this command, or None with --no-cache."""
    if settings.cache_path is None:
        return None
    from ..engine import catalog
    from ..engine.cache import ParseCache

    return ParseCache(settings.cache_path, key=catalog.current().key, on_warning=_warn)


def _parse_into(store: JobStore, files: list[Path], jobs: Optional[int] = None, cache=None,
                per_file: Optional[dict[Path, ParseStats]] = None) -> ParseStats:
    from ..engine.pool import parse_files_into
    from ..ui.progress import ReadProgress

    for path in files:
        store.add_file(str(path))
    progress = ReadProgress()
    try:
        return parse_files_into(store, files, jobs=jobs, cache=cache, progress=progress, per_file=per_file,
                                on_error=lambda path, exc: _err(f"cannot read {path}: {exc.strerror or exc}"))
    finally:
        progress.done()



def _cmd_alerts(settings: Settings) -> int:
    from .alerts import cmd_alerts

    local, remote = split_paths(settings.paths)
    if settings.state and not settings.follow:
        raise PathError("--state goes with --follow")
    if settings.follow:
        return cmd_follow(settings, show_events=False, alerts_format=settings.format)

    def parse_into(store: JobStore, files: list[Path]) -> dict[str, float]:
        """Parse into ``store``; the remote files' mtimes."""
        cache = _cache(settings)
        try:
            _parse_into(store, files, settings.jobs, cache)
        finally:
            if cache is not None:
                cache.close()
        seen: dict[str, tuple[Optional[float], Optional[str]]] = {}
        if remote and not _read_remote(settings, remote, store.add, seen):
            raise _Reported()
        return {label: mtime for label, (mtime, _) in seen.items() if mtime is not None}

    return cmd_alerts(settings, parse_into=parse_into, files_of=lambda a: _files(a, local), warn=_warn)


def cmd_summary(settings: Settings) -> int:
    from ..figures.alerts import quiet_verdict_of
    from ..figures.ledger import attach as attach_ledgers
    from ..figures.summary import on_clock, summarize_timeless
    from ..store.job_store import JobStore

    local, remote = split_paths(settings.paths)
    files = _files(settings, local)
    SUMMARY_LOG.info("%d file(s) under %s; %s", len(files), ", ".join(local) or "-",
                     f"{settings.jobs} reading process(es)" if settings.jobs else "reading processes: one a core")
    for path in files:
        SUMMARY_LOG.debug("file %s", path)
    keep_freed_memory()
    _settle()
    t0 = time.perf_counter()
    store = JobStore()
    for path in files:
        store.add_file(str(path))
    cache = _cache(settings)
    try:
        made = _summaries(settings, store, files, cache, reuse_kept=not remote)
        if made is None:  # a group's parse touched another group's jobs: every file read, nothing kept
            store = JobStore()
            made = _summaries(settings, store, files, cache, reuse_kept=False)
            assert made is not None
    finally:
        if cache is not None:
            cache.close()
    timeless, stats = made
    SUMMARY_LOG.info("%d job(s) from %d file(s) in %.2f s: %d of %d bytes from the parse cache (%s)", len(timeless),
                     len(files), time.perf_counter() - t0, stats.cached, stats.bytes,
                     "off" if cache is None else f"{cache.path}: {cache.hits} hit(s), {cache.misses} miss(es)")
    seen: dict[str, tuple[Optional[float], Optional[str]]] = {}  # remote label -> (mtime, last line)
    remote_files: list = []
    if remote:
        if not _read_remote(settings, remote, store.add, seen, stats, remote_files):
            return EXIT_USAGE
        # summarised again once all are read: a remote file may join a local job
        timeless = [summarize_timeless(job, gpu_peak=settings.gpu_peak, gpu=settings.gpu)
                    for job in store.jobs.values()]

    def mtime_of(f: str) -> Optional[float]:
        return seen[f][0] if f in seen else _mtime(f)

    now = time.time()
    rows = []
    for row, facts in timeless:
        last_write = max((m for m in map(mtime_of, row.files) if m is not None), default=None)
        row = on_clock(row, facts, now, last_write, settings.startup_timeout)
        # read once, never seen growing: a run quiet past its limit ended, or stalled by its own stamps
        verdict = quiet_verdict_of(row, facts.quiet_in_log_s, STALL_DEFAULTS, now, last_write, grew=False,
                                   every=facts.logged_every)
        if verdict is not None:
            row = row.with_(status=verdict)
        if row.status == "stuck-in-startup" and row.failure:
            latest = max(row.files, key=lambda f: mtime_of(f) or 0.0)
            row = row.with_(failure=dataclasses.replace(
                row.failure, file=latest, last_line=seen[latest][1] if latest in seen else last_line(latest)))
        rows.append(row)
    rows = attach_ledgers(rows)
    order = {str(f): k for k, f in enumerate(files)}
    rows.sort(key=lambda r: (r.job, order.get(r.files[0], len(order)) if r.files else len(order)))
    if settings.columns:
        sys.stdout.write(render_columns(rows, parse_columns(settings.columns), settings.format))
    else:
        sys.stdout.write(render_summary(rows, settings.format))
    sys.stdout.flush()
    _report(stats, len(files) + len(remote_files), time.perf_counter() - t0)
    return 0


def _settle() -> None:
    """A batch verb's start-up done (the engine imported, the formats' rules made): out of the cyclic
    collector's way from here (:func:`~tuimon.engine.alloc.collector_for_batch`)."""
    from ..engine import catalog, ingest  # noqa: F401 (imported before the freeze)

    catalog.current()
    collector_for_batch()


def _summaries(settings: Settings, store: JobStore, files: list[Path], cache,
               reuse_kept: bool) -> Optional[tuple[list, ParseStats]]:
    """The timeless summaries of ``files``' jobs (see :mod:`.reuse`): kept ones where their
    files did not change, the others made from the files (and kept).  None when a group's
    files made or joined a job of another group (then no group's summaries may be reused)."""
    from ..engine import catalog
    from ..engine.ingest import ParseStats
    from ..figures.summary import summarize_timeless
    from . import reuse

    names = reuse.file_groups(store, files) if reuse_kept and cache is not None and cache.usable() else None
    ctx = reuse.context(catalog.current().key, (settings.gpu_peak, settings.gpu))
    groups = [reuse.group(names_, ctx) for names_ in names] if names is not None else []
    for g in groups:
        reuse.load(cache, g)
    kept = {f for g in groups if g.kept is not None for f in g.files}
    per_file: dict[Path, ParseStats] = {}
    stats = _parse_into(store, [f for f in files if str(f) not in kept], settings.jobs, cache, per_file)
    if names is None:
        return [summarize_timeless(job, gpu_peak=settings.gpu_peak, gpu=settings.gpu)
                for job in store.jobs.values()], stats
    # every job is one group's own (checked for all before any is kept): else nothing is kept
    placeholders = {id(store.job_for(f)[0]) for g in groups if g.kept is not None for f in g.files}
    owner: dict[int, int] = {}  # job -> the group whose files made it
    jobs_of: dict[int, list] = {}
    for k, g in enumerate(groups):
        if g.kept is None:
            jobs_of[k] = list({id(j): j for f in g.files for j in store.runs_of(f)}.values())
            for job in jobs_of[k]:
                if owner.setdefault(id(job), k) != k or id(job) in placeholders:
                    return None
    if len(owner) + len(placeholders) != len(store.jobs):
        return None  # a job no group's files made
    timeless: list = []
    for k, g in enumerate(groups):
        if g.kept is not None:
            timeless += g.kept
            assert g.stats is not None
            stats.add(g.stats)
            continue
        made = [summarize_timeless(job, gpu_peak=settings.gpu_peak, gpu=settings.gpu) for job in jobs_of[k]]
        timeless += made
        group_stats = ParseStats()
        for f in g.files:
            group_stats.add(per_file.get(Path(f), ParseStats()))
        reuse.save(cache, g, made, group_stats)
    return timeless, stats


def _mtime(path: str) -> Optional[float]:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return None


def cmd_events(settings: Settings) -> int:
    from ..engine.ingest import ParseStats, parse_file, start_sizes
    from ..engine.procs import cores
    from ..store.job_store import JobStore
    from .alerts import feed_from, last_writes

    if settings.follow:
        return cmd_follow(settings)
    local, remote = split_paths(settings.paths)
    files = _files(settings, local)
    keep_freed_memory()
    _settle()
    t0 = time.perf_counter()
    out = sys.stdout
    total = ParseStats()
    store = JobStore()  # alerts are judged on whole jobs: they follow the events
    write = _json_lines(out)

    def emit(events) -> None:
        store.add(events)
        write(events)

    cache = _cache(settings)
    sizes = start_sizes(files)  # read what the files held at the start, not after a writer that keeps on
    jobs = settings.jobs or cores()
    beside = jobs if jobs > 1 else 0  # (a big file's parsers in workers, its events written here)
    for path in files:
        try:
            _, stats = parse_file(path, str(path), sink=emit, cache=cache, limit=sizes[path], beside=beside)
        except BrokenPipeError:  # writing: the reader went away (`| head`), no file is unreadable
            if cache is not None:
                cache.close()
            raise
        except OSError as exc:
            _err(f"cannot read {path}: {exc.strerror or exc}")
            continue
        total.add(stats)
    if cache is not None:
        cache.close()
    remote_files: list = []
    if remote and not _read_remote(settings, remote, emit, stats=total, counted=remote_files):
        return EXIT_USAGE
    feed = feed_from(settings, on_warning=_warn)
    out.write("".join(json.dumps(a.to_dict(), allow_nan=False) + "\n"
                      for a in feed.update(list(store.jobs.values()), last_writes(store))))
    out.flush()
    _report(total, len(files) + len(remote_files), time.perf_counter() - t0)
    return 0


def _check_follow_args(settings: Settings) -> bool:
    """Local paths must exist when following starts, remote hosts must let us in and
    have the paths (checked once, before anything is shown).  Raises PathError."""
    local, remote = split_paths(settings.paths)
    for raw in local:
        if not os.path.exists(os.path.expanduser(raw)):
            raise PathError(f"no such file or directory: {raw}")
    if remote:
        import asyncio

        from ..follow.remote import check_remote

        errors, passing = asyncio.run(check_remote(remote, settings.ssh_config))
        for message in passing:
            _warn(f"{message}; retrying in the background")
        for message in errors:
            _err(message)
        if errors:
            return False
    return True


def _json_lines(out, flush: bool = False):
    from ..engine.native import json_lines
    from ..figures.schemas import EVENTS_SCHEMA_VERSION
    from ..parsers.columns import expand

    # one encoder (json.dumps makes one a call when given an option) that never checks for cycles:
    # an event is a flat record; 20,000 a second are written
    encode = json.JSONEncoder(allow_nan=False, check_circular=False).encode

    def line(event) -> str:
        return encode({"schema_version": EVENTS_SCHEMA_VERSION, **event.to_dict()}) + "\n"

    def emit(events) -> None:
        out.write(json_lines(list(expand(events)), EVENTS_SCHEMA_VERSION, line))
        if flush:
            out.flush()
    return emit


def cmd_follow(settings: Settings, *, show_events: bool = True, alerts_format: str = "json") -> int:
    """``events --follow`` (events and alerts as JSON lines) and ``alerts --follow``
    (alerts alone, ``alerts_format`` table or json)."""
    import threading

    from ..follow.local import LocalFollower, supervise
    from ..live.alerting import seen_path_for
    from ..sources.discover import DEFAULT_EXCLUDE
    from .alerts import StoreTicker, alert_lines, feed_from

    if not _check_follow_args(settings):
        return EXIT_USAGE
    lock = threading.Lock()
    write = _json_lines(sys.stdout, flush=True)

    def alerts_out(alerts) -> None:
        with lock:
            sys.stdout.write(alert_lines(alerts, alerts_format))
            sys.stdout.flush()

    feed = feed_from(settings, seen_path=seen_path_for(settings.state), on_warning=_warn)  # bad options: before anything
    stop = threading.Event()
    _stop_on_term(stop)  # (before the state file is taken: a SIGTERM from then on saves it)

    def emit(events) -> None:  # local and remote events come from two threads (after the ticker exists)
        ticker.add(events)
        if show_events:
            with lock:
                write(events)

    local, remote = split_paths(settings.paths)
    follower = LocalFollower(local, emit, include=_include(settings),
                             exclude=tuple(settings.exclude) if settings.exclude else DEFAULT_EXCLUDE, poll=settings.poll,
                             state_path=settings.state, on_warning=_warn, follow_links=settings.follow_links,
                             wall=feed.clock,
                             cache=None if settings.state else settings.cache_path)
    ticker = StoreTicker(feed, alerts_out, follower.take_mtimes)  # last writes as the follower saw them
    thread = threading.Thread(target=supervise, args=(follower, stop, _warn), daemon=True) if local else None
    failed = interrupted = False
    try:
        ticker.start()
        if thread is not None:
            thread.start()
        if remote:
            failed = not _follow_remote(settings, remote, emit, follower.positions if settings.state else None, stop)
        else:
            behind_since: Optional[float] = None
            while not stop.wait(LAG_SAID_EVERY_S):  # (--debug says how far behind the reading is)
                backlog = follower.backlog()
                behind_since = (behind_since or time.monotonic()) if backlog else None
                if behind_since is not None:
                    LOG.debug("behind %.0f s: %.1f MB written and not read yet", time.monotonic() - behind_since,
                              backlog / 1e6)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        stop.set()
        follower.wake()
        if thread is not None:  # Ctrl-C: the follower ends its block within a second, or is left behind
            thread.join(timeout=0.4 if interrupted else 5)
        stopped = thread is None or not thread.is_alive()
        ticker.close(interrupted=interrupted)
        if settings.state and stopped:  # else the last periodic save stands (a restart doubles at most its bound)
            try:
                follower.save_state()  # (with the remote files' positions)
            except (OSError, PathError) as exc:
                _err(f"cannot save state to {settings.state}: {getattr(exc, 'strerror', None) or exc}")
        if stopped:
            follower.close()
    return EXIT_USAGE if failed else 0


def _stop_on_term(stop: threading.Event) -> None:
    """SIGTERM (``kill``, ``timeout``, a batch system ending the job) stops a follower: ``stop``
    is set, the main loop ends and the state is saved at the output's end, so a restart repeats
    no line (killed outright, the last periodic save stood).  Only an event is set: raised as an
    exception wherever the main thread was (its shutdown included), it exited 1 now and then at load
    15, its state unsaved."""
    import signal

    def on_term(signum: int, frame: Any) -> None:
        stop.set()

    try:
        signal.signal(signal.SIGTERM, on_term)
    except ValueError:  # not the main thread (a test driving the verb): the default stands
        pass


def _follow_remote(settings: Settings, specs, emit, positions=None, halt: Optional[threading.Event] = None) -> bool:
    """Follow remote specs until Ctrl-C (or ``halt``: SIGTERM); each host's state changes go to
    stderr.  False (after one line each) when a host refused us for good.  ``positions``: the
    state file's (--state), which the files resume from and save to."""
    import asyncio

    from ..follow.remote import read_remote

    errors: list[str] = []

    def fatal(message: str) -> None:
        errors.append(message)
        _err(message)

    stop: list[asyncio.Event] = []
    tasks: list[asyncio.Future] = []

    async def main() -> None:
        hosts: list = []
        stop.append(asyncio.Event())
        task = asyncio.ensure_future(read_remote(specs, emit, ssh_config=settings.ssh_config, follow=True,
                                                 on_error=fatal, on_warning=_warn, poll=settings.poll or 1.0,
                                                 hosts_out=hosts, cache=None if settings.state else settings.cache_path,
                                                 stop=stop[0], positions=positions))
        tasks.append(task)
        shown: dict[str, str] = {}
        while not task.done():
            for h in hosts:
                text = h.state.describe()
                if shown.get(h.host) != text.split(" (")[0]:
                    shown[h.host] = text.split(" (")[0]
                    print(f"tuimon: {sanitize(h.host)}: {sanitize(text)}", file=sys.stderr)
            if positions is not None:
                _save_positions(positions)
            if halt is not None and halt.is_set():
                stop[0].set()  # the hosts end their reads, the task ends
            await asyncio.sleep(0.5)
        await task

    # not asyncio.run: on Ctrl-C it waits for every task to end, and an SFTP read cut
    # mid-flight may never end; here the hosts get half a second to close, then we go
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main())
    except KeyboardInterrupt:
        if stop and tasks:
            stop[0].set()
            try:
                loop.run_until_complete(asyncio.wait(tasks, timeout=0.5))
            except BaseException:  # noqa: BLE001 - a second Ctrl-C, or a host's close failing: we leave anyway
                pass
        raise
    finally:
        if not any(not t.done() for t in tasks):
            loop.close()
        if positions is not None:
            _save_positions(positions)
    return not errors


def _save_positions(positions) -> None:
    try:
        positions.flush()
    except (OSError, PathError) as exc:
        _err(f"cannot save state to {positions.path}: {getattr(exc, 'strerror', None) or exc}")


def make_session(paths: list[str], settings: Settings, *, poll: Optional[float] = None):
    """The live session the app and ``serve`` show (not started)."""
    from ..engine import catalog
    from ..live.session import LiveSession
    from .alerts import feed_from

    feed = feed_from(settings)  # a bad --alert or --on-alert: one line, before anything starts
    session = LiveSession(paths, poll=poll, gpu_peak=settings.gpu_peak, gpu=settings.gpu, alerts=feed,
                          startup_timeout=settings.startup_timeout, process=True,
                          ssh_config=settings.ssh_config,
                          cache=settings.cache_path, follow_links=settings.follow_links,
                          catalog_spec=catalog.current().spec)
    feed.on_warning = session.warnings.append  # shown by the app (stderr is under its screen) or by serve
    return session


def run_app(paths: list[str], settings: Settings, *, poll: Optional[float] = None, quit_after: Optional[float] = None,
            on_quit=None, after_start=None) -> int:
    """``after_start`` runs once the ingest process exists (it is forked while this
    process still has a single thread, which is fast and safe)."""
    from ..ui.app import TuimonApp
    from .serve import start_metrics

    session = make_session(paths, settings, poll=poll)
    session.start()
    server = None
    try:
        if settings.metrics:
            server = start_metrics(session, settings.metrics, settings)
        if after_start is not None:
            after_start()
        app = TuimonApp(session, theme=settings.theme, quit_after=quit_after, on_quit=on_quit,
                        bell=not settings.no_bell, keymap=dict(settings.keymap))
        code = app.run()
    finally:
        if server is not None:
            server.close()
        session.stop()
    return code or 0


def cmd_watch(settings: Settings) -> int:
    if not _check_follow_args(settings):
        return EXIT_USAGE
    return run_app(settings.paths, settings, poll=settings.poll)


def cmd_serve(settings: Settings) -> int:
    from .serve import cmd_serve as serve

    if not _check_follow_args(settings):
        return EXIT_USAGE

    def session():
        made = make_session(settings.paths, settings, poll=settings.poll)
        made.start()
        return made

    return serve(settings, make_session=session, warn=_warn)


def cmd_tflops(settings: Settings) -> int:
    from ..figures.metrics import parse_size, tflops_per_gpu

    seq, gbs, iter_time, gpus = settings.seq, settings.gbs, settings.iter_time, settings.gpus
    if settings.params is None or seq is None or gbs is None or iter_time is None or gpus is None:
        _err("tflops needs --params, --seq, --gbs, --iter-time and --gpus")  # argparse requires them: a guard
        return EXIT_USAGE
    try:
        params = parse_size(settings.params)
    except ValueError:
        _err(f"--params: not a model size: {settings.params!r} (try 52B or 350M)")
        return EXIT_USAGE
    value = tflops_per_gpu(params, seq, gbs, iter_time, gpus,
                           activation_checkpointing=not settings.no_activation_checkpointing)
    if value is None:
        _err("--iter-time and --gpus must be positive")
        return EXIT_USAGE
    print(f"{value:.1f}")
    if settings.gpu_peak:
        print(f"MFU {100.0 * value / settings.gpu_peak:.1f}%")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
