"""Warnings runs print, mostly on their ranks' stderr, counted by kind::

    [rank3]:W0818 03:14:47.400000 178186 torch/_inductor/triton_bundler.py:396] ...      (torch)
    nid001: 12:34:56 [0] NCCL INFO ... / ... NCCL WARN Cuda failure ...                 (nccl)
    [rank0]:[W1124 ProcessGroupNCCL.cpp:1250] Warning: WARNING: destroy_process_group()
        was not called before program exit, which can leak resources.                  (process-group)
    /usr/lib/python3.12/site-packages/x.py:61: FutureWarning: The pynvml package ...   (python)

A job whose ``.err`` holds only these still shows its ranks and what they complained
of.  NCCL warnings that report an error are failures (:mod:`parsers.failures`).
"""
from __future__ import annotations

from .base import LineContext, LineParser, Sample
from .common import message_of
from .events import Event, LogWarning
from .patterns import lazy

_PYTHON = lazy(r"\b((?:User|Future|Deprecation|Runtime|Resource|Syntax|Import|Unicode|Bytes|"
               r"PendingDeprecation)?Warning): \S")
_GLOG = lazy(r"^W\d{4} \d\d:\d\d:\d\d[.\d]* +\d+ +\S+:\d+\]")
_NCCL_ERROR = lazy(r"[Ee]rror|[Tt]imeout|[Ff]ailure|[Ff]ailed")


class WarningParser(LineParser):
    name = "warnings"
    READS = "warnings by kind: NCCL, destroy_process_group, Python warnings, torch W lines"
    SNIFF = None  # any run's stderr
    ROUTES = ((r"destroy_process_group\(\) was not called", "_on_process_group"), (r"NCCL WARN", "_on_nccl"),
              (r"Warning: ", "_on_python"), (r"W\d{4} \d\d:", "_on_glog"))

    SAMPLES = (
        Sample("[rank0]:[W1124 05:00:00.123 ProcessGroupNCCL.cpp:1250] Warning: WARNING: destroy_process_group() was "
               "not called before program exit, which can leak resources.", "warning",
               {"kind": "process-group", "rank": 0}),
        Sample("3: /usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:61: FutureWarning: The pynvml "
               "package is deprecated.", "warning", {"kind": "python", "rank": 3}),
        Sample("[rank9]:W0818 03:14:47.400000 178186 torch/_inductor/triton_bundler.py:396] [2/1] Directory "
               "/tmp/.triton/cache does not exist", "warning", {"kind": "torch", "rank": 9}),
        Sample("nid001:1234:1290 [0] NCCL WARN NET/OFI Only EFA provider is supported", "warning", {"kind": "nccl"}),
        Sample("nid001:1234:1290 [0] NCCL WARN Cuda failure 'out of memory'", None),  # an error: a failure
        Sample("  warnings.warn(", None),
    )

    def _warn(self, ctx: LineContext, kind: str, body: str) -> list[Event]:
        return [self.make(LogWarning, ctx, kind=kind, message=message_of(body, 300))]

    def _on_process_group(self, body: str, ctx: LineContext) -> list[Event]:
        return self._warn(ctx, "process-group", body)

    def _on_nccl(self, body: str, ctx: LineContext) -> list[Event]:
        return [] if _NCCL_ERROR.search(body) else self._warn(ctx, "nccl", body)

    def _on_python(self, body: str, ctx: LineContext) -> list[Event]:
        if "destroy_process_group() was not called" in body or not _PYTHON.search(body):
            return []
        return self._warn(ctx, "python", body)

    def _on_glog(self, body: str, ctx: LineContext) -> list[Event]:
        return self._warn(ctx, "torch", body) if _GLOG.match(body) else []
