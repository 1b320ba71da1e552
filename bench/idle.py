"""Idle cost of the long-running verbs on many quiet files (issue 26, fault 17).

4,096 files in 64 directories, each a short Megatron log that was read to its end and
is never written again.  For ``events --follow``, ``alerts --follow``, ``serve`` and
``watch`` (the app, in a detached tmux session), the share of one core each process
uses once its backfill is over, measured from /proc over --seconds.  With
--baseline DIR, the same verbs of another checkout run beside, alternating on the
same files, and the ratio is printed.  Target: at most 2 % of a core for each.

    python bench/idle.py [--files 4096] [--seconds 20] [--baseline /path/to/checkout]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINE = (" iteration {i:8d}/    1000 | consumed samples: {s:12d} | elapsed time per iteration (ms): 2500.0 | "
        "learning rate: 3.000E-04 | global batch size:    64 | lm loss: 2.500000E+00 | loss scale: 4096.0 |\n")
TARGET = 2.0


def make_tree(root: Path, files: int, dirs: int = 64) -> None:
    for k in range(files):
        d = root / f"run{k % dirs:02d}"
        d.mkdir(exist_ok=True)
        (d / f"job-{k:05d}.log").write_text("".join(LINE.format(i=i, s=i * 64) for i in range(1, 6)))
    old = time.time() - 3600  # written an hour ago: history, nothing new comes
    for p in root.rglob("*.log"):
        os.utime(p, (old, old))


def cpu_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def tree(pid: int) -> list[int]:
    """``pid`` and its descendants (watch's session may ingest in a child process)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            kids = Path(f"/proc/{p}/task/{p}/children").read_text().split()
        except OSError:
            kids = []
        todo.extend(int(k) for k in kids)
    return out


def settle(pid: int, limit: float = 180.0) -> float:
    """Seconds until the process tree used under 10 % of a core for two 1 s windows running."""
    start = time.monotonic()
    time.sleep(5.0)
    quiet = 0
    while quiet < 2 and time.monotonic() - start < limit:
        c0 = cpu_seconds(tree(pid))
        time.sleep(1.0)
        quiet = quiet + 1 if cpu_seconds(tree(pid)) - c0 < 0.1 else 0
    return time.monotonic() - start


def run_verb(repo: Path, verb: str, logs: Path, seconds: float, home: Path) -> tuple[float, float]:
    """(CPU share in % of one core while idle, seconds the backfill took)."""
    env = dict(os.environ, PYTHONPATH=str(repo), XDG_CONFIG_HOME=str(home / "config"),
               XDG_CACHE_HOME=str(home / "cache"))
    base = [sys.executable, "-m", "tuimon"]
    session = None
    if verb == "watch":
        session = f"tuimon-idle-{os.getpid()}"
        cmd = " ".join([*base, "watch", "--no-cache", str(logs)])
        subprocess.run(["tmux", "new-session", "-d", "-s", session, "-x", "180", "-y", "50",
                        f"cd {repo} && env PYTHONPATH={repo} XDG_CONFIG_HOME={home}/config {cmd}"], check=True)
        time.sleep(1.0)
        pane = subprocess.run(["tmux", "list-panes", "-t", session, "-F", "#{pane_pid}"], capture_output=True,
                              text=True).stdout.split()
        pid = int(pane[0])
        proc = None
    else:
        args = {"events": ["events", "--follow", "--no-cache"], "alerts": ["alerts", "--follow", "--no-cache"],
                "serve": ["serve", "--listen", "127.0.0.1:0", "--no-cache"]}[verb]
        proc = subprocess.Popen([*base, *args, str(logs)], cwd=repo, env=env, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        pid = proc.pid
    try:
        settled = settle(pid)
        pids = tree(pid)
        c0, t0 = cpu_seconds(pids), time.monotonic()
        time.sleep(seconds)
        c1, t1 = cpu_seconds(pids), time.monotonic()
    finally:
        if proc is not None:
            proc.send_signal(2)
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
        if session is not None:
            subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
    return 100.0 * (c1 - c0) / (t1 - t0), settled


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=4096)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--verbs", default="events,alerts,serve,watch")
    ap.add_argument("--baseline", help="another checkout, run beside this one on the same files")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="tuimon-idle-"))
    try:
        logs = tmp / "logs"
        logs.mkdir()
        make_tree(logs, args.files)
        print(f"{args.files} quiet files in 64 directories; idle CPU over {args.seconds:.0f} s "
              f"(target <= {TARGET:g} % of one core)")
        worst = 0.0
        for verb in args.verbs.split(","):
            if verb == "watch" and not shutil.which("tmux"):
                print(f"{verb:8s} skipped: tmux is not installed")
                continue
            share, settled = run_verb(ROOT, verb, logs, args.seconds, tmp)
            worst = max(worst, share)
            line = f"{verb:8s} this checkout {share:6.2f} % (backfill {settled:4.0f} s)"
            if args.baseline:
                base, bsettled = run_verb(Path(args.baseline), verb, logs, args.seconds, tmp)
                line += f"   baseline {base:6.2f} % (backfill {bsettled:4.0f} s)   ratio {share / max(base, 1e-3):.2f}"
            print(line + ("" if share <= TARGET else "   OVER TARGET"), flush=True)
        print(f"worst: {worst:.2f} % of one core")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
