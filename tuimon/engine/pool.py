"""Many files on several cores: each file parsed whole, by one process.

A file's lines are read in order by one engine (parser state runs from line to
line), so the unit of parallel work is the file.  Each file is parsed into a job
store of its own, merged into the caller's in the order of the files (what adding
their events in turn gives).  The biggest file past :data:`WORKER_MAX` is read here,
streamed a block at a time (so one big file costs what ``--jobs 1`` costs, and its
events never wait in memory); workers take every other file, the biggest first (a
store pickled back is a few numpy arrays: 17 MB for a 200 MB log), so a directory
of several big logs is read on every core.  With no pool (one file to read, the
others taken from the parse cache), a big file is parsed by workers beside its
store, in pieces where it has two or more (:mod:`.pipeline`).
"""
from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, Sequence

from ..store.job_store import JobStore
from . import catalog
from .alloc import collector_for_batch, keep_freed_memory
from .cache import ParseCache
from .ingest import ParseStats, cached_store, parse_file_store, start_sizes
from .procs import cores, die_with, process_context

if TYPE_CHECKING:
    from concurrent.futures import Future

#: the biggest file past this size is parsed here, streamed to the store a block at a time
WORKER_MAX = 32 << 20
#: small files go to a worker together, at most this many bytes and files a task: a task opens the
#: catalog and the parse cache (and folds the cache's log when it closes it), 3 ms of work; one a file,
#: 4,096 small files took twice as long on two workers as on one process
BATCH_BYTES, BATCH_FILES = 8 << 20, 256
#: and at least this many tasks a worker, so that the workers end together
TASKS_PER_WORKER = 4


def _parse_batch(paths: Sequence[str], spec: Sequence[tuple[str, str]], cache_path: Optional[str],
                 limits: Sequence[Optional[int]]) -> list[Optional[bytes]]:
    """Each file's (store, stats), pickled; None for a file that failed (it is read again by the
    caller, which reports what is wrong with it)."""
    keep_freed_memory()
    cat = catalog.from_spec(spec)
    collector_for_batch()  # (the worker's modules and the catalog's rules are made by now)
    cache = ParseCache(Path(cache_path), key=cat.key) if cache_path else None
    out: list[Optional[bytes]] = []
    try:
        for path, limit in zip(paths, limits):
            try:
                result = parse_file_store(Path(path), path, catalog=cat, cache=cache, limit=limit)
                out.append(pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
            except Exception:
                out.append(None)
    finally:
        if cache is not None:
            cache.close()
    return out


def batches(paths: list[Path], sizes: dict[Path, Optional[int]], workers: int) -> list[list[Path]]:
    """``paths`` (the biggest first) cut into tasks: a file of :data:`BATCH_BYTES` or more alone, small
    ones together (at most :data:`BATCH_BYTES` and :data:`BATCH_FILES` a task, and at least
    :data:`TASKS_PER_WORKER` tasks a worker where there are files enough), in order."""
    cap = max(1, min(BATCH_FILES, -(-len(paths) // (workers * TASKS_PER_WORKER))))
    out: list[list[Path]] = []
    held = 0
    for p in paths:
        size = sizes.get(p) or 0
        if not out or held + size > BATCH_BYTES or len(out[-1]) >= cap:
            out.append([])
            held = 0
        out[-1].append(p)
        held += size
    return out


class _Task:
    """A task's future, unpickled once for all its files."""

    __slots__ = ("future", "results")

    def __init__(self, future: "Future") -> None:
        self.future = future
        self.results: Optional[list[Optional[bytes]]] = None

    def result(self, k: int) -> Optional[tuple]:
        """File ``k``'s store and stats; None if the worker died or failed (the file is then read here)."""
        try:
            if self.results is None:
                self.results = self.future.result()
            blob = self.results[k]
            if blob is None:
                return None
            self.results[k] = None  # (taken: its memory goes with the merge)
            return pickle.loads(blob)
        except Exception:
            return None


class ReadObserver(Protocol):
    """What a progress display is told of a batch read."""

    def begin(self, total_bytes: int, total_files: int) -> None: ...

    def advance(self, nbytes: int, nfiles: int) -> None: ...


def parse_files_into(store: JobStore, files: list[Path], *, jobs: Optional[int] = None,
                     on_error: Callable[[Path, OSError], None], cache: Optional[ParseCache] = None,
                     progress: Optional["ReadObserver"] = None,
                     per_file: Optional[dict[Path, ParseStats]] = None) -> ParseStats:
    """Each file parsed into a store of its own (by a worker, or here), merged into
    ``store`` in the order of ``files``: what adding their events in turn would give.
    With ``cache``, files read before are taken in from their saved stores.  ``progress``
    is told the total first, then (bytes, files) as they are done: a big file read here by
    block, a worker's or a cached one whole.  ``per_file`` is given each file's stats."""
    def told(n: int) -> None:
        if progress is not None:
            progress.advance(n, 0)

    jobs = jobs or cores()
    cache_path = str(cache.path) if cache is not None and cache.usable() else None
    sizes = start_sizes(files)  # a batch report reads what the files held when it started
    if progress is not None:
        progress.begin(sum(n or 0 for n in sizes.values()), len(files))
    # files whose saved store is still theirs need no worker: taken in here at once
    ready = {p: hit for p in files if (hit := cached_store(p, cache)) is not None} if cache is not None else {}
    unread = sorted((p for p in dict.fromkeys(files) if p not in ready), key=lambda p: -(sizes[p] or 0))
    here = unread.pop(0) if unread and (sizes[unread[0]] or 0) > WORKER_MAX else None  # the biggest, read here
    total = ParseStats()
    pool = None
    futures: dict[Path, tuple[_Task, int]] = {}
    if jobs > 1 and len(unread) > 1:
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        try:
            workers = min(jobs, len(unread))
            pool = ProcessPoolExecutor(workers, mp_context=process_context(),
                                       initializer=die_with, initargs=(os.getpid(),))
            spec = catalog.current().spec
            # the biggest first: the last to finish is then a small one (the pool takes them in turn)
            for batch in batches(unread, sizes, workers):
                try:
                    task = _Task(pool.submit(_parse_batch, [str(p) for p in batch], spec, cache_path,
                                             [sizes[p] for p in batch]))
                except BrokenProcessPool:  # a worker died while tasks were handed out: the rest are read here
                    break
                futures.update((p, (task, k)) for k, p in enumerate(batch))
        except OSError:  # no room for the pool's semaphores (/dev/shm full), no processes left: read here
            if pool is not None:
                _stop_workers(pool)
            pool, futures = None, {}
    read_here: dict[Path, tuple | OSError] = {}  # (store, stats), or what reading it raised
    # with no pool (whose threads make fork unsafe), a big file read here is parsed beside its store
    beside = jobs if jobs > 1 and not futures else 0
    try:
        if here is not None and futures:  # read while the workers read theirs, not after waiting for them
            try:
                read_here[here] = parse_file_store(here, str(here), cache=cache, on_bytes=told, limit=sizes[here])
            except OSError as exc:
                read_here[here] = exc
        for path in files:
            try:
                whole = read_here.pop(path, None)
                if isinstance(whole, OSError):
                    raise whole
                if whole is None:
                    whole = ready.get(path) or (futures[path][0].result(futures[path][1]) if path in futures
                                                else None)
                    if whole is not None:
                        told(sizes[path] or 0)
                part, stats = whole if whole is not None else parse_file_store(
                    path, str(path), cache=cache, on_bytes=told, limit=sizes[path], beside=beside)
            except OSError as exc:
                on_error(path, exc)
                continue
            finally:
                if progress is not None:
                    progress.advance(0, 1)
            store.merge_file(str(path), part)
            total.add(stats)
            if per_file is not None:
                per_file.setdefault(path, ParseStats()).add(stats)
    except BaseException:  # Ctrl-C (or an error): the workers' files are not wanted any more
        if pool is not None:
            _stop_workers(pool)
            pool = None
        raise
    finally:
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    return total


def _stop_workers(pool: Any) -> None:
    """End a pool's workers now, not after the files they are reading (Ctrl-C ends a summary within a
    second, not when its biggest file is read): the running ones terminated (Python 3.14's
    ``terminate_workers``; before it, the processes themselves, taken before ``shutdown`` forgets
    them), the pending ones cancelled."""
    stop = getattr(pool, "terminate_workers", None)
    if stop is not None:
        stop()
        return
    processes = list((getattr(pool, "_processes", None) or {}).values())
    for process in processes:
        try:
            process.terminate()
        except (OSError, ValueError):  # already gone
            pass
    pool.shutdown(wait=False, cancel_futures=True)
