"""Benchmarks of reading logs over SSH (issue 4), against a real sshd started on
127.0.0.1 for the run (needs openssh-server).  Prints figures; asserts nothing.

  backfill : MB/s of reading a remote file over SFTP (transfer only, and through the
             full tuimon summary), beside `ssh host cat FILE >/dev/null`; ratio target >= 0.5
  idle     : bytes the server sends and receives while tuimon idle-follows 500 files
  many     : seconds to a complete `tuimon summary` of 500 remote files
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from summary_throughput import block  # noqa: E402
from tests.helpers import sshd  # noqa: E402
from tuimon.sources.remote import RemoteHost, parse_spec  # noqa: E402


def tuimon(*args: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "tuimon", *args], check=True, capture_output=True,
                   env=dict(os.environ, PYTHONPATH=str(ROOT)))
    return time.perf_counter() - t0


def io_bytes(pid: int) -> int:
    """Bytes read + written by a process and its children (the sshd serving us)."""
    total = 0
    pids = [pid] + [int(p) for p in subprocess.run(["pgrep", "-P", str(pid)], capture_output=True,
                                                     text=True).stdout.split()]
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/io").read_text().splitlines():
                if line.startswith(("rchar:", "wchar:")):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


async def sftp_transfer(cfg: Path, path: Path) -> float:
    """Seconds to read the file over SFTP the way the follower does, without parsing."""
    import asyncssh

    t0 = time.perf_counter()
    async with asyncssh.connect("tuimon-test", config=[str(cfg)]) as conn:
        async with conn.start_sftp_client() as sftp:
            async with sftp.open(str(path), "rb") as fh:
                offset = 0
                while True:
                    data = await fh.read(1 << 20, offset)
                    if not data:
                        break
                    offset += len(data)
    return time.perf_counter() - t0


def backfill(srv, tmp: Path, mb: int) -> None:
    log = tmp / "big-1234.out"
    body = "".join(block(j) for j in range(1, 500)).encode()
    with open(log, "wb") as fh:
        while fh.tell() < mb * 1_000_000:
            fh.write(body)
    size = log.stat().st_size / 1e6
    t0 = time.perf_counter()
    subprocess.run(["ssh", "-F", str(srv.config), "tuimon-test", "cat", str(log)], check=True,
                   stdout=subprocess.DEVNULL)
    t_cat = time.perf_counter() - t0
    t_sftp = asyncio.run(sftp_transfer(srv.config, log))
    t_sum = tuimon("summary", f"tuimon-test:{log}", "--ssh-config", str(srv.config))
    t_local = tuimon("summary", str(log))
    print(f"backfill {size:.0f} MB: ssh cat {size / t_cat:7.1f} MB/s | tuimon SFTP transfer {size / t_sftp:7.1f} MB/s "
          f"(ratio {t_cat / t_sftp:.2f}, target >= 0.5) | tuimon summary over SSH {size / t_sum:5.1f} MB/s "
          f"(ratio {t_cat / t_sum:.2f}; parsing bound: local summary {size / t_local:.1f} MB/s)")


def make_many(tmp: Path, n: int) -> Path:
    d = tmp / "many"
    d.mkdir()
    body = "".join(block(j) for j in range(1, 3))
    for i in range(n):
        (d / f"job-{i:04d}.log").write_text(body)
    return d


def many(srv, tmp: Path, n: int) -> None:
    d = make_many(tmp, n)
    t = tuimon("summary", f"tuimon-test:{d}", "--ssh-config", str(srv.config))
    print(f"many     complete summary of {n} remote files: {t:.2f} s")


def idle(srv, tmp: Path, n: int, seconds: float) -> None:
    d = tmp / "many" if (tmp / "many").exists() else make_many(tmp, n)
    spec = parse_spec(f"tuimon-test:{d}")
    host = RemoteHost(spec.endpoint, [spec.path], lambda evs: None, ssh_config=str(srv.config), poll=1.0)

    async def run() -> tuple[int, int]:
        stop = asyncio.Event()
        task = asyncio.ensure_future(host.run(stop))
        while host.state.bytes_read < sum(p.stat().st_size for p in d.iterdir()):
            await asyncio.sleep(0.2)
        await asyncio.sleep(2.0)
        before = io_bytes(srv.proc.pid)
        await asyncio.sleep(seconds)
        after = io_bytes(srv.proc.pid)
        stop.set()
        await task
        return before, after

    before, after = asyncio.run(run())
    print(f"idle     following {n} files for {seconds:.0f} s at 1 s polls: server I/O {(after - before) / 1e3:.0f} kB "
          f"({(after - before) / seconds / 1e3:.1f} kB/s; stats only, {host.state.bytes_read / 1e6:.1f} MB read once)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="*", default=["backfill", "many", "idle"])
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=20)
    args = ap.parse_args()
    if sshd.SSHD is None:
        raise SystemExit("sshd not installed (apt-get install openssh-server)")
    tmp = Path(tempfile.mkdtemp(prefix="tuimon-remote-bench-"))
    srv = sshd.start(tmp / "sshd")
    try:
        if "backfill" in args.what:
            backfill(srv, tmp, args.mb)
        if "many" in args.what:
            many(srv, tmp, args.files)
        if "idle" in args.what:
            idle(srv, tmp, args.files, args.seconds)
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
