"""``tuimon demo``: five simulated training jobs written live into a temporary
directory at accelerated speed, shown in the dashboard; the directory is removed
on exit.

Every simulated line is one of the parsers' own sample lines (the lines their
tests check) with its numbers changed, so the demo exercises exactly the formats
tuimon is tested on: a Megatron-DeepSpeed run that hits a NaN and recovers, a
STRONGHOLD offload run with its timer hierarchy, memory and checkpoints, one stuck
in startup (flagged after ``STARTUP_TIMEOUT_S`` of demo time), one that dies of CUDA
OOM with its traceback in its ``.err``, and a multi-rank run with a straggler rank
and a loss spike.  Each names its GPU, so MFU shows.
"""
from __future__ import annotations

import os
import random
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

from tuimon.parsers.base import Sample
from tuimon.parsers.deepspeed import DeepSpeedParser
from tuimon.parsers.failures import FailureParser
from tuimon.parsers.formats import BUILTIN_FORMATS
from tuimon.parsers.megatron import MegatronParser
from tuimon.parsers.timers import TimerParser

from ..engine.ingest import parse_file
from ..figures.columns import render_summary
from ..figures.metrics import model_size_billion
from ..figures.summary import summarize
from ..store.job_store import JobStore
from .settings import Settings


def _sample(cls, *texts: str) -> Sample:
    """The first of ``cls``'s samples whose line holds every one of ``texts`` (by
    content: samples are added and removed, their positions move)."""
    return next(s for s in cls.SAMPLES if all(t in s.line for t in texts))


NEW_STYLE_ITERATION = _sample(MegatronParser, "] iteration ", "TFLOP/s/GPU").line  # stamped, with TFLOP/s/GPU
OLD_STYLE_ITERATION = _sample(MegatronParser, " iteration ", "number of nan iterations").line  # Megatron 2.x
OFFLOAD_TIMERS = _sample(TimerParser, "offloading-fwd-overhead").line
DS_STEP = _sample(DeepSpeedParser, "step=0, skipped=").line
OOM = _sample(FailureParser, "CUDA out of memory").line
JOB_STARTED = next(s.line for f in BUILTIN_FORMATS for e in f.lines for s in e.samples if "Job started at: " in s.line)
ARGS = next(s.lines for f in BUILTIN_FORMATS for b in f.blocks for s in b.samples
            if "num_layers" in s.expect and "end of arguments" in s.lines[-1])
FUSED = _sample(MegatronParser, "fused kernels").line
INIT = _sample(MegatronParser, "initializing torch distributed").line
TRAINING_START = _sample(MegatronParser, "before the start of training").line
MEMORY = _sample(MegatronParser, "[Rank 12] (after 1 iterations) memory (MB)").line
SAVED = _sample(TimerParser, "successfully saved checkpoint").line
SAVE_TIME = _sample(TimerParser, "save-checkpoint: ").line
_GPU_LINE = next(s.line for f in BUILTIN_FORMATS for e in f.lines for s in e.samples if s.line.startswith("GPU 0: "))
#: a stuck job is flagged after this much demo time (a real run's default is 600 s)
STARTUP_TIMEOUT_S = 25.0


def gpu_line(name: str) -> str:
    """nvidia-smi -L's line (the hardware format's sample) for another GPU model."""
    return _GPU_LINE.replace("NVIDIA A100-SXM4-80GB", name)

_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}[ -]\d{2}:?\d{2}:?\d{2}(?:[.,]\d+)?")


#: a STRONGHOLD iteration whose backward waits on its CPU offload: shares of e2e-time, each
#: part inside what holds it (parsers.timers.TIMER_PARENTS)
OFFLOAD_SHARES = {
    "e2e-time": 1.0, "forward-compute": 0.14, "backward-compute": 0.80, "optimizer": 0.05,
    "batch-generator": 0.0002, "backward-embedding-all-reduce": 0.00001,
    "offloading-func-call-overhead": 0.002, "offloading-fwd-overhead": 0.12, "offloading-fwd-2gpu-overhead": 0.055,
    "offloading-fwd-2cpu-overhead": 0.065, "offloading-bwd-overhead": 0.55, "offloading-bwd-2gpu-overhead": 0.03,
    "offloading-bwd-2cpu-overhead": 0.52,
}


def fill(sample: str, values: dict[str, str], iteration: Optional[tuple[int, int]] = None) -> str:
    """A sample line with the values of some ``key: value`` fields replaced."""
    out = sample
    for key, value in values.items():
        out = re.sub(rf"({re.escape(key)}:\s*)[^|\s]+", lambda m: m.group(1) + value, out)
    if iteration is not None:
        out = re.sub(r"iteration(\s+)\d+/(\s*)\d+", lambda m: f"iteration{m.group(1)}{iteration[0]}/"
                     f"{m.group(2)}{iteration[1]}", out)
    return out


def stamp(line: str, when: Optional[time.struct_time] = None, compact: bool = False) -> str:
    when = when or time.localtime()
    text = time.strftime("%Y-%m-%d-%H%M%S" if compact else "%Y-%m-%d %H:%M:%S", when)
    return _STAMP.sub(lambda m: text + (m.group(0)[19:] if not compact and len(m.group(0)) > 19 else ""), line,
                      count=1)


def _args(layers: int, gbs: int, world: int, hidden: int = 2048) -> list[str]:
    replace = {"num_layers": layers, "global_batch_size": gbs, "tensor_model_parallel_size": 1, "hidden_size": hidden}
    lines = []
    for line in ARGS:
        m = re.match(r"(\s+)(\w+) (\.+) (\S+)", line)
        if m and m.group(2) in replace:
            line = f"{m.group(1)}{m.group(2)} {m.group(3)} {replace[m.group(2)]}"
        lines.append(line)
    extra = [f"  seq_length {'.' * 38} 1024", f"  padded_vocab_size {'.' * 31} 50304", f"  world_size {'.' * 38} {world}"]
    return lines[:-1] + extra + lines[-1:]


def megatron_job(rng: random.Random, *, layers: int, gbs: int, world: int, base_ms: float, iters: int,
                 gpu: str, hidden: int = 2048, style: str = "new", offload: bool = False, deepspeed: bool = False,
                 oom_at: Optional[int] = None, ranks: int = 1, straggler: Optional[int] = None,
                 nan_at: Optional[int] = None, spike_at: Optional[int] = None,
                 err: Optional[list[str]] = None) -> Iterator[list[str]]:
    """The lines one job writes at each tick of the simulation (its ``.err`` lines go to ``err``)."""
    yield [stamp(JOB_STARTED, compact=True), gpu_line(gpu), INIT, FUSED] + _args(layers, gbs, world, hidden)
    yield [stamp(TRAINING_START)]
    for i in range(1, iters + 1):
        out = []
        for r in range(ranks):
            ms = base_ms * (1.6 if i == 1 else 1.0) * rng.uniform(0.97, 1.03)
            if straggler is not None and r == straggler:
                ms *= 1.35
            loss = 10.5 * (0.995 ** i) + rng.uniform(-0.02, 0.02) + (4.0 if i == spike_at else 0.0)
            loss_text = "nan" if i == nan_at else f"{loss:E}"
            values = {"elapsed time per iteration (ms)": f"{ms:.1f}", "global batch size": f"{gbs:5d}",
                      "lm loss": loss_text, "grad norm": "nan" if i == nan_at else f"{1.5 + 0.02 * (i % 7):.3f}"}
            if style == "new":
                values["consumed samples"] = f"{i * gbs:12d}"
                # the log's own figure, as Megatron's formula gives it (attention included: a little above ours)
                values["throughput per GPU (TFLOP/s/GPU)"] = "{:.1f}".format(
                    1.03 * model_size_billion(layers, hidden, 1024, 50304) * 4 * 2 * 1024 * gbs
                    / (ms / 1000 * world * 1e3))
                line = stamp(fill(NEW_STYLE_ITERATION, values, (i, iters)))
            else:
                line = fill(OLD_STYLE_ITERATION, values, (i, iters))
            out.append(f"{r}: {line}" if ranks > 1 else line)
        if deepspeed:
            out.insert(0, stamp(fill(DS_STEP, {}).replace("step=0,", f"step={i},")))
        if offload:
            out.append(fill(OFFLOAD_TIMERS, {name: f"{base_ms * share:.2f}" for name, share in OFFLOAD_SHARES.items()}))
        if i % 5 == 0:  # memory every few iterations, a checkpoint every ten
            out.append(MEMORY.replace("after 1 iterations", f"after {i} iterations").replace("[Rank 12] ", ""))
        if i % 10 == 0:
            out.append(SAVED.replace("iteration      50", f"iteration {i:8d}"))
            out.append(SAVE_TIME.replace("66891.40", f"{base_ms * 1.8:.2f}"))
        if oom_at is not None and i == oom_at:
            failure = ["Traceback (most recent call last):", '  File "pretrain_gpt.py", line 150, in <module>', OOM]
            if err is not None:  # Slurm writes the job's stderr to its .err: one job, two files
                err.extend(failure)
            else:
                out += failure
            yield out
            return
        yield out


def _drain(lines: list[str]) -> Iterator[list[str]]:
    """What another job put in ``lines`` since the last tick (its stderr)."""
    while True:
        out, lines[:] = list(lines), []
        yield out


def still_starting() -> Iterator[list[str]]:
    yield [stamp(JOB_STARTED, compact=True), INIT]
    while True:
        yield []


def simulate(directory: Path, seed: int = 0) -> Callable[[], None]:
    """Returns ``tick()``: each call appends one step of every job's log."""
    rng = random.Random(seed)
    oom_err: list[str] = []
    jobs: dict[str, Iterator[list[str]]] = {
        # each job's shape gives the size its name says (12 l h^2: 13 B, 5 B, 52 B, 7 B), and its
        # iteration time an MFU such runs reach (about 40% of the GPU's bf16 peak; STRONGHOLD offloading, 5%)
        "megatron-deepspeed-gpt-13b-4001.out": megatron_job(rng, layers=40, hidden=5120, gbs=512, world=64,
                                                            base_ms=2150.0, iters=2000, deepspeed=True,
                                                            gpu="NVIDIA H100 80GB HBM3", nan_at=40),
        "stronghold-5b-offload-4002.out": megatron_job(rng, layers=100, gbs=4, world=1, base_ms=25000.0, iters=500,
                                                       style="old", offload=True, gpu="Tesla V100-SXM2-32GB"),
        "gpt-175b-startup-4003.out": still_starting(),
        "gpt-52b-oom-4004.out": megatron_job(rng, layers=64, hidden=8192, gbs=1024, world=64, base_ms=48000.0,
                                             iters=1000, oom_at=6, gpu="NVIDIA A100-SXM4-80GB", err=oom_err),
        "gpt-52b-oom-4004.err": _drain(oom_err),
        "llama-7b-ranks-straggler-4005.out": megatron_job(rng, layers=32, hidden=4096, gbs=256, world=4,
                                                          base_ms=23000.0, iters=3000, ranks=4, straggler=2,
                                                          spike_at=30, gpu="NVIDIA A100-SXM4-80GB"),
    }
    handles = {name: open(directory / name, "a", encoding="utf-8") for name in jobs}

    def tick() -> None:
        for name, gen in jobs.items():
            try:
                lines = next(gen)
            except StopIteration:
                continue
            if lines:
                handles[name].write("".join(line + "\n" for line in lines))
                handles[name].flush()

    def close() -> None:
        for h in handles.values():
            h.close()

    tick.close = close  # type: ignore[attr-defined]
    return tick


class Simulator:
    """Writes the demo logs from a background thread until stopped."""

    def __init__(self, directory: Path, tick_s: float = 0.5) -> None:
        self.directory = directory
        self.tick_s = tick_s
        self._tick = simulate(directory)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tuimon-demo-writer", daemon=True)

    def start(self) -> "Simulator":
        self.first_lines()
        self.run_in_background()
        return self

    def first_lines(self) -> None:
        self._tick()  # the first lines exist before the app opens

    def run_in_background(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.tick_s):
            self._tick()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        self._tick.close()  # type: ignore[attr-defined]


def frame(directory: Path) -> str:
    store = JobStore()
    for path in sorted(p for p in directory.iterdir() if p.suffix in (".out", ".err")):
        parse_file(path, path.name, sink=store.add)
    now = time.time()
    rows = [summarize(job, now=now, last_write=now, startup_timeout=STARTUP_TIMEOUT_S) for job in store.jobs.values()]
    rows.sort(key=lambda r: r.job)
    return render_summary(rows, "table")


def run_headless(directory: Path, seconds: float) -> int:
    tty = sys.stdout.isatty()
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            left = max(0, int(deadline - time.monotonic()))
            text = f"tuimon demo: 5 simulated jobs in {directory} (Ctrl-C quits, {left} s left)\n\n" + frame(directory)
            sys.stdout.write(("\x1b[H\x1b[2J" if tty else "\n") + text)
            sys.stdout.flush()
            time.sleep(1.0)
    except KeyboardInterrupt:
        pass
    return 0


def _remove_on_signals(directory: Path) -> None:
    """A closed terminal (SIGHUP) or a kill (SIGTERM) ends the demo without its ``finally``:
    the temporary logs go first, then the signal does what it would have done."""
    def removed_then_default(signum: int, _frame: object) -> None:
        shutil.rmtree(directory, ignore_errors=True)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    for name in ("SIGHUP", "SIGTERM"):
        sig = getattr(signal, name, None)
        if sig is not None and threading.current_thread() is threading.main_thread():
            signal.signal(sig, removed_then_default)


def run_demo(settings: Settings, run_app: Callable[..., int]) -> int:
    """``run_app``: the CLI's, which runs the dashboard as ``watch`` does (passed in, so that
    the demo needs no import of the CLI that imports it)."""
    settings = settings.with_(startup_timeout=STARTUP_TIMEOUT_S)  # the demo runs at accelerated speed
    directory = Path(tempfile.mkdtemp(prefix="tuimon-demo-"))
    _remove_on_signals(directory)
    sim = Simulator(directory, tick_s=0.25 if settings.headless else 0.5)
    sim.first_lines()
    try:
        if settings.headless:
            sim.run_in_background()
            code = run_headless(directory, settings.seconds or 20.0)
        else:
            code = run_app([str(directory)], settings, quit_after=settings.seconds, after_start=sim.run_in_background)
    finally:
        sim.stop()
        shutil.rmtree(directory, ignore_errors=True)
    print("tuimon demo: finished, temporary logs removed")
    return code
