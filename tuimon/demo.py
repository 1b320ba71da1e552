"""``tuimon demo``: five simulated training jobs written live into a temporary
directory, shown as a refreshing summary table until time is up or Ctrl-C.

Until the Textual dashboard lands (issue 5) the demo renders the same summary
rows the ``summary`` command prints.  The simulator is deterministic per seed.
"""
from __future__ import annotations

import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator

from .ingest import parse_file
from .store import JobStore
from .summary import render_table, summarize

ITER = (" iteration {i:8d}/{n:8d} | consumed samples: {cs:12d} | elapsed time per iteration (ms): {ms:.1f} | "
        "learning rate: 1.406E-06 | global batch size: {gbs:5d} | lm loss: {loss:E} | loss scale: 1.0 | "
        "grad norm: {gn:.3f} | number of skipped iterations:   0 | number of nan iterations:   0 |{extra}")


def _args(layers: int, hidden: int, gbs: int, world: int, iters: int, tp: int = 1, pp: int = 1) -> list[str]:
    rows = {"activations_checkpoint_method": "uniform", "global_batch_size": gbs, "hidden_size": hidden,
            "num_attention_heads": 16, "num_layers": layers, "padded_vocab_size": 50304,
            "pipeline_model_parallel_size": pp, "seq_length": 1024, "tensor_model_parallel_size": tp,
            "train_iters": iters, "world_size": world}
    return (["------------------------ arguments ------------------------"]
            + [f"  {k} {'.' * (48 - len(k))} {v}" for k, v in rows.items()]
            + ["-------------------- end of arguments ---------------------"])


def _startup(stamp: time.struct_time) -> list[str]:
    return [f"Job started at: {time.strftime('%Y-%m-%d-%H%M%S', stamp)} on demo-node01",
            "> initializing torch distributed ...",
            ">>> done with compiling and loading fused kernels. Compilation time: 6.667 seconds"]


def _training_start() -> str:
    return f"[before the start of training step] datetime: {time.strftime('%Y-%m-%d %H:%M:%S')} "


def megatron_job(rng: random.Random, *, layers: int, gbs: int, world: int, base_ms: float, iters: int,
                 offload: bool = False, deepspeed: bool = False, oom_at: int | None = None, ranks: int = 1,
                 straggler: int | None = None) -> Iterator[list[str]]:
    """Yields the lines a job writes at each tick of the simulation."""
    yield _startup(time.localtime()) + _args(layers, 2048, gbs, world, iters)
    yield [_training_start()]
    for i in range(1, iters + 1):
        out = []
        for r in range(ranks):
            ms = base_ms * (1.6 if i == 1 else 1.0) * rng.uniform(0.97, 1.03)
            if straggler is not None and r == straggler:
                ms *= 1.35
            line = ITER.format(i=i, n=iters, cs=i * gbs, ms=ms, gbs=gbs, loss=10.5 * (0.995 ** i), gn=rng.uniform(1, 4),
                               extra="")
            out.append(f"{r}: {line}" if ranks > 1 else line)
        if deepspeed:
            stamp = time.strftime("%Y-%m-%d %H:%M:%S")
            out.insert(0, f"[{stamp},000] [INFO] [logging.py:96:log_dist] [Rank 0] step={i}, skipped=0, "
                          "lr=[0.0003, 0.0003], mom=[(0.9, 0.95), (0.9, 0.95)]")
        if offload:
            out.append(f"time (ms) | forward-compute: {base_ms * 0.14:.2f} | backward-compute: {base_ms * 0.85:.2f} | "
                       f"optimizer: 2.48 | offloading-fwd-overhead: {base_ms * 0.13:.2f} | "
                       f"offloading-bwd-overhead: {base_ms * 0.6:.2f} | offloading-func-call-overhead: 16.28")
        if oom_at is not None and i == oom_at:
            out += ["Traceback (most recent call last):", '  File "pretrain_gpt.py", line 150, in <module>',
                    "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB (GPU 0; 31.75 GiB "
                    "total capacity; 27.16 GiB already allocated; 244.44 MiB free)"]
            yield out
            return
        yield out


def still_starting() -> Iterator[list[str]]:
    yield _startup(time.localtime())[:2]
    while True:
        yield []


def simulate(directory: Path, seed: int = 0) -> Callable[[], None]:
    rng = random.Random(seed)
    jobs = {
        "megatron-deepspeed-gpt-13b-4001.out": megatron_job(rng, layers=40, gbs=512, world=64, base_ms=900.0,
                                                            iters=2000, deepspeed=True),
        "stronghold-5b-offload-4002.out": megatron_job(rng, layers=100, gbs=4, world=1, base_ms=25000.0, iters=500,
                                                       offload=True),
        "gpt-175b-startup-4003.out": still_starting(),
        "gpt-52b-oom-4004.out": megatron_job(rng, layers=64, gbs=1024, world=64, base_ms=3500.0, iters=1000,
                                             oom_at=6),
        "llama-7b-ranks-straggler-4005.out": megatron_job(rng, layers=32, gbs=256, world=4, base_ms=6000.0,
                                                          iters=3000, ranks=4, straggler=2),
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

    tick.close = lambda: [h.close() for h in handles.values()]  # type: ignore[attr-defined]
    return tick


def frame(directory: Path) -> str:
    store = JobStore()
    for path in sorted(directory.glob("*.out")):
        parse_file(path, path.name, sink=store.add)
    now = time.time()
    rows = [summarize(job, now=now, last_write=now) for job in store.jobs.values()]
    rows.sort(key=lambda r: r["job"])
    return render_table(rows)


def run_demo(seconds: float = 20.0, tick_s: float = 0.25) -> int:
    directory = Path(tempfile.mkdtemp(prefix="tuimon-demo-"))
    tick = simulate(directory)
    tty = sys.stdout.isatty()
    deadline = time.monotonic() + seconds
    try:
        next_frame = 0.0
        while time.monotonic() < deadline:
            tick()
            if time.monotonic() >= next_frame:
                next_frame = time.monotonic() + 1.0
                left = max(0, int(deadline - time.monotonic()))
                text = f"tuimon demo: 5 simulated jobs in {directory} (Ctrl-C quits, {left} s left)\n\n" + frame(directory)
                sys.stdout.write(("\x1b[H\x1b[2J" if tty else "\n") + text)
                sys.stdout.flush()
            time.sleep(tick_s)
    except KeyboardInterrupt:
        pass
    finally:
        tick.close()  # type: ignore[attr-defined]
        shutil.rmtree(directory, ignore_errors=True)
    print("\ntuimon demo: finished, temporary logs removed")
    return 0
