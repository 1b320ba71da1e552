"""``tuimon summary`` of many large files on 1..N cores: the wall-clock speed-up, beside perl.

Sixteen files of ``--file-mb`` megabytes (default 40), each of one of the matrix's shapes in
turn (``--shapes``), in one directory.  For each core count N (1, 2, 4, ... up to the cores
there are, and the count itself): ``tuimon summary --jobs N`` of the directory (best of
``--runs``, alternating with the others), its speed-up over N = 1 and that over N (the
efficiency; issue 46's target: at least 0.7).  Beside it, seed 001's perl one-liner over
the same files on one core, and one perl a file, N at a time (``xargs -P N``): what a shell
user gets from the cores.  With ``--baseline``, another checkout's ``--jobs N`` beside each.

    python bench/scaling.py [--files 16] [--file-mb 40] [--runs 2] [--baseline DIR] [--rank-files]

With ``--rank-files``, the files are one job's per-rank logs (``train_rank0000.log``...): many
small ones (``--files 1000 --file-mb 0.05 --shapes dense``) measure what a file costs beyond its
bytes, where each file has a parser, a store and a merge of its own.

The machine's load average is printed before and after: a busy machine says so.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from matrix import SHAPES, build, timed  # noqa: E402
from summary_throughput import PERL  # noqa: E402


def core_counts(cores: int) -> list[int]:
    """1, 2, 4, ... below ``cores``, then ``cores`` itself."""
    counts, n = [], 1
    while n < cores:
        counts.append(n)
        n *= 2
    return counts + [cores]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--file-mb", type=float, default=40)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--shapes", default="dense,srun-mcore,titan-hf,corpus-megatron",
                    help=f"shapes the files take in turn (of {', '.join(SHAPES)})")
    ap.add_argument("--repo", default=str(HERE.parent))
    ap.add_argument("--baseline", help="another checkout to time beside --repo, alternating")
    ap.add_argument("--rank-files", action="store_true", help="the files are one job's per-rank logs")
    args = ap.parse_args()
    if not shutil.which("perl") or not shutil.which("xargs"):
        raise SystemExit("perl and xargs are needed for the baselines")
    cores = len(os.sched_getaffinity(0))
    tmp = Path(tempfile.mkdtemp(prefix="tuimon-scaling-"))
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp / "cache"), OPENBLAS_NUM_THREADS="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for repo in filter(None, (args.repo, args.baseline)):
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(repo) / "tuimon")], check=False)
    try:
        logs = tmp / "logs"
        logs.mkdir()
        shapes = [s for s in args.shapes.split(",") if s]
        files = []
        for k in range(args.files):
            path = logs / (f"train_rank{k:04d}.log" if args.rank_files else f"job{k:02d}-{shapes[k % len(shapes)]}.log")
            if not build(shapes[k % len(shapes)], path, args.file_mb):
                raise SystemExit(f"shape {shapes[k % len(shapes)]} needs ../shared/corpus")
            files.append(str(path))
        mb = sum(os.path.getsize(f) for f in files) / 1e6
        print(f"{len(files)} files, {mb:.0f} MB, {cores} cores; load average before: {os.getloadavg()}", flush=True)
        tui = [sys.executable, "-m", "tuimon", "summary", "--no-cache", "--format", "json"]
        counts = core_counts(cores)
        best: dict[str, float] = {}

        def run(name: str, cmd: list[str], cwd: str | None = None, shell_env: dict | None = None) -> None:
            seconds = timed(cmd, cwd=cwd, env=shell_env)[0]
            best[name] = min(best.get(name, float("inf")), seconds)

        for _ in range(args.runs):  # alternating: each count's runs spread over the whole bench
            run("perl 1", ["perl", "-lne", PERL, *files])
            for n in counts:
                run(f"perl {n} files at once", ["sh", "-c", f'printf "%s\\n" "$@" | xargs -P {n} -n 1 perl -lne \'{PERL}\'',
                                                "sh", *files])
                run(f"tuimon {n}", tui + ["--jobs", str(n), str(logs)], cwd=args.repo, shell_env=env)
                if args.baseline:
                    run(f"baseline {n}", tui + ["--jobs", str(n), str(logs)], cwd=args.baseline, shell_env=env)
        one = best["tuimon 1"]
        print(f"\nperl, one core: {mb / best['perl 1']:.0f} MB/s\n")
        print("| cores | tuimon MB/s | speed-up | speed-up / cores | x perl (one core) | perl a file, N at once, MB/s |"
              + (" baseline MB/s | this / baseline |" if args.baseline else ""))
        print("|---|---|---|---|---|---|" + ("---|---|" if args.baseline else ""))
        for n in counts:
            t = best[f"tuimon {n}"]
            line = (f"| {n} | {mb / t:.1f} | {one / t:.2f} | {one / t / n:.2f} | {best['perl 1'] / t:.3f} "
                    f"| {mb / best[f'perl {n} files at once']:.0f} |")
            if args.baseline:
                b = best[f"baseline {n}"]
                line += f" {mb / b:.1f} | {b / t:.2f}x |"
            print(line)
        worst = min(counts, key=lambda n: one / best[f"tuimon {n}"] / n)
        print(f"\nleast efficient: {worst} cores, {one / best[f'tuimon {worst}'] / worst:.2f} of linear "
              f"(target 0.7); load average after: {os.getloadavg()}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
