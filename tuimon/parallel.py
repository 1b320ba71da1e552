"""One big log parsed on several cores, with exactly the events of one pass.

Parsers keep state from line to line, so a file cannot simply be cut in pieces.
Instead (speculate, then check):

* the file is cut at line boundaries into pieces (three a worker, the last ones
  smaller: :func:`piece_weights`);
* every piece is parsed by a worker process from a fresh parser set (*warm*:
  once-only events assumed reported, unless the piece starts the file), which
  records a snapshot of its state after each step of its reading (a block, or a
  run of lines of its first whole block: :func:`_steps`);
* on two cores this process parses every other piece itself, from the true state,
  beside one worker (:func:`shares_pieces`); the rest of this describes the others;
* this process takes the first piece's events as they are, then carries on into
  the next piece with the true state, step by step, until its state equals the
  worker's snapshot after the same step.  From there the worker's events are the
  events of one pass (same state, same input), so they are taken as they are,
  and so is the worker's final state, for the next piece;
* past its first reads (where this process settles) a worker joins its steps'
  batches by shape (:func:`_joined_steps`): a few big batches cross over and
  reach the job store instead of hundreds, and the store ends in the same state.

Logs settle fast (the next iteration line sets the last iteration, the next
stamp the wall time), so this process reads a few hundred lines of each piece
again.  When a state never settles (say a NaN was reported before the cut and
never after) this process parses the whole piece: slower, never wrong.
"""
from __future__ import annotations

import io
import mmap
import multiprocessing
import os
import pickle
import shutil
import struct
import tempfile
import threading
from array import array
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional, Sequence

import numpy as np

from parsers import parser_set
from parsers.base import SUPPRESSED, WARM
from parsers.events import Batch, Event, concat, shape
from parsers.lanes import packed

from .alloc import keep_freed_memory
from .ingest import READ_SIZE, FileParser, ParseStats, parse_file
from .scan import trigger_scanner

SPLIT_FROM = 48 << 20  # a smaller file is parsed whole, beside other files
# each piece costs its worker 20-30 ms (joining, packing, pickling its results) and this
# process as much (reading them, settling); fewer and bigger ones leave this process more
# to take in once the workers are done.  Three: 0.97 of the CPU and wall of four on the
# 300 MB bench log (12 alternating pairs), two: 1.03-1.05 of three
PIECES_PER_WORKER = 3
MIN_PIECE = 8 << 20  # each piece costs a few lines parsed again here, and a process's turn
MAX_PIECE = 256 << 20  # a piece's events wait in memory until its turn
# A worker's state settles to this process's within a few lines of a piece (the next
# iteration line sets the last iteration, the next stamp the wall time), but it can only
# be compared where a step of the worker's reading ends.  So a piece's first whole block
# (read 1: read 0 is the rest of a one-pass read) is fed in parts, and this process reads
# a part of it again instead of all of it (about 20 ms a piece).
SPLIT_READ = 1
SPLIT_PARTS = 16
SETTLE_STEPS = 2  # steps of a piece this process reads before it waits for the worker's results
# A worker joins the batches of its steps from here on (read 2 onwards: this process settles
# within the first two reads, or reads the whole piece itself): a 47 MB piece's 300 batches,
# each taken in by the job store column by column, become a few, and the results it
# hands over hold a few hundred arrays instead of thousands
JOIN_FROM = SPLIT_READ + SPLIT_PARTS
PIECE_READ_SIZE = READ_SIZE  # the blocks of one pass


def cores() -> int:
    """Cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def process_context():
    """fork starts in milliseconds, but is only safe while this process has a single thread."""
    fork = threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if fork else "spawn")


def pieces_for(size: int, workers: Optional[int] = None) -> int:
    """1 for a file parsed whole, else how many cores its pieces may keep busy."""
    return max(1, min(workers or cores(), size * 2 // SPLIT_FROM))


# On two cores, one worker and this process share the pieces: this process parses every other
# piece itself (it has the true state, so nothing of it is handed over, counted or checked)
# and takes in the worker's between them.  A megabyte costs both about the same: the worker
# 9.05 ms with its snapshots and hand-over, this process 9.2 ms with the job store (one
# process, 67 MB of the bench log); the worker counts the lines of this process's pieces,
# this process takes in the worker's.  So the pieces are equal (the worker's at 0.8 of this
# process's: wall 1.013 of equal ones, 16 alternating pairs), and the last one is the
# worker's: this process's tail is taking it in.
SHARED_PIECES = 4  # at least: more when a piece would exceed MAX_PIECE
WORKER_SHARE = 1.0  # a worker's piece, relative to one of this process's


def shares_pieces(workers: int) -> bool:
    """Whether this process parses pieces itself beside the workers: on two cores.
    With more, taking in the other workers' results keeps it busy enough."""
    return workers == 2


def shared_weights(pieces: int) -> list[float]:
    """Relative sizes of ``pieces`` (even) pieces, this process's first."""
    return [1.0 if k % 2 == 0 else WORKER_SHARE for k in range(pieces)]


def piece_weights(pieces: int, workers: int) -> list[int]:
    """Relative sizes of ``pieces`` pieces parsed in order by ``workers`` processes:
    equal, but for the last ones, which shrink step by step.  This process takes in
    each piece's results in turn, and what it has left once the workers are done
    (the last pieces) runs on one core; small last pieces keep that short."""
    top = 2 * workers
    return [min(pieces - k, top) for k in range(pieces)]


def cut_points(path: Path, size: int, pieces: int, read_size: int = READ_SIZE,
               weights: Optional[list[int]] = None) -> list[int]:
    """Offsets of ``pieces`` ranges (fewer if lines are huge), sized as ``weights``
    (default: equal).  Each cut is where a one-pass read in ``read_size`` steps
    ends a block (just after the last newline of a read): sniffing works a block at
    a time, so the pieces' blocks must be the very blocks of one pass."""
    weights = weights or [1] * pieces
    total = sum(weights)
    points = [0]
    with open(path, "rb") as fh:
        for k in range(1, pieces):
            cell = int(size * sum(weights[:k]) // total) // read_size
            while True:
                fh.seek(cell * read_size)
                chunk = fh.read(read_size)
                if not chunk:
                    break
                nl = chunk.rfind(b"\n")
                if nl >= 0:
                    at = cell * read_size + nl + 1
                    if points[-1] < at < size:
                        points.append(at)
                    break
                cell += 1
    points.append(size)
    return points


def read_range(path: Path, start: int, end: int, size: int = READ_SIZE) -> Iterator[bytes]:
    """Bytes [start, end) in reads that end where one pass's reads of ``size`` end."""
    with open(path, "rb") as fh:
        fh.seek(start)
        at = start
        while at < end:
            chunk = fh.read(min((at // size + 1) * size, end) - at)
            if not chunk:
                return
            at += len(chunk)
            yield chunk


def _count_lines(path: str, start: int, end: int) -> int:
    """Newlines in bytes [start, end), counted over a map of that range (no copies).
    The map is populated as it is made: touched page by page, its faults took
    twice as long as the count (20-40 ms of CPU for 47 MB, a piece's)."""
    if end <= start:
        return 0
    with open(path, "rb") as fh:
        at = start - start % mmap.ALLOCATIONGRANULARITY
        try:
            mm = mmap.mmap(fh.fileno(), end - at, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                           prot=mmap.PROT_READ, offset=at)
        except (ValueError, OSError, AttributeError, TypeError):
            # emptied meanwhile, a file that cannot be mapped, or no such flags (Windows): read it
            return sum(chunk.count(b"\n") for chunk in read_range(Path(path), start, end, 8 << 20))
        with mm:
            data = np.frombuffer(mm, dtype=np.uint8)
            try:
                return sum(int(np.count_nonzero(data[k:min(k + (1 << 20), end - at)] == 10))
                           for k in range(start - at, end - at, 1 << 20))
            finally:
                del data  # the map cannot close while an array still views it


# lines in each piece, shared by the workers of one parse (-1: not counted yet); see _first_line
_line_counts: Optional[Sequence[int]] = None


def _share_line_counts(counts) -> None:
    """Worker initializer: the parse's shared line counts (inherited when forked,
    handed over when spawned)."""
    global _line_counts
    _line_counts = counts


def _first_line(path: str, points: Sequence[int], index: int) -> int:
    """The number of the first line of piece ``index``: 1 plus the lines of the
    pieces before it.  Each count is made once, by the first worker that needs it
    (usually the next piece's, as it starts: a worker starts a piece only after
    every earlier piece was started), and shared; two workers that both find it
    missing both count it, and agree.  This process, which takes in results while
    the workers parse, counts nothing."""
    counts = _line_counts
    first = 1
    for j in range(index):
        known = counts[j] if counts is not None else -1
        if known < 0:
            known = _count_lines(path, points[j], points[j + 1])
            if counts is not None:
                counts[j] = known
        first += known
    return first


def _parse_piece(path: str, label: str, points: Sequence[int], index: int, read_size: int,
                 spool: Optional[str] = None) -> "bytes | str":
    """Worker: parse piece ``index`` (bytes ``points[index]`` to ``points[index + 1]``)
    from a fresh state (warm unless at the start of the file); per block (events,
    snapshot, stats so far), then the final FileParser, pickled: written to a file
    in ``spool`` (its path is returned), else returned."""
    keep_freed_memory()  # inherited when forked, not when spawned
    start, end = points[index], points[index + 1]
    first_line = _first_line(path, points, index)
    ps = parser_set(label, scanner=trigger_scanner, lanes=True)
    if start > 0:
        ps.warm()
    ps._flushes = index << 32  # batch flush ids stay distinct from other pieces'
    fp = FileParser(label, parsers=ps)
    fp.framer.next_line = first_line
    blocks = []
    for events in _steps(fp, read_range(Path(path), start, end, read_size)):
        blocks.append((events, ps.snapshot(), fp.stats))
    if _line_counts is not None and _line_counts[index] < 0:
        # known now: a later piece started after this one ends need not count it (with two
        # workers the next piece usually ends with this one, so the one after counts only it)
        _line_counts[index] = fp.framer.next_line - first_line
    # columns are packed once joined: a step at a time, 300 batches a piece took 10 ms
    apart = len(blocks)  # steps packed one by one
    if len(blocks) > JOIN_FROM + 1:
        apart = JOIN_FROM
        joined = _packed(_joined_steps([events for events, _, _ in blocks[JOIN_FROM:]]))
        blocks[JOIN_FROM:] = [(joined if j == JOIN_FROM else [], snapshot, stats)
                              for j, (_, snapshot, stats) in enumerate(blocks[JOIN_FROM:], JOIN_FROM)]
    blocks[:apart] = [(_packed(events), snapshot, stats) for events, snapshot, stats in blocks[:apart]]
    if spool:
        return _spooled((blocks, fp), spool, f"piece-{index}")
    return pickle.dumps((blocks, fp), protocol=pickle.HIGHEST_PROTOCOL)


def _joined_steps(steps: list[list[Event]]) -> list[Event]:
    """The events of consecutive steps, the batches of each run of steps that hold
    only batches joined by shape (:func:`parsers.events.concat`), one batch a shape,
    ordered by last line and made together (one ``flush``).

    The job store ends in the state the steps would leave it in: within a run each
    kind has one shape (a kind keyed by name, timers, may have several with no name
    in common), so each kind's lines, and each timer's values, still come in line
    order; what it keeps of several kinds (the latest progress line, the earliest
    stamp) is taken the same whatever their order.  Records end a run."""
    out: list[Event] = []
    run: dict[tuple, list[Batch]] = {}  # shape -> its batches, in line order
    claims: dict[tuple, tuple] = {}  # (kind,) or (kind, timer name) -> the run's shape holding it

    def close() -> None:
        if run:
            joined = sorted((concat(batches) for batches in run.values()), key=_last_line)
            made_with = joined[0].flush
            out.extend(b._replace(flush=made_with) for b in joined)
        run.clear()
        claims.clear()

    for events in steps:
        if not events:
            continue
        wanted = _claims(events)
        if wanted is None:  # records, or two batches of one kind: as they are
            close()
            out.extend(events)
            continue
        if any(claims.get(slot, mine) != mine for slot, mine in wanted.items()):
            close()
        claims.update(wanted)
        for e in events:
            run.setdefault(shape(e), []).append(e)
    close()
    return out


def _claims(events: list[Event]) -> Optional[dict[tuple, tuple]]:
    """What each batch of a step holds within a run (see :func:`_joined_steps`):
    its kind, or a kind keyed by name its names; None if the step holds a record
    or two batches hold the same."""
    wanted: dict[tuple, tuple] = {}
    for e in events:
        if type(e) is not Batch:
            return None
        mine = shape(e)
        try:
            hash(mine)
        except TypeError:  # a constant that is a list, say
            return None
        key = getattr(e.kind, "KEYED_BY", None)
        slots = [(e.kind, name) for name in e.maps.get(key, ())] if key else [(e.kind,)]
        for slot in slots:
            if slot in wanted:
                return None
            wanted[slot] = mine
    return wanted


def _last_line(batch: Batch) -> int:
    return batch.lines[-1]


class _ArraysApart(pickle.Pickler):
    """Pickles arrays as references to buffers kept apart (protocol 5): their
    bytes are written to the file once, and read back into arrays once, instead of
    being copied into the pickle, out of the file and out of the pickle again (a
    piece's results are 10 MB of arrays, and each fresh copy faults its pages in)."""

    def reducer_override(self, obj):
        if type(obj) is array:
            return _array_from, (obj.typecode, pickle.PickleBuffer(obj))
        return NotImplemented


def _array_from(typecode: str, data) -> array:
    out = array(typecode)
    out.frombytes(data)
    return out


_HEAD = struct.Struct("<QQ")  # pickle length, buffer count; then the buffers' lengths


def _spooled(result: object, spool: str, name: str) -> "bytes | str":
    """``result`` pickled into a file of ``spool`` for this process (its path), its
    arrays' bytes after the pickle; or pickled whole and returned if the file
    cannot be written.  Through the pool's pipe a worker hands megabytes over in
    64 kB turns, each waiting for this process's reader thread, which waits for the
    GIL while this process takes in events: 40-60 ms of a worker's time a piece, idle."""
    out = os.path.join(spool, name)
    buffers: list[pickle.PickleBuffer] = []
    stream = io.BytesIO()
    _ArraysApart(stream, protocol=5, buffer_callback=buffers.append).dump(result)
    views = [b.raw() for b in buffers]
    try:
        with open(out, "wb") as fh:
            fh.write(_HEAD.pack(stream.tell(), len(views)))
            fh.write(struct.pack(f"<{len(views)}Q", *(v.nbytes for v in views)))
            fh.write(stream.getbuffer())
            for view in views:
                fh.write(view)
    except OSError:  # a full /dev/shm, say
        try:
            os.unlink(out)
        except OSError:
            pass
        return pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
    return out


def _unspooled(result: "bytes | str") -> object:
    """What :func:`_spooled` left (the file is removed once read): the pickle and
    its arrays read through a map of the file, populated as it is made."""
    if isinstance(result, bytes):
        return pickle.loads(result)
    try:
        with open(result, "rb") as fh:
            with mmap.mmap(fh.fileno(), 0, flags=mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0),
                           prot=mmap.PROT_READ) as mm:
                view = memoryview(mm)
                stream, buffers = None, []  # views of the map: released before it closes
                try:
                    length, count = _HEAD.unpack_from(view)
                    at = _HEAD.size + 8 * count
                    sizes = struct.unpack_from(f"<{count}Q", view, _HEAD.size)
                    stream = view[at:at + length]
                    at += length
                    for size in sizes:
                        buffers.append(view[at:at + size])
                        at += size
                    return pickle.loads(stream, buffers=buffers)
                finally:
                    del stream, buffers
                    view.release()
    finally:
        os.unlink(result)


def spool_dir(need: int) -> Optional[str]:
    """A new directory for the workers' results where ``need`` bytes are free:
    /dev/shm (memory) where there is one, else the temporary directory (TMPDIR);
    None if neither has room (results then come through the pool's pipe).  Shared
    memory is small in containers (64 MB under Docker) and other programs use it,
    so it is taken only with room to spare."""
    for root in ("/dev/shm", tempfile.gettempdir()):
        try:
            free = os.statvfs(root)
        except (OSError, AttributeError):  # no such directory; no statvfs (Windows)
            continue
        if free.f_bavail * free.f_frsize >= need and os.access(root, os.W_OK):
            try:
                return tempfile.mkdtemp(prefix="tuimon-", dir=root)
            except OSError:
                continue
    return None


_FLOATS, _INTS = {float}, {int}


def _packed(events: list[Event]) -> list[Event]:
    """Batch columns of plain floats or ints (and line numbers) as arrays: they
    cross to this process as bytes instead of one object each, and sequences they
    remain (the store reads them as it reads lists, numpy without a copy)."""
    return [e._replace(lines=packed("q", e.lines) if type(e.lines) is list else e.lines,
                       columns={k: _array_of(v) for k, v in e.columns.items()},
                       maps={m: {k: _array_of(v) for k, v in cols.items()} for m, cols in e.maps.items()})
            if type(e) is Batch else e for e in events]


def _array_of(values: list):
    if type(values) is array:  # the lanes' number columns already are
        return values
    kind = type(values[0]) if values else None
    if kind is float and set(map(type, values)) == _FLOATS:
        return packed("d", values)
    if kind is int and set(map(type, values)) == _INTS:
        try:
            return packed("q", values)
        except struct.error:  # beyond 64 bits
            return values
    return values


def parse_file_parallel(path: Path, label: str, sink: Callable[[list[Event]], None], *,
                        pieces: Optional[int] = None, workers: Optional[int] = None,
                        read_size: int = PIECE_READ_SIZE) -> tuple[ParseStats, dict]:
    """Parse ``path`` in ``pieces`` (default: PIECES_PER_WORKER a worker, at least 8 MB and at
    most 256 MB each, which bounds memory; see :func:`piece_weights`) on
    ``workers`` processes (default: one a core); events reach ``sink`` in file
    order.  Returns the parse stats and what happened: pieces, blocks read again
    here, pieces taken from workers, pieces parsed here (:func:`shares_pieces`)."""
    size = os.path.getsize(path)
    workers = workers or cores()
    weights: Optional[list] = None
    if pieces is None and shares_pieces(workers):
        pieces = max(2, min(SHARED_PIECES, size // MIN_PIECE // 2 * 2))
        while size / pieces > MAX_PIECE:
            pieces += 2
        weights = shared_weights(pieces)
    elif pieces is None:
        # a few pieces a worker, the last ones smaller (piece_weights): this process
        # takes in one piece's results while the workers parse the next ones, and
        # is left with little once they are done
        pieces = max(1, min(PIECES_PER_WORKER * workers, size // MIN_PIECE))
        weights = piece_weights(pieces, workers)
        while max(weights) * size // sum(weights) > MAX_PIECE:
            pieces += 1
            weights = piece_weights(pieces, workers)
    points = cut_points(path, size, pieces, read_size, weights)
    info = {"pieces": len(points) - 1, "blocks_reread": 0, "pieces_taken": 0, "pieces_parsed_here": 0,
            "pieces_lost": 0}
    if len(points) <= 2:
        return parse_file(path, label, sink=sink, read_size=read_size)[1], info
    spool = spool_dir(size)  # results take about a sixth of the log's size
    try:
        return _parse_pieces(path, label, sink, points, workers, read_size, spool, info)
    finally:
        if spool is not None:
            shutil.rmtree(spool, ignore_errors=True)  # results of pieces never taken, after an error


def _parse_pieces(path: Path, label: str, sink: Callable[[list[Event]], None], points: list[int], workers: int,
                  read_size: int, spool: Optional[str], info: dict) -> tuple[ParseStats, dict]:
    """The pieces between ``points``, parsed by workers and taken in here in turn
    (:func:`_take_piece`); on two cores every other piece is parsed here instead,
    beside one worker (:func:`shares_pieces`)."""
    counted = ParseStats()  # stats of parsers since replaced
    last = len(points) - 1
    own = set(range(0, last, 2)) if shares_pieces(workers) else set()  # pieces parsed here
    theirs = [k for k in range(last) if k not in own]
    context = process_context()
    counts = context.RawArray("q", [-1] * last)
    with ProcessPoolExecutor(min(workers - 1 if own else workers, len(theirs)), mp_context=context,
                             initializer=_share_line_counts, initargs=(counts,)) as pool:

        def submit(k: int) -> Future:
            try:
                return pool.submit(_parse_piece, str(path), label, tuple(points), k, read_size, spool)
            except Exception as exc:  # the pool broke (a worker was killed): the piece is read here
                return _failed(exc)

        ahead = min(len(theirs), 2 * workers + 1)  # pieces in flight: results wait in memory until their turn
        futures = {k: submit(k) for k in theirs[:ahead]}
        fp: Optional[FileParser] = None
        for k in range(last):
            if ahead < len(theirs):
                futures[theirs[ahead]] = submit(theirs[ahead])
                ahead += 1
            if k in own:
                fp = fp or _first_piece_parser(label)
                lines = _read_here(fp, path, points[k], points[k + 1], read_size, sink)
                if counts[k] < 0:  # for a worker whose piece starts after this one
                    counts[k] = lines
                info["pieces_parsed_here"] += 1
                continue
            future = futures.pop(k)
            if fp is None:  # the first piece starts where one pass does: its events are one pass's
                try:
                    blocks, fp = _unspooled(future.result())
                except Exception:  # its worker died (killed, out of memory): the piece is read here
                    info["pieces_lost"] += 1
                    fp = _first_piece_parser(label)
                    _read_here(fp, path, points[k], points[k + 1], read_size, sink)
                    continue
                for events, _, _ in blocks:
                    sink(events)
                continue
            fp = _take_piece(fp, future, path, points[k], points[k + 1], read_size, sink, info, counted)
    sink(fp.finish())
    counted.add(fp.stats)
    return counted, info


def _take_piece(fp: FileParser, future, path: Path, start: int, end: int, read_size: int,
                sink: Callable[[list[Event]], None], info: dict, counted: ParseStats) -> FileParser:
    """Take in a worker's piece (bytes ``start`` to ``end``): read its first steps
    again here with the true state ``fp`` until that state is the worker's after the
    same step, then take the worker's events from there on, and return its parser
    for what follows.  A piece whose state never settles is read here (``fp``)."""
    steps = _steps(fp, read_range(path, start, end, read_size))
    read = 0  # steps of this piece read again here

    def step() -> bool:
        """Read the piece's next step again here; False at its end."""
        nonlocal read
        events = next(steps, None)
        if events is None:
            return False
        sink(events)
        read += 1
        info["blocks_reread"] += 1
        return True

    # the steps the states usually settle after (the rest of a one-pass read,
    # then a part of a block) are read again before waiting for the worker:
    # at the end of a run this process would otherwise wait, then read them
    while step() and read < SETTLE_STEPS and not future.done():
        pass
    try:
        blocks, worker_fp = _unspooled(future.result())
    except Exception:  # its worker died (killed, out of memory) or failed: the piece is read here
        info["pieces_lost"] += 1
        while step():
            pass
        return fp
    while read:
        i = read - 1
        # from JOIN_FROM on, the worker's steps are joined: its events can be taken after
        # the last step or one before JOIN_FROM only
        fixes = _settled(fp.parsers.snapshot(), blocks[i][1], worker_fp.parsers.snapshot()) \
            if i < len(blocks) and (i < JOIN_FROM or i == len(blocks) - 1) else None
        if fixes is not None:
            for events, _, _ in blocks[i + 1:]:
                sink(events)
            counted.add(fp.stats)
            counted.add(_negated(blocks[i][2]))  # the worker's count of what was read here
            for j, flag, value in fixes:
                setattr(worker_fp.parsers.active[j], flag, value)
            worker_fp.parsers._warm = False  # from here on it is the one pass
            info["pieces_taken"] += 1
            return worker_fp
        if not step():
            break  # never settled: the whole piece was read here
    return fp


def _read_here(fp: FileParser, path: Path, start: int, end: int, read_size: int,
               sink: Callable[[list[Event]], None]) -> int:
    """Bytes ``start`` to ``end`` parsed in this process, carrying on from ``fp``'s
    state (the one pass's); the number of lines read."""
    first_line = fp.framer.next_line
    for chunk in read_range(path, start, end, read_size):
        sink(fp.feed(chunk))
    return fp.framer.next_line - first_line


def _failed(exc: BaseException) -> Future:
    future: Future = Future()
    future.set_exception(exc)
    return future


def _first_piece_parser(label: str) -> FileParser:
    """The parser of a one-pass read from the start, as a worker makes it for piece 0."""
    return FileParser(label, parsers=parser_set(label, scanner=trigger_scanner, lanes=True))


def _steps(fp: FileParser, chunks: Iterable[bytes]) -> Iterator[list[Event]]:
    """The events of a piece, step by step, as its worker reads it and as this
    process reads it again: a read at a time, but the block of read SPLIT_READ in
    SPLIT_PARTS runs of lines, with the same records (FileParser.feed_parts)."""
    for i, chunk in enumerate(chunks):
        if i == SPLIT_READ:
            yield from fp.feed_parts(chunk, SPLIT_PARTS)
        else:
            yield fp.feed(chunk)


def _settled(ours: tuple, theirs: tuple, their_end: tuple) -> Optional[list[tuple[int, str, object]]]:
    """Whether the worker's state after a block (``theirs``) is ours: then its
    events from there on are ours too.  A once-only flag it never had to consult
    (still WARM at its end) matches anything and takes our value; one it did
    consult counts as reported.  Returns the flags to set, or None if unsettled."""
    if ours[:3] != theirs[:3]:
        return None
    fixes = []
    for j, (mine, other, last) in enumerate(zip(ours[3], theirs[3], their_end[3])):
        if mine.keys() != other.keys():
            return None
        for key, value in mine.items():
            seen = other[key]
            if seen is WARM and (last.get(key) is WARM or _norm(value) is True):
                fixes.append((j, key, value))  # it never reports, and neither would we
            elif _norm(seen) != _norm(value):
                return None
    # parsers it switched on after that block were switched on fresh in one pass:
    # their once-only events are due, so none of them may have been held back
    for j in range(len(theirs[3]), len(their_end[3])):
        for key, value in their_end[3][j].items():
            if value is SUPPRESSED:
                return None
            if value is WARM:
                fixes.append((j, key, False))
    return fixes


def _norm(value: object) -> object:
    return True if value is SUPPRESSED else value


def _negated(stats: ParseStats) -> ParseStats:
    return ParseStats(bytes=-stats.bytes, lines=-stats.lines, too_long=-stats.too_long,
                      invalid_utf8=-stats.invalid_utf8)


def _parse_whole(path: str) -> bytes:
    keep_freed_memory()
    events: list[Event] = []
    _, stats = parse_file(Path(path), path, sink=events.extend)
    return pickle.dumps((events, stats), protocol=pickle.HIGHEST_PROTOCOL)


def _whole_result(future: Future) -> Optional[tuple]:
    """A small file's events and stats from its worker; None if the worker died or
    failed (the file is then read here)."""
    try:
        return pickle.loads(future.result())
    except Exception:
        return None


def parse_files(files: list[Path], sink: Callable[[list[Event]], None], *, jobs: Optional[int] = None,
                on_error: Callable[[Path, OSError], None]) -> ParseStats:
    """Parse ``files`` on ``jobs`` processes (default: one a core): big files in
    pieces (:func:`parse_file_parallel`), small ones each in a worker.  Events
    reach ``sink`` file by file, in the order of ``files``, as in one pass."""
    jobs = jobs or cores()
    sizes = {}
    for path in files:
        try:
            sizes[path] = path.stat().st_size
        except OSError:
            sizes[path] = 0  # reading it will say what is wrong
    small = [p for p in files if pieces_for(sizes[p], jobs) <= 1]
    total = ParseStats()
    pool = None
    futures: dict = {}
    if jobs > 1 and len(small) > 1:
        pool = ProcessPoolExecutor(min(jobs, len(small)), mp_context=process_context())
        futures = {p: pool.submit(_parse_whole, str(p)) for p in small}
    try:
        for path in files:
            try:
                whole = _whole_result(futures[path]) if path in futures else None
                if whole is not None:
                    events, stats = whole
                    sink(events)
                elif path not in small:
                    stats, _ = parse_file_parallel(path, str(path), sink, workers=jobs)
                else:
                    _, stats = parse_file(path, str(path), sink=sink)
            except OSError as exc:
                on_error(path, exc)
                continue
            total.add(stats)
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return total
