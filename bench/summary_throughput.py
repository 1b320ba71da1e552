"""Throughput of ``tuimon summary`` against seed 001's perl one-liner on the same file.

Generates a mixed log (Megatron iteration and timer lines, DeepSpeed log_dist
lines, memory reports, NCCL INFO noise, tqdm bars) of --mb megabytes, then times:
  perl  : the one-liner users run today (averages one field)
  tuimon: `tuimon summary FILE` (extracts every event), on all cores and with --jobs 1
and prints their MB/s and ratios.  Target: ratio >= 0.25.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PERL = (r"m|elapsed time per iteration .ms.: ([\d\.]+)| &&  do {$x+=$1; $c++}; "
        r'END { print "$ARGV " . ($c ? int($x/$c/1000) : "fail")}')


def block(i: int) -> str:
    ts = f"2024-05-0{1 + i % 9} {i % 24:02d}:{i % 60:02d}:{(i * 7) % 60:02d},{i % 1000:03d}"
    nccl = "".join(f"nid{i % 512:06d}:{1000 + r}:{2000 + r} [{r}] NCCL INFO Channel {r:02d}/32 :    0   1   2   3\n"
                   for r in range(12))
    return (
        nccl
        + f"[{ts}] [INFO] [logging.py:96:log_dist] [Rank 0] step={i}, skipped=0, lr=[0.0003, 0.0003], "
          f"mom=[(0.9, 0.95), (0.9, 0.95)]\n"
        + f"[{ts}] [INFO] [logging.py:96:log_dist] [Rank 0] rank=0 time (ms) | forward_microstep: 612.{i % 97:02d} | "
          f"backward_microstep: 1501.{i % 89:02d} | backward_allreduce_microstep: 100.01 | step_microstep: 250.25\n"
        + f" iteration {i:8d}/ 1000000 | consumed samples: {i * 64:12d} | elapsed time per iteration (ms): "
          f"{2500 + i % 113}.{i % 10} | learning rate: 3.000E-04 | global batch size:    64 | lm loss: "
          f"{2 + (i % 1000) / 1000:.6E} | loss scale: 4096.0 | grad norm: {1 + (i % 37) / 10:.3f} | "
          f"number of skipped iterations:   0 | number of nan iterations:   0 |\n"
        + f"time (ms) | forward-compute: 612.{i % 7} | backward-compute: 1501.2 | optimizer: 250.1 | "
          f"offloading-fwd-overhead: 31.{i % 5} | offloading-bwd-overhead: 40.2\n"
        + f"[Rank {i % 8}] (after {i} iterations) memory (MB) | allocated: 15382.8 | max allocated: 19070.7 | "
          f"reserved: 26762.0 | max reserved: 26762.0\n"
        + " 50%|#####     | 50/100 [00:10<00:10,  4.90it/s]\r100%|##########| 100/100 [00:20<00:00,  4.90it/s]\n"
        + "WARNING: some library chatter that no parser cares about, repeated as real logs do\n" * 4
    )


def generate(path: Path, megabytes: float, make=block) -> int:
    """A log of about ``megabytes`` MB made of ``make(i)`` for i = 1, 2, ..."""
    target = int(megabytes * 1_000_000)
    written = 0
    i = 1
    step = 500 if megabytes >= 1 else 5  # (a small file, one of many rank files, is not a whole chunk)
    with open(path, "w") as fh:
        while written < target:
            chunk = "".join(make(j) for j in range(i, i + step))
            fh.write(chunk)
            written += len(chunk.encode())
            i += step
    return written


def interpreter() -> str:
    """Which Python the figures are for, and how fast it reads a number: a CPython
    built without --enable-optimizations (pyenv's default) took 170 ns a float()
    against 47-75 ns for the distribution's build on the same machine, and its
    summary took 1.3-1.6 times as long."""
    import platform
    import timeit
    ns = min(timeit.repeat("f(s)", setup="f = float; s = '2602.3'", number=200_000, repeat=5)) / 200_000 * 1e9
    return f"{platform.python_implementation()} {platform.python_version()} ({sys.executable}), float() {ns:.0f} ns"


def timed(cmd: list[str]) -> tuple[float, str]:
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode != 0:
        raise SystemExit(f"command failed: {' '.join(cmd)}\n{r.stderr}")
    return dt, r.stderr.strip()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=int, default=300, help="size of the generated log (default 300)")
    # the best of five: on a shared machine one run of the same command took from 0.28 to 0.44 s
    # of a pure-Python loop's time from one minute to the next, and both commands' best settle by five
    ap.add_argument("--runs", type=int, default=5, help="timed runs of each, best kept (default 5)")
    args = ap.parse_args()
    if not shutil.which("perl"):
        raise SystemExit("perl not found: the baseline needs it")
    # an installed package has its bytecode compiled (pip does it); a checkout run
    # with PYTHONDONTWRITEBYTECODE set would compile every module on every run
    import compileall
    root = Path(__file__).resolve().parents[1]
    for package in ("tuimon", "parsers", "themes"):
        compileall.compile_dir(root / package, quiet=1)
    tmp = Path(tempfile.mkdtemp(prefix="tuimon-bench-"))
    try:
        log = tmp / "mixed-1234567.out"
        size = generate(log, args.mb)
        lines = sum(1 for _ in open(log, "rb"))
        print(f"generated {size / 1e6:.0f} MB, {lines:,} lines: {log}")
        print(f"interpreter: {interpreter()}")
        tuimon = [sys.executable, "-m", "tuimon", "summary", str(log)]
        perl = ["perl", "-lne", PERL, str(log)]
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
        # interleaved runs, best of each: this machine's speed drifts between runs
        t_perl = t_one = t_tui = float("inf")
        report = ""
        rounds = []  # the ratio within each round, whose runs are seconds apart
        for _ in range(args.runs):
            p = timed(perl)[0]
            t_perl = min(t_perl, p)
            t_one = min(t_one, timed(tuimon + ["--jobs", "1"])[0])
            dt, said = timed(tuimon)
            rounds.append(p / dt)
            if dt < t_tui:
                t_tui, report = dt, said
        mb = size / 1e6
        print(f"perl one-liner        : {t_perl:7.2f} s  {mb / t_perl:8.1f} MB/s  (one field, one core)")
        print(f"tuimon summary -j 1   : {t_one:7.2f} s  {mb / t_one:8.1f} MB/s  (every event, one core)")
        print(f"tuimon summary        : {t_tui:7.2f} s  {mb / t_tui:8.1f} MB/s  (every event, {cores} cores)")
        print(f"ratio tuimon/perl MB/s: {t_perl / t_tui:.2f} ({t_perl / t_one:.2f} on one core)  (target >= 0.25)")
        print(f"ratio per round       : {' '.join(f'{r:.2f}' for r in rounds)} "
              f"(median {statistics.median(rounds):.2f})")
        print(f"tuimon said: {report}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    main()
