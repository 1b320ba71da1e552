"""Start-up CPU: ``tuimon --help`` and ``tuimon summary`` of a 100-line log (issue 46's
target: at most 0.1 s of CPU each), beside what any Python command costs here (the bare
interpreter, ``import numpy``) and, with --baseline, another checkout's, runs alternating.

CPU is user plus system seconds of the child process (its own and its descendants'), the
median of --runs; the log is the first 100 lines of a ../shared corpus Megatron-LM log, or
generated Megatron iteration lines where the corpus is absent.  The parse cache is off
(``--no-cache``) and ``OPENBLAS_NUM_THREADS=1`` is set, as ``python -m tuimon`` sets it.

    python bench/startup.py [--runs 15] [--repo DIR] [--baseline DIR]
"""
from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("TUIMON_SHARED", HERE.parent.parent / "shared")) / "corpus"
TARGET_S = 0.1


def _log(path: Path) -> str:
    """A 100-line log at ``path``; where its lines come from."""
    sources = sorted((SHARED / "megatron-lm").glob("*.log")) if SHARED.exists() else []
    if sources:
        with open(sources[0], "rb") as fh:
            path.write_bytes(b"".join(fh.readline() for _ in range(100)))
        return f"the first 100 lines of {sources[0].name}"
    path.write_text("".join(
        f" iteration {i:8d}/ 1000 | consumed samples: {i * 64:12d} | elapsed time per iteration (ms): 2500.{i % 10} |"
        f" learning rate: 3.000E-04 | global batch size:    64 | lm loss: 2.5E+00 | loss scale: 4096.0 |\n"
        for i in range(1, 101)))
    return "100 generated Megatron iteration lines (../shared/corpus not found)"


def _cpu(cmd: list[str], cwd: str, env: dict) -> float:
    """CPU seconds (user and system) of one run of ``cmd``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])}... failed with status {done.returncode}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--repo", default=str(HERE.parent), help="checkout whose tuimon to time (cwd for python -m)")
    ap.add_argument("--baseline", help="another checkout, timed beside --repo, alternating")
    args = ap.parse_args()
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # (each run would compile tuimon again)
    repos = [r for r in (args.repo, args.baseline) if r]
    for repo in repos:  # compiled once, before any run is timed
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(repo) / "tuimon")], check=False)
    with tempfile.TemporaryDirectory(prefix="tuimon-startup-") as tmp:
        log = Path(tmp) / "train.log"
        said = _log(log)
        env["XDG_CACHE_HOME"] = str(Path(tmp) / "cache")
        py = [sys.executable]
        tui = py + ["-m", "tuimon"]
        cases = [("python -c pass", py + ["-c", "pass"], None), ("import numpy", py + ["-c", "import numpy"], None)]
        for repo in repos:
            tag = "" if repo == args.repo else " (baseline)"
            cases += [(f"tuimon --help{tag}", tui + ["--help"], repo),
                      (f"tuimon summary, 100 lines{tag}", tui + ["summary", "--no-cache", str(log)], repo)]
        times: dict[str, list[float]] = {name: [] for name, _, _ in cases}
        for _ in range(args.runs):  # alternating: each case once a round
            for name, cmd, repo in cases:
                times[name].append(_cpu(cmd, repo or tmp, env))
        print(f"start-up CPU, median of {args.runs} runs ({said}; target at most {TARGET_S:g} s):")
        median = {name: sorted(ts)[len(ts) // 2] for name, ts in times.items()}
        for name, _, repo in cases:
            met = "" if repo is None else ("  met" if median[name] <= TARGET_S else "  over the target")
            print(f"  {name:42s} {median[name]:.3f} s (least {min(times[name]):.3f}){met}")
        if args.baseline:
            for what in ("tuimon --help", "tuimon summary, 100 lines"):
                print(f"  {what}: this checkout / baseline CPU {median[what] / median[what + ' (baseline)']:.2f}x")


if __name__ == "__main__":
    main()
