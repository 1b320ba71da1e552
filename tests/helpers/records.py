"""Summary records of small logs, read by the real engine (no record is made by hand)."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tuimon.engine.ingest import parse_file
from tuimon.figures.record import Summary
from tuimon.figures.summary import summarize
from tuimon.store.job_store import JobStore


def summary_of_text(text: str, name: str = "run.log") -> Summary:
    """The one job's summary of a log holding ``text``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text)
        store = JobStore()
        parse_file(path, os.path.basename(path), sink=store.add)
        (job,) = store.jobs.values()
        return summarize(job, now=None, last_write=None)
