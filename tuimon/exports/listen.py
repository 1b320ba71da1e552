"""The address a metrics endpoint listens on (kept apart from prometheus_client, so the
command line reads it without importing the exporter)."""
from __future__ import annotations

import ipaddress
import re

DEFAULT_LISTEN = "127.0.0.1:9464"

# a host name: letters, digits, dots and hyphens, with a letter somewhere (``0`` or ``10``
# would be read by inet_aton as 0.0.0.0 and 0.0.0.10)
_HOSTNAME = re.compile(r"(?=.*[A-Za-z])[A-Za-z0-9](?:[A-Za-z0-9.-]{0,251}[A-Za-z0-9])?")


class ListenError(ValueError):
    """A --listen/--metrics address that cannot be used (one line for the user)."""


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` or ``[IPv6]:PORT`` -> (host, port).  The host is named in full:
    an empty one (``:9464``, ``[]:9464``) or a shorthand such as ``0`` would bind every
    interface unseen; every interface must be asked for as ``0.0.0.0`` or ``[::]``."""
    host, sep, port = text.rpartition(":")
    usage = f"cannot listen on {text!r}: expected HOST:PORT, such as {DEFAULT_LISTEN}"
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:  # 0: any free port
        raise ListenError(usage)
    bracketed = host.startswith("[") and host.endswith("]")
    name = host[1:-1] if bracketed else host
    if not name:
        raise ListenError(f"{usage} (name the host; 0.0.0.0 or [::] for every interface)")
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        if bracketed or not _HOSTNAME.fullmatch(name):
            raise ListenError(f"{usage} ({name!r} is neither an IP address nor a host name)") from None
        return name, int(port)
    if address.version == 6 and not bracketed:
        raise ListenError(f"{usage} (write an IPv6 address in brackets: [{name}]:{port})")
    return str(address), int(port)


def url_host(host: str) -> str:
    """``host`` as it goes in a URL (an IPv6 address in brackets)."""
    return f"[{host}]" if ":" in host else host
