"""Iteration rows into a job's series, in bulk and in line order.

The compiled core reads a block's Megatron iteration lines into one
:class:`~tuimon.parsers.columns.IterationRows`, which comes after the block's other
events.  The store takes it in as if each row were the :class:`~tuimon.parsers.events.Iteration`
its line gives, at its place among those events:

* before any event of the same file, the rows of earlier lines are folded (:class:`Pending`
  finds them ahead in the call's items); the rest when the rows' own item comes;
* except before an event that changes nothing an iteration reads and reads nothing it
  changes (the store says which: a reported rate, a memory line...), when none of the
  rows starts a new run (which would take the event): the rows wait, and runs grow long;
* a run of rows is folded without an event a row (:func:`fold`): the order-dependent
  state (a rank's last counter, a run's total, NaN episodes, the latest values) a row
  at a time, the points a rank's run of rows at a time (:meth:`Series.stage`);
* a row that starts a new run, runs of fewer than :data:`FEW` rows, and every row of a
  bounded store (a follower's series thin as they take points) go through the event
  path one by one.

The tests hold the store of rows to the store of the same rows' events.
"""
from __future__ import annotations

import math
from bisect import bisect_left
from itertools import chain
from operator import itemgetter, lt
from typing import Any, Callable, Container, Mapping, Optional, Sequence, Union, cast

from tuimon.parsers.columns import IterationRows, has_none, map_values, weight

from .fields import Of, primary_loss
from .series import Series, point_plan

RankKey = Union[int, str]
#: rows fewer than this go the event path: a fold's fixed cost is more than their events'
FEW = 4
MAX_ASIDE = 4096  # iteration records a job keeps as timed over an evaluation pass

_PLAN = point_plan("iteration")
#: whether every point of an iteration can be made from a row's values (each getter an
#: attribute or a function of one): else rows go through the event path
_ROWS_MAKE_POINTS = _PLAN.iteration_at == 0 and all(isinstance(get, Of) for _, get in _PLAN.computed)
_COMPUTED = [(k, get) for k, get in _PLAN.computed if isinstance(get, Of)]


class Pending:
    """The iteration rows of one call's items, per file in order, and how far each is folded."""

    __slots__ = ("queue", "epoch", "slack", "_safe")

    def __init__(self, items: Sequence[Any]) -> None:
        self.queue: dict[str, list[list]] = {}  # file -> [rows, rows folded] of rows not all folded, in order
        for item in items:
            if type(item) is IterationRows:
                self.queue.setdefault(item.file, []).append([item, 0])
        self.epoch = 0  # moved on by every event that may change what the rows do to their run
        self.slack = weight(items)  # the most ranks the call's events can add to a job's (a row's events count)
        self._safe: dict[str, tuple] = {}  # file -> (epoch, rows, the first row that starts a new run)

    def first_line(self, file: str) -> int:
        """The line of ``file``'s first row not folded yet."""
        rows, at = self.queue[file][0]
        return rows.line[at]

    def before(self, file: str, line: int) -> list[tuple[IterationRows, int, int]]:
        """The slices (rows, start, end) of ``file``'s rows not folded yet of lines before
        ``line``, marked folded."""
        queue = self.queue[file]
        out = []
        while queue:
            entry = queue[0]
            rows, at = entry
            end = bisect_left(rows.line, line, at)
            if end > at:
                out.append((rows, at, end))
                entry[1] = end
            if end < len(rows.line):
                return out
            queue.pop(0)
        del self.queue[file]
        return out

    def peek(self, file: str, line: int) -> list[tuple[IterationRows, int, int]]:
        """The slices (rows, start, end) of ``file``'s rows not folded yet of lines before
        ``line`` (as :meth:`before`, not marked folded)."""
        out = []
        for rows, at in self.queue[file]:
            end = bisect_left(rows.line, line, at)
            if end > at:
                out.append((rows, at, end))
            if end < len(rows.line):
                break
        return out

    def rest(self, rows: IterationRows) -> list[tuple[IterationRows, int, int]]:
        """The slice of ``rows`` (at its place in the items) not folded yet, marked folded."""
        queue = self.queue[rows.file]
        if queue[0][0] is not rows:
            return []  # (folded before an event of a later line)
        at = queue.pop(0)[1]
        if not queue:
            del self.queue[rows.file]
        return [(rows, at, len(rows.line))] if at < len(rows.line) else []

    def may_wait(self, store: Any, file: str, line: int, max_runs: int, max_ranks: int) -> bool:
        """Whether ``file``'s rows of lines before ``line`` may be folded after an event at
        ``line`` that changes nothing they read nor reads anything they change (the store
        says which): when none of them starts a new run (which would take the event) and
        the ranks a job counts cannot fill up meanwhile.  Where the first of its rows that
        starts a new run is holds until the epoch moves (rows folded before it leave their
        run as the scan did)."""
        rows, at = self.queue[file][0]
        held = self._safe.get(file)
        if held is None or held[0] != self.epoch or held[1] is not rows:
            held = self._safe[file] = (self.epoch, rows, first_split(store, rows, at, max_runs, max_ranks, self.slack))
        return bisect_left(rows.line, line, at) <= held[2]


#: a counter that jumped this many times more than the step from the one before it to the one after
#: it, which then goes back past it, was a torn line (:func:`after_spike`)
SPIKE_RATIO = 1000


def after_spike(seen: tuple[int, int], iteration: int) -> bool:
    """Whether the record before ``iteration`` (``seen``: its counter and the jump that reached it)
    was a torn line's counter: ``iteration`` goes back from it but not as far as the counter before
    it, and that jump was over :data:`SPIKE_RATIO` times the step from there to ``iteration``.
    ``2, 1000000000000000, 3`` (of 500): the run is at 3, not finished.  A restart goes back further
    (to a checkpoint, to 1); ranks printed out of order go back by a step, not after a jump."""
    counter, jump = seen
    before = counter - jump
    return before < iteration < counter and jump > SPIKE_RATIO * (iteration - before)


def key_of(rank: Optional[int], node: Optional[str], file_rank: Optional[int]) -> RankKey:
    """Whose series a point joins: its rank, else the file's, else its node."""
    if rank is not None:
        return rank
    if file_rank is not None:
        return file_rank
    return node if node is not None else "-"


def says_divergence(loss: Optional[float], grad_norm: Optional[float], skipped: Any) -> bool:
    """A loss that is not finite, or a grad norm that is not finite in a step not skipped (see
    :func:`nan_check`)."""
    return (loss is not None and not math.isfinite(loss)) or (
        grad_norm is not None and not math.isfinite(grad_norm) and not skipped)


_NAN_COUNT = "nan_count"  # (an iteration's count of NaN iterations)


def _loss_of(losses: Optional[Mapping[str, float]], nan_count: Optional[int]) -> Optional[float]:
    """An iteration row's loss (its primary one; NaN where it counted NaN iterations)."""
    return math.nan if nan_count else primary_loss(losses) if losses else None


def nan_check(job: Any, step: Optional[int], ev: Any, loss: Optional[float], grad_norm: Optional[float],
              skipped: bool, max_failures: int) -> None:
    """A non-finite loss is a divergence.  A non-finite grad norm is one too, unless the
    step was skipped: fp16's loss scaler skips a step whose gradients overflowed, and
    lowers its scale; that is normal.  A finite step after it clears it."""
    if says_divergence(loss, grad_norm, skipped):
        if job.nan_at is None and len(job.nan_events) < max_failures:
            rank = ev.rank if ev.rank is not None else None
            job.nan_events.append((step, None if rank is None else str(rank), ev.file, ev.line, ev.wall_time))
        job.nan_at = (step, ev.file, ev.line)
    elif loss is not None:
        job.nan_at = None


def fold(store: Any, rows: IterationRows, a: int, b: int, segment: Any, take: Callable[[Any], Any],
         limits: tuple[int, int, int]) -> list[Any]:
    """Rows ``a`` to ``b`` of ``rows`` into ``store`` as their events would go (``take``
    takes one event the event path's way); the jobs whose series now hold staged points.
    ``limits``: the store's runs a file, ranks a job and failures a job."""
    max_runs, max_ranks, max_failures = limits
    touched: list[Any] = []
    file = rows.file
    while a < b:
        job, file_rank = store.job_for(file)
        if job.bounded or not _ROWS_MAKE_POINTS or b - a < FEW:
            for k in range(a, b):
                touched.append(take(rows.event(k)))
            return touched
        end = _fold_run(store, job, file_rank, rows, a, b, segment, max_runs, max_ranks, max_failures)
        touched.append(job)
        if end < b:  # row ``end`` starts a new run: the event path makes it (a rare event)
            touched.append(take(rows.event(end)))
            end += 1
        a = end
    return touched


class Scan:
    """What rows ``a`` to ``end`` do to their run, read without changing it: ``end`` is the
    first row that starts a new run (or ``b``); each row's series key; the rows that are
    points (not another rank's print of an iteration seen); the ranks' last counters after
    them, and the run's total."""

    __slots__ = ("end", "keys", "points", "last", "known", "resets")

    def __init__(self, store: Any, job: Any, file_rank: Optional[int], rows: IterationRows, a: int, b: int,
                 max_runs: int, max_ranks: int) -> None:
        run = job.run_of(rows.file)
        before = run.last
        known = run.shape.get("train_iters")
        if not self._at_once(rows, a, b, before, known, file_rank, max_ranks):
            self._each(store, rows, a, b, before, known, file_rank, max_runs, max_ranks)

    def _at_once(self, rows: IterationRows, a: int, b: int, before: dict, known: Optional[int],
                     file_rank: Optional[int], max_ranks: int) -> bool:
        """The common cases at once: each rank's counter going up from row to row and from the run's
        last of that rank (one rank's rows, or ranks that each print every record), with room for
        the ranks new to the run. Each row is then a point, none starts a new run (a split needs a
        counter that does not go up), none undoes a torn one. False (nothing set) where the rows are
        not so: :meth:`_each` reads them."""
        n = b - a
        if n < 1:
            return False
        its, ranks = rows.iteration[a:b], rows.rank[a:b]
        rank = ranks[0]
        if ranks.count(rank) == n and (rank is not None or file_rank is not None or
                                       rows.node[a:b].count(rows.node[a]) == n):  # one key (in C)
            key = key_of(rank, rows.node[a], file_rank)
            seen = before.get(key)
            if seen is None and max_ranks - len(before) <= 0 or seen is not None and its[0] <= seen[0]:
                return False
            if n > 1 and not all(map(lt, its, its[1:])):
                return False
            step = its[-1] - its[-2] if n > 1 else its[0] - seen[0] if seen is not None else 0
            keys: list[RankKey] = [key] * n
            last = {key: (its[-1], step)}
        else:
            keys = cast(list[RankKey], ranks) if None not in ranks else [key_of(r, node, file_rank)
                                                    for r, node in zip(ranks, rows.node[a:b])]
            counter: dict[RankKey, int] = {}
            steps: dict[RankKey, int] = {}
            new = 0
            for key, it in zip(keys, its):
                was = counter.get(key)
                if was is None:
                    seen = before.get(key)
                    if seen is None:
                        new += 1
                    was = seen[0] if seen is not None else it - 1
                    steps[key] = it - seen[0] if seen is not None else 0
                else:
                    steps[key] = it - was
                if it <= was:
                    return False
                counter[key] = it
            if new > max_ranks - len(before):
                return False
            last = {key: (counter[key], steps[key]) for key in counter}
        totals = [t for t in rows.train_iters[a:b] if t is not None]
        self.end, self.keys, self.points = b, keys, list(range(a, b))
        self.last, self.known = last, totals[-1] if totals else known
        self.resets: dict[int, tuple[int, int]] = {}
        return True

    def _each(self, store: Any, rows: IterationRows, a: int, b: int, before: dict, known: Optional[int],
              file_rank: Optional[int], max_runs: int, max_ranks: int) -> None:
        """The rows read one at a time, in order."""
        can_split = len(store.runs_of(rows.file)) < max_runs
        its, totals, ranks, nodes = rows.iteration, rows.train_iters, rows.rank, rows.node
        last: dict[RankKey, tuple[int, int]] = {}  # the counters these rows leave (over ``before``)
        room = max_ranks - len(before)  # (a run remembers so many ranks' counters)
        keys: list[RankKey] = []
        points: list[int] = []
        resets: dict[int, tuple[int, int]] = {}  # row -> (a torn line's counter before it, where the run is)
        end = b
        for k in range(a, b):
            it, total, rank = its[k], totals[k], ranks[k]
            key = rank if rank is not None else key_of(None, nodes[k], file_rank)
            seen = last.get(key) or before.get(key)
            if seen is not None and can_split and (it < seen[0] - seen[1] or (
                    it <= seen[0] and total is not None and known is not None and total != known)):
                end = k
                break
            keys.append(key)
            if total is not None:
                known = total
            if seen is not None and it == seen[0]:
                continue  # the same iteration again: printed by another rank whose lines carry no rank
            if seen is not None and after_spike(seen, it):
                ranks_now = {**before, **last}
                resets[k] = (seen[0], max([it] + [v[0] for r, v in ranks_now.items() if r != key]))
                last[key] = (it, it - (seen[0] - seen[1]))
            elif seen is not None or room > 0:
                if seen is None:
                    room -= 1
                last[key] = (it, it - seen[0] if seen is not None and it > seen[0] else 0)
            points.append(k)
        self.end, self.keys, self.points, self.last, self.known = end, keys, points, last, known
        self.resets = resets


def first_split(store: Any, rows: IterationRows, a: int, max_runs: int, max_ranks: int, slack: int) -> int:
    """The first row from ``a`` on that would start a new run of its file, were they folded
    now (the rows' end if none); ``a`` if they and ``slack`` more could fill what a job
    counts of ranks."""
    job, file_rank = store.job_for(rows.file)
    b = len(rows.line)
    if len(job.ranks_seen) + b - a + slack >= max_ranks:
        return a
    return Scan(store, job, file_rank, rows, a, b, max_runs, max_ranks).end


def _fold_run(store: Any, job: Any, file_rank: Optional[int], rows: IterationRows, a: int, b: int, segment: Any,
              max_runs: int, max_ranks: int, max_failures: int) -> int:
    """Rows from ``a`` into ``job`` up to the first that starts a new run (or ``b``); where it stopped."""
    scan = Scan(store, job, file_rank, rows, a, b, max_runs, max_ranks)
    end = scan.end
    if end == a:
        return a
    run = job.run_of(rows.file)
    run.last.update(scan.last)
    run.progressed = True
    if scan.known is not None:
        run.shape["train_iters"] = scan.known
    series_of = job.ranks
    for key in dict.fromkeys(scan.keys):
        if key not in series_of:
            series_of[key] = Series(bounded=job.bounded)
    _counts(job, rows, a, end, max_ranks)
    points = scan.points
    _marks(store, job, run, rows, a, end, points, segment)
    if points:
        keys = scan.keys if len(points) == end - a else [scan.keys[k - a] for k in points]
        _points(job, rows, points, keys)
        _latest(job, rows, points, max_failures, scan.resets)
    return end


def _marks(store: Any, job: Any, run: Any, rows: IterationRows, a: int, end: int, points: list[int],
           segment: Any) -> None:
    """What rows ``a`` to ``end`` do, row by row as the event path does it, while it moves: the two
    records after an evaluation pass (the first is timed over the pass: the summary leaves it out
    of the step times), and the state the file's timer reports count in, marked at each row until
    the run has logged progress and no evaluation's records are awaited (the reports before are
    setup timers, or put aside).  A row another rank printed again counts for neither record.  (The
    records after a pass were taken one by one: with an evaluation every 250 steps, llm.c's, 2 rows
    in 250 were events.)"""
    if segment.progressed and not segment.aside and not run.after_eval:
        return  # (the common case: nothing moves)
    counted: Container[int] = range(a, end) if len(points) == end - a else set(points)
    for k in range(a, end):
        if run.after_eval and k in counted:
            if run.after_eval == 2 and len(job.after_eval) < MAX_ASIDE:
                job.after_eval.add((rows.file, rows.line[k] or 0))
            run.after_eval -= 1
        if not segment.progressed or segment.aside:
            segment.mark(rows.line[k], store._timer_state(rows.file))
        elif not run.after_eval:
            return


def _counts(job: Any, rows: IterationRows, a: int, b: int, max_ranks: int) -> None:
    """What the store counts of every event: how many, the ranks seen, the first and last stamps."""
    job.events += b - a
    seen_in(job, rows.rank[a:b], rows.wall_time[a:b], max_ranks)


def seen_in(job: Any, ranks: Sequence[Optional[int]], walls: Sequence[Optional[float]], max_ranks: int) -> None:
    """What the store keeps of every event of rows (the ranks seen, the first and last
    stamps), of their ``ranks`` and stamps ``walls``."""
    seen = job.ranks_seen
    for rank in dict.fromkeys(ranks):
        if rank is not None and rank not in seen and len(seen) < max_ranks:
            seen.add(rank)
    floor = job.launch_wall  # (a stamp before its run's launch is the run before's, carried over)
    counted = [w for w in walls if w is not None and (floor is None or w >= floor)]
    if counted:
        low, high = min(counted), max(counted)
        if job.first_wall is None or low < job.first_wall:
            job.first_wall = low
        if job.last_wall is None or high > job.last_wall:
            job.last_wall = high


class Columns:
    """Some rows' fields, a column at a time (taken in C: a slice where the rows are a run, the
    common case; a comprehension a field a row was most of the fold's time)."""

    __slots__ = ("fields", "pick", "n", "end", "_none")

    def __init__(self, rows: IterationRows, points: Sequence[int]) -> None:
        self.fields, self.n = rows.fields, len(points)
        self._none: Optional[list] = None
        a, b = points[0], points[-1] + 1
        self.end = b
        if b - a == len(points):
            self.pick: Callable[[list], list] = lambda column: column[a:b]
        else:
            self.pick = lambda column: list(map(column.__getitem__, points))

    def __call__(self, name: str) -> list:
        """The rows' values of field ``name`` (None where a row has none), not to be changed (the
        Nones of a field no row has are one list, most of the point plan's fields)."""
        column = self.fields.get(name)
        if column is not None:
            return self.pick(column)
        if self._none is None:
            self._none = [None] * self.n
        return self._none

    def given(self, name: str) -> Optional[list]:
        """The rows' values of field ``name``, None where no row has it (a field the rule does not read)."""
        column = self.fields.get(name)
        return None if column is None else self.pick(column)

    def last(self, column: Optional[list], truthy: bool = False) -> Any:
        """The rows' last value of ``column`` (a column of all the rows, or None: none) that is not
        None (with ``truthy``: not empty): the last row's where it has one, as it mostly has."""
        if column is None:
            return None
        value = column[self.end - 1]  # (the last row is a point: a run's last, or the last picked)
        if value if truthy else value is not None:
            return value
        return _last_of(self.pick(column), truthy)


def _points(job: Any, rows: IterationRows, points: list[int], keys: list[RankKey]) -> None:
    """The rows' points, staged a rank's run at a time, as the event path stages each."""
    fields = Columns(rows, points)
    columns: list[list] = []
    for name in _PLAN.names:
        if name == "iteration":
            columns.append(fields.pick(rows.iteration))
        elif name == "wall_time":
            columns.append(fields.pick(rows.wall_time))
        elif name == "line":
            columns.append(fields.pick(rows.line))
        else:
            columns.append(fields(name))
    computed = [get.of_each(fields(get.name)) for _, get in _COMPUTED]
    file_id = job.file_index.get(rows.file, 0)
    if len(set(keys)) == 1:
        job.ranks[keys[0]].stage(_PLAN, columns, computed, file_id)
        return
    where: dict[RankKey, list[int]] = {}
    for j, key in enumerate(keys):
        where.setdefault(key, []).append(j)
    for key, js in where.items():
        pick = itemgetter(*js) if len(js) > 1 else (lambda column, j=js[0]: (column[j],))  # (a tuple of each column's)
        job.ranks[key].stage(_PLAN, [pick(c) for c in columns], [list(pick(c)) for c in computed], file_id)


def diverges(rows: IterationRows, a: int, b: int) -> bool:
    """Whether a row of ``a`` to ``b`` may say a divergence (:func:`_latest`'s check): a loss
    that is not finite, NaN iterations counted, a grad norm that is not finite in a step
    not skipped."""
    return _diverging(Columns(rows, range(a, b)))


def _diverging(fields: Columns) -> bool:
    """Whether one of these rows' fields says a divergence (:func:`says_divergence`): none can
    where no row counts NaN iterations and every loss and grad norm is finite (looked at in C),
    else each row is asked."""
    nan_counts, losses, grads = fields.given(_NAN_COUNT), fields("losses"), fields.given("grad_norm")
    if nan_counts is None or not any(nan_counts):
        values = map_values(losses)  # (one key's maps: their values, no map made)
        if values is not None and has_none(values):
            values = [v for v in values if v is not None]
        if grads is not None and has_none(grads):
            grads = [g for g in grads if g is not None]
        try:
            if all(map(math.isfinite, values if values is not None else
                       chain.from_iterable(map(dict.values, filter(None, losses))))) and \
                    (grads is None or all(map(math.isfinite, grads))):
                return False
        except TypeError:  # (a value that is no number: each row is asked, as before)
            pass
    return any(says_divergence(_loss_of(row_losses, nan), grad, skipped)
               for row_losses, nan, grad, skipped in zip(losses, fields(_NAN_COUNT), fields("grad_norm"),
                                                         fields("skipped")))


def _latest(job: Any, rows: IterationRows, points: list[int], max_failures: int,
            resets: Optional[dict[int, tuple[int, int]]] = None) -> None:
    """What each point leaves as the job's latest (its counter, progress, losses, rates, the
    NaN episode): at once where no point says a divergence and no torn counter is undone,
    else a row at a time in order."""
    top = None if resets else _latest_at_once(job, rows, points)
    if top is None:
        top = _latest_each(job, rows, points, max_failures, resets)
    job.last_iteration = top
    k = points[-1]
    job.last_progress = (rows.file, rows.line[k])
    a, b = points[0], k + 1
    walls: list = rows.wall_time[a:b] if b - a == len(points) else list(map(rows.wall_time.__getitem__, points))
    if has_none(walls):  # (a log without stamps: none, seen in C)
        walls = [w for w in walls if w is not None]
    if walls:
        job.last_progress_wall = walls[-1]
        low = min(walls)
        if job.first_step_wall is None or low < job.first_step_wall:
            job.first_step_wall = low


def _latest_each(job: Any, rows: IterationRows, points: list[int], max_failures: int,
                 resets: Optional[dict[int, tuple[int, int]]]) -> int:
    """:func:`_latest`, a row at a time in order; the latest counter."""
    its = rows.iteration
    top = job.last_iteration
    for k in points:
        f = rows.row(k)
        it = its[k]
        if top is None or it >= top:
            top = it
        elif resets and k in resets and top == resets[k][0]:
            top = resets[k][1]  # the counter before was a torn line's (see after_spike)
        losses = f.get("losses")
        if losses:
            job.last_losses = dict(losses)
        loss = _loss_of(losses, f.get(_NAN_COUNT))
        grad = f.get("grad_norm")
        if says_divergence(loss, grad, f.get("skipped")):
            nan_check(job, it, rows.event(k), loss, grad, bool(f.get("skipped")), max_failures)
        elif loss is not None:
            job.nan_at = None
        lr = f.get("lr")
        if lr is not None:
            job.last_iteration_lr = lr
        scale = f.get("loss_scale")
        if scale is not None:
            job.last_loss_scale = scale
        gbs = f.get("global_batch")
        if gbs is not None:
            job.config["global_batch"] = gbs
        if rows.train_iters[k] is not None:
            job.config["train_iters"] = rows.train_iters[k]
    return top


def _latest_at_once(job: Any, rows: IterationRows, points: list[int]) -> Optional[int]:
    """:func:`_latest` at once, where no point says a divergence (no NaN episode to record): each
    field's last value; the latest counter, or None (nothing changed) where a point says one."""
    fields = Columns(rows, points)
    if _diverging(fields):
        return None
    given = rows.fields.get
    last = fields.last(given("losses"), truthy=True)
    if last is not None:
        job.last_losses = dict(last)
        # (a finite loss clears a NaN episode: a row has one where it has losses, none of them None)
        job.nan_at = None
    lr = fields.last(given("lr"))
    if lr is not None:
        job.last_iteration_lr = lr
    scale = fields.last(given("loss_scale"))
    if scale is not None:
        job.last_loss_scale = scale
    gbs = fields.last(given("global_batch"))
    if gbs is not None:
        job.config["global_batch"] = gbs
    total = fields.last(rows.train_iters)
    if total is not None:  # (a key's place in the config is not read: only its value)
        job.config["train_iters"] = total
    top = max(fields.pick(rows.iteration))
    return top if job.last_iteration is None or top >= job.last_iteration else job.last_iteration


def _last_of(values: list, truthy: bool = False) -> Any:
    """The last of ``values`` that is not None (with ``truthy``: not empty)."""
    if values.count(None) == len(values):  # (a field the rows leave out: seen in C)
        return None
    for value in reversed(values):
        if value if truthy else value is not None:
            return value
    return None
