"""Memory and first events of the long-running verbs over many files, a few of them active
(issue 47, point 3).

--files quiet logs in 64 directories (five Megatron lines each, written an hour ago) and --active
of them written on by one writer process (--rate lines/s in all, round robin).  For each verb
(``events --follow``, ``serve``), the process's peak resident memory (VmHWM) over --seconds, the
time from its start to its first event (``events``: the first line out; ``serve``: /metrics
naming every file's job), and for ``events`` the lines out against the lines written (every line
once).  With --baseline DIR, another checkout runs on the same files, alternating, and the ratios
are printed.  Goal: 10,000 files with 100 active, every line out, at most 500 MB, first events
within 10 s.

    python bench/many_files.py [--files 10000] [--active 100] [--rate 1000] [--seconds 30]
                               [--verbs events,serve] [--baseline /path/to/checkout]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINE = (" iteration {i:8d}/ 9999999 | consumed samples: {s:12d} | elapsed time per iteration (ms): 2500.0 | "
        "learning rate: 3.000E-04 | global batch size:    64 | lm loss: 2.500000E+00 | loss scale: 4096.0 |\n")
QUIET_LINES = 5
MB_GOAL, FIRST_GOAL_S = 500, 10.0


def make_tree(root: Path, files: int, dirs: int = 64) -> list[Path]:
    paths = []
    for k in range(files):
        d = root / f"run{k % dirs:02d}"
        d.mkdir(parents=True, exist_ok=True)
        p = d / f"job-{k:05d}.log"
        p.write_text("".join(LINE.format(i=i, s=i * 64) for i in range(1, QUIET_LINES + 1)))
        paths.append(p)
    old = time.time() - 3600
    for p in paths:
        os.utime(p, (old, old))
    return paths


WRITER = r"""
import sys, time
paths, rate, seconds = sys.argv[1].split("\n"), float(sys.argv[2]), float(sys.argv[3])
line = sys.argv[4]
handles = [open(p, "a", buffering=1) for p in paths]
nexts = [6] * len(paths)
written, t0 = 0, time.monotonic()
while time.monotonic() - t0 < seconds:
    due = int((time.monotonic() - t0) * rate)
    while written < due:
        k = written % len(handles)
        handles[k].write(line.format(i=nexts[k], s=nexts[k] * 64))
        nexts[k] += 1
        written += 1
    time.sleep(0.01)
print(written)
"""


def peak_mb(pid: int) -> float:
    try:
        for row in Path(f"/proc/{pid}/status").read_text().splitlines():
            if row.startswith("VmHWM:"):
                return int(row.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(checkout: Path, verb: str, root: Path, active: list[Path], rate: float, seconds: float) -> dict:
    env = dict(os.environ, PYTHONPATH=str(checkout), XDG_CACHE_HOME=tempfile.mkdtemp(prefix="tuimon-bench-cache-"))
    python = checkout / ".venv" / "bin" / "python"
    python = python if python.exists() else Path(sys.executable)
    port = free_port()
    argv = ([str(python), "-m", "tuimon", "events", "--follow", "--no-cache", str(root)] if verb == "events" else
            [str(python), "-m", "tuimon", "serve", "--no-cache", "--listen", f"127.0.0.1:{port}", str(root)])
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=checkout, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    first: list[float] = []
    lines: dict[str, int] = {}

    def read_events() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            if not first:
                first.append(time.monotonic() - t0)
            if b'"iteration"' in raw:
                ev = json.loads(raw)
                if ev.get("type") == "iteration":
                    lines[ev["file"]] = lines.get(ev["file"], 0) + 1

    reader = threading.Thread(target=read_events, daemon=True)
    reader.start()
    writer = subprocess.Popen([sys.executable, "-c", WRITER, "\n".join(map(str, active)), str(rate), str(seconds),
                               LINE], stdout=subprocess.PIPE, text=True)
    peak = 0.0
    while writer.poll() is None:
        peak = max(peak, peak_mb(proc.pid))
        if verb == "serve" and not first:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as r:
                    if r.read().count(b"tuimon_job_iteration{") >= 1:
                        first.append(time.monotonic() - t0)
            except OSError:
                pass
        time.sleep(0.2)
    written = int(writer.communicate()[0])
    out = 0
    deadline = time.monotonic() + 30
    if verb == "events":  # the last lines written: out within a few polls
        want = QUIET_LINES * n_files(root) + written
        while sum(lines.values()) < want and time.monotonic() < deadline:
            peak = max(peak, peak_mb(proc.pid))
            time.sleep(0.2)
        out = sum(lines.values())
    peak = max(peak, peak_mb(proc.pid))
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    return {"peak_mb": peak, "first_s": first[0] if first else float("nan"), "written": written, "out": out}


def n_files(root: Path) -> int:
    return sum(1 for _ in root.rglob("*.log"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=10_000)
    ap.add_argument("--active", type=int, default=100)
    ap.add_argument("--rate", type=float, default=1000.0, help="lines/s written in all, to the active files")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--verbs", default="events,serve")
    ap.add_argument("--baseline", help="another checkout, run beside this one on the same files")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tuimon-many-"))
    try:
        checkouts = [("this", ROOT)] + ([("baseline", Path(args.baseline))] if args.baseline else [])
        print(f"{args.files:,} files, {args.active} written at {args.rate:,.0f} lines/s in all, {args.seconds:.0f} s a run")
        for verb in args.verbs.split(","):
            results = {}
            for name, checkout in checkouts:  # alternating, each on a fresh copy of the same tree
                root = tmp / f"{verb}-{name}"
                paths = make_tree(root, args.files)
                results[name] = run(checkout, verb, root, paths[:: max(1, args.files // args.active)][:args.active],
                                    args.rate, args.seconds)
                shutil.rmtree(root)
                r = results[name]
                every = ("" if verb != "events" else
                         f"  lines out {r['out']:,} of {QUIET_LINES * args.files + r['written']:,}")
                print(f"{verb:7s} {name:8s} peak {r['peak_mb']:7.0f} MB  first events {r['first_s']:6.2f} s{every}")
            if "baseline" in results:
                a, b = results["this"], results["baseline"]
                print(f"{verb:7s} ratio    peak {a['peak_mb'] / max(b['peak_mb'], 1):.3f}   "
                      f"first {a['first_s'] / max(b['first_s'], 1e-3):.3f}")
            r = results["this"]
            ok = r["peak_mb"] <= MB_GOAL and r["first_s"] <= FIRST_GOAL_S and \
                (verb != "events" or r["out"] == QUIET_LINES * args.files + r["written"])
            print(f"{verb:7s} goal (<= {MB_GOAL} MB, first <= {FIRST_GOAL_S:.0f} s, every line): "
                  f"{'met' if ok else 'NOT met'}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
