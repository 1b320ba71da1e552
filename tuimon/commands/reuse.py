"""Summaries kept for files that did not change: ``tuimon summary`` over a directory read
before takes each job's summary back instead of loading, merging and summarising its store
(987 MB in 5 files: 0.6 s of the 1.1 s an unchanged reopen took).

A job is made of the files its name groups (:mod:`tuimon.store.identity`), so the jobs of
a set of files are the jobs their first runs join and nothing else: files are grouped by
that job (:meth:`JobStore.job_for`, which sees every file's name, companions included), and
each group's summaries are kept in the parse cache under a signature of

* every file of the group: its path, device, inode, size, mtime and ctime (a write moves
  ctime, and ctime cannot be set back), and its first and last 4 KB (``engine.cache.Ident``),
* the format set, tuimon's version and the code of parsers, engine and store (the parse
  cache's own key, :attr:`Catalog.key`), the code of the figures,
* the options a summary depends on (``--gpu``, ``--gpu-peak``).

What the clock changes is kept apart (:class:`~tuimon.figures.summary.ClockFacts`) and
applied when shown, the same step a summary made now goes through.  A summary is kept in
its own JSON form (read back by :func:`~tuimon.figures.record.from_dict`: nothing kept is
code), sealed by the cache's per-user key like every blob of it.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional, Sequence

from .. import __version__
from ..engine.cache import Ident, ParseCache
from ..engine.ingest import ParseStats
from ..figures.record import Summary, from_dict
from ..figures.summary import ClockFacts
from ..sources.files import NotRegular, open_regular
from ..store.job_store import JobStore

Kept = tuple[Summary, ClockFacts]


@dataclasses.dataclass
class Group:
    """Files whose jobs are their own, and what was kept of them (None: to be made)."""
    files: list[str]
    slot: bytes
    sig: Optional[bytes]  # None: a file cannot be looked at (nothing is kept then)
    kept: Optional[list[Kept]] = None
    stats: Optional[ParseStats] = None


def file_groups(store: JobStore, files: Sequence[Path]) -> Optional[list[list[str]]]:
    """``files`` (added to ``store``) by the job their first run joins, in order; None when a
    job key holds ``#``: a later run of one file (``name#2``) could then be another's job."""
    groups: dict[int, list[str]] = {}
    for path in files:
        job = store.job_for(str(path))[0]
        if "#" in job.key:
            return None
        groups.setdefault(id(job), []).append(str(path))
    return list(groups.values())


@lru_cache(maxsize=1)
def _figures_digest() -> bytes:
    from .. import figures

    digest = hashlib.sha256(__version__.encode())
    for path in sorted(Path(figures.__file__ or "").parent.glob("*.py")) + [Path(__file__)]:
        try:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
        except OSError:
            digest.update(path.name.encode())
    return digest.digest()


def context(catalog_key: str, options: Sequence[Any]) -> bytes:
    """What every group's signature holds besides its files."""
    return hashlib.sha256(b"\0".join([_figures_digest(), catalog_key.encode(), repr(tuple(options)).encode()])).digest()


def group(files: list[str], ctx: bytes) -> Group:
    slot = hashlib.sha256(b"summaries\0" + b"\0".join(os.fsencode(f) for f in files)).digest()
    digest = hashlib.sha256(ctx)
    for f in files:
        try:
            fd, st = open_regular(f)  # (a FIFO or a device is never read here)
        except (OSError, NotRegular):
            return Group(files, slot, None)
        try:
            # as the parse cache tells a file apart (its bytes at both ends too: a rewrite of the same
            # size within a coarse clock's tick, a network file system's, keeps size and times)
            digest.update(repr((f, dataclasses.astuple(Ident.of(fd, st.st_size, st)))).encode())
        except OSError:
            return Group(files, slot, None)
        finally:
            os.close(fd)
    return Group(files, slot, digest.digest())


def load(cache: ParseCache, g: Group) -> None:
    """``g``'s kept summaries and parse figures, if its files are still those they were made of."""
    if g.sig is None:
        return
    blob = cache.result(g.slot, g.sig)
    if blob is None:
        return
    try:
        data = json.loads(blob)
        kept = [(from_dict(d["summary"]), ClockFacts(**d["facts"])) for d in data["jobs"]]
        stats = ParseStats(**data["stats"])
    except Exception:  # another layout (an older build's): made again
        return
    stats.cached = stats.bytes  # nothing of it was parsed now
    g.kept, g.stats = kept, stats


def save(cache: ParseCache, g: Group, kept: list[Kept], stats: ParseStats) -> None:
    if g.sig is None:
        return
    try:
        blob = json.dumps({"jobs": [{"summary": s.as_dict(), "facts": dataclasses.asdict(f)} for s, f in kept],
                           "stats": dataclasses.asdict(stats)})
    except (TypeError, ValueError):
        return
    cache.save_result(g.slot, g.sig, blob.encode())
