"""Latency of the live view: from a line appended to a followed log to the jobs screen showing it.

The app runs headless (Textual's test driver) on a live session as ``tuimon watch`` makes it (the ingest
in its own process). The bench appends one Megatron iteration line at a time to a followed log (at random
0.2-0.6 s apart, as a training run's lines come), then polls the screen every 2 ms until the job's Iter
cell shows the new iteration; prints p50 / p99 / max of those delays. Target: p99 <= 150 ms on a quiet
machine. ``--baseline DIR`` runs the same measurement on another checkout's tuimon (its own interpreter
path, this script), alternating runs, and prints the ratios side by side.

    python bench/latency.py --samples 60 [--baseline /tmp/base] [--runs 2]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def line(i: int, total: int = 100000) -> str:
    return (f" iteration {i:8d}/{total:8d} | consumed samples: {i * 512:12d} | elapsed time per iteration (ms): "
            f"{1234.5 + (i % 7):.1f} | learning rate: 1.000E-04 | global batch size:   512 | lm loss: 2.345678E+00 | "
            f"loss scale: 1.0 | grad norm: 0.812 | number of skipped iterations:   0 | number of nan iterations:   0 |\n")


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))] if s else float("nan")


async def measure(samples: int, seed: int) -> list[float]:
    from tuimon.live.session import LiveSession
    from tuimon.ui.app import TuimonApp

    rng = random.Random(seed)
    tmp = Path(tempfile.mkdtemp(prefix="tuimon-latency-"))
    log = tmp / "train-4242.out"
    log.write_text("".join(line(i) for i in range(1, 11)))
    session = LiveSession([str(tmp)], process=True)  # as `tuimon watch` makes it
    session.start()
    app = TuimonApp(session)
    delays: list[float] = []
    try:
        async with app.run_test(size=(200, 50)):
            def shown() -> str:
                screen = app.screen
                if not screen.query("#jobs"):
                    return ""
                table = screen.query_one("#jobs")
                if not table.row_count:
                    return ""
                headers = [str(c.label) for c in table.columns.values()]
                if "Iter" not in headers:
                    return ""
                return str(table.get_row_at(0)[headers.index("Iter")])

            deadline = time.monotonic() + 30
            while not shown().startswith("10/") and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            it = 10
            for _ in range(samples):
                await asyncio.sleep(rng.uniform(0.2, 0.6))
                it += 1
                with open(log, "a") as fh:
                    fh.write(line(it))
                written = time.perf_counter()
                want = f"{it}/"
                limit = time.monotonic() + 10
                while not shown().startswith(want):
                    if time.monotonic() > limit:
                        raise SystemExit(f"iteration {it} not shown after 10 s (screen: {shown()!r})")
                    await asyncio.sleep(0.002)
                delays.append((time.perf_counter() - written) * 1000.0)
    finally:
        session.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return delays


def _child(tree: str, samples: int, seed: int) -> list[float]:
    """This script run against ``tree``'s tuimon, in a fresh interpreter: its delays."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")]))}
    r = subprocess.run([sys.executable, __file__, "--json", "--samples", str(samples), "--seed", str(seed)],
                       capture_output=True, text=True, env=env, cwd=tree, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"{tree}: {r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def _say(name: str, delays: list[float]) -> str:
    return (f"{name:<9} {len(delays):4d} lines: p50 {pct(delays, 50):6.1f} ms  p99 {pct(delays, 99):6.1f} ms  "
            f"max {max(delays):6.1f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=60)
    ap.add_argument("--runs", type=int, default=1, help="alternating runs of each tree (with --baseline)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--baseline", help="another checkout: measured the same way, side by side")
    ap.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.json:
        print(json.dumps(asyncio.run(measure(args.samples, args.seed))))
        return
    trees = [("this", str(ROOT))] + ([("baseline", args.baseline)] if args.baseline else [])
    got: dict[str, list[float]] = {name: [] for name, _ in trees}
    for run in range(args.runs):
        for name, tree in (trees if run % 2 == 0 else trees[::-1]):
            got[name] += _child(tree, args.samples, args.seed + run)
    print(f"append -> jobs screen, {os.cpu_count()} CPUs (target p99 <= 150 ms on a quiet machine)")
    for name, _ in trees:
        print(_say(name, got[name]))
    if args.baseline:
        a, b = got["this"], got["baseline"]
        print(f"ratio     this/baseline: p50 {pct(a, 50) / pct(b, 50):.2f}x  p99 {pct(a, 99) / pct(b, 99):.2f}x  "
              f"max {max(a) / max(b):.2f}x")


if __name__ == "__main__":
    main()
