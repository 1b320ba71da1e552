"""The batch commands' allocator tuning: freed 1 MB blocks are reused instead of
faulted in again page by page (see tuimon.engine.alloc)."""
from __future__ import annotations

import subprocess
import sys

import pytest

PATTERN = r"""
import resource, sys
from tuimon.engine.alloc import keep_freed_memory
if sys.argv[1] == "tuned" and not keep_freed_memory():
    print("unsupported"); raise SystemExit
def block():  # what a parse does each block: several 1 MB objects, then all freed
    held = [b"x" * (1 << 20) for _ in range(6)]
    del held
for _ in range(3):
    block()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(20):
    block()
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def faults(mode: str) -> str:
    return subprocess.run([sys.executable, "-c", PATTERN, mode], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_freed_blocks_are_reused_without_page_faults():
    tuned = faults("tuned")
    if tuned == "unsupported":
        pytest.skip("SKIPPED LOUDLY: this libc has no mallopt to tune (not glibc): nothing to check")
    plain = int(faults("plain"))
    if plain < 5_000:
        pytest.skip(f"SKIPPED LOUDLY: this libc reuses freed blocks untuned ({plain} faults): nothing to compare")
    assert int(tuned) < plain / 20, (tuned, plain)  # 120 MB allocated: about 30,000 faults untuned, none tuned


def test_a_bounded_series_keeps_recent_points_whole_and_an_even_history():
    """A 7-day run at 10 lines/s is 6 million points: a follower's series keeps the
    latest RECENT whole and at most HISTORY before them, evenly spaced by arrival."""
    import numpy as np

    from tuimon.store.series import HISTORY, POINT_DTYPE, RECENT, Series

    s = Series(bounded=True)
    total = 1_000_000
    for i in range(total):
        s.append(i, float(i), elapsed_ms=float(i))
    assert s.appended == total and s.thinned
    assert s.n <= RECENT + HISTORY and s.bytes_allocated <= (RECENT + HISTORY) * 9 // 8 * POINT_DTYPE.itemsize + 4096
    its = s.column("iteration")
    recent = its[s.history:]
    assert len(recent) >= RECENT // 2 and (np.diff(recent) == 1).all() and recent[-1] == total - 1
    history = its[:s.history]
    assert (np.diff(history) == s.stride).all() and history[0] == 0, "evenly thinned, from the first point"
    assert history[-1] + s.stride == recent[0] or history[-1] < recent[0]
    # an unbounded series (batch verbs) keeps every point
    u = Series()
    for i in range(200_000):
        u.append(i, float(i))
    assert u.n == u.appended == 200_000 and not u.thinned


def test_a_bounded_store_counts_every_iteration_and_its_median_stays_close():
    import numpy as np

    from tuimon.figures.summary import summarize
    from tuimon.store.job_store import JobStore
    from tuimon.store.series import HISTORY, RECENT

    rng = np.random.default_rng(3)
    times = 2500.0 + rng.normal(0, 20, 400_000)
    from tuimon.parsers.events import Iteration
    events = [Iteration(file="run.log", line=i, rank=None, node=None, wall_time=float(i), iteration=i,
                        elapsed_ms=float(times[i - 1]), global_batch=64) for i in range(1, 400_001)]
    full, bounded = JobStore(), JobStore(bounded=True)
    full.add(events)
    bounded.add(events)
    a, b = (summarize(next(iter(s.jobs.values())), now=None).as_dict() for s in (full, bounded))
    assert a["iterations_seen"] == b["iterations_seen"] == 400_000
    assert abs(a["iter_time_ms"]["median"] - b["iter_time_ms"]["median"]) < 1.0
    series = next(iter(next(iter(bounded.jobs.values())).ranks.values()))
    assert series.n <= RECENT + HISTORY


def test_a_batch_parse_leaves_start_up_out_and_collects_the_young_less_often():
    code = ("import gc; from tuimon.engine.alloc import YOUNG_PASS, collector_for_batch; before = gc.get_threshold(); "
            "collector_for_batch(); after = gc.get_threshold(); "
            "print(gc.get_freeze_count() > 0, after[0] == YOUNG_PASS > before[0], after[1:] == before[1:])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "True"], out
