"""A real OpenSSH sshd on 127.0.0.1 for the remote tests: temporary host key,
authorized_keys and client config with an alias.  Tests skip (saying why) when
sshd is not installed; `.ci/run` installs openssh-server."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

SSHD = shutil.which("sshd") or ("/usr/sbin/sshd" if os.path.exists("/usr/sbin/sshd") else None)
KEYGEN = shutil.which("ssh-keygen")
if os.environ.get("TUIMON_TEST_SSHD") == "asyncssh":
    SSHD = None  # force the in-process server, to test the fallback itself


@dataclass
class Server:
    port: int
    root: Path
    config: Path  # client config with the alias "tuimon-test"
    known_hosts: Path
    client_key: Path
    proc: subprocess.Popen
    host_key: Path
    kind: str = "OpenSSH sshd"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
        for pipe in (self.proc.stdout, self.proc.stderr):  # (else left to the collector: a ResourceWarning in
            if pipe is not None:                           # whichever test it runs in)
                pipe.close()

    def kill_connections(self) -> None:
        """Drop every client connection, keep listening: every process below the
        listener dies (a connection's monitor and the session process it forked,
        which would otherwise keep serving SFTP on its own)."""
        for pid in _descendants(self.proc.pid):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass


class InProcessServer(Server):
    """asyncssh's own SSH+SFTP server in a thread: the fallback where sshd is missing."""

    def __init__(self, port, root, config, known_hosts, client_key, host_key) -> None:
        import asyncio
        import threading

        import asyncssh

        self.port, self.root, self.config, self.known_hosts = port, root, config, known_hosts
        self.client_key, self.host_key, self.kind = client_key, host_key, "in-process asyncssh server"
        self.conns: list = []
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        server_self = self

        class Tracking(asyncssh.SSHServer):
            def connection_made(self, conn) -> None:
                server_self.conns.append(conn)

        async def serve() -> None:
            self.acceptor = await asyncssh.listen(
                "127.0.0.1", port, server_host_keys=[str(host_key)],
                authorized_client_keys=str(root / "authorized_keys"), sftp_factory=True,
                server_factory=Tracking, allow_scp=False)
            ready.set()

        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        asyncio.run_coroutine_threadsafe(serve(), self.loop)
        ready.wait(10)
        self.proc = None  # type: ignore[assignment]

    def stop(self) -> None:
        async def close() -> None:
            self.acceptor.close()
            for conn in self.conns:
                conn.abort()
        import asyncio
        asyncio.run_coroutine_threadsafe(close(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)

    def kill_connections(self) -> None:
        import asyncio

        async def abort() -> None:
            for conn in self.conns:
                conn.abort()
            self.conns.clear()
        asyncio.run_coroutine_threadsafe(abort(), self.loop).result(10)


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, stack = [], list(children.get(root, ()))
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(children.get(pid, ()))
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path, kind: str = "ed25519") -> None:
    if KEYGEN:
        subprocess.run([KEYGEN, "-q", "-t", kind, "-N", "", "-f", str(path)], check=True)
        return
    import asyncssh

    key = asyncssh.generate_private_key("ssh-ed25519")
    key.write_private_key(str(path))
    key.write_public_key(str(path) + ".pub")
    path.chmod(0o600)


def start(root: Path) -> Server:
    root.mkdir(parents=True, exist_ok=True)
    host_key, client_key = root / "host_key", root / "client_key"
    keygen(host_key)
    keygen(client_key)
    auth = root / "authorized_keys"
    auth.write_text(client_key.with_suffix(".pub").read_text())
    auth.chmod(0o600)
    port = free_port()
    user = os.environ.get("USER") or subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    cfg = root / "sshd_config"
    cfg.write_text(f"""Port {port}
ListenAddress 127.0.0.1
HostKey {host_key}
PidFile {root / 'sshd.pid'}
AuthorizedKeysFile {auth}
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin yes
StrictModes no
UsePAM no
Subsystem sftp internal-sftp
LogLevel ERROR
""")
    known = root / "known_hosts"
    pub = host_key.with_suffix(".pub").read_text().split()
    known.write_text(f"[127.0.0.1]:{port} {pub[0]} {pub[1]}\n")
    client_cfg = root / "ssh_config"
    client_cfg.write_text(f"""Host tuimon-test
    HostName 127.0.0.1
    Port {port}
    User {user}
    IdentityFile {client_key}
    UserKnownHostsFile {known}
    IdentitiesOnly yes
""")
    if SSHD is None:
        return InProcessServer(port, root, client_cfg, known, client_key, host_key)
    os.makedirs("/run/sshd", exist_ok=True)  # privilege separation directory
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(cfg)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {proc.stderr.read().decode(errors='replace')}")
        time.sleep(0.05)
    return Server(port, root, client_cfg, known, client_key, proc, host_key)
