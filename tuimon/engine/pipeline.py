"""One file on two cores: its parser in a worker process, what takes its events here.

A file's lines are parsed in order (the parser's state runs from line to line) and its events are
taken in order (the store's folds run from event to event): two stages, each sequential, and
neither waits on the other's result.  So a big file is read on two cores by running them side by
side: the parser in a forked worker, which hands each block's events over a pipe (pickled: a
block's rows are a few arrays and lists, pickling and unpickling them cost 5-15 % of parsing),
while this process adds them to its store.  The result is the sequential read's by construction:
the same parser reads the same blocks, the same events reach the store in the same order, and the
parser's state at the end comes back with the last message (the parse cache saves it, and this
process flushes the end of input with it).

The pipe holds at most 64 KiB: a worker ahead of the store waits in its write (a block or so
of events in flight, whatever the file's size).
"""
from __future__ import annotations

import os
import pickle
import signal
from typing import Any, Callable, Iterator, Optional

from . import guard
from .procs import die_with, fork_is_safe

#: a file (what is left of it to read) at least this big is parsed beside the store: starting the
#: worker and pickling the events cost 10 ms a MB of events less than they save
BESIDE_MIN = 8 << 20

#: the pipe's size asked for: a block's events or two (Linux lets a user have pipes of 1 MiB)
PIPE_BYTES = 1 << 20

_BLOCK, _END, _FAILED = 0, 1, 2


class WorkerLost(Exception):
    """The worker ended before the end of the file (killed: by the kernel short of memory, by a
    user): the events handed over are a part.  The file is to be read again, here."""


def parse_beside(pieces: Iterator[tuple[int, bytes]], feed: Callable[[bytes], list], state: Callable[[], Any],
                 out: Callable[[list], None],
                 on_bytes: Optional[Callable[[int], None]] = None) -> Optional[tuple[int, Any]]:
    """``feed`` (a parser's) given each piece's data in a worker, ``out`` given here each piece's
    events (if any), in order, as they come.  ``pieces``: (bytes passed, data) in file order, read
    in the worker (a hole passed over has no data).  Returns the bytes passed and ``state()`` at the
    end (the parser, as the worker left it: pickled, as the parse cache saves it); None where no
    worker can be started (fork is unsafe while threads run): nothing was read.  Raises what
    reading raised in the worker (an OSError of the file's), or :class:`WorkerLost`."""
    if not fork_is_safe():
        return None
    import multiprocessing

    ctx = multiprocessing.get_context("fork")
    receiver, sender = ctx.Pipe(duplex=False)
    _widen(receiver.fileno())
    worker = ctx.Process(target=_parse, args=(pieces, feed, state, sender, os.getpid()),
                         name="tuimon-parser", daemon=True)
    try:
        worker.start()
    except OSError:  # no processes left
        receiver.close()
        sender.close()
        return None
    sender.close()  # (the worker's end: at its exit, a read here ends instead of waiting)
    passed = 0
    try:
        while True:
            try:
                message = pickle.loads(receiver.recv_bytes())
            except EOFError:
                raise WorkerLost(f"the parsing process ended before the file's end (exit status {_status(worker)})")
            if message[0] == _BLOCK:
                passed += message[1]
                if on_bytes is not None:
                    on_bytes(message[1])
                if message[2]:
                    out(message[2])
            elif message[0] == _END:
                guard.adopt(message[2])  # (formats the worker turned off stay off for the files after)
                return passed, message[1]
            else:
                raise message[1]
    finally:
        receiver.close()
        if worker.is_alive():  # (Ctrl-C, or taking the events failed here)
            worker.terminate()
        worker.join()


def _widen(fd: int) -> None:
    """A pipe of :data:`PIPE_BYTES` where the system allows it (of 64 KiB, the worker waits in its
    write of a block's events until the store has taken the block before: the stages take turns)."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (OSError, ImportError):
        pass


def _status(worker: Any) -> str:
    worker.join(5)
    return str(worker.exitcode)


def _parse(pieces: Iterator[tuple[int, bytes]], feed: Callable[[bytes], list], state: Callable[[], Any],
           sender: Any, parent: int) -> None:
    """The worker: each piece's events sent as they are made, then the state; or what went wrong."""
    die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it ends this worker
    try:
        for passed, data in pieces:
            sender.send_bytes(pickle.dumps((_BLOCK, passed, feed(data) if data else []), pickle.HIGHEST_PROTOCOL))
        sender.send_bytes(pickle.dumps((_END, state(), guard.disabled()), pickle.HIGHEST_PROTOCOL))
    except (BrokenPipeError, ConnectionResetError):  # the parent stopped reading: nobody to tell
        pass
    except Exception as exc:
        try:
            blob = pickle.dumps((_FAILED, exc), pickle.HIGHEST_PROTOCOL)
            pickle.loads(blob)  # (an exception that cannot be rebuilt there is told by its text)
        except Exception:
            blob = pickle.dumps((_FAILED, RuntimeError(f"{type(exc).__name__}: {exc}")))
        try:
            sender.send_bytes(blob)
        except OSError:
            pass
    finally:
        sender.close()
