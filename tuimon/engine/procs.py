"""Processes that read beside this one: how many cores there are, how a worker is started, and
a worker's first act (to die with its parent)."""
from __future__ import annotations

import os
import threading
from typing import Any


def cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def fork_is_safe() -> bool:
    """fork starts in milliseconds, but is only safe while this process has a single thread."""
    import multiprocessing  # (with the first worker: one file, the common case, starts 8 ms sooner)

    return threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()


def process_context() -> Any:
    """fork where it is safe (:func:`fork_is_safe`), else spawn."""
    import multiprocessing

    return multiprocessing.get_context("fork" if fork_is_safe() else "spawn")


def die_with(parent: int) -> None:
    """A worker's first act: ask the kernel to kill it when its parent dies (a ``timeout``'s
    SIGTERM or a SIGKILL give the parent no time to stop its workers, which would read on for
    minutes, orphaned).  Linux's ``PR_SET_PDEATHSIG``; where there is none, workers still end
    with their file."""
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request was made
        os._exit(1)
