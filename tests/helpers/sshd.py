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


@dataclass
class Server:
    port: int
    root: Path
    config: Path  # client config with the alias "tuimon-test"
    known_hosts: Path
    client_key: Path
    proc: subprocess.Popen
    host_key: Path

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)

    def kill_connections(self) -> None:
        """Drop every client connection (the per-connection sshd children), keep listening."""
        subprocess.run(["pkill", "-KILL", "-P", str(self.proc.pid)], capture_output=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def keygen(path: Path, kind: str = "ed25519") -> None:
    subprocess.run([KEYGEN, "-q", "-t", kind, "-N", "", "-f", str(path)], check=True)


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
