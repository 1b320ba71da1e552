"""Many Prometheus scrapers at once against `tuimon serve`: answers, errors (resets, timeouts) and the
latency of a scrape, p50 / p99 / max. Target: no error, p99 under 100 ms with 200 scrapers.

    python bench/scrapers.py [DIR] [--scrapers 200] [--seconds 30] [--baseline /tmp/base]

DIR defaults to ../shared/corpus. ``--baseline`` runs the same load against another checkout's
tuimon, after this one's, and prints both.
"""
from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))] if s else float("nan")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def measure(tree: str, logs: str, scrapers: int, seconds: float) -> tuple[list[float], list[str]]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tree, os.environ.get("PYTHONPATH")]))}
    proc = subprocess.Popen([sys.executable, "-m", "tuimon", "serve", logs, "--listen", f"127.0.0.1:{port}"],
                            cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        deadline = time.monotonic() + 120
        while True:  # up, and every file read (the figures are there)
            try:
                with urllib.request.urlopen(url, timeout=5) as r:
                    if b"tuimon_job_iteration{" in r.read():
                        break
            except OSError:
                pass
            if time.monotonic() > deadline or proc.poll() is not None:
                raise SystemExit(f"{tree}: serve did not come up ({proc.stderr.read().decode()[-500:] if proc.poll() else ''})")
            time.sleep(0.2)
        latencies: list[float] = []
        errors: list[str] = []
        lock = threading.Lock()
        end = time.monotonic() + seconds
        start = threading.Barrier(scrapers)

        def scraper() -> None:
            start.wait()
            while time.monotonic() < end:
                t0 = time.perf_counter()
                try:
                    with urllib.request.urlopen(url, timeout=60) as r:
                        r.read()
                    with lock:
                        latencies.append((time.perf_counter() - t0) * 1000.0)
                except OSError as exc:
                    with lock:
                        errors.append(type(exc).__name__)
                time.sleep(0.2)  # each scraper asks several times a second
        threads = [threading.Thread(target=scraper) for _ in range(scrapers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return latencies, errors
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("logs", nargs="?", default=str(ROOT.parent / "shared" / "corpus"))
    ap.add_argument("--scrapers", type=int, default=200)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--baseline")
    args = ap.parse_args()
    print(f"{args.scrapers} scrapers for {args.seconds:.0f} s against serve {args.logs} ({os.cpu_count()} CPUs)")
    for name, tree in [("this", str(ROOT))] + ([("baseline", args.baseline)] if args.baseline else []):
        lat, err = measure(tree, args.logs, args.scrapers, args.seconds)
        print(f"{name:<9} {len(lat):6d} answers, {len(err):5d} errors {sorted(set(err))}: p50 {pct(lat, 50):7.1f} ms  "
              f"p99 {pct(lat, 99):7.1f} ms  max {max(lat, default=float('nan')):7.1f} ms")


if __name__ == "__main__":
    main()
