"""The ingest process's messages: each one a store can take on its own.  A cut between a
block's events and the rows that follow them folded rows before the events of their
lines (the live view of a NeoX run kept an evaluation's interval in its breakdown that
the batch summary leaves out)."""
from __future__ import annotations

import queue
import threading

import pytest

from tests.conftest import shared_or_skip
from tests.test_breakdown import _neox_log
from tuimon.engine.ingest import parse_file
from tuimon.figures.summary import summarize
from tuimon.live import session as session_mod
from tuimon.live.messages import Batch, Progress
from tuimon.store.job_store import JobStore


def _summaries(store: JobStore) -> dict:
    return {key: summarize(job, now=0.0).as_dict() for key, job in store.jobs.items()}


def _live_store(path, monkeypatch, size: int) -> tuple[JobStore, int]:
    """The store the UI process builds from the ingest's messages (``size`` events a message
    at most), and how many messages carried events."""
    monkeypatch.setattr(session_mod, "MESSAGE_EVENTS", size)
    out: queue.Queue = queue.Queue()
    stop = threading.Event()
    worker = threading.Thread(target=session_mod.ingest_main,
                              args=([str(path)], {"poll": 0.05, "cache": None}, out, stop), daemon=True)
    worker.start()
    store, messages, total = JobStore(bounded=True), 0, path.stat().st_size
    try:
        done = False
        while not done:  # until the follower says it read every byte, then what is queued
            msg = out.get(timeout=60)
            if isinstance(msg, Batch) and msg.events:
                store.add(msg.events)
                messages += 1
            done = isinstance(msg, Progress) and msg.bytes_done >= total
        stop.set()
        worker.join(timeout=30)
        while not out.empty():
            msg = out.get_nowait()
            if isinstance(msg, Batch) and msg.events:
                store.add(msg.events)
                messages += 1
    finally:
        stop.set()
    return store, messages


@pytest.mark.parametrize("size", [7, 1000])
def test_messages_cut_where_a_store_can_take_each(tmp_path, monkeypatch, size):
    text, _, _ = _neox_log(True, n=6000)  # 3.6 MB: blocks of several reads
    path = tmp_path / "neox.log"
    path.write_text(text)
    live, messages = _live_store(path, monkeypatch, size)
    assert messages > 1  # (the cut is what is checked)
    batch = JobStore()
    parse_file(path, sink=batch.add)
    (job,) = live.jobs.values()
    # (the reports of the two intervals after each pass: NeoX prints its timers before its record)
    assert len(job.after_eval) == 599 and job.timers["forward"].aside_count == 2 * 599
    assert _summaries(live) == _summaries(batch)


def test_a_corpus_neox_run_reads_the_same_live(monkeypatch):
    path = shared_or_skip("corpus") / "gpt-neox" / "neox-scaling01-70M-512step.log"
    if not path.exists():
        pytest.skip(f"{path} is not in this corpus")
    live, _ = _live_store(path, monkeypatch, 1000)
    batch = JobStore()
    parse_file(path, sink=batch.add)
    assert _summaries(live) == _summaries(batch)
