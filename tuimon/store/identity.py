"""Which files make one job.

* A Slurm/PBS job id in the file name groups ``x-1999618.out`` with ``x-1999618.err``,
  and PBS's ``x.o1999618`` with ``x.e1999618``.
* Per-rank files of one run (``...rank3...``, ``...rank_3...``, ``log.rank0``) are one job,
  and the number gives the rank.
* Otherwise each file is its own job.
Files are grouped within one directory; a scheduler's own stream of a job (Cobalt's
``.cobaltlog``, a job's ``.error``/``.err``) also joins the job of the same id read
before it from another directory (see :class:`~tuimon.store.job_store.JobStore`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import Optional

_RANK_IN_NAME = re.compile(r"(?i)([-_.]?)(?:rank|worker|proc)[-_]?(\d{1,6})(?=[-_.]|$)")
_JOB_ID = re.compile(r"(?:^|[-_.])(?:slurm-|job[-_]?)?(\d{5,10})(?=[-_.]|$)")
_LOG_SUFFIXES = (".log", ".out", ".err", ".txt")
_PBS_STREAM = re.compile(r"^(.+)\.[oe](\d{3,10})(?:\.\d+)?$")  # NAME.o<id>, NAME.e<id> (array jobs: .o<id>.<n>)


_COMPANION = (".cobaltlog", ".error", ".err")


@dataclass(frozen=True)
class FileIdentity:
    job_key: str
    job_name: str
    rank: Optional[int]
    job_id: Optional[str] = None  # the scheduler's job id the name carries
    companion: bool = False  # the scheduler's or the job's error stream, not its output


def _stem(name: str) -> str:
    changed = True
    while changed:
        changed = False
        for suffix in _LOG_SUFFIXES:
            if name.lower().endswith(suffix) and len(name) > len(suffix):
                name = name[: -len(suffix)]
                changed = True
    return name


def identify(path: str) -> FileIdentity:
    p = PurePath(path)
    parent = str(p.parent)
    stem = _stem(p.name)
    pbs = _PBS_STREAM.match(stem)
    if pbs:
        name = f"{pbs.group(1)}-{pbs.group(2)}"
        return FileIdentity(f"{parent}/{name}", name, None)
    rank = None
    m = _RANK_IN_NAME.search(stem)
    if m:
        rank = int(m.group(2))
        stem_wo_rank = (stem[: m.start()] + stem[m.end():]).strip("-_.") or stem
    else:
        stem_wo_rank = stem
    job_id = _JOB_ID.findall(stem_wo_rank)
    if job_id:
        jid = job_id[-1]
        name = stem_wo_rank[: stem_wo_rank.rfind(jid) + len(jid)]
        companion = stem.lower().endswith(_COMPANION) or p.name.lower().endswith(_COMPANION)
        return FileIdentity(f"{parent}/{name}", name, rank, jid, companion)
    return FileIdentity(f"{parent}/{stem_wo_rank}", stem_wo_rank, rank)
