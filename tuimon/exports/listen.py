"""The address a metrics endpoint listens on (kept apart from prometheus_client, so the
command line reads it without importing the exporter)."""
from __future__ import annotations

DEFAULT_LISTEN = "127.0.0.1:9464"


class ListenError(ValueError):
    """A --listen/--metrics address that cannot be used (one line for the user)."""


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPv6]:PORT`` -> (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:  # 0: any free port
        raise ListenError(f"cannot listen on {text!r}: expected HOST:PORT, such as {DEFAULT_LISTEN}")
    return host.strip("[]"), int(port)
