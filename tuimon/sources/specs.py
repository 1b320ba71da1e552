"""Remote specs: ``[user@]host[:port]:path`` and ``ssh://user@host:port/path``.

Kept apart from :mod:`.remote` so that local commands tell local paths from
remote ones without importing asyncio.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional
from urllib.parse import unquote, urlsplit

from .discover import PathError

_SPEC = re.compile(r"^(?:(?P<user>[^@/:\s]+)@)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)"
                   r"(?::(?P<port>\d{1,5}))?:(?P<path>.*)$", re.S)


@dataclass(frozen=True)
class RemoteSpec:
    host: str
    path: str
    user: Optional[str] = None
    port: Optional[int] = None

    @property
    def endpoint(self) -> tuple[str, Optional[str], Optional[int]]:
        return (self.host, self.user, self.port)

    def label(self, remote_path: str) -> str:
        return f"{self.host}:{remote_path}"


def parse_spec(text: str) -> Optional[RemoteSpec]:
    """The remote spec in ``text``, or None when it names a local path.  Raises
    :class:`~tuimon.sources.discover.PathError` for a spec that cannot be right (a port out
    of range, a broken IPv6 address)."""
    if text.startswith("ssh://"):
        try:
            parts = urlsplit(text)
            hostname, port = parts.hostname, parts.port
        except ValueError as exc:  # "Port out of range 0-65535", "Invalid IPv6 URL"
            raise PathError(f"bad remote spec {text!r}: {exc}") from None
        if not hostname:
            raise PathError(f"bad remote spec {text!r}: no host (use ssh://user@host:port/path)")
        path = unquote(parts.path)
        path = path[1:] if path.startswith("/~") else path  # ssh://h/~/runs -> ~/runs
        return RemoteSpec(hostname, path or ".", unquote(parts.username) if parts.username else None,
                          _port(text, port))
    if text.startswith(("/", "./", "../", "~")):
        return None
    m = _SPEC.match(text)
    if not m:
        return None
    return RemoteSpec(m["host"].strip("[]"), m["path"] or ".", m["user"],
                      _port(text, int(m["port"])) if m["port"] else None)


def _port(text: str, port: Optional[int]) -> Optional[int]:
    if port is not None and not 1 <= port <= 65535:
        raise PathError(f"bad remote spec {text!r}: port {port} is not in 1-65535")
    return port


def split_paths(paths: list[str]) -> tuple[list[str], list[RemoteSpec]]:
    """Local paths and remote specs; a name that exists here is always local."""
    local: list[str] = []
    remote: list[RemoteSpec] = []
    for raw in paths:
        spec = None if os.path.exists(os.path.expanduser(raw)) else parse_spec(raw)
        if spec is None:
            local.append(raw)
        else:
            remote.append(spec)
    return local, remote


def host_and_path(label: str) -> tuple[str, str]:
    """``("local", path)`` for a local file's label, ``(SSH alias, remote path)`` for a
    remote one's (``alias:path``)."""
    try:
        _, remote = split_paths([label])
    except (ValueError, PathError):  # not a spec after all: a local name with a colon
        return "local", label
    return (remote[0].host, remote[0].path) if remote else ("local", label)
