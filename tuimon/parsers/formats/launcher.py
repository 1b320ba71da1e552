"""Launcher lines of every framework, as data: a job's start as the ALCF job
scripts print it, a job script's end line (``END TIME: ...``: the job is over, so a job
that logged no step by then never trained) (the rest of the launcher's lines, which carry state, are
:class:`parsers.launcher.LauncherParser`)."""
from __future__ import annotations

# `date` in brackets at a line's start ("[Tue Aug 18 04:05:25 CEST 2026] ..."), and its anchors, written out:
# "[" alone is on most lines of a log, and each would be tried
_BRACKETED_DATE = (r"^\s*\[(?P<wall_time>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun),? [^\]:]{4,24}\d{1,2}:\d{2}:\d{2}"
                   r"(?: [AP]M)?(?: [A-Z]{2,5})? \d{4})\]")
_DATE_ANCHORS = ["[Mon ", "[Tue ", "[Wed ", "[Thu ", "[Fri ", "[Sat ", "[Sun "]

FORMAT = {
    "name": "launcher",
    "description": "Job launchers and schedulers: job start and end",
    "lines": [
        {
            "event": "milestone",
            "anchor": "Job started at: ",
            "regex": r"Job started at:? (?P<wall_time>\S.{5,60}?)(?: on (?P<node>\S+))?\s*$",
            "set": {"name": "job-start"},
            "samples": [
                {"line": "Job started at: 2023-11-02-183323 on x3004c0s13b0n0",
                 "expect": {"name": "job-start", "wall_time": 1698950003.0, "node": "x3004c0s13b0n0"}},
                {"line": "Job started at: Wed Apr 15 11:16:53 CEST 2026", "expect": {"wall_time": 1776251813.0}},
            ],
        },
        {
            # a job script's own start stamp: echo "START TIME: $(date)", in the locale it runs in
            "event": "milestone",
            "anchors": ["START TIME", "Start time", "Start Time", "Job start time", "Started at", "Starting at"],
            "regex": r"^(?:START TIME|Start [Tt]ime|Job start time|Start(?:ed|ing) at)\s*[:=]?\s*"
                     r"(?P<wall_time>\S.{5,60}?)\s*$",
            "set": {"name": "job-start"},
            "samples": [
                {"line": "START TIME: Wed Apr 15 11:16:53 CEST 2026",
                 "expect": {"name": "job-start", "wall_time": 1776251813.0}},
                {"line": "START TIME: mer. 15 avril 2026 11:16:53 CEST",
                 "expect": {"name": "job-start", "wall_time": 1776251813.0}},
                {"line": "START TIME: Mi 15. Apr 11:16:53 CEST 2026",
                 "expect": {"name": "job-start", "wall_time": 1776251813.0}},
                {"line": "Job start time: 2026-04-15 11:16:53", "expect": {"name": "job-start", "wall_time": 1776251813.0}},
                {"line": "Started at Tue Aug 18 07:53:33 PM CEST 2026",
                 "expect": {"name": "job-start", "wall_time": 1787082813.0}},
            ],
        },
        {
            # a line that is only a date: `date` at the top of a job script (C, en_US, en_GB, fr_FR, de_DE
            # locales), nvidia-smi's header.  A stamp followed by more (Cobalt's "... +0000 (UTC) Command:")
            # is another program's line.
            "event": "milestone",
            # (German's two-letter days, "Do ", "So "..., are in too much prose to look for alone:
            # a de_DE date is read after START TIME: and the like)
            "anchors": ["Mon ", "Tue ", "Wed ", "Thu ", "Fri ", "Sat ", "Sun ", "lun. ", "mar. ", "mer. ", "jeu. ",
                        "ven. ", "sam. ", "dim. "],
            "regex": r"^\s*(?P<wall_time>(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun|lun\.|mar\.|mer\.|jeu\.|ven\.|sam\.|dim\.)"
                     r",? [^:]{4,24}\d{1,2}:\d{2}:\d{2}(?: [AP]M)?(?: [A-Z]{2,5})?(?: \d{4})?)\s*$",
            # detail "date": a start stamp if it comes first, never a new run (a script may end with `date` too)
            "set": {"name": "job-start", "detail": "date"},
            "samples": [
                {"line": "Wed Apr 15 11:16:53 CEST 2026", "expect": {"name": "job-start", "wall_time": 1776251813.0}},
                {"line": "Tue Aug 18 07:53:33 PM CEST 2026", "expect": {"name": "job-start", "wall_time": 1787082813.0}},
                {"line": "Wed 15 Apr 11:16:53 CEST 2026", "expect": {"name": "job-start", "wall_time": 1776251813.0}},
                {"line": "mer. 15 avril 2026 11:16:53 CEST", "expect": {"name": "job-start", "wall_time": 1776251813.0}},
                {"line": "Tue May 25 06:29:21 2021       ", "expect": {"name": "job-start", "wall_time": 1621924161.0}},
            ],
        },
        {
            "event": "milestone",
            "anchors": ["END TIME", "End time", "Job ended at", "Job finished at", "Job completed at"],
            "regex": r"^(?:END TIME|End time|Job (?:ended|finished|completed) at)\s*[:=]?\s*(?P<detail>\S.{0,79})?$",
            "types": {"detail": "str"},
            "set": {"name": "job-end"},
            "samples": [
                {"line": "END TIME: Wed Apr 15 11:30:02 CEST 2026",
                 "expect": {"name": "job-end", "detail": "Wed Apr 15 11:30:02 CEST 2026"}},
                {"line": "Job ended at: 2023-11-02-190112", "expect": {"name": "job-end"}},
            ],
        },
        {
            # DeepSpeed's launcher (launcher/launch.py) on each worker process that returned 0: the job is over
            # for it (a run that logged no step by then never trained)
            "event": "milestone",
            "anchor": " exits successfully",
            "regex": r"\bProcess (?P<detail>\d{1,10}) exits successfully\.?\s*$",
            "types": {"detail": "str"},
            "set": {"name": "job-end"},
            "samples": [
                {"line": "[2023-10-20 18:56:04,104] [INFO] [launch.py:346:main] Process 86487 exits successfully.",
                 "expect": {"name": "job-end", "detail": "86487"}},
            ],
        },
        {
            # PyTorch Lightning (NeMo, BioNeMo) as each rank joins: "Initializing distributed: GLOBAL_RANK: 3, MEMBER: 4/16"
            "event": "run_config",
            "anchor": "Initializing distributed: ",
            "regex": r"Initializing distributed: GLOBAL_RANK: \d{1,7}, MEMBER: \d{1,7}/(?P<world_size>\d{1,7})\b",
            "samples": [
                {"line": "Initializing distributed: GLOBAL_RANK: 3, MEMBER: 4/16", "expect": {"world_size": 16}},
            ],
        },
        {
            # the same stamp on a launch line ("Launching ...", "Starting ..."): the start of a run, also of a
            # second run in the file (the line below gives the stamp of any other such line, never a new run)
            "event": "milestone",
            "anchors": _DATE_ANCHORS,
            "regex": _BRACKETED_DATE + r"\s+(?:[Ll]aunch|[Ss]tart)(?:ing|ed)?\b",
            "set": {"name": "job-start", "detail": "launch"},
            "samples": [
                {"line": "[Tue Aug 18 04:05:25 CEST 2026] Launching training...",
                 "expect": {"name": "job-start", "detail": "launch", "wall_time": 1787025925.0}},
                {"line": "[Tue Aug 18 04:05:25 2026] Starting run 3", "expect": {"detail": "launch"}},
            ],
        },
        {
            # a script's own launch stamp: echo "[$(date)] Launching training..." (a date in brackets, then words)
            "event": "milestone",
            "anchors": _DATE_ANCHORS,
            "regex": _BRACKETED_DATE + r"\s+\S",
            "set": {"name": "job-start", "detail": "date"},
            "samples": [
                {"line": "[Tue Aug 18 04:05:25 CEST 2026] Launching training...",
                 "expect": {"name": "job-start", "wall_time": 1787025925.0}},
                {"line": "[Tue Aug 18 04:05:25 2026] done", "expect": {"name": "job-start"}},
            ],
        },
    ],
}
