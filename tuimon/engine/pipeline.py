"""One file on several cores: its parsers in worker processes, what takes its events here.

A file's lines are parsed in order (the parser's state runs from line to line) and its events are
taken in order (the store's folds run from event to event): two stages, each sequential, and
neither waits on the other's result.  So a big file is read on two cores by running them side by
side (:func:`parse_beside`): the parser in a forked worker, which hands each block's events over a
pipe (pickled: a block's rows are a few arrays and lists, pickling and unpickling them cost 5-15 %
of parsing), while this process adds them to its store.  The result is the sequential read's by
construction: the same parser reads the same blocks, the same events reach the store in the same
order, and the parser's state at the end comes back with the last message (the parse cache saves
it, and this process flushes the end of input with it).  The pipe is 1 MiB (64 KiB where Linux
will not widen it): a worker ahead of the store waits in its write.

A file of two pieces or more is parsed by several workers at once (:func:`parse_in_pieces`): each
piece from a state of its own (the read in order's state a few pieces before, sent to the worker as
the store took its last piece: what lasts, the parsers woken and what they saw once, is mostly the
same), checked here against the state the read in order has there, block by block, and parsed here
until the two are alike; from there the worker's events are the read in order's.  Mostly they are
alike before the piece's first block, or after it.  Each worker parses at most one piece ahead of
the store (:data:`PIECE_WORKERS` of :data:`PIECE_BYTES` of log, their events pickled, in this
process at most).
"""
from __future__ import annotations

import os
import pickle
import signal
from typing import Any, Callable, Iterator, NamedTuple, Optional, Sequence

from . import guard
from .procs import die_with, fork_is_safe

#: a file (what is left of it to read) at least this big is parsed beside the store: starting the
#: worker and pickling the events cost 10 ms a MB of events less than they save
BESIDE_MIN = 8 << 20

#: the pipe's size asked for: a block's events or two (Linux lets a user have pipes of 1 MiB)
PIPE_BYTES = 1 << 20

# what a worker sends: a block's events, its end (and the formats it turned off), what went wrong,
# a piece's end state, a piece's start state
_BLOCK, _END, _FAILED, _PIECE, _START = range(5)


class WorkerLost(Exception):
    """A worker ended before the end of the file (killed: by the kernel short of memory, by a user),
    or failed (what it raised is the cause: a worker's own shortage, or the file's error, which the
    read here meets again): the events handed over are a part.  The file is to be read again, here."""


def _failed(error: BaseException) -> WorkerLost:
    lost = WorkerLost(f"a parsing process failed: {type(error).__name__}: {error}")
    lost.__cause__ = error
    return lost


def parse_beside(pieces: Iterator[tuple[int, bytes]], feed: Callable[[bytes], list], state: Callable[[], Any],
                 out: Callable[[list], None],
                 on_bytes: Optional[Callable[[int], None]] = None) -> Optional[tuple[int, Any]]:
    """``feed`` (a parser's) given each piece's data in a worker, ``out`` given here each piece's
    events (if any), in order, as they come.  ``pieces``: (bytes passed, data) in file order, read
    in the worker (a hole passed over has no data).  Returns the bytes passed and ``state()`` at the
    end (the parser, as the worker left it: pickled, as the parse cache saves it); None where no
    worker can be started (fork is unsafe while threads run): nothing was read.  Raises
    :class:`WorkerLost` where the worker died or failed (what it raised is the cause)."""
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
                blob: Optional[bytes] = receiver.recv_bytes()
            except EOFError:
                blob = None
            message = _message(blob, worker)
            if message[0] == _BLOCK:
                passed += message[1]
                if on_bytes is not None:
                    on_bytes(message[1])
                if message[2]:
                    out(message[2])
            else:
                guard.adopt(message[2])  # (formats the worker turned off stay off for the files after)
                return passed, message[1]
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


def _as_worker(sender: Any, parent: int, run: Callable[[], None], parent_gone: tuple[type[BaseException], ...]) -> None:
    """A worker's body ``run``: the worker ends with its parent and leaves Ctrl-C to it (the parent
    ends the worker), sends what ``run`` raised as its failure (``parent_gone``: what says the parent
    stopped reading or sending: nobody to tell), and closes its pipe at the end."""
    die_with(parent)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        run()
    except parent_gone:
        pass
    except Exception as exc:
        _send_failure(sender, exc)
    finally:
        sender.close()


def _parse(pieces: Iterator[tuple[int, bytes]], feed: Callable[[bytes], list], state: Callable[[], Any],
           sender: Any, parent: int) -> None:
    """The worker: each piece's events sent as they are made, then the state; or what went wrong."""
    def run() -> None:
        for passed, data in pieces:
            sender.send_bytes(pickle.dumps((_BLOCK, passed, feed(data) if data else []), pickle.HIGHEST_PROTOCOL))
        sender.send_bytes(pickle.dumps((_END, state(), guard.disabled()), pickle.HIGHEST_PROTOCOL))

    _as_worker(sender, parent, run, (BrokenPipeError, ConnectionResetError))


def _send_failure(sender: Any, exc: Exception) -> None:
    try:
        blob = pickle.dumps((_FAILED, exc), pickle.HIGHEST_PROTOCOL)
        pickle.loads(blob)  # (an exception that cannot be rebuilt there is told by its text)
    except Exception:
        blob = pickle.dumps((_FAILED, RuntimeError(f"{type(exc).__name__}: {exc}")))
    try:
        sender.send_bytes(blob)
    except OSError:
        pass


# -- a file in pieces, on several workers -----------------------------------------------------------
#: a file read in pieces is cut (at line ends) into pieces of this size
PIECE_BYTES = 16 << 20
#: workers at most: each holds a piece of events ahead of the store, pickled, at most (the memory bound)
PIECE_WORKERS = 8
#: blocks of a piece whose parser state the worker sends with their events: the state a piece's parser
#: starts from is its own, and where it has not become the state of the read in order by then (a parser
#: woken only by the log's first lines, say), the rest of the piece is parsed here
CHECKED_BLOCKS = 16

class Piece(NamedTuple):
    """A piece of a file, cut where the read in order ends a block (the engine's blocks are a read's
    complete lines: a parser woken by a line reads the lines of its block before it too, so the
    blocks must be the read in order's): its lines from ``start`` (a line's first) on, read at
    ``grid`` (the read in order's offset there: the bytes before it are the piece's first line's
    start, held whole by the framer) up to ``end`` (the next piece's grid)."""
    start: int
    grid: int
    end: int
    line: int  # the number of the line at ``start``


def cut(fd: int, offset: int, end: int, line: int, read_size: int) -> list[Piece]:
    """The file from ``offset`` to ``end`` as pieces of about :data:`PIECE_BYTES`, cut where the read
    in order from ``offset`` by ``read_size`` ends a block (see :class:`Piece`), each numbered (its
    lines counted); none where a sparse hole is in it (a hole is stepped over, not read: see
    :func:`tuimon.engine.ingest._pieces`).  No cut falls in a line of 64 KiB or more, or in one
    holding a carriage return (the framer's segments)."""
    seek_hole = getattr(os, "SEEK_HOLE", None)
    try:
        if end - offset < 2 * PIECE_BYTES or seek_hole is None or os.lseek(fd, offset, seek_hole) < end:
            return []
    except OSError:
        return []
    step = max(1, PIECE_BYTES // read_size) * read_size
    cuts = [(offset, offset)]  # (a piece's first line's start, the grid offset it is read at)
    for grid in range(offset + step, end - step // 2, step):
        reach = min(1 << 16, grid - cuts[-1][1])
        window = os.pread(fd, reach, grid - reach)
        nl = window.rfind(b"\n")
        if len(window) == reach and nl >= 0 and b"\r" not in window[nl + 1:]:
            cuts.append((grid - reach + nl + 1, grid))
    out = []
    at = offset
    for k, (start, grid) in enumerate(cuts):
        while at < start:
            window = os.pread(fd, min(4 << 20, start - at), at)
            if not window:
                return []  # (cut short under us: read in order)
            line += window.count(b"\n")
            at += len(window)
        out.append(Piece(start, grid, cuts[k + 1][1] if k + 1 < len(cuts) else end, line))
    return out


def parse_in_pieces(fd: int, pieces: Sequence[Piece], first: Any, at_line: Callable[[int, Any], Any],
                    restore: Callable[[Any], None], read_size: int, out: Callable[[list], None],
                    on_bytes: Optional[Callable[[int], None]], workers: int) -> Optional[tuple[int, Any]]:
    """A file's ``pieces`` parsed by ``workers`` processes at once, their events given to ``out`` here,
    in file order, as the one parser ``first`` reading them all in turn gives them.

    The first piece is parsed from ``first``; every other one from a parser of its own,
    ``at_line(piece.line, before)`` (``before``: the state the read in order had at the end of the
    worker's last piece, sent as the store took it; None for a worker's first piece), fed the piece's
    first line's start. Here, each piece but the first is parsed again from the
    state the one before it ended in (the state of the read in order), a block at a time, until that
    state is the worker's (``deciding()``: the same state gives the same events for the same bytes),
    before the first block or after one; from there the worker's events are the read in order's, and
    its parser's state at the piece's end is that read's (its ``counts()`` summed).

    Returns the bytes read and the parser's state at the end (``restore`` makes a state sent back
    readable on); None where no worker can be started. Raises :class:`WorkerLost` as
    :func:`parse_beside` does (the events given so far are the read in order's first ones)."""
    if not fork_is_safe():
        return None
    import multiprocessing
    import queue
    import threading

    ctx = multiprocessing.get_context("fork")
    workers = max(1, min(workers, PIECE_WORKERS, len(pieces)))
    procs: list[Any] = []
    receivers: list[Any] = []
    goes: list[Any] = []  # to each worker: go on to your next piece, from this state (the read in order's)
    inboxes: list[queue.SimpleQueue] = [queue.SimpleQueue() for _ in range(workers)]
    threads: list[threading.Thread] = []
    try:
        for w in range(workers):
            receiver, sender = ctx.Pipe(duplex=False)
            go_receiver, go = ctx.Pipe(duplex=False)
            _widen(receiver.fileno())
            proc = ctx.Process(target=_parse_pieces, name="tuimon-parser",
                               args=(fd, pieces, range(w, len(pieces), workers), first, at_line, read_size,
                                     sender, go_receiver, os.getpid()), daemon=True)
            try:
                proc.start()
            finally:
                sender.close()
                go_receiver.close()
            procs.append(proc)
            receivers.append(receiver)
            goes.append(go)
            go.send_bytes(b"")  # (its first piece: from a state of its own)
    except OSError:  # no processes left
        _end(procs, receivers + goes, threads)
        return None
    for receiver, inbox in zip(receivers, inboxes):  # (threads only once every worker is forked)
        thread = threading.Thread(target=_drain, args=(receiver, inbox), daemon=True, name="tuimon-pieces")
        thread.start()
        threads.append(thread)
    passed = 0

    def tell(n: int) -> None:
        nonlocal passed
        passed += n
        if on_bytes is not None:
            on_bytes(n)

    try:
        state = first
        for k, piece in enumerate(pieces):
            w = k % workers

            def take(inbox: queue.SimpleQueue = inboxes[w], proc: Any = procs[w]) -> tuple:
                return _taken(inbox, proc)

            state = _take_piece(take, tell, out, restore, None if k == 0 else state,
                                _blocks(fd, piece.grid, piece.end, read_size))
            if k + workers < len(pieces):  # (its next piece: the state here is the nearest true one)
                try:
                    goes[w].send_bytes(pickle.dumps(state, pickle.HIGHEST_PROTOCOL))
                except OSError:
                    raise WorkerLost(f"a parsing process ended before the file's end (exit status {_status(procs[w])})")
        for w in range(workers):
            message = _taken(inboxes[w], procs[w])
            guard.adopt(message[1])
        return passed, state
    finally:
        _end(procs, receivers + goes, threads)


def _take_piece(take: Callable[[], tuple], tell: Callable[[int], None], out: Callable[[list], None],
                restore: Callable[[Any], None], state: Any, blocks: Iterator[bytes]) -> Any:
    """A piece's events out, its parser's state at its end returned. ``state``: the state the piece
    starts in, for a piece parsed from a state of its own (None for the first, parsed from the true one);
    parsed here until it is the worker's."""
    met: Optional[tuple] = None  # the worker's counts where the states met
    here = state
    while True:
        message = take()
        if message[0] == _START:
            if here.deciding() == message[1]:
                met = message[2]  # (met before a block: nothing is parsed here)
            continue
        if message[0] == _PIECE:
            ended = message[1]
            restore(ended)
            if here is None:  # (the first piece)
                return ended
            if met is None:  # never met: parsed here, whole
                return here
            ended.set_counts([a + b - c for a, b, c in zip(here.counts(), ended.counts(), met)])
            return ended
        _, passed, events, check = message
        tell(passed)
        if here is None or met is not None:
            if events:
                out(events)
            continue
        own = here.feed(next(blocks, b""))  # (b"": the file was cut short under us)
        if own:
            out(own)
        if check is not None and here.deciding() == check[0]:
            met = check[1]


def _taken(inbox: Any, proc: Any) -> tuple:
    return _message(inbox.get(), proc)


def _message(blob: Optional[bytes], worker: Any) -> tuple:
    """A worker's message; :class:`WorkerLost` where it ended (None: its pipe closed) or failed."""
    if blob is None:
        raise WorkerLost(f"a parsing process ended before the file's end (exit status {_status(worker)})")
    message = pickle.loads(blob)
    if message[0] == _FAILED:
        raise _failed(message[1])
    return message


def _drain(receiver: Any, inbox: Any) -> None:
    """A worker's messages taken off its pipe as they come (the worker goes on with its piece while the
    store takes another's events); None at the pipe's end."""
    try:
        while True:
            inbox.put(receiver.recv_bytes())
    except (EOFError, OSError):
        inbox.put(None)


def _end(procs: list, pipes: list, threads: list) -> None:
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join()
    for pipe in pipes:
        pipe.close()
    for thread in threads:
        thread.join(5)


def _blocks(fd: int, start: int, end: int, read_size: int) -> Iterator[bytes]:
    """A piece's bytes, a block at a time: the worker's blocks, and the ones read again here."""
    while start < end:
        data = os.pread(fd, min(read_size, end - start), start)
        if not data:  # (cut short under us: the file is read to where it ends)
            return
        start += len(data)
        yield data


def _parse_pieces(fd: int, pieces: Sequence[Piece], mine: Sequence[int], first: Any, at_line: Callable[[int, Any], Any],
                  read_size: int, sender: Any, go: Any, parent: int) -> None:
    """A worker: its pieces in turn (each when the store has taken its piece before, which sends the state
    the read in order had at that piece's end), each block's events sent, with the state they leave for a
    piece's first blocks, then the piece's end state."""
    def run() -> None:
        for k in mine:
            blob = go.recv_bytes()
            piece = pieces[k]
            # (a piece's parser goes on from the state the read in order had a few pieces before: what
            # lasts, the parsers woken and what they saw once, is then mostly what it has there)
            parser = first if k == 0 else at_line(piece.line, pickle.loads(blob) if blob else None)
            if k:
                if piece.grid > piece.start:  # (its first line's start, held as the read in order holds it)
                    parser.feed(os.pread(fd, piece.grid - piece.start, piece.start))
                sender.send_bytes(pickle.dumps((_START, parser.deciding(), parser.counts()), pickle.HIGHEST_PROTOCOL))
            n = 0
            for data in _blocks(fd, piece.grid, piece.end, read_size):
                events = parser.feed(data)
                n += 1
                check = (parser.deciding(), parser.counts()) if k and n <= CHECKED_BLOCKS else None
                sender.send_bytes(pickle.dumps((_BLOCK, len(data), events, check), pickle.HIGHEST_PROTOCOL))
            sender.send_bytes(pickle.dumps((_PIECE, parser), pickle.HIGHEST_PROTOCOL))
        sender.send_bytes(pickle.dumps((_END, guard.disabled()), pickle.HIGHEST_PROTOCOL))

    # (EOFError: the parent stopped, and sends no next piece)
    _as_worker(sender, parent, run, (BrokenPipeError, ConnectionResetError, EOFError))
