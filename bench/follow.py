"""Benchmarks of following live logs (issue 3).  Prints figures; asserts nothing.

  latency  : append -> event delay, p50/p99, with inotify and with forced polling
             (a separate writer process stamps each line with its wall-clock time)
  idle     : CPU share and RSS of `tuimon events --follow` on 4,096 idle files, 1 s poll
  backfill : MB/s to read a directory of 200 existing logs to the end

Targets: p99 <= 100 ms with inotify, <= poll interval + 100 ms when polling;
idle CPU <= 2 % of one core for 4,096 files at a 1 s poll.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tuimon.follow.local import LocalFollower  # noqa: E402

WRITER = r"""
import sys, time
path, n, gap = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
with open(path, "a", buffering=1) as fh:
    for i in range(1, n + 1):
        fh.write(f" iteration {i:8d}/ 1000000 | elapsed time per iteration (ms): {time.time():.6f} |\n")
        time.sleep(gap)
"""


def percentile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100.0 * (len(s) - 1))))]


def latency(mode: str, n: int, gap: float, poll: float) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="tuimon-lat-"))
    log = tmp / "live.log"
    log.write_text("")
    delays: list[float] = []

    def sink(events) -> None:
        now = time.time()
        for e in events:
            if e.type == "iteration" and e.elapsed_ms is not None:
                delays.append((now - e.elapsed_ms) * 1000.0)

    kwargs = {"poll": poll} if mode == "polling" else {}
    fol = LocalFollower([str(tmp)], sink, **kwargs)
    stop = threading.Event()
    t = threading.Thread(target=fol.run, args=(stop,), daemon=True)
    t.start()
    time.sleep(0.5)
    subprocess.run([sys.executable, "-c", WRITER, str(log), str(n), str(gap)], check=True)
    deadline = time.time() + poll + 3
    while len(delays) < n and time.time() < deadline:
        time.sleep(0.05)
    stop.set()
    fol._wake.set()
    t.join()
    fol.close()
    shutil.rmtree(tmp, ignore_errors=True)
    target = 100.0 if mode == "inotify" else poll * 1000 + 100.0
    print(f"latency {mode:8s} (appends every {gap * 1000:.0f} ms, {len(delays)}/{n} seen): "
          f"p50 {percentile(delays, 50):6.1f} ms  p99 {percentile(delays, 99):6.1f} ms  "
          f"max {max(delays):6.1f} ms  (target p99 <= {target:.0f} ms)")


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def idle(files: int, seconds: float, poll: float, inotify: bool) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="tuimon-idle-"))
    for i in range(files):
        (tmp / f"job{i:05d}.log").write_text(f" iteration {i:8d}/ 10 | elapsed time per iteration (ms): 1.0 |\n")
    args = [sys.executable, "-m", "tuimon", "events", "--follow", str(tmp)]
    if not inotify:
        args += ["--poll", str(poll)]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, env=env)
    try:
        settled = _settle(proc.pid)  # backfill done: measure the idle interval only
        c0, t0 = _cpu_seconds(proc.pid), time.monotonic()
        time.sleep(seconds)
        c1, t1 = _cpu_seconds(proc.pid), time.monotonic()
        rss = _rss_mb(proc.pid)
    finally:
        proc.send_signal(2)
        proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)
    share = 100.0 * (c1 - c0) / (t1 - t0)
    label = "inotify+poll" if inotify else f"poll {poll:g}s"
    print(f"idle     {label:12s} {files} files: CPU {share:5.2f} % of one core over {seconds:.0f} s, "
          f"RSS {rss:6.1f} MB  (target CPU <= 2 %); backfill settled after {settled:.0f} s")


def _settle(pid: int, limit: float = 90.0) -> float:
    """Seconds until the process used under 10 % of a core in two 1 s windows running
    (the backfill of every file is over), at least 8 and at most ``limit``."""
    start = time.monotonic()
    time.sleep(6.0)
    quiet = 0
    while quiet < 2 and time.monotonic() - start < limit:
        c0 = _cpu_seconds(pid)
        time.sleep(1.0)
        quiet = quiet + 1 if _cpu_seconds(pid) - c0 < 0.1 else 0
    return time.monotonic() - start


def backfill(files: int, mb_each: float) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from summary_throughput import block

    tmp = Path(tempfile.mkdtemp(prefix="tuimon-backfill-"))
    body = "".join(block(j) for j in range(1, 200))
    reps = max(1, int(mb_each * 1e6 / len(body)))
    for i in range(files):
        (tmp / f"run-{i:03d}.log").write_text(body * reps)
    total = sum(p.stat().st_size for p in tmp.iterdir())
    fol = LocalFollower([str(tmp)], lambda evs: None, poll=1.0)
    t0 = time.perf_counter()
    while True:
        fol.poll()
        if fol.progress.bytes_total and fol.progress.bytes_done >= total:
            break
    dt = time.perf_counter() - t0
    fol.close()
    shutil.rmtree(tmp, ignore_errors=True)
    print(f"backfill {files} files, {total / 1e6:.0f} MB: {dt:.2f} s = {total / 1e6 / dt:.1f} MB/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="*", default=["latency", "idle", "backfill"])
    ap.add_argument("--appends", type=int, default=200)
    ap.add_argument("--gap", type=float, default=0.05, help="seconds between appends")
    ap.add_argument("--poll", type=float, default=1.0)
    ap.add_argument("--files", type=int, default=4096)
    ap.add_argument("--seconds", type=float, default=20.0)
    args = ap.parse_args()
    if "latency" in args.what:
        latency("inotify", args.appends, args.gap, args.poll)
        latency("polling", args.appends, args.gap, args.poll)
        latency("polling", max(20, args.appends // 10), 1.5, args.poll)
    if "idle" in args.what:
        idle(args.files, args.seconds, args.poll, inotify=False)
        idle(args.files, args.seconds, args.poll, inotify=True)
    if "backfill" in args.what:
        backfill(200, 0.5)


if __name__ == "__main__":
    main()
