"""Lanes (the by-column fast path) give exactly what the line-by-line path gives:
the same records, field by field, and the same summary of every job."""
from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from parsers import parser_set
from parsers.events import Batch, expand
from tests.conftest import FIXTURE_LOGS, SHARED
from tuimon.scan import trigger_scanner
from tuimon.sources.framing import Framer
from tuimon.store import JobStore
from tuimon.summary import summarize

CORPUS = sorted((SHARED / "corpus").rglob("*.log")) if (SHARED / "corpus").exists() else []


def parse(text: str, lanes: bool, label: str = "run-1234.log", block_lines: int = 0) -> list:
    """Events of ``text`` fed in blocks of ``block_lines`` lines (0: one block)."""
    ps = parser_set(label, scanner=trigger_scanner, lanes=lanes)
    lines = text.split("\n")[:-1]
    step = block_lines or max(1, len(lines))
    events: list = []
    for i in range(0, len(lines), step):
        events.extend(ps.feed_block("".join(line + "\n" for line in lines[i:i + step]), i + 1))
    return events + ps.flush()


def records(events: list) -> list[str]:
    """Records in line order (stable: the events of one line keep their order)."""
    return [json.dumps(e.to_dict(), sort_keys=True) for e in sorted(expand(events), key=lambda e: e.line)]


def summary(events: list) -> list[dict]:
    store = JobStore()
    store.add(events)
    return [summarize(job, now=0.0) for job in store.jobs.values()]


def assert_same(text: str, block_lines: int = 0) -> list:
    fast = parse(text, True, block_lines=block_lines)
    slow = parse(text, False, block_lines=block_lines)
    assert sorted(records(fast)) == sorted(records(slow))
    assert records(fast) == records(slow)  # and the same order within a line
    assert json.dumps(summary(fast), sort_keys=True, default=str) == \
        json.dumps(summary(slow), sort_keys=True, default=str)
    return fast


def framed(path: Path) -> str:
    f = Framer()
    return f.feed(path.read_bytes()).text + f.flush().text


@pytest.mark.parametrize("path", FIXTURE_LOGS, ids=lambda p: p.name)
def test_fixtures_same_with_and_without_lanes(path):
    assert_same(framed(path))
    assert_same(framed(path), block_lines=7)


def test_corpus_same_with_and_without_lanes():
    if not CORPUS:
        pytest.skip(f"SKIPPED: {SHARED / 'corpus'} not found")
    batched = 0
    for path in CORPUS:
        fast = assert_same(framed(path))
        batched += sum(e.size for e in fast if type(e) is Batch)
    assert batched > 10_000  # the lanes really carry the corpus's hot lines


ITER_KEYS = ["consumed samples: {n}", "elapsed time per iteration (ms): {f}", "learning rate: {e}",
             "global batch size: {n}", "lm loss: {e}", "loss scale: {f}", "grad norm: {f}",
             "number of skipped iterations: {n}", "number of nan iterations: {n}", "samples per second: {f}",
             "TFLOPs: {f}", "actual seqlen: {n}", "elapsed_time_per_iteration_ms={f}", "lm-loss: {e}"]
ODD_VALUES = ["nan", "inf", "-inf", "1_000", "abc", "", "1,234", "13.3TFLOPS", "１２", "9" * 25, "-5", "+7", " 3 "]
PREFIXES = ["", " ", "3: ", "[default1]: ", "[2024-05-01 10:00:0{s},123] [INFO] [logging.py:96:log_dist] [Rank {r}] ",
            "0: [rank2]: ", "nid001234: "]


def _value(kind: str, rng: random.Random, odd: float) -> str:
    if rng.random() < odd:
        return rng.choice(ODD_VALUES)
    if kind == "n":
        return str(rng.randrange(0, 10 ** rng.randrange(1, 8))).rjust(rng.choice([1, 5, 12]))
    if kind == "e":
        return f"{rng.uniform(0, 12):.6E}"
    return f"{rng.uniform(0, 5000):.{rng.randrange(0, 4)}f}"


def make_line(rng: random.Random, keys: list[str], odd: float) -> str:
    prefix = rng.choice(PREFIXES).format(s=rng.randrange(10), r=rng.randrange(4))
    kind = rng.random()
    if kind < 0.45:
        it = rng.randrange(1, 5000)
        segs = [k.format(n=_value("n", rng, odd), f=_value("f", rng, odd), e=_value("e", rng, odd)) for k in keys]
        # the usual head, and near misses of it (each must read as the line path reads it)
        head = rng.choice([" iteration {n}/ {t} ", " iteration {n}/ {t} ", " iteration {n} / {t} ",
                           "iteration {n}/{t}", " iteration={n}/ {t}", " iteration{n}/ {t} ", " iteration\t{n}/ {t}",
                           "  iteration {n}/ {t} ", " iteration {n}/ {t}/2 ", " Iteration {n}/ {t} "]).format(
            n=str(it).rjust(rng.choice([1, 8])), t=rng.choice(['1000', '  5000', '٣٣', '12 3', '']))
        line = prefix + head + "|" + " |".join(" " + s for s in segs) + (" |" if rng.random() < 0.8 else "")
        if rng.random() < 0.05:
            line += line  # two ranks' records on one physical line
        return line
    if kind < 0.7:
        names = ["forward-compute", "backward-compute", "optimizer", "offloading-fwd-overhead", "save-checkpoint",
                 "batch-generator", "", "a:b"]
        picked = rng.sample(names, rng.randrange(1, 5))
        return prefix + "time (ms) | " + " | ".join(f"{n}: {_value('f', rng, odd)}" for n in picked)
    if kind < 0.85:
        tag = rng.choice([f"[Rank {rng.randrange(8)}] ", f"[Rank {rng.randrange(8)}] ", "", "[Rank x] ",
                          "[Rank 99999999999999999999] "])  # none, odd and absurd tags: other paths
        after = rng.choice(["(after {n} iterations)", "(after {n} iterations)", "after {n} iterations",
                            "(after  {n} iterations)", "(after {n}  iterations)", "(after ٣{n} iterations)",
                            " (after {n} iterations)"]).format(n=rng.randrange(100))
        return (prefix + f"{tag}{after} memory (MB) |{rng.choice([' ', ' ', '', '  '])}"
                f"allocated: {_value('f', rng, odd)} | max allocated: {_value('f', rng, odd)} | "
                f"reserved: {_value('f', rng, odd)} | max reserved: {_value('f', rng, odd)}")
    if kind < 0.95:
        step = (f"step={_value('n', rng, odd).strip()}, skipped={_value('n', rng, odd).strip()}, "
                f"lr=[{_value('e', rng, odd)}" + rng.choice([", 0.1], mom=[(0.9, 0.95)]", "]", "", ", 0.1"]))
        if rng.random() < odd:  # near misses: two records, another step= first, an empty lr
            step = rng.choice([step + " " + step, "global_step=3 " + step, step.replace("lr=[", "lr=[]")])
        return prefix + step
    return prefix + rng.choice(["  successfully saved checkpoint at iteration      50 to ckpt",
                                "Effective Tera Flops per GPU: 9.29 and total parameters 1.717 B",
                                "some chatter", "Traceback (most recent call last):", "RuntimeError: boom"])


@settings(max_examples=int(__import__('os').environ.get('LANE_EXAMPLES', '150')), deadline=None)
@given(st.integers(0, 2 ** 32), st.floats(0, 0.3), st.integers(0, 9))
def test_generated_logs_same_with_and_without_lanes(seed, odd, block_lines):
    rng = random.Random(seed)
    shapes = [rng.sample(ITER_KEYS, rng.randrange(1, 8)) for _ in range(rng.randrange(1, 3))]
    lines = [make_line(rng, rng.choice(shapes), odd) for _ in range(rng.randrange(1, 60))]
    assert_same("".join(line + "\n" for line in lines), block_lines=block_lines)


def test_clean_lines_take_the_lanes():
    lines = []
    for i in range(1, 200):
        lines += [f" iteration {i:8d}/ 1000 | consumed samples: {i * 64:10d} | elapsed time per iteration (ms): "
                  f"{900 + i % 7}.5 | learning rate: 3.0E-04 | lm loss: {2 + 1 / i:.6E} | loss scale: 1.0 | "
                  f"number of skipped iterations:   0 | number of nan iterations:   0 |",
                  f"time (ms) | forward-compute: {600 + i % 5}.1 | backward-compute: 1200.2 | optimizer: 30.0",
                  f"[Rank {i % 4}] (after {i} iterations) memory (MB) | allocated: 15382.8 | max allocated: "
                  f"{19000 + i}.5 | reserved: 26762.0 | max reserved: 26762.0",
                  f"[2024-05-01 10:00:{i % 60:02d},123] [INFO] [logging.py:96:log_dist] [Rank 0] step={i}, "
                  f"skipped=0, lr=[0.0003, 0.0003], mom=[(0.9, 0.95)]"]
    text = "".join(line + "\n" for line in lines)
    fast = assert_same(text, block_lines=100)
    kinds = {e.kind.type: 0 for e in fast if type(e) is Batch}
    for e in fast:
        if type(e) is Batch:
            kinds[e.kind.type] += e.size
    assert kinds == {"iteration": 199, "timers": 199, "memory": 199, "step": 199}


def test_iteration_lines_of_two_key_sets_with_as_many_bars_take_the_lane():
    """Iteration records whose keys change from line to line with the same number of
    "|" (a validation loss in place of the learning rate, say) are batched by key
    set, as the line path reads them; in blocks starting either way."""
    rng = random.Random(3)
    lines = []
    for i in range(1, 400):
        middle = (f"learning rate: {rng.uniform(1e-5, 3e-4):.3E}" if rng.random() < 0.7
                  else f"mtp loss: {rng.uniform(1, 9):.4E}")
        lines.append(f" iteration {i:8d}/   10000 | consumed samples: {i * 32:10d} | elapsed time per iteration "
                     f"(ms): {rng.uniform(100, 900):.1f} | {middle} | lm loss: {rng.uniform(1, 9):.6E} |")
    fast = assert_same("".join(line + "\n" for line in lines), block_lines=97)
    assert sum(e.size for e in fast if type(e) is Batch) == 399


def test_gpt_neox_lines_take_the_lanes():
    """GPT-NeoX's iteration line (a unit glued to the flops: "13.3TFLOPS") and the
    pipeline engine's "steps: N loss: ..." line, one of each a step, go through
    lanes and read as the line path reads them."""
    rng = random.Random(9)
    lines = []
    for i in range(1, 300):
        flops = rng.choice([f"{rng.uniform(1, 99):.1f}", "inf", "nan", "1e3", f"{rng.uniform(1, 9):.2f} "])
        lines += [f"steps: {i} loss: {rng.uniform(1, 11):.4f} iter time (s): {rng.uniform(0.1, 3):.3f} "
                  f"samples/sec: {rng.uniform(100, 900):.3f}",
                  f" samples/sec: {rng.uniform(100, 900):.3f} | iteration {i:8d}/     512 | elapsed time per "
                  f"iteration (ms): {rng.uniform(100, 3000):.1f} | learning rate: 1.000E-05 | approx flops per GPU: "
                  f"{flops}TFLOPS | lm_loss: {rng.uniform(1, 11):.6E} | loss scale: 4096.0 | number of skipped "
                  f"iterations:   0 | number of nan iterations:   0 |"]
    fast = assert_same("".join(line + "\n" for line in lines), block_lines=100)
    sizes = {}
    for e in fast:
        if type(e) is Batch:
            sizes[e.kind.type] = sizes.get(e.kind.type, 0) + e.size
    assert sizes == {"step": 299, "iteration": 299}


@pytest.mark.parametrize("seed", range(4))
def test_values_with_a_unit_read_as_the_line_path_reads_them(seed):
    """lanes.floats_with_unit against numbers.to_float, value by value, on numbers
    and near misses with units glued on."""
    from parsers.lanes import floats_with_unit
    from parsers.numbers import to_float
    rng = random.Random(seed)
    numbers = ["13.3", "-2", "+.5", "5.", "1e5", "1.5e", "2.5E+", "inf", "-inf", "nan", "Infinity", "1,234", "1_0",
               "0x1F", "١٣", " 7 ", "", "~3", "3.3.3", "1e500"]
    for _ in range(300):
        unit = rng.choice(["TFLOPS", "TFLOPS", "eFLOPS", "s", "GB", "µs"])
        values = [rng.choice(numbers) + unit + rng.choice(["", " "]) for _ in range(rng.randrange(1, 6))]
        got = floats_with_unit(values)
        if got is not None:
            assert [repr(v) for v in got] == [repr(to_float(v)) for v in values], values


def test_timer_lines_of_two_shapes_with_as_many_bars_take_the_lane():
    """DeepSpeed's and Megatron's timer lines interleaved, each with two timers (as
    many "|"): each set of names is batched apart, as the line path reads them; a
    comms logger line among them takes the line path."""
    rng = random.Random(5)
    lines = []
    for i in range(1, 300):
        lines += [f"[2024-05-01 10:00:{i % 60:02d},123] [INFO] [logging.py:96:log_dist] [Rank {i % 2}] rank={i % 2} "
                  f"time (ms) | forward_microstep: {rng.uniform(1, 900):.2f} | backward_microstep: "
                  f"{rng.uniform(1, 900):.2f}",
                  f"time (ms) | forward-compute: {rng.uniform(1, 900):.2f} | optimizer: {rng.uniform(1, 90):.2f}"]
        if i % 50 == 0:
            lines.append(f"[Rank 0] rank=0 | comm op: all_reduce | time (ms): {rng.uniform(0, 9):.2f} | msg size: 4 KB")
    fast = assert_same("".join(line + "\n" for line in lines), block_lines=150)
    assert sum(e.size for e in fast if type(e) is Batch) == 2 * 299
    assert sum(1 for e in fast if type(e) is not Batch) == 5


@pytest.mark.parametrize("line", [
    "[2022-06-29 01:26:11,085] [INFO] x", "2022-06-29 01:26:11.524672 x", "[2023-12-19 13:33:24][INFO] x",
    " [2026-04-15 11:19:02.524672] iteration", "[titan] 2026-05-19 23:02:48,804 - root", "[2022-06-29 01:26:11] x",
    "2021-05-27T21:42:11 x", "[2022-13-29 01:26:11,085] bad month", "[2022-06-29 01:26:11,0123456789] long",
])
def test_leading_timestamp_same_from_the_cache(line):
    """The per-second cache gives what the full pattern gives, cold and warm."""
    from parsers import timestamps

    timestamps._seconds_cache.clear()
    m = timestamps.LEADING.match(line)
    expected = None
    if m:
        stamp = m.group(1)
        base = timestamps.parse_iso(stamp[:19])
        frac = stamp[20:]
        expected = None if base is None else base + (int(frac) / 10 ** len(frac) if frac.isdigit() else 0.0)
    assert timestamps.leading_timestamp(line) == expected  # cold
    assert timestamps.leading_timestamp(line) == expected  # from the cache
    assert timestamps.line_stamp(line) == expected  # the quick path, warm
    timestamps._seconds_cache.clear()
    assert timestamps.line_stamp(line) == expected  # and cold


@pytest.mark.parametrize("prefix", ["", " ", "  ", "\u00a0", " \u2003", "\t", "[titan-x] ", "x "])
def test_block_path_reads_stamps_as_the_line_path(prefix):
    """The block path's quick 'can a stamp start here' test never skips a stamp."""
    line = prefix + "2024-05-01 10:00:07,250 iteration 3/ 10 | elapsed time per iteration (ms): 5.0 |"
    block = parse("time (ms) | a: 1.0\n" + line + "\n", lanes=False)
    ps = parser_set("run-1234.log", scanner=trigger_scanner)
    ps.sniff("time (ms) | a: 1.0\n" + line + "\n")
    one = ps.feed_line("time (ms) | a: 1.0", 1) + ps.feed_line(line, 2)
    assert [e.wall_time for e in block] == [e.wall_time for e in one]
    expected = None if prefix == "x " else 1714557607.25  # what the full LEADING pattern reads
    assert [e.wall_time for e in block if e.type == "iteration"] == [expected]
