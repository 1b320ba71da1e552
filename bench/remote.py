"""Benchmarks of reading logs over SSH (issue 4), against a real sshd started on
127.0.0.1 for the run (needs openssh-server).  Prints figures; asserts nothing.

  backfill : MB/s of reading a remote file over SFTP (transfer only, and through the
             full tuimon summary), beside `ssh host cat FILE >/dev/null`; ratio target >= 0.5
  idle     : bytes the server sends and receives while tuimon idle-follows 500 files
  many     : seconds to a complete `tuimon summary` of 500 remote files
  idle-cpu : CPU of `tuimon events --follow` idle on 20,000 remote files (one directory, and
             100), once all are read; target <= 10% of a core (python bench/remote.py idle-cpu)
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
from tests.helpers.output import EventStream  # noqa: E402
from tuimon.follow.remote import RemoteHost, parse_spec  # noqa: E402


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


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_cpu(srv, tmp: Path, n: int, dirs: int, seconds: float, repo: Path) -> None:
    """CPU of `tuimon events --follow` (a real user's command) idle on n remote files in
    ``dirs`` directories, once everything has been read."""
    d = tmp / f"idle-{n}-{dirs}"
    for k in range(dirs):
        sub = d / f"d{k:03d}"
        sub.mkdir(parents=True)
        for i in range(n // dirs):
            (sub / f"rank{i:05d}.log").write_bytes(b" iteration        1/ 10 | elapsed time per iteration (ms): 1.0 |\n")
    proc = subprocess.Popen([sys.executable, "-m", "tuimon", "events", "--follow", f"tuimon-test:{d}",
                             "--ssh-config", str(srv.config)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            cwd=repo, env=dict(os.environ, PYTHONPATH=str(repo)))
    t0, got = time.monotonic(), []
    EventStream(proc.stdout).iterations_until(lambda: len(got) >= n, 600, got)
    ready = time.monotonic() - t0
    time.sleep(3.0)
    c0, s0 = cpu_seconds(proc.pid), sum(cpu_seconds(p) for p in sshd._descendants(srv.proc.pid))
    time.sleep(seconds)
    c1, s1 = cpu_seconds(proc.pid), sum(cpu_seconds(p) for p in sshd._descendants(srv.proc.pid))
    busy = d / "d000" / "rank00000.log"  # one file of them written 10 lines a second
    end = time.monotonic() + seconds
    with open(busy, "ab", buffering=0) as fh:
        while time.monotonic() < end:
            fh.write(b" iteration        2/ 10 | elapsed time per iteration (ms): 1.0 |\n")
            time.sleep(0.1)
    c2, s2 = cpu_seconds(proc.pid), sum(cpu_seconds(p) for p in sshd._descendants(srv.proc.pid))
    proc.terminate()
    proc.wait(timeout=30)
    print(f"idle cpu {n} remote files in {dirs} dir(s): all read in {ready:.1f} s; then idle "
          f"tuimon {100 * (c1 - c0) / seconds:.1f}% of a core, sshd {100 * (s1 - s0) / seconds:.1f}% "
          f"(target: tuimon <= 10%); one file written 10 lines/s: tuimon {100 * (c2 - c1) / seconds:.1f}%, "
          f"sshd {100 * (s2 - s1) / seconds:.1f}%")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="*", default=["backfill", "many", "idle", "idle-cpu"])
    ap.add_argument("--mb", type=int, default=100)
    ap.add_argument("--files", type=int, default=500)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--idle-files", type=int, default=20_000)
    ap.add_argument("--repo", type=Path, default=ROOT, help="the checkout whose tuimon runs (idle-cpu)")
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
        if "idle-cpu" in args.what:
            for dirs in (1, 100):  # one flat directory, and the same files spread out
                idle_cpu(srv, tmp, args.idle_files, dirs, args.seconds, args.repo)
    finally:
        srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
