"""Launcher lines of every framework, as data: a job's start as the ALCF job
scripts print it, a job script's end line (``END TIME: ...``: the job is over, so a job
that logged no step by then never trained) (the rest of the launcher's lines, which carry state, are
:class:`parsers.launcher.LauncherParser`)."""
from __future__ import annotations

FORMAT = {
    "name": "launcher",
    "description": "Job launchers and schedulers: job start and end",
    "lines": [
        {
            "event": "milestone",
            "anchor": "Job started at: ",
            "regex": r"Job started at: (?P<wall_time>\d{4}-\d{2}-\d{2}-\d{6}) on (?P<node>\S+)",
            "set": {"name": "job-start"},
            "samples": [
                {"line": "Job started at: 2023-11-02-183323 on x3004c0s13b0n0",
                 "expect": {"name": "job-start", "wall_time": 1698950003.0, "node": "x3004c0s13b0n0"}},
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
    ],
}
