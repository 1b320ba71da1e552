"""Soak: memory of the long-running verbs under a steady stream (issue 26, faults 3-4).

A writer process appends Megatron iteration lines at --rate lines/s (default 5,000)
to one log for --minutes (default 10).  ``tuimon events --follow``, ``tuimon serve``
and ``tuimon watch`` (the app in a detached tmux session, its whole process tree)
follow it at once.  Every minute the RSS of each is printed beside the bound it must
stay under; ``serve``'s /metrics is scraped every 5 s and the slowest answer is
printed (target: under 1 s); how far behind the writer ``events`` is (lines written and
not out yet, in seconds of writing) and ``serve`` is (its tuimon_parse_lag_seconds), and at
the end how long after the writer stopped ``events`` had every line out.  Exit status 1 if
a bound or the scrape target is broken, or ``events`` lost a line.

The bounds come from the design, not from a run: a series keeps at most 131,072
points (tuimon.store.series), a job here has three (rank, steps, reported), and the
rest is the interpreter, the parsers and the app.

    python bench/soak.py [--minutes 10] [--rate 5000]     (and --rate 20000: the rate one core keeps up with)
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BOUND_MB = {"events": 300.0, "serve": 350.0, "watch": 450.0}

WRITER = r"""
import sys, time
path, rate, seconds = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
line = (" iteration {i:8d}/ 99999999 | consumed samples: {s:12d} | elapsed time per iteration (ms): {ms:.1f} | "
        "learning rate: 3.000E-04 | global batch size:    64 | lm loss: {loss:.6E} | loss scale: 4096.0 | "
        "grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")
start = time.monotonic()
i = 0
with open(path, "a", buffering=1 << 16) as fh:
    while time.monotonic() - start < seconds:
        due = int((time.monotonic() - start) * rate)
        while i < due:
            i += 1
            fh.write(line.format(i=i, s=i * 64, ms=2500.0 + (i % 17), loss=2.5 + (i % 13) * 1e-3))
        fh.flush()
        time.sleep(0.02)
print(i)
"""


class Counted:
    """Iteration events in a growing JSON-lines file, counted as it grows (read once)."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.count, self._rest = path, 0, 0, b""

    def update(self) -> int:
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read()
        self.offset += len(data)
        data, cut = self._rest + data, data.rfind(b"\n")
        if cut >= 0:
            cut = len(self._rest) + cut
            self.count += data[:cut + 1].count(b'"type": "iteration"')
            self._rest = data[cut + 1:]
        else:
            self._rest = data
        return self.count


def rss_mb(pid: int) -> float:
    """RSS of ``pid`` and its descendants, in MB."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) / 1024.0
            todo.extend(int(k) for k in Path(f"/proc/{p}/task/{p}/children").read_text().split())
        except OSError:
            continue
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=5000.0)
    ap.add_argument("--verbs", default="events,serve,watch",
                    help="which followers run (at once: on 2 cores, three at 20,000 lines/s share them)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tuimon-soak-"))
    logs = tmp / "logs"
    logs.mkdir()
    log = logs / "soak-1.log"
    log.write_text("")
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CONFIG_HOME=str(tmp / "config"), XDG_CACHE_HOME=str(tmp / "c"))
    seconds = args.minutes * 60.0
    procs: dict[str, subprocess.Popen] = {}
    session = f"tuimon-soak-{os.getpid()}"
    pids: dict[str, int] = {}
    ok = True
    verbs = set(args.verbs.split(","))
    address = ""
    counted = None
    try:
        if "events" in verbs:
            events_out = open(tmp / "events.jsonl", "wb")
            procs["events"] = subprocess.Popen([sys.executable, "-m", "tuimon", "events", "--follow", str(logs)],
                                               cwd=ROOT, env=env, stdout=events_out, stderr=subprocess.DEVNULL)
            counted = Counted(tmp / "events.jsonl")
        if "serve" in verbs:
            procs["serve"] = subprocess.Popen([sys.executable, "-m", "tuimon", "serve", "--listen", "127.0.0.1:0",
                                               str(logs)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                                              stderr=subprocess.PIPE, text=True)
            line = procs["serve"].stderr.readline()  # type: ignore[union-attr]
            address = re.search(r"http://(\S+)/metrics", line).group(1)  # type: ignore[union-attr]
        pids = {name: p.pid for name, p in procs.items()}
        if "watch" in verbs and shutil.which("tmux"):
            cmd = f"cd {ROOT} && env PYTHONPATH={ROOT} XDG_CONFIG_HOME={tmp}/config {sys.executable} -m tuimon watch {logs}"
            subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "180", "-y", "50", cmd], check=True)
            time.sleep(1.0)
            pane = subprocess.run(["tmux", "list-panes", "-t", session, "-F", "#{pane_pid}"], capture_output=True,
                                  text=True).stdout.split()
            pids["watch"] = int(pane[0])
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(log), str(args.rate), str(seconds)],
                                  stdout=subprocess.PIPE, text=True)
        print(f"soak: {args.rate:.0f} lines/s for {args.minutes:g} min into one log; RSS in MB (bound)")
        print("minute  " + "  ".join(f"{name:>16s}" for name in pids) + "  slowest /metrics (s)"
              "  events behind (s)  serve behind (s)")
        start = time.monotonic()
        minute = 0
        slowest = 0.0
        while writer.poll() is None:
            time.sleep(5.0)
            t0 = time.monotonic()
            serve_lag, took = float("nan"), 0.0
            if address:
                try:
                    with urllib.request.urlopen(f"http://{address}/metrics", timeout=30) as r:
                        body = r.read().decode()
                    took = time.monotonic() - t0
                    found = re.search(r"^tuimon_parse_lag_seconds (\S+)$", body, re.M)
                    serve_lag = float(found.group(1)) if found else serve_lag
                except OSError:
                    took = float("inf")
            slowest = max(slowest, took)
            if time.monotonic() - start >= (minute + 1) * 60.0 or writer.poll() is not None:
                minute += 1
                cells = []
                for name, pid in pids.items():
                    mb = rss_mb(pid)
                    over = mb > BOUND_MB[name]
                    ok = ok and not over
                    cells.append(f"{mb:7.1f} ({BOUND_MB[name]:4.0f}){'!' if over else ' '}")
                behind = max(0.0, ((time.monotonic() - start) * args.rate - counted.update()) / args.rate) \
                    if counted is not None else float("nan")
                print(f"{minute:6d}  " + "  ".join(f"{c:>16s}" for c in cells) + f"  {slowest:6.2f}"
                      f"  {behind:17.1f}  {serve_lag:16.1f}", flush=True)
                ok = ok and slowest < 1.0
                slowest = 0.0
        written = int((writer.stdout.read() or "0").strip() or 0)  # type: ignore[union-attr]
        stopped = time.monotonic()
        said = f"written: {written:,} lines ({log.stat().st_size / 1e6:.0f} MB)"
        if counted is not None:
            while counted.update() < written and time.monotonic() - stopped < 600:
                time.sleep(0.5)
            out = counted.update()
            ok = ok and out == written
            said += f"; events gave {out:,}, every one {time.monotonic() - stopped:.1f} s after the writer stopped"
        print(f"{said}; {'all bounds held' if ok else 'A BOUND WAS BROKEN (or a line lost)'}")
    finally:
        for p in procs.values():
            p.send_signal(2)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
