"""Launcher lines of every framework, as data: a job's start as the ALCF job
scripts print it (the rest of the launcher's lines, which carry state, are
:class:`parsers.launcher.LauncherParser`)."""
from __future__ import annotations

FORMAT = {
    "name": "launcher",
    "description": "Job launchers and schedulers: job start",
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
    ],
}
