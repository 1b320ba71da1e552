"""The compiled core (tuimon._core) against the Python engine, its oracle: the same events.

Both engines read every fixture, every corpus file, the bench shapes (small sizes) and
generated logs (launcher prefixes, stamps, CRLF and lone CR, invalid UTF-8, huge lines,
interleaved ranks, block edges anywhere), and must give identical events.  The core's
line pieces (prefix, stamp) are also held to the Python definitions one line at a time.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import FIXTURE_LOGS, ROOT, shared_or_skip
from tuimon.engine import blocks, native, rows
from tuimon.engine.ingest import parse_file
from tuimon.figures.summary import summarize
from tuimon.parsers.columns import IterationRows, MemoryRows, TimerRows, expand, slices
from tuimon.parsers import megatron, timers
from tuimon.parsers.events import frozen_map
from tuimon.parsers.numbers import to_float, to_int
from tuimon.parsers.prefix import split_prefix
from tuimon.parsers.timestamps import line_stamp
from tuimon.store.job_store import JobStore

core = native.core
if core is None:  # loud: the README's test command builds it; a test that cannot compare must not pass
    pytest.skip(f"the compiled core is not importable ({native.name()}): "
                "pip install -e '.[test]' builds it (cargo and maturin)", allow_module_level=True)


def _items(path: Path, engine: str, read_size: int = 1 << 20) -> tuple[list, Any]:
    """What a reader is handed (the core's plain timer lines as rows), and the stats."""
    before = native.use(core if engine == "core" else None)
    items: list = []
    try:
        return items, parse_file(path, read_size=read_size, sink=items.extend)[1]
    finally:
        native.use(before)


def _reprs(items: list, stats: Any) -> list[str]:
    # the core's timer rows stand for the events the Python hook gives
    return [repr(ev) for ev in expand(items)] + [repr((stats.lines, stats.too_long, stats.invalid_utf8, stats.failed))]


def _store_state(items: list, slice_size: int = 0) -> list:
    """Everything a store keeps of its jobs' timers, and every job's summary (the items
    added at once, or in slices as a live session adds them)."""
    store = JobStore()
    for part in slices(items, slice_size) if slice_size else (items,):
        store.add(part)
    out = []
    for key, job in store.jobs.items():
        timers = [(name, t.group, t.total_ms, t.count, t.last_ms, t.in_training, list(t._at), list(t._sum),
                   list(t._val[1:]), t._stride, t.aside_count, t.aside_ms) for name, t in job.timers.items()]
        # (the step rows' part: the steps and reported series bit for bit, the latest values)
        steps = (job.steps.points.tobytes(), job.reported.points.tobytes(), repr(sorted(job.memory.items())),
                 job.last_step_number, repr(job.last_step_loss), repr(job.last_step_lr), job.last_progress,
                 job.last_progress_wall, job.first_step_wall, repr(job.nan_at), repr(job.nan_events))
        out.append((key, job.events, sorted(job.ranks_seen), job.first_wall, job.last_wall, repr(timers),
                    sorted(job.after_eval), steps,
                    repr(summarize(job, now=0.0).as_dict())))
    return out


def _same(path: Path, monkeypatch, read_size: int = 1 << 20) -> int:
    python_items, python_stats = _items(path, "python", read_size)
    core_items, core_stats = _items(path, "core", read_size)
    want, got = _reprs(python_items, python_stats), _reprs(core_items, core_stats)
    for k, (a, b) in enumerate(zip(want, got)):
        assert a == b, f"{path.name}: event {k} differs:\n python: {a}\n core:   {b}"
    assert len(want) == len(got), f"{path.name}: {len(want)} events from Python, {len(got)} from the core"
    # the store folds the rows in bulk to what it makes of the events one by one
    want_state = _store_state(python_items)
    assert _store_state(core_items) == want_state, path.name
    assert _store_state(core_items, 7) == want_state, f"{path.name}: in slices"
    return len(want)


# -- whole logs ---------------------------------------------------------------------------
@pytest.mark.parametrize("path", FIXTURE_LOGS, ids=lambda p: p.name)
def test_fixtures_give_the_same_events(path, monkeypatch):
    assert _same(path, monkeypatch) > 1


def test_corpus_gives_the_same_events(monkeypatch):
    corpus = shared_or_skip("corpus")
    files = sorted(p for p in corpus.rglob("*") if p.is_file() and p.suffix not in (".tsv", ".md", ".gz", ".zst"))
    assert len(files) > 50, f"only {len(files)} corpus files under {corpus}"
    total = sum(_same(path, monkeypatch) for path in files)
    assert total > 10_000, total


@pytest.mark.parametrize("walk", [1, 1 << 40], ids=["at-once", "line-by-line"])
@pytest.mark.parametrize("shape", ["dense", "sparse", "srun-mcore", "titan-hf", "corpus-megatron",
                                   "ds-neox-stronghold", "llmc", "nanogpt"])
def test_bench_shapes_give_the_same_events(shape, walk, tmp_path, monkeypatch):
    monkeypatch.setattr(blocks, "BULK_WALK", walk)  # (see _WALKS)
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import matrix
    finally:
        sys.path.remove(str(ROOT / "bench"))
    path = tmp_path / "train.log"
    if not matrix.build(shape, path, 0.5):
        pytest.skip(f"the {shape} shape needs ../shared's corpus (or TUIMON_SHARED=/path/to/shared)")
    assert _same(path, monkeypatch, read_size=1 << 16) > 100
    rows = sum(len(item) for item in _items(path, "core", 1 << 16)[0] if type(item) is TimerRows)
    if shape in ("dense", "srun-mcore", "corpus-megatron", "ds-neox-stronghold"):
        assert rows > 100, f"{shape}: {rows} timer lines read in columns"
    if shape in ("llmc", "nanogpt"):  # (a declared format's step lines go to the store as rows)
        runs = sum(len(item) for item in _items(path, "core", 1 << 16)[0] if type(item) is IterationRows)
        assert runs > 1000, f"{shape}: {runs} step lines as rows"


# -- generated logs -----------------------------------------------------------------------
_PREFIXES = st.sampled_from(["", "0: ", "12: ", "  3: ", "      7: ", "       8: ", "gpu-node12: ", "10.0.0.1: ",
                             "localhost: ", "node: ", "[default3]: ", "[default0]:", "[rank5]: ", "[rank5]:[rank5]: ",
                             "0: [default1]: [rank9]: ", "x1000c0s0b0n0: [rank3]: ", "1: [rank1]:", "abc1:def "])
_STAMPS = st.sampled_from(["", "[2024-05-01 10:00:01,250] ", "[2024-05-01 10:00:01] ", "2021-05-27T21:42:11 ",
                           "[titan] 2026-05-19 23:02:48,804 - root - INFO - ", " [2026-04-15 11:19:02.524672] ",
                           "[2024-13-01 10:00:01] ", "[0000-01-01 00:00:00] ", "[2023-02-31 23:59:61.123456789] ",
                           "\x1c2024-05-01 10:00:01 ", "[2024-05-01 10:00:01,1234567890] ", "[INFO] [2024-05-01 1"])
_BODIES = st.sampled_from([
    " iteration       10/ 1000 | consumed samples: 640 | elapsed time per iteration (ms): 2500.5 | learning rate: "
    "3.000E-04 | global batch size: 64 | lm loss: 2.5E+00 | loss scale: 4096.0 | grad norm: 1.2 | number of skipped "
    "iterations: 0 | number of nan iterations: 0 |",
    "time (ms) | forward-compute: 612.1 | backward-compute: 1501.2 | optimizer: 250.1",
    " samples/sec: 3.412 | iteration       20/     100 | elapsed time per iteration (ms): 4689.0 | approx flops per "
    "GPU: 712.3GFLOPS | MFU: 2.28% | HFU: 3.04% | lm_loss: 9.1E+00 | number of nan iterations:   0 |",
    " iteration 7/ 9 | approx flops per GPU: 1.2PFLOPS | MFU: n/a | lm_loss: 2.0 |",
    " iteration 126/ 5000 | elapsed time per iteration (ms): 13372.8/13364.7 | throughput per GPU (TFLOP/s/GPU): "
    "567.6/568.0 | tokens per GPU (tokens/s/GPU): 9801.4/9807.3 | tokens/sec/gpu: 8000.5 | lm loss: 6.5E-03 |",
    " iteration 8/ 9 | approx flops per GPU: 12 | approx flops per GPU: x1TFLOPS | lm_loss: 2.0 |",
    "(min, max) time across ranks (ms):", "    forward-backward ...........: (1000.12, 1100.34)",
    "max time across ranks (ms):", "    forward-backward ...........: 1100.34", "    a b ..: 1,5", "  x ..: inf",
    "[Rank 0] (after 5 iterations) memory (MB) | allocated: 15382.8 | max allocated: 19070.7 | reserved: 26762.0",
    "[Rank 0] (after 5 iterations) memory (MB) | allocated: 15382.8 | max allocated: 19070.7 | res",
    "erved: 42498.00 | max reserved: 42498.00",
    "[INFO] [logging.py:96:log_dist] [Rank 0] step=10, skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]",
    # DeepSpeed's step, samples and pipeline lines the core reads, and those only the hook reads (step 0
    # and 00, a value only to_float reads, a long counter, the older samples line)
    "[INFO] [logging.py:96:log_dist] [Rank 3] step=20, skipped=2, lr=[3.4e-06, 3.4e-06], mom=[(0.9, 0.95)]",
    "[logging.py:96:log_dist] [Rank 0] step=0, skipped=0, lr=[0.0, 0.0]", "step=00, skipped=0, lr=[1e-3]",
    "[Rank 12345678] step=7, skipped=01, lr=[]", "step=1234567890123456789, skipped=0, lr=[nan]",
    "[Rank 1] step=30, skipped=0, lr=[1,5e-4]",
    "[INFO] [timer.py:199:stop] epoch=9/micro_step=350/global_step=4490, RunningAvgSamplesPerSec=171.76, "
    "CurrSamplesPerSec=171.67, MemAllocated=2.17GB, MaxMemAllocated=19.79GB",
    "[timer.py:198:stop] 0/20, RunningAvgSamplesPerSec=232.73, CurrSamplesPerSec=227.48, MemAllocated=0.36GB, "
    "MaxMemAllocated=15.06GB", "[timer.py:260:stop] epoch=0/micro_step=10/global_step=10, RunningAvgSamplesPerSec=2, "
    "CurrSamplesPerSec=28.1", "MemAllocated=1GB, MaxMemAllocated=2GB global_step=5, RunningAvgSamplesPerSec=1, "
    "CurrSamplesPerSec=inf, MemAllocated=1.2xGB, MaxMemAllocated=3GB",
    "[timer.py:181:stop] 0/50, SamplesPerSec=0.25199842464335126 global_step=3, RunningAvgSamplesPerSec=1, "
    "CurrSamplesPerSec=2", "steps: 2 loss: 12.8004 iter time (s): 145.206 samples/sec: 7.052",
    "steps: 20 loss: 12.8004 iter time (s): 1,5 samples/sec: 7.052", "steps: 3 loss: nan iter time (s): 1.0 "
    "samples/sec: x", "steps: 4 loss: 2.5123 moe_loss: 0.0125 aux loss: 1 iter time (s): 1.250 samples/sec: 51.2",
    "steps: 5 loss: 2.5 moe_loss: 0.0125 lbl_loss: 0.5 iter time (s): 1.250 samples/sec: 51.2",
    "step: 10  loss:  7.1234  memory: 30.12GiB(31.70%)  tps: 65,622  tflops: 304.53  mfu: 14.59%",
    # metrics lines the core types, and those whose values only Python's to_float reads (the hook's)
    "step: 20  loss: nan  memory: 1.5GiB(3%)  tps: 1,2.5  tflops: 1,  mfu: .", "validate step: 5  loss: 1.0",
    "step: 7  tps: 5", "\x1b[31mstep: 30  \x1b[32mloss:  2.5  wps: 1,234  mfu: 9.9%\x1b[39m memory: 2GB",
    "step: 1.5  loss: 3", "step: 40  loss: 2.0  memory: 1.2.3GiB  tflops: 5e1",
    "{'loss': 2.1, 'grad_norm': 0.5, 'learning_rate': 5e-05, 'epoch': 0.1}",
    # dicts the core reads, and those whose values only Python's to_float reads (the hook's)
    "{'loss': nan, 'grad_norm': inf, 'learning_rate': 1.2.3, 'epoch': 1e5x}", "{'loss': 3., 'a/b': +1e-3, 'x': 'y'}",
    "{'train_runtime': 12.5, 'train_samples_per_second': 1,234, 'train_steps_per_second': 0.5, 'epoch': 3.0}",
    "{'loss': 2.0, 'loss': 1.5}", "{'train_runtime': 1.0, 'train_steps_per_second': 0}",
    # transformers 5 and ms-swift quote the numbers; a quote that does not close is no pair
    "{'loss': '10.96', 'grad_norm': '0.3923', 'learning_rate': '0.000135', 'epoch': '0.0125'}",
    "{'train_runtime': '50.68', 'train_samples_per_second': '126.3', 'train_steps_per_second': '7.892', "
    "'train_loss': '10.85', 'epoch': '0.5'}", "{'loss': '1.5, 'epoch': 2', 'x': '1e5', 'y': '-inf'}",
    "{'loss': '1,234', 'memory(GiB)': '17.88', 'global_step/max_steps': '10/100', 'epoch': '.5'}",
    "Effective Tera Flops per GPU: 41.2 and total parameters 52.005 B",
    "------------------------ arguments ------------------------", "  num_layers ...................... 24",
    "-------------------- end of arguments ---------------------", "using world size: 8",
    "  inference_dynamic_batching_buffer_size_gb .. 40.0", "  seq_length ....... 1,024", "  fp16 ...... True",
    "NumWorkers: 1; SamplesPerStep: 4; IterationTime: 7.123;  SamplesPerSecond: 0.5512",
    "Traceback (most recent call last):", "torch.OutOfMemoryError: CUDA out of memory.",
    ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1, \"event_type\": \"POINT_IN_TIME\", \"key\": \"eval_accuracy\", "
    "\"value\": 0.5, \"metadata\": {\"epoch_num\": 1}}",
    "iter 100: loss 3.24, time 123ms", "plain noise line", "", "é█ progress 47%|████▋  | 7/15 [06:19<07:13]",
    # timer lines the core reads, and those it leaves to the hook (a save, the first offloading
    # timer, a comms-logger line, a number only to_float reads, a [Rank N] tag)
    "time (ms) | offloading-fwd-overhead: 31.5 | offloading-bwd-overhead: 40.2 | forward-compute: 1.0",
    "time (ms) | save-checkpoint: 66891.40 | forward-compute: 2.0", "  successfully saved checkpoint at iteration "
    "50 to ckpt", "[Rank 3] rank=3 time (ms) | forward: 1.5 | step: 2.5", "time (ms) | a: n/a | b: 1,234.5 | c: inf",
    "rank=0 | comm op: broadcast | time (ms): 3907.38 | msg size: 576.0 B", "    save-checkpoint .....: (1.0, 2.0)",
    "    offloading-x ..: (1.0, nan)", "time (ms) | forward: 1e400 | backward: -0.0",
    "time (ms) | broadcast: 2.5 | forward: 1.0", "[Rank 1] rank=1 | comm op: all_reduce | time (ms): n/a | x",
    "rank=0 | comm op:  | time (ms): 1.0 | msg size: 1 KB",
])
_ENDS = st.sampled_from([b"\n", b"\n", b"\n", b"\r\n", b"\r", b"\r\r\n"])
_JUNK = st.sampled_from([b"", b"", b"", b"\xff\xfe", b"\xc3", b"\x00", b"\xe2\x96", "ŝ".encode()])


@st.composite
def _log(draw) -> bytes:
    out = []
    for _ in range(draw(st.integers(1, 60))):
        line = (draw(_PREFIXES) + draw(_STAMPS) + draw(_BODIES)).encode()
        cut = draw(st.integers(0, len(line)))
        line = line[:cut] + draw(_JUNK) + line[cut:]
        if draw(st.integers(0, 40)) == 0:
            line = line * draw(st.integers(50, 400))  # a huge line (some past the framer's limit)
        out.append(line + draw(_ENDS))
    return b"".join(out)


#: BlockEngine._events walks the core's lines between two hook lines at once from BULK_WALK of them,
#: else one at a time: always at once, as built, and always one at a time
_WALKS = st.sampled_from([1, blocks.BULK_WALK, 1 << 40])


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=_log(), read_size=st.sampled_from([64, 1000, 1 << 16]), walk=_WALKS)
def test_generated_logs_give_the_same_events(data, read_size, walk, tmp_path, monkeypatch):
    path = tmp_path / "gen.log"
    path.write_bytes(data)
    monkeypatch.setattr(blocks, "BULK_WALK", walk)
    _same(path, monkeypatch, read_size)


@pytest.mark.parametrize("walk", [1, blocks.BULK_WALK])
def test_the_log_start_goes_before_the_first_line_that_gives_something(walk, tmp_path, monkeypatch):
    """The first stamped line is one the core reads and makes nothing of (a DeepSpeed step line it
    does not take), then timer lines the core reads as rows, then a hook's line: the log start
    goes before the first timer row, as in the Python engine, where the rows are walked at once
    (hypothesis found it with a walk of one line; a log's start with as many timer lines as a walk
    at once takes shows it as built)."""
    head = "[2024-05-01 10:00:01,250] steps: 4 loss: 2.5123 moe_loss: 0.0125 aux loss: 1 iter time (s): 1.250 samples/sec: 51.2\n"
    timers = "time (ms) | forward-compute: 612.1 | backward-compute: 1501.2 | optimizer: 250.1\n" * (walk + 2)
    tail = (" iteration       10/ 1000 | consumed samples: 640 | elapsed time per iteration (ms): 2500.5 | learning rate: "
            "3.000E-04 | global batch size: 64 | lm loss: 2.5E+00 | loss scale: 4096.0 | grad norm: 1.2 | number of "
            "skipped iterations: 0 | number of nan iterations: 0 |\n")
    path = tmp_path / "start.log"
    path.write_text(head + timers + tail)
    monkeypatch.setattr(blocks, "BULK_WALK", walk)
    _same(path, monkeypatch)
    items, _ = _items(path, "core", 1 << 20)
    kinds = [type(e).__name__ for e in expand(items)]
    assert kinds[:2] == ["Milestone", "Timers"], kinds[:4]


_MINMAX_PIECES = st.sampled_from(["    ", " ", "forward-compute", "a", "1", "..", ".", "....", ": ", ":", "(", ")", ", ",
                                  ",", "1001.12", "1e3", "inf", "nan", "n/a", "\t", "\x0b", "\r", "\x1c", "é", " .. ",
                                  "batch-generator ....: ", "(1.5, 2.5)"])


@st.composite
def _minmax_body(draw) -> str:
    """A ``(min, max)`` timer line's parts, one of them changed or another put in, or pieces in any order."""
    if draw(st.booleans()):
        return "".join(draw(st.lists(_MINMAX_PIECES, max_size=16)))
    parts = ["    ", draw(st.sampled_from(["forward-compute", "a b", "x ..y", "optimizer-copy-to-main-grad"])), " ",
             draw(st.sampled_from(["..", "....", "."])), ": ",
             draw(st.sampled_from(["(1001.12, 1101.34)", "4670.69", "4670.69 ", "(1, 2) ", "(1,2)", "(1, 2, 3)"]))]
    at = draw(st.integers(0, len(parts)))
    parts.insert(at, draw(st.sampled_from(["", "", " ", ".", ":", "(", ",", "\t", "\x0b"])))
    return "".join(parts)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(bodies=st.lists(_minmax_body(), min_size=1, max_size=8), prefix=st.sampled_from(["", "3: "]))
def test_min_max_timer_lines_the_core_reads_by_their_shape_give_the_hooks_events(bodies, prefix, tmp_path,
                                                                                  monkeypatch):
    """The core reads a ``(min, max)`` line by its declared shape, not a regex; the hook by the
    regex made of the shape: the same events, line for line."""
    head = f"{prefix}(min, max) time across ranks (ms):\n"
    path = tmp_path / "minmax.log"
    path.write_text(head + "".join(f"{prefix}{body}\n" for body in bodies), encoding="utf-8")
    _same(path, monkeypatch)


def test_lines_two_readers_or_another_rule_are_on_go_to_every_hook(tmp_path, monkeypatch):
    """A line two core readers are on (an iteration record holding a timer list), or that another
    rule also matches (a timer list naming the GPU), is left to the hooks, each of which reads it as
    the Python engine does; the lines around them are the core's."""
    record = " iteration {k}/ 100 | elapsed time per iteration (ms): 2500.5 | lm loss: 2.5E+00 |"
    lines = []
    for k in range(1, 40):
        lines.append(record.format(k=k))
        lines.append("time (ms) | forward-compute: 612.1 | backward-compute: 1501.2")
        if k % 3 == 0:
            lines.append(record.format(k=k) + " time (ms) | forward-compute: 600.0 | optimizer: 10.0")
        if k % 4 == 0:
            lines.append("time (ms) | forward on NVIDIA A100-SXM4-80GB: 1.5 | backward-compute: 2.0")
    path = tmp_path / "shared.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for read_size in (256, 1 << 20):
        _same(path, monkeypatch, read_size)
    # a user's format on some of the iteration lines: its event, and no built-in one of its type, on them
    from tuimon.engine import catalog

    fmt = tmp_path / "mine.toml"
    fmt.write_text('name = "mine"\n[[lines]]\nevent = "iteration"\nanchor = "ours"\n'
                   "regex = 'iteration (?P<iteration>\\d+)/ 100 .* ours'\n")
    cat = catalog.load([fmt])
    assert not cat.errors, cat.errors
    path.write_text("\n".join(line + (" ours" if k % 5 == 0 and "iteration" in line else "")
                              for k, line in enumerate(lines)) + "\n", encoding="utf-8")
    before = catalog.current()
    catalog.use(cat)
    try:
        assert _same(path, monkeypatch) > 0
    finally:
        catalog.use(before)


@pytest.mark.parametrize("walk", [1, 1 << 40], ids=["at-once", "line-by-line"])
def test_rate_lines_name_the_iteration_the_lines_before_them_left(walk, tmp_path, monkeypatch):
    """Megatron-DeepSpeed's ``Effective Tera Flops`` and ``NumWorkers`` lines are at the iteration
    of the last record before them: one the core read, or one its hook read (not ASCII) after it."""
    monkeypatch.setattr(blocks, "BULK_WALK", walk)
    record = " iteration {k}/ 100 | elapsed time per iteration (ms): 2500.5 | lm loss: 2.5E+00 |{tail}"
    lines = []
    for k in range(1, 60):
        lines.append(record.format(k=k, tail=" é" if k % 3 == 0 else ""))  # (every third the hook's)
        lines.append("Effective Tera Flops per GPU: 41.2 and total parameters 52.005 B")
        lines.append("NumWorkers: 1; SamplesPerStep: 4; IterationTime: 7.123;  SamplesPerSecond: 0.5512")
        if k % 4 == 0:
            lines.append("Effective Tera Flops per GPU: 40.0 and total parameters 52.005 B")
    path = tmp_path / "rates.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert _same(path, monkeypatch) > 200
    rates = [ev for ev in expand(_items(path, "core")[0]) if ev.type == "throughput"]
    assert [ev.iteration for ev in rates[:7]] == [1, 1, 2, 2, 3, 3, 4]


_ROW_KINDS = {  # a line of each kind the core reads into rows its parser makes many at once (rows._ROWS_OF)
    "ds-step": "[INFO] [logging.py:96:log_dist] [Rank 0] step={k}, skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]",
    "ds-samples": "[INFO] [timer.py:260:stop] epoch=0/micro_step={k}/global_step={k}, RunningAvgSamplesPerSec=2.5, "
                  "CurrSamplesPerSec=28.1, MemAllocated=1GB, MaxMemAllocated=2GB",
    "ds-pipe": "steps: {k} loss: 2.5123 iter time (s): 1.250 samples/sec: 51.2",
    "metrics": "[titan] 2026-05-19 23:02:{s:02d},804 - root - INFO - step: {k}  loss:  7.1234  memory: 30.12GiB(31.70%)  "
               "tps: 65,622  tflops: 304.53  mfu: 14.59%",
    "hf-dict": "{{'loss': 2.1, 'grad_norm': 0.5, 'learning_rate': 5e-05, 'epoch': 0.{k}}}",
}


@pytest.mark.parametrize("walk", [1, 1 << 40], ids=["at-once", "line-by-line"])
@pytest.mark.parametrize("kind", sorted(_ROW_KINDS))
def test_lines_made_into_rows_at_once_say_first_what_their_first_line_says(kind, walk, tmp_path, monkeypatch):
    """A parser makes many lines' rows at once only once none of them can make events: the first
    line of a run still says the framework (and where its step time comes from), as the Python
    engine's; so does a step 0 among DeepSpeed's steps, and the run's end among Trainer's dicts."""
    monkeypatch.setattr(blocks, "BULK_WALK", walk)
    lines = [_ROW_KINDS[kind].format(k=k, s=k % 60) for k in range(1, 120)]
    if kind == "ds-step":
        lines[60] = _ROW_KINDS[kind].format(k=0)
    if kind == "hf-dict":
        lines[90] = "{'train_runtime': 12.5, 'train_samples_per_second': 1.5, 'train_steps_per_second': 0.5, 'epoch': 3.0}"
    path = tmp_path / f"{kind}.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert _same(path, monkeypatch, read_size=1 << 12) > 100
    said = [ev for ev in expand(_items(path, "core")[0]) if ev.type == "run_config"]
    assert said and said[0].line == 1, said[:1]


def test_the_min_max_shape_is_the_regex_the_hook_reads_by():
    """One definition: the hook's regex is made of the shape the core is handed."""
    assert timers.CORE["minmax_shape"] is timers.MINMAX_SHAPE
    assert timers.MINMAX == timers.shape_regex(timers.MINMAX_SHAPE)
    other = dict(timers.MINMAX_SHAPE, leader="_", after=" = ")
    reader = core.TimerLines(dict(timers.CORE, minmax_shape=other))
    text = "  forward-compute ____ = (1.5, 2.5)\n  forward-compute ....: (1.5, 2.5)\n"
    verdicts, *_ = reader.read(text, [(0, 35, 1), (36, 71, 1)], True)
    assert list(verdicts) == [rows.ROW, rows.NOTHING]
    assert re.match(timers.shape_regex(other), text[:35])
    with pytest.raises(ValueError, match="leader"):
        core.TimerLines(dict(timers.CORE, minmax_shape=dict(timers.MINMAX_SHAPE, leader="..")))


def test_timer_segments_of_a_line_other_items_share_keep_their_order(tmp_path, monkeypatch):
    """A lone carriage return makes segments of one file line, numbered alike: a timer row
    on the line of an iteration (in the same block, or going on from the block before)
    cannot order itself by line, so it becomes an event in its segment's place (counted
    as training: the iteration came first)."""
    record = (b" iteration       10/ 1000 | elapsed time per iteration (ms): 2500.5 | lm loss: 2.5E+00 | "
              b"number of skipped iterations: 0 | number of nan iterations: 0 |")
    timers = b"time (ms) | forward-compute: 612.1 | backward-compute: 1501.2\n"
    for data in (record * 40 + b"\r" + timers, record + b"\r" + timers + timers, timers + record + b"\r" + timers):
        path = tmp_path / "cr.log"
        path.write_bytes(data)
        for read_size in (64, 1000, 1 << 16):
            _same(path, monkeypatch, read_size)
        store = JobStore()
        store.add(_items(path, "core", 64)[0])
        (job,) = store.jobs.values()
        assert job.timers["forward-compute"].in_training >= 1


def test_the_block_holding_the_first_stamp_keeps_its_rows(tmp_path, monkeypatch):
    """The log-start milestone goes before the first event at or after the first stamped
    line, rows included: a small log (one block) has its timer lines read in columns too."""
    lines = ["time (ms) | setup: 5.0", "Effective Tera Flops per GPU: 41.2 and total parameters 52.005 B"]
    lines += [f"[2024-05-01 10:00:{k:02d},250] [INFO] [logging.py:96:log_dist] [Rank 0] rank=0 time (ms) | "
              f"forward: {k}.5 | step: 2.5" for k in range(10)]
    path = tmp_path / "small.log"
    path.write_text("\n".join(lines) + "\n")
    assert _same(path, monkeypatch) == 15  # 1 + 2 events, the milestone, 10 timers, and the stats
    items = _items(path, "core")[0]
    assert sum(len(item) for item in items if type(item) is TimerRows) == 11
    events = expand(items)
    at = next(k for k, e in enumerate(events) if e.type == "milestone")
    assert events[at].line == 3 and events[at + 1].line == 3 and events[at + 1].type == "timers"


# -- line pieces ---------------------------------------------------------------------------
_ALPHABET = st.sampled_from(list("0123456789 :-.,T[]abcdefghlkmnoprstuxz") + ["[rank", "[default", "\t", "\x1c", "\x0b",
                                                                             "2024-05-01 10:00:01", "]: "])


def test_every_prefix_form_is_split_as_python_splits_it():
    """Each prefix form, short ones too (a one-digit label: its colon at 1, its space at 2), before
    bodies whose first space follows a colon or not (llm.c's ``s:1 trl:``), and bare: the core's
    quick test and pattern give the Python definition's split (the drawn lines rarely hold them)."""
    framing = rows.framing(core)
    heads = ["0: ", "7: ", " 3: ", "      7: ", "12: ", "123456: ", "a1: ", "x1: ", "nid001234: ", "gpu-node7.cluster: ",
             "10.0.0.1: ", "localhost: ", "[default3]:", "[rank5]: ", "0: [default1]: [rank9]: ", "s:", "a:", "0:", "1:x ",
             "a1:b ", "localhost:", ""]
    bodies = ["s:1 trl:10.9598 lr:0.000002 norm:15.24", "step:3/15258 train_time:87406ms step_avg:nanms",
              "iteration 5/ 10 |", "x: y", ": z", " ", ""]
    for head in heads:
        for body in bodies:
            line = head + body
            pre = split_prefix(line)
            assert framing.split_prefix(line) == (len(line) - len(pre.body), pre.rank, pre.local_rank, pre.node), line


@settings(max_examples=2000, deadline=None)
@given(pieces=st.lists(_ALPHABET, max_size=24))
def test_prefix_and_stamp_follow_the_python_definitions(pieces):
    line = "".join(pieces)
    pre = split_prefix(line)
    framing = rows.framing(core)
    if "\x1c" in line:  # Python's \s holds \x1c-\x1f, the core's does not: such lines are Python's
        assert framing.split_prefix(line) is None and framing.line_stamp(line) is None
        return
    assert framing.split_prefix(line) == (len(line) - len(pre.body), pre.rank, pre.local_rank, pre.node), line
    assert framing.line_stamp(line) == line_stamp(line), line
    assert framing.line_stamp(pre.body) == line_stamp(pre.body), line


_KEYS = st.sampled_from(["iteration", " consumed samples", " elapsed time per iteration (ms)", " learning rate",
                         " lm loss", " lm-loss", "loss scale", " grad norm", " number of skipped iterations",
                         " throughput per GPU (TFLOP/s/GPU)", " samples per second", " train_step_timing in s",
                         "lr", " mtp_1 loss", "forward-compute", " backward-compute ", "optimizer", " élan loss",
                         " tokens per gpu per second (tgs)", "", " x"])
_VALUES = st.sampled_from([" 1", " 2500.5", "  1.052111E+01", " 3.000E-04", " 64 ", " nan", " inf", " -inf", " 9,921",
                           " 13.3TFLOPS", " 1_000", " n/a", "", " 1e309", " .5", " 5.", " +7", " -3", " ٣", "\x1c1.5 ",
                           " 12345678901234567890", " 0x10", " 1.5e", " é"])


@settings(max_examples=1500, deadline=None)
@given(parts=st.lists(st.tuples(_KEYS, st.sampled_from([":", "=", "", "::"]), _VALUES), max_size=12))
def test_records_follow_the_python_definitions(parts):
    records = core.Records(megatron.spec_of, to_float, to_int, frozen_map, megatron.CORE_RECORD)
    text = "|".join(k + d + v for k, d, v in parts)
    want, got = megatron.parse_record(text), records.record(text)
    assert repr(got) == repr(want), text
    want, got = timers.pairs(text), records.pairs(text)
    assert repr(got) == repr(want), text


_METRIC_PIECES = st.sampled_from(["step: ", "step:", "loss: ", " ", "  ", "\t", ":", "_", "a", "n", "i", "f", "x", "1",
                                  "2.5", ",", "e", "E", "-", "+", "nan", "inf", "GiB", "(92.83%)", "\x1b[31m",
                                  "\x1b[38;2;1;2;3m", "\x1b[", "m", "\x1b", "validate step", "memory: ", "tps: 2,579",
                                  "é", "\x1c", "\x85", "\u2003", "\n", "٣", "\x0b"])


@settings(max_examples=3000, deadline=None)
@given(pieces=st.lists(_METRIC_PIECES, max_size=30))
def test_metrics_lines_follow_the_python_definition(pieces):
    from tuimon.parsers import torchtitan

    body = "".join(pieces)
    got = core.MetricLines(torchtitan.metric_values, torchtitan.CORE_METRICS).read(body)
    want = torchtitan.metric_values(body)
    assert got == want and (got is None or list(got.items()) == list(want.items())), body


_MEMORY_PIECES = st.sampled_from(["[Rank 3] ", "[Rank 12] (", "(", "after ", "after 10 iterations", ")", "before ",
                                  "save_checkpoint for iteration 50", "after save_checkpoint for iteration ",
                                  " memory (MB) | ", "allocated: ", "max allocated: ", "Max_Reserved:", "reserved: ",
                                  " max reserved : ", "15382.8", "1.5e3", "7", " ", " | ", "|", ":", "n/a", "1,024",
                                  "inf", "nan", "[Rank", "x", "\x1c", "00012", "99999999999999999999"])
_MEMORY_KEYS = st.sampled_from(["allocated", "max allocated", "reserved", "max reserved", "Max_Allocated",
                                " max  reserved ", "MAX-RESERVED", "allocated/x", "cpu"])
_MEMORY_VALUES = st.sampled_from(["1.5", " 26762.0 ", "2e3", "-4", "n/a", "1,024", "inf", "", "7.25"])


@st.composite
def _memory_line(draw) -> str:
    """A report's shape (a tag or none, the parts after it), or pieces in any order."""
    if draw(st.booleans()):
        return "".join(draw(st.lists(_MEMORY_PIECES, max_size=25)))
    head = draw(st.sampled_from(["", "[Rank 7] ", "x [Rank 2] ", "noise "]))
    after = draw(st.sampled_from(["(after 10 iterations)", "after 007 iterations", "(after 1 iterations",
                                  "(before save_checkpoint for iteration 50)", "(after save_checkpoint for iteration 7)",
                                  "before save_checkpoint for iteration 50", "(during save_checkpoint for iteration 1)"]))
    parts = draw(st.lists(st.tuples(_MEMORY_KEYS, st.sampled_from([": ", ":", " "]), _MEMORY_VALUES), max_size=6))
    tail = draw(st.sampled_from(["", " | junk", "[Rank 1] (after 10 iterations) memory (MB) | allocated: 2.0"]))
    return f"{head}{after} memory (MB) | " + " | ".join(k + sep + v for k, sep, v in parts) + tail


def _memory_events(parser, row, frame, wall) -> list:
    """The events of a report the core read, as its parser puts it into rows (MemoryRows)."""
    rows: list = []
    assert parser.memory_into(rows, row, frame, wall) is None
    return MemoryRows(parser.file, rows).events()


@settings(max_examples=3000, deadline=None)
@given(body=_memory_line(), rank=st.sampled_from([None, 5]))
def test_memory_reports_follow_the_python_definition(body, rank):
    """A line the core reads gives the events the hook gives; a line it leaves goes to the hook."""
    parser = megatron.MegatronParser("m.log")
    frame = (7, len(body), 0, rank, None, "n1", 1.5)
    verdicts, rows = core.MemoryLines(megatron.CORE_MEMORY).read(body, [(0, len(body))])
    verdicts = list(verdicts)
    if verdicts == [3]:
        assert _memory_events(parser, rows[0], frame, 1.5) == parser._on_memory(body, parser.context_of(frame, 1.5)), \
            body
    else:
        assert verdicts == [1]


def test_a_memory_report_is_read_by_the_core_and_two_go_to_the_hook():
    one = "[Rank 12] (after 1 iterations) memory (MB) | allocated: 15382.845703125 | max allocated: 19070.7 | " \
          "reserved: 26762.0 | max reserved: 26800.5"
    verdicts, rows = core.MemoryLines(megatron.CORE_MEMORY).read(one + one, [(0, len(one)), (0, 2 * len(one))])
    assert list(verdicts) == [3, 1] and rows == [(12, "after 1 iterations", [15382.845703125, 19070.7, 26762.0, 26800.5])]
    parser = megatron.MegatronParser("m.log")
    frame = (3, len(one), 0, None, None, None, None)
    assert _memory_events(parser, rows[0], frame, None) == parser._on_memory(one, parser.context_of(frame, None))


def test_a_whole_memory_report_goes_to_the_core_not_the_hooks(tmp_path, monkeypatch):
    """A whole report holds the wrapped tail's trigger (``| max reserved:``) too; its handler
    leaves such lines (LineParser.LEAVES), so the report is the core's reader's, not a line of
    two hooks; a tail srun wrapped onto its own line still goes to the tail's handler."""
    called: list = []
    for name in ("_on_memory", "_on_memory_tail"):
        original = getattr(megatron.MegatronParser, name)

        def spy(self, body, ctx, _name=name, _original=original):
            called.append(_name)
            return _original(self, body, ctx)

        monkeypatch.setattr(megatron.MegatronParser, name, spy)
    path = tmp_path / "m.log"
    path.write_text(" iteration 1/ 10 | elapsed time per iteration (ms): 5.0 | lm loss: 1.0 |\n"
                    "[Rank 0] (after 1 iterations) memory (MB) | allocated: 15382.8 | max allocated: 19070.7 | "
                    "reserved: 26762.0 | max reserved: 26762.0\n"
                    "0: [Rank 1] (after 1 iterations) memory (MB) | allocated: 1.0 | max allocated: 2.0 | res\n"
                    "0: erved: 42498.00 | max reserved: 42498.00\n")
    python_items, _ = _items(path, "python")
    assert called.count("_on_memory") == 2 and called.count("_on_memory_tail") == 1
    called.clear()
    core_items, _ = _items(path, "core")
    assert called == ["_on_memory_tail"], "the whole report went to the core's reader"
    assert [repr(e) for e in expand(core_items)] == [repr(e) for e in expand(python_items)]
    memory = [e for e in expand(core_items) if e.type == "memory"]
    assert [(e.line, e.gpu_max_reserved_mb) for e in memory] == [(2, 26762.0), (3, None), (4, 42498.0)]


_RECORD_KEYS = st.sampled_from([" lm loss", " mtp_1 loss", " number of nan iterations", " number of skipped iterations",
                                 " grad norm", " learning rate", " loss scale", " x", " élan loss", ""])
_RECORD_VALUES = st.sampled_from([" 0", " 1", " 2", " 2.5", " nan", " inf", " -1", " 00", " 1_000", " n/a", "", " ٣",
                                  " 12345678901234567890", " 1e309"])


@settings(max_examples=400, deadline=None)
@example(lines=[[(" mtp_1 loss", " 1")], [(" loss scale", " 2")], [(" mtp_1 loss", " nan")]])  # (same length, same place)
@given(lines=st.lists(st.lists(st.tuples(_RECORD_KEYS, _RECORD_VALUES), max_size=8), min_size=1, max_size=8))
def test_iteration_records_read_one_after_another_follow_the_python_definitions(lines):
    """One reader over many lines: keys found by their place in the line before, keys that move,
    repeat within a line (the last value counts, to the NaN and veto checks too) or come new."""
    records = rows._records(core)
    bodies = ["iteration 5/ 10 |" + "|".join(k + ":" + v for k, v in parts) + " |" for parts in lines]
    text = "\n".join(bodies) + "\n"
    spans, at = [], 0
    for body in bodies:
        spans.append((at, at + len(body)))
        at += len(body) + 1
    found, counters, totals, fields = records.columns(text, spans)
    assert len(found) == len(bodies) and len(counters) == len(totals) == sum(found)
    assert all(len(column) == len(counters) for column in fields.values())
    row = 0
    for body, read in zip(bodies, found):
        want = megatron.parse_record(body)
        losses = want.get(megatron._LOSSES, {})
        nan_count = want.get(megatron._NAN_COUNT)
        if any(v != v for v in losses.values()) or (nan_count is not None and nan_count > 0):
            assert not read, body
            continue
        assert read and (counters[row], totals[row]) == (5, 10), body
        # (a column a field: a row's own fields are those not None, in any order)
        got = {name: column[row] for name, column in fields.items() if column[row] is not None}
        assert repr(sorted(got.items())) == repr(sorted((k, v) for k, v in want.items() if v is not None)), body
        row += 1


def test_records_remember_4096_keys_and_read_the_rest_as_well():
    records = core.Records(megatron.spec_of, to_float, to_int, frozen_map, megatron.CORE_RECORD)
    for k in range(4200):
        text = f"k{k}: 1 | lm loss: {k}.5 | number of nan iterations: {k % 2}"
        assert repr(records.record(text)) == repr(megatron.parse_record(text)), text


def test_records_keep_256_timers_at_most():
    records = core.Records(megatron.spec_of, to_float, to_int, frozen_map, megatron.CORE_RECORD)
    text = " | ".join(f"t{k}: {k}.5" for k in range(300)) + " | t1: 9.0"
    assert records.pairs(text) == timers.pairs(text) and len(records.pairs(text)) == 256


def test_non_ascii_lines_are_left_to_python():
    framing = rows.framing(core)
    assert framing.split_prefix("0: é") is None and framing.line_stamp("[2024-05-01 10:00:01] é") is None
    assert framing.line_stamp("\x1c2024-05-01 10:00:01 x") is None  # the separators: Python's \s, not the core's
    # the frame says so (body None) and gives the offsets in characters, as Python slices
    text = "é█\n0: [2024-05-01 10:00:01] x\n"
    frames = framing.frame(text, [0, 3, 3], 7)
    assert frames == [(7, 2, None, None, None, None, None), (8, 29, 6, 0, None, None, 1714557601.0)]
    assert rows.Frames(framing.frame_columns(text, [0, 3, 3], 7)).tuples() == frames  # (the columns' form)
    assert text[6:29] == "[2024-05-01 10:00:01] x"


def test_long_blocks_not_ascii_are_sliced_in_characters_whichever_block_came_before():
    """The core indexes a block that is not ASCII once and reuses the index while the same str
    is asked about: blocks asked in turn, and an equal block that is another str, give Python's
    offsets (lines past many of its checkpoints)."""
    import random

    rng = random.Random(5)
    pieces = ["a", "é", "█", "😀", "abcdefgh", "step=1 ", "0: "]

    def block() -> str:
        return "".join("".join(rng.choice(pieces) for _ in range(rng.randint(0, 30))) + "\n" for _ in range(3000))

    framing = rows.framing(core)
    first, second = block(), block()
    copy = "".join(list(first))  # (equal, another object)
    assert copy == first and copy is not first
    for text in (first, second, first, copy, second):
        starts = [0] + [k + 1 for k, ch in enumerate(text) if ch == "\n" and k + 1 < len(text)]
        picked = sorted(rng.sample(starts, 200))
        frames = framing.frame(text, picked, 1)
        assert rows.Frames(framing.frame_columns(text, picked, 1)).tuples() == frames
        assert [f[0] for f in frames] == [text.count("\n", 0, a) + 1 for a in picked]
        assert [f[1] for f in frames] == [text.find("\n", a) for a in picked]
        got = dict(core.Literals(["step=1", "█"]).scan(text))
        assert got.get(0, []) == [a for a in starts if "step=1" in text[a:text.find("\n", a)]]


def test_literal_scan_counts_characters_not_bytes():
    lits = core.Literals(["loss", "step"])
    text = "█ step 1\nloss █ loss\nnone\nstep loss"
    assert dict(lits.scan(text)) == {0: [9, 26], 1: [0, 26]}
    assert lits.present(text) == [0, 1] and lits.present("nothing") == []


def test_the_engine_is_named_and_can_be_chosen(tmp_path):
    env = {**os.environ, "TUIMON_ENGINE": "python"}
    r = subprocess.run([sys.executable, "-m", "tuimon", "--version"], capture_output=True, text=True, env=env)
    assert r.returncode == 0 and "engine: python (TUIMON_ENGINE=python)" in r.stdout, r.stdout
    r = subprocess.run([sys.executable, "-m", "tuimon", "--version"], capture_output=True, text=True,
                       env={k: v for k, v in os.environ.items() if k != "TUIMON_ENGINE"})
    assert f"engine: core {core.__version__} (compiled, {core.BUILD})" in r.stdout, r.stdout
    log = tmp_path / "x.log"
    log.write_text("iteration 1/ 10 | lm loss: 1.0 |\n")
    r = subprocess.run([sys.executable, "-m", "tuimon", "summary", str(log)], capture_output=True, text=True,
                       env={**os.environ, "TUIMON_ENGINE": "fast"})
    assert r.returncode == 2 and r.stderr.strip().splitlines() == [
        "tuimon: error: TUIMON_ENGINE='fast' is not one of auto, core, python"], r.stderr


def test_a_saved_engine_reads_on_as_one_that_never_stopped(tmp_path):
    """The parse cache and a follower's saved position keep the engine (pickled); with the
    core, a restored one reads the rest of a file as the one that read it all."""
    import pickle

    from tuimon.engine.ingest import FileParser

    data = (ROOT / "tests" / "fixtures" / "megatron-deepspeed-8gpu-1234567.log").read_bytes()
    whole = FileParser("x.log")
    want = whole.feed(data) + whole.finish()
    for cut in (len(data) // 3, len(data) // 2 + 7):
        first = FileParser("x.log")
        got = first.feed(data[:cut])
        restored = pickle.loads(pickle.dumps(first))
        restored.engine.attach(first.engine.formats, first.engine.builtin_formats)
        got += restored.feed(data[cut:]) + restored.finish()
        assert [repr(e) for e in expand(got)] == [repr(e) for e in expand(want)], cut


def test_rules_on_the_cores_line_lists_find_what_a_block_search_finds(monkeypatch):
    """A rule run on the lines the core says hold its anchors (the regex starting with a
    literal or not) finds what a search of the whole block finds, at line ends too."""
    import random

    from tuimon.engine import blocks, rules
    from tuimon.parsers.schema import Format, compile_line

    regexes = [r'^\s*"(stage|device)": (\d+)', r"(?<![\w-])(bf16|fp16)=True,", r"x(\d+)(?=\s)", r"x(\d+)\s+y",
               r"(ab)?c", r"^\}\s*$", r"bf16=(\w+)", r"stage.: (\d)"]
    pieces = ['  "stage": 3', '"device": 1', "bf16=True,", "-fp16=True,", "x12", "x7 y", "x7", "y", "c", "abc",
              "}", "}  ", " }", "noise", "", "\t", "é"]
    rng = random.Random(7)
    for _ in range(300):
        text = "\n".join(" ".join(rng.choice(pieces) for _ in range(rng.randint(1, 3)))
                         for _ in range(rng.randint(1, 40))) + rng.choice(["\n", ""])
        for regex in regexes:
            fmt = Format(name="t", description="", lines=(compile_line({"event": "failure", "regex": regex}),))
            rule = blocks.DataRule(fmt, fmt.lines[0], False, 0)
            hook = rules.HookRule(regex, "print", (0, 0))
            literals = sorted(set(rule.anchors) | set(hook.anchors or ()))
            held = {literals[k]: starts for k, starts in core.Literals(literals).scan(text)}
            found = []
            for source in (held, None):
                with monkeypatch.context() as m:
                    if source is None:  # the whole block searched
                        m.setattr(blocks, "lines_holding", lambda *a, **k: None)
                        m.setattr(rules, "lines_holding", lambda *a, **k: None)
                    data: list = []
                    blocks._data_hits(text, rule, data, source)
                    lines: list = []
                    hook.lines(text, 0, lines, source)
                found.append(([(s, m.span(), m.groups()) for s, _, _, m in data], [s for s, *_ in lines]))
            assert found[0] == found[1], (regex, text)


def test_hook_triggers_on_the_core_find_the_lines_re_finds():
    """Every built-in hook trigger the core runs picks, of its candidate lines, those
    ``re`` picks (lines made of the trigger's own pieces, numbers, spaces, a line end)."""
    import random
    import re

    from tuimon.engine.rules import HookRule
    from tuimon.parsers import ALL_PARSERS

    rng = random.Random(11)
    triggers = [t for cls in ALL_PARSERS for t, _ in cls.ROUTES]
    # the parsers' own sample lines, and with their spaces as \x1c (a space to re's \s, not the core's)
    samples = [line for cls in ALL_PARSERS for sample in cls.SAMPLES for line in (sample.line, *sample.context)]
    samples += [line.replace(" ", "\x1c") for line in samples]
    checked = 0
    for trigger in triggers:
        hook = HookRule(trigger, "print", (0, 0))
        if hook.core is None:
            continue
        checked += 1
        pieces = [w for w in re.split(r"[\\()\[\]?*+|{}^$]", trigger) if w] + \
            ["1", "42", " ", "  ", "\t", "=", ":", "/", "-", "x", "é", "\x1c", "TRUE", "step", ".", ","]
        lines = ["".join(rng.choice(pieces) for _ in range(rng.randint(0, 8))) for _ in range(400)] + samples
        text = "\n".join(lines) + rng.choice(["\n", ""])
        starts = [0] + [m.end() for m in re.finditer("\n", text) if m.end() < len(text)]
        kept, unread = hook.core.lines(text, starts)
        ends = [text.find("\n", s) for s in starts]
        want = [s for s, e in zip(starts, ends) if hook.regex.search(text, s, len(text) if e < 0 else e + 1)]
        python = [s for s in unread if hook.regex.search(text, s, len(text) if text.find("\n", s) < 0
                                                         else text.find("\n", s) + 1)]
        assert sorted(kept + python) == want, trigger
        for s in unread:  # left to re: lines (and the character before) that are not plain ASCII
            seen = text[max(0, s - 1):(text.find("\n", s) + 1) or len(text)]
            assert not seen.isascii() or any("\x1c" <= c <= "\x1f" for c in seen), (trigger, seen)
    assert checked >= 20


def test_a_missing_core_is_said_once_and_python_reads(tmp_path):
    """Without the extension (a build that failed, an interpreter it was not built for),
    tuimon says so once, on stderr, and the Python engine gives the same table."""
    log = tmp_path / "x.log"
    log.write_text(" iteration        1/      10 | elapsed time per iteration (ms): 100.0 | lm loss: 1.0 |\n"
                   " iteration        2/      10 | elapsed time per iteration (ms): 100.0 | lm loss: 1.0 |\n")
    code = ("import sys; sys.modules['tuimon._core'] = None; from tuimon.commands.cli import main; "
            f"sys.exit(main(['summary', '--no-cache', {str(log)!r}]))")
    env = {k: v for k, v in os.environ.items() if k != "TUIMON_ENGINE"}
    missing = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
    present = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--no-cache", str(log)], capture_output=True,
                             text=True, env=env, cwd=ROOT)
    assert missing.returncode == 0 and present.returncode == 0, missing.stderr
    notes = [line for line in missing.stderr.splitlines() if "compiled core" in line]
    assert len(notes) == 1 and "missing" in notes[0] and "Python engine" in notes[0], missing.stderr
    assert "compiled core" not in present.stderr
    assert missing.stdout == present.stdout and "megatron" in present.stdout


# -- user formats: their line regexes in the core --------------------------------------------
_ATOMS = st.sampled_from(["a", "b", "x", "1", " ", ":", "-", r"\.", r"\d", r"\w", r"\s", r"\S", r"\D", r"\W", ".",
                          "[a-c]", "[^ab]", "[0-9.]", r"\b", r"\B", "^", "$", "é"])


@st.composite
def _regex(draw, depth: int = 0) -> str:
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.integers(0, 9 if depth < 2 else 5))
        if kind <= 5:
            part = draw(_ATOMS)
        elif kind == 6:
            part = "(" + draw(_regex(depth + 1)) + ")"
        elif kind == 7:
            part = f"(?P<g{draw(st.integers(0, 99))}_{depth}_{len(parts)}>" + draw(_regex(depth + 1)) + ")"
        elif kind == 8:
            part = "(?:" + draw(_regex(depth + 1)) + "|" + draw(_regex(depth + 1)) + ")"
        else:
            part = "(?:" + draw(_regex(depth + 1)) + ")"
        if part not in ("^", "$", r"\b", r"\B"):
            part += draw(st.sampled_from(["", "", "", "*", "+", "?", "{1,3}", "*?", "+?", "??", "{2}"]))
        parts.append(part)
    return "".join(parts)


_LINE = st.lists(st.sampled_from(list("abx1 :.-\t") + ["é", "\x1c", "ab", "11"]), max_size=20).map("".join)


@settings(max_examples=int(os.environ.get("TUIMON_CORE_EXAMPLES", 600)), deadline=None)
@given(regex=_regex(), lines=st.lists(_LINE, min_size=1, max_size=4))
def test_user_regexes_in_the_core_find_what_pythons_regex_finds(regex, lines):
    """On every line, at every start the engine uses (a line's start, after a match, with
    and without the newline), the core's match and groups are those of the `regex` module."""
    import re as stdlib_re

    from tuimon.engine.user_regex import CorePattern, RegexTimeout, TimedPattern, core_reason, core_regex

    try:
        stdlib_re.compile(regex)
    except stdlib_re.error:
        return
    if core_reason(regex) is not None:
        return
    timed, ours = TimedPattern(regex, multiline=True), CorePattern(regex, core_regex(regex)[0], multiline=True)
    assert list(ours.groupindex.items()) == list(stdlib_re.compile(regex).groupindex.items())
    text = "\n".join(lines) + "\n"
    start = 0
    for line in lines:
        end = start + len(line)
        for pos in sorted({start, min(end, start + 1), min(end, start + 3), end}):
            for endpos in (end + 1, end, None):
                try:
                    want = timed.search(text, pos, endpos)
                except RegexTimeout:  # the oracle backtracks past its bound: it has no answer to compare
                    return
                got = ours.search(text, pos, endpos)
                assert (want is None) == (got is None), (regex, text, pos, endpos, want, got)
                if want is not None:
                    assert want.span() == got.span() and want.groups() == got.groups(), (regex, text, pos, endpos)
                    assert want.groupdict() == got.groupdict()
        start = end + 1


def test_a_pathological_user_regex_is_harmless_in_the_core(tmp_path):
    """(a+)+b backtracks without end on a line of a's: Python's regex refuses it (the probe),
    the core runs it in time linear in the line, and the format reads its lines."""
    import time

    from tuimon.engine import catalog
    from tuimon.engine.user_regex import CorePattern, core_reason

    fmt = tmp_path / "fmt.toml"
    fmt.write_text('name = "slowpoke"\ndescription = "a pathological regex"\n[[lines]]\nevent = "step"\n'
                   'regex = \'step (?P<step>\\d+) (a+)+b\'\nsamples = [{ line = "step 3 aab", expect = { step = 3 } }]\n')
    assert core_reason(r"step (?P<step>\d+) (a+)+b") is None
    cat = catalog.load([fmt])
    assert not cat.errors, cat.errors
    entry = cat.user[0].lines[0]
    assert isinstance(entry.pattern, CorePattern)
    log = tmp_path / "run.log"
    log.write_text("".join(f"step {k} " + "a" * 5000 + ("b" if k % 2 else "c") + "\n" for k in range(40)))
    before = catalog.current()
    catalog.use(cat)
    try:
        t0 = time.perf_counter()
        events, stats = parse_file(log)
        took = time.perf_counter() - t0
    finally:
        catalog.use(before)
    assert [e.step for e in events if e.type == "step"] == list(range(1, 40, 2)), events[:3]
    assert not stats.disabled and took < 5, (stats.disabled, took)


def test_formats_check_says_which_engine_runs_each_entry(tmp_path):
    fmt = tmp_path / "two.toml"
    fmt.write_text('name = "two"\ndescription = "one line regex each way"\n'
                   '[[lines]]\nevent = "step"\nregex = \'step (?P<step>\\d+)\'\n'
                   'samples = [{ line = "step 3", expect = { step = 3 } }]\n'
                   '[[lines]]\nevent = "step"\nregex = \'(?<=at )iter (?P<step>\\d+)\'\n'
                   'samples = [{ line = "at iter 4", expect = { step = 4 } }]\n')
    r = subprocess.run([sys.executable, "-m", "tuimon", "formats", "check", str(fmt)], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr
    assert "compiled core" in r.stdout and "look-around" in r.stdout, r.stdout
    assert "columns" not in r.stdout, r.stdout  # (step events are not read into rows)
    fmt.write_text('name = "rows"\n[[lines]]\nevent = "iteration"\nregex = \'step (?P<iteration>\\d+) loss (?P<loss>\\S+)\'\n'
                   'samples = [{ line = "step 3 loss 2.5", expect = { iteration = 3, loss = 2.5 } }]\n')
    r = subprocess.run([sys.executable, "-m", "tuimon", "formats", "check", str(fmt)], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 0 and "read into columns" in r.stdout, (r.stdout, r.stderr)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from(list('ab ,:[]{}"\\\n\t\x1bé€') + ["\U0001f600"]), max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(alphabet='ab:,"[{\\é', max_size=4), inner,
                                                                  max_size=4),
    max_leaves=30)


@settings(max_examples=1500, deadline=None)
@given(obj=_JSON)
def test_json_laid_out_by_the_core_is_pythons_indented_json(obj):
    """Every summary and alert export in JSON: the core's layout of the C encoder's compact text is
    json.dumps(indent=2), byte for byte (strings holding the syntax's own characters, escapes, empty
    containers, nesting)."""
    import json

    assert native.json_indented(obj) == json.dumps(obj, indent=2, allow_nan=False)


def test_json_laid_out_without_the_core_is_pythons_too():
    import json

    before = native.use(None)
    try:
        obj = [{"a": [1, 2.5, {}], "b": None}, []]
        assert native.json_indented(obj) == json.dumps(obj, indent=2, allow_nan=False)
    finally:
        native.use(before)
    with pytest.raises(ValueError):
        native.json_indented([float("nan")])
