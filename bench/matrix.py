"""``tuimon summary`` (or ``tuimon events``, ``--verb events``) across log shapes, against seed
001's perl one-liner on the same files.

Shapes (each about --mb megabytes):
  dense     every line an event: Megatron iteration, DeepSpeed log_dist timers,
            STRONGHOLD ``time (ms)``, ``Effective Tera Flops``, ``NumWorkers``
  sparse    bench/summary_throughput.py's log (70 % noise lines)
  corpus-megatron   ../shared/corpus Megatron-LM and Megatron-DeepSpeed logs, replicated
  srun-mcore        srun-labelled 8-rank Megatron-Core log with ``(min, max)`` timer blocks
  titan-hf          torchtitan metric lines and HF Trainer dicts (generated, plus corpus)
  ds-neox-stronghold  ../shared/corpus DeepSpeed, GPT-NeoX and STRONGHOLD logs, replicated
  llmc      llm.c's main.log step lines (s:N trl:... lr:... norm:...), a tel line every 250
  nanogpt   modded-nanogpt's step lines (step:N/M train_loss:... train_time:...ms step_avg:...)

For each: perl MB/s, tuimon summary MB/s by default and with --jobs 1 (best of
--runs, runs alternating), the ratios, the peak RSS of the whole process tree (and by default,
with forked workers sharing their parent's pages, its peak summed PSS: each shared page counted
once across the tree, where summed RSS counts it in every process) and the
ratio of CPU seconds (user and system, the process tree) beside the wall-clock one.
With --reopen, also the time to summarise an unchanged directory of --reopen-mb
megabytes a second time (the parse cache) and after appending 10 MB to it, each
against perl over the same files.

    python bench/matrix.py --mb 100 [--repo DIR] [--shapes dense,sparse] [--reopen] [--verb events]
"""
from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from summary_throughput import PERL, generate  # noqa: E402
from summary_throughput import block as sparse_block  # noqa: E402

SHARED = Path(os.environ.get("TUIMON_SHARED", HERE.parent.parent / "shared")) / "corpus"
LAST_CPU = 0.0  # CPU seconds of the last timed() process tree
LAST_PSS = 0  # peak proportional set size (kB) of the last timed() process tree


def _dense(i: int) -> str:
    ts = f"2024-05-01 {i // 3600 % 24:02d}:{i // 60 % 60:02d}:{i % 60:02d},{i % 1000:03d}"
    return (
        f" iteration {i:8d}/ 1000000 | consumed samples: {i * 64:12d} | elapsed time per iteration (ms): "
        f"{2500 + i % 113}.{i % 10} | learning rate: 3.000E-04 | global batch size:    64 | lm loss: "
        f"{2 + (i % 1000) / 1000:.6E} | loss scale: 4096.0 | grad norm: {1 + (i % 37) / 10:.3f} | "
        f"number of skipped iterations:   0 | number of nan iterations:   0 |\n"
        f"[{ts}] [INFO] [logging.py:96:log_dist] [Rank 0] rank=0 time (ms) | forward_microstep: 612.{i % 97:02d} | "
        f"backward_microstep: 1501.{i % 89:02d} | backward_inner_microstep: 1490.1 | "
        f"backward_allreduce_microstep: 10.01 | step_microstep: 250.25\n"
        f"[{ts}] [INFO] [logging.py:96:log_dist] [Rank 0] rank=0 time (ms) | forward: 612.{i % 97:02d} | "
        f"backward: 1501.{i % 89:02d} | backward_inner: 1490.1 | backward_allreduce: 10.01 | step: 250.25\n"
        f"time (ms) | forward-compute: 612.{i % 7} | backward-compute: 1501.2 | optimizer: 250.1 | "
        f"offloading-fwd-overhead: 31.{i % 5} | offloading-bwd-overhead: 40.2\n"
        f"Effective Tera Flops per GPU: {40 + i % 7}.{i % 10} and total parameters 52.005 B\n"
        f"NumWorkers: 1; SamplesPerStep: 4; IterationTime: 7.{i % 1000:03d};  SamplesPerSecond: 0.55{i % 100:02d}\n"
    )


_MCORE_TIMERS = ("forward-backward", "forward-compute", "backward-compute", "batch-generator",
                 "layernorm-grads-all-reduce", "embedding-grads-all-reduce", "all-grads-sync",
                 "params-all-gather", "optimizer-copy-to-main-grad", "optimizer-unscale-and-check-inf",
                 "optimizer-clip-main-grad", "optimizer-count-zeros", "optimizer-inner-step",
                 "optimizer-copy-main-to-model-params", "optimizer")


def _srun_mcore(i: int) -> str:
    out = []
    for r in range(8):
        out.append(f"{r}: [2024-06-01 10:{i // 60 % 60:02d}:{i % 60:02d}] iteration {i:8d}/  500000 | consumed samples: "
                   f"{i * 512:12d} | elapsed time per iteration (ms): {3100 + (i * 7 + r) % 97}.{r} | throughput per "
                   f"GPU (TFLOP/s/GPU): {400 + (i + r) % 30}.{r} | learning rate: 1.500000E-04 | global batch size:   512 "
                   f"| lm loss: {3 + (i % 500) / 1000:.6E} | loss scale: 1.0 | grad norm: 0.{i % 1000:03d} | number "
                   f"of skipped iterations:   0 | number of nan iterations:   0 |\n")
    out.append("0: (min, max) time across ranks (ms):\n")
    for name in _MCORE_TIMERS:
        out.append(f"0:     {name} {'.' * (48 - len(name))}: ({1000 + i % 50}.12, {1100 + i % 60}.34)\n")
    out.append("0: [Rank 0] (after %d iterations) memory (MB) | allocated: 15382.8 | max allocated: 19070.7 | "
               "reserved: 26762.0 | max reserved: 26762.0\n" % i)
    return "".join(out)


def _hand_loops(i: int) -> str:
    """Hand-written training loops' step lines (parsers/formats/loops.py): llm.c's main.log (a
    ``tel`` evaluation every 250 steps), then modded-nanogpt's running-total lines."""
    out = f"s:{i} trl:{2 + (i % 997) / 500:.4f} lr:{(i % 600) / 1e6:.6f} norm:{0.5 + (i % 150) / 100:.2f}\n"
    if i % 250 == 0:
        out += f"s:{i} tel:{2 + (i % 991) / 500:.4f}\n"
    return out


def _nanogpt(i: int) -> str:
    return f"step:{i}/9999999 train_loss:{2 + (i % 997) / 500:.4f} train_time:{i * 160 + i % 7}ms step_avg:160.00ms\n"


def _titan_hf(i: int) -> str:
    return (f"[rank0]:[titan] 2026-04-30 00:{i // 60 % 60:02d}:{i % 60:02d},090 - root - INFO - \x1b[31mstep: {i}  "
            f"\x1b[32mloss:  {3 + (i % 100) / 100:.5f}  \x1b[38;2;180;60;0mgrad_norm:  0.0442  \x1b[38;2;54;234;195m"
            f"memory: 26.01GiB(82.96%)  \x1b[34mtps: 2,579  \x1b[36mtflops: 16.00  \x1b[35mmfu: 5.13%\x1b[39m\n"
            f"0: {{'loss': {2 + (i % 100) / 100:.4f}, 'grad_norm': 0.9704080820083618, 'learning_rate': "
            f"4.175257731958763e-05, 'epoch': {i / 1000:.2f}}}\n"
            f"[rank0]:[titan] 2026-04-30 00:00:00,000 - root - INFO - Sleeping 2 seconds for other ranks to complete\n")


def _generated(path: Path, megabytes: float, make) -> None:
    generate(path, megabytes, make)


def _replicated(path: Path, megabytes: float, sources: list[Path]) -> bool:
    if not sources:
        return False
    data = b"".join(p.read_bytes().rstrip(b"\n") + b"\n" for p in sources)
    copies = max(1, int(megabytes * 1_000_000 / len(data)))
    with open(path, "wb") as fh:
        for _ in range(copies):
            fh.write(data)
    return True


def _corpus(*dirs: str) -> list[Path]:
    return sorted(p for d in dirs for p in (SHARED / d).glob("*.log")) if SHARED.exists() else []


def build(shape: str, path: Path, mb: float) -> bool:
    if shape == "dense":
        _generated(path, mb, _dense)
    elif shape == "sparse":
        _generated(path, mb, sparse_block)
    elif shape == "srun-mcore":
        _generated(path, mb, _srun_mcore)
    elif shape == "titan-hf":
        _generated(path, mb / 2, _titan_hf)
        extra = path.with_suffix(".corpus")
        if _replicated(extra, mb / 2, _corpus("torchtitan", "hf-trainer")):
            with open(path, "ab") as fh:
                fh.write(extra.read_bytes())
            extra.unlink()
    elif shape == "llmc":
        _generated(path, mb, _hand_loops)
    elif shape == "nanogpt":
        _generated(path, mb, _nanogpt)
    elif shape == "corpus-megatron":
        return _replicated(path, mb, _corpus("megatron-lm", "megatron-deepspeed"))
    elif shape == "ds-neox-stronghold":
        return _replicated(path, mb, _corpus("deepspeed", "gpt-neox", "stronghold"))
    return True


SHAPES = ("dense", "sparse", "corpus-megatron", "srun-mcore", "titan-hf", "ds-neox-stronghold", "llmc", "nanogpt")


def _pss_kb(pid: int) -> int:
    """Proportional set size of ``pid`` in kB (0 where /proc does not say): its resident pages, a page
    shared with other processes counted as its share (forked workers share the parent's pages: the
    sum of the tree's RSS counts those once a process)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _tree_memory_kb(root: int) -> tuple[int, int]:
    """(resident kB, proportional kB) of ``root`` and every descendant, read from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            ppid, pages = int(fields[1]), int(fields[21])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
        rss[int(entry)] = pages * os.sysconf("SC_PAGE_SIZE") // 1024
    total, pss, todo = 0, 0, [root]
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        pss += _pss_kb(pid)
        todo.extend(children.get(pid, ()))
    return total, pss


def timed(cmd: list[str], cwd: str | None = None, env: dict | None = None,
          discard: bool = False) -> tuple[float, int, str]:
    """(seconds, peak process-tree RSS in kB, stdout: empty with ``discard``, for an output of
    hundreds of megabytes); the CPU seconds of the process tree (user and system, every
    descendant it waited for) are in :data:`LAST_CPU`, its peak summed PSS in :data:`LAST_PSS`."""
    global LAST_CPU, LAST_PSS
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL if discard else subprocess.PIPE, stderr=subprocess.DEVNULL,
                            cwd=cwd, env=env, text=True)
    peak = [0, 0]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            rss, pss = _tree_memory_kb(proc.pid)
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], pss)
            done.wait(0.02)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    out, _ = proc.communicate()
    elapsed = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    LAST_CPU = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    done.set()
    t.join()
    LAST_PSS = peak[1]
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:4])}... failed with status {proc.returncode}")
    return elapsed, peak[0], out


def _no_cache(repo: str) -> list[str]:
    """``--no-cache`` where the checkout knows it (a baseline may predate the cache)."""
    out = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--help"], capture_output=True, text=True,
                         cwd=repo).stdout
    return ["--no-cache"] if "--no-cache" in out else []


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mb", type=float, default=100)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--shapes", default=",".join(SHAPES))
    ap.add_argument("--repo", default=str(HERE.parent), help="checkout whose tuimon to time (cwd for python -m)")
    ap.add_argument("--baseline", help="another checkout to time beside --repo, alternating (its default only)")
    ap.add_argument("--reopen", action="store_true", help="also time reopening an unchanged directory")
    ap.add_argument("--reopen-mb", type=float, default=1000)
    ap.add_argument("--verb", choices=("summary", "events"), default="summary",
                    help="events: tuimon events (its JSON lines, discarded) where it says summary")
    args = ap.parse_args()
    if not shutil.which("perl"):
        raise SystemExit("perl not found: the baseline needs it")
    tmp = Path(tempfile.mkdtemp(prefix="tuimon-matrix-"))
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp / "cache"))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # every run would compile tuimon again (+0.2 s each)
    for repo in filter(None, (args.repo, args.baseline)):  # and compiled once, before any run is timed
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(repo) / "tuimon")], check=False)
    tui = [sys.executable, "-m", "tuimon", "summary", "--format", "json"]
    events = args.verb == "events"
    verb = [sys.executable, "-m", "tuimon", "events"] if events else tui
    rows = []
    try:
        for shape in filter(None, args.shapes.split(",")):
            log = tmp / f"{shape}.log"
            if not build(shape, log, args.mb):
                print(f"{shape:20s} SKIPPED: ../shared/corpus not found")
                continue
            mb = log.stat().st_size / 1e6
            best = {"perl": float("inf"), "default": float("inf"), "jobs1": float("inf"), "base": float("inf")}
            cpu = dict(best)  # least CPU seconds of each, over the runs
            rss = {"default": 0, "jobs1": 0, "base": 0}
            pss = dict(rss)
            runs = [("default", [], args.repo), ("jobs1", ["--jobs", "1"], args.repo)]
            if args.baseline:
                runs.append(("base", [], args.baseline))
            for _ in range(args.runs):  # alternating, best of each
                best["perl"] = min(best["perl"], timed(["perl", "-lne", PERL, str(log)])[0])
                cpu["perl"] = min(cpu["perl"], LAST_CPU)
                for name, extra, repo in runs:
                    if events and extra:  # (events reads its files in turn: no --jobs)
                        continue
                    t, peak, _ = timed(verb + extra + _no_cache(repo) + [str(log)], cwd=repo, env=env, discard=events)
                    best[name] = min(best[name], t)
                    cpu[name] = min(cpu[name], LAST_CPU)
                    rss[name] = max(rss[name], peak)
                    pss[name] = max(pss[name], LAST_PSS)
            if events:
                best["jobs1"], cpu["jobs1"], rss["jobs1"] = best["default"], cpu["default"], rss["default"]
                pss["jobs1"] = pss["default"]
            row = (shape, mb, mb / best["perl"], mb / best["default"], mb / best["jobs1"],
                   best["perl"] / best["default"], best["perl"] / best["jobs1"], rss["default"] / 1024,
                   pss["default"] / 1024, rss["jobs1"] / 1024, cpu["perl"] / max(cpu["default"], 1e-9),
                   cpu["perl"] / max(cpu["jobs1"], 1e-9))
            rows.append(row)
            print("{:20s} {:7.1f} MB  perl {:7.1f} MB/s  default {:6.1f} MB/s  jobs1 {:6.1f} MB/s  "
                  "ratio {:.3f} / {:.3f}  RSS {:5.0f} (PSS {:.0f}) / {:5.0f} MB  CPU ratio {:.3f} / {:.3f}".format(*row),
                  flush=True)
            if args.baseline:
                print(f"{'':20s} baseline default {mb / best['base']:6.1f} MB/s (ratio {best['perl'] / best['base']:.3f}, "
                      f"RSS {rss['base'] / 1024:.0f} MB); this checkout / baseline: {best['base'] / best['default']:.2f}x",
                      flush=True)
            log.unlink()
        if rows:
            print("\n| shape | MB | perl MB/s | default MB/s | --jobs 1 MB/s | ratio default | ratio --jobs 1 "
                  "| peak RSS default (PSS) | peak RSS --jobs 1 | CPU ratio default | CPU ratio --jobs 1 |")
            print("|---|---|---|---|---|---|---|---|---|---|---|")
            for r in rows:
                print("| {} | {:.0f} | {:.0f} | {:.1f} | {:.1f} | {:.3f} | {:.3f} | {:.0f} MB ({:.0f}) | {:.0f} MB | {:.3f} "
                      "| {:.3f} |".format(*r))
            worst = min(rows, key=lambda r: r[5])
            print(f"\nworst shape: {worst[0]}, ratio {worst[5]:.3f} (default), {worst[6]:.3f} (--jobs 1)")
        if args.reopen:
            reopen(tmp, args, tui, env)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def reopen(tmp: Path, args, tui: list[str], env: dict) -> None:
    """Summaries of one directory: cold, unchanged (cached), and after appending 10 MB."""
    d = tmp / "runs"
    d.mkdir()
    shapes = [s for s in SHAPES if s not in ("dense",)]
    per = args.reopen_mb / len(shapes)
    for shape in shapes:
        if not build(shape, d / f"{shape}.log", per):
            build("sparse", d / f"{shape}.log", per)
    files = sorted(str(p) for p in d.iterdir())
    mb = sum(os.path.getsize(f) for f in files) / 1e6
    perl = min(timed(["perl", "-lne", PERL, *files])[0] for _ in range(2))
    cold = timed(tui + [str(d)], cwd=args.repo, env=env)[0]
    warm = min(timed(tui + [str(d)], cwd=args.repo, env=env)[0] for _ in range(3))
    # each round appends as much again (the same work a round: a parse from the saved offset), best of 3
    grown_runs, perl2 = [], float("inf")
    for k in range(3):
        appended = "".join(sparse_block(j) for j in range(10**7 * (k + 1), 10**7 * (k + 1) + 10_000_000 // 2500))
        with open(d / "sparse.log", "a") as fh:
            fh.write(appended)
        perl2 = min(perl2, timed(["perl", "-lne", PERL, *files])[0])
        grown_runs.append(timed(tui + [str(d)], cwd=args.repo, env=env)[0])
    grown_mb = len(appended) / 1e6
    alone = tmp / "appended.log"  # the appended bytes on their own: what parsing them costs
    alone.write_text(appended)
    parse_alone = min(timed(tui + _no_cache(args.repo) + [str(alone)], cwd=args.repo, env=env)[0] for _ in range(3))
    print(f"\nreopen {mb:.0f} MB in {len(files)} files: cold {cold:.2f} s, unchanged {warm:.2f} s "
          f"(perl {perl:.2f} s, ratio perl/tuimon {perl / warm:.1f}); after appending {grown_mb:.1f} MB "
          f"{min(grown_runs):.2f} s (rounds: {', '.join(f'{t:.2f}' for t in grown_runs)}; perl {perl2:.2f} s; "
          f"a summary of those {grown_mb:.1f} MB alone: {parse_alone:.2f} s)")


if __name__ == "__main__":
    main()
