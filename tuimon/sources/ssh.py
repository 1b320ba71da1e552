"""SSH connections for the remote sources: the user's ~/.ssh/config (or ``--ssh-config``), asyncssh,
and one line for the user on what went wrong.  Bytes only: parsing happens above (tuimon.follow)."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Optional


async def connect(endpoint: tuple[str, Optional[str], Optional[int]], ssh_config: Optional[str] = None,
                  **options: Any) -> Any:
    """An SSH connection to ``endpoint`` (host, user, port), with the user's SSH config
    (or ``ssh_config``) and asyncssh's own ``options``."""
    import asyncssh

    host, user, port = endpoint
    if ssh_config:
        options["config"] = [ssh_config]
        beside = beside_known_hosts(ssh_config)
        if beside is not None and "known_hosts" not in options:
            options["known_hosts"] = beside
    if user:
        options["username"] = user
    if port:
        options["port"] = port
    return await asyncssh.connect(host, **options)


def beside_known_hosts(ssh_config: str) -> Optional[bytes]:
    """The host keys a ``--ssh-config FILE`` brings: the ``known_hosts`` file beside it (as ``~/.ssh/known_hosts``
    is beside ``~/.ssh/config``), with the user's own after it; None where the file names its own
    ``UserKnownHostsFile`` (asyncssh reads that) or has none beside it."""
    import re

    try:
        if re.search(r"(?im)^\s*UserKnownHostsFile\b", Path(ssh_config).expanduser().read_text(errors="replace")):
            return None
        beside = (Path(ssh_config).expanduser().parent / "known_hosts").read_bytes()
    except OSError:
        return None
    try:
        own = (Path.home() / ".ssh" / "known_hosts").read_bytes()
    except OSError:
        own = b""
    return beside.rstrip(b"\n") + b"\n" + own


def sftp_path(path: str) -> str:
    """SFTP paths are relative to the remote home: ``~/x`` -> ``x``, ``~`` -> ``.``."""
    if path == "~":
        return "."
    if path.startswith("~/"):
        return path[2:] or "."
    return path


class FatalSSHError(Exception):
    """An error retrying cannot fix (authentication, host key): one line for the user."""


def describe(exc: BaseException, host: str) -> tuple[str, bool]:
    """(one-line message, fatal?) for a connection error."""
    import asyncssh

    if isinstance(exc, asyncssh.HostKeyNotVerifiable):
        return (f"{host}: host key not verifiable ({exc.reason}); if the host is known to you, check "
                f"~/.ssh/known_hosts (after a legitimate key change: ssh-keygen -R {host}, then ssh {host} once)",
                True)
    if isinstance(exc, asyncssh.PermissionDenied):
        return f"{host}: authentication failed ({exc.reason}); check your key, agent or ~/.ssh/config", True
    if isinstance(exc, (asyncssh.ConfigParseError,)):
        return f"{host}: bad SSH config: {exc}", True
    if isinstance(exc, OSError) and getattr(exc, "errno", None) is None and "resolve" in str(exc).lower():
        return f"{host}: unknown host ({exc})", True
    if isinstance(exc, OSError) and "Name or service not known" in str(exc):
        return f"{host}: unknown host", True
    if isinstance(exc, asyncio.TimeoutError):
        return f"{host}: connection timed out", False
    text = str(exc) or type(exc).__name__
    return f"{host}: {text}", False
