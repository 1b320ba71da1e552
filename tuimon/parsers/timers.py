"""Timer breakdowns and checkpoint saves.

Megatron prints ``time (ms) | name: x | name: y``; DeepSpeed wraps the same in a
``log_dist`` line tagged ``[Rank R]``; newer Megatron prints a
``(min, max) time across ranks (ms):`` header followed by one
``name ....: (min, max)`` line per timer (``max time across ranks (ms):`` and
``name ....: max`` with ``--timing-log-option max``).  Timer names are free-form (STRONGHOLD
adds ``offloading-*``), so each is classified into a group by its words.
"""
from __future__ import annotations

import re
from typing import Mapping, Optional

from .base import LineContext, LineParser, Sample, compile_sniff
from .common import RANK_ANCHOR, RANK_TAG, rank_or
from .events import Checkpoint, Event, RunConfig, Timers, frozen_map
from .numbers import to_float, to_int
from .patterns import lazy

#: a ``name ....: (min, max)`` line (or ``name ....: max``), as data: a name, a space and at least two
#: leaders, ``after``; a pair (``open`` min ``comma`` and a space, max ``close``) or a value alone; spaces to
#: the end.  The compiled core reads lines by the shape itself (core/src/timers.rs, in a pass: a regex's
#: captures cost 0.8 us a line), re by :data:`MINMAX`, made of it here
MINMAX_SHAPE = {"leader": ".", "after": ": ", "open": "(", "comma": ",", "close": ")"}


def shape_regex(shape: Mapping[str, str]) -> str:
    """The regex of a ``(min, max)`` line's shape (:data:`MINMAX_SHAPE`): groups 1 the name, 2 and 3
    a pair's min and max, 4 a value alone."""
    leader, after, open_, comma, close = (re.escape(shape[k]) for k in ("leader", "after", "open", "comma", "close"))
    marks = comma + open_ + close  # (what a value holds none of)
    return (rf"^\s*(\S.*?) {leader}{{2,}}{after}(?:{open_}([^{marks}]+){comma} ([^{marks}]+){close}|([^\s{marks}]+))"
            rf"\s*$")


MINMAX = shape_regex(MINMAX_SHAPE)  # (min, max), or max alone
_MINMAX = lazy(MINMAX)
# DeepSpeed's comms logger: "rank=0 | comm op: broadcast | time (ms): 3907.38 | msg size: 576.0 B | ..."
COMM_OP_NAME = r"\bcomm op: ([^|]*?)\s*\|"
_COMM_OP = lazy(COMM_OP_NAME)
# a list line's anchor (its pairs follow; a colon right after it: a comms-logger line); the timer a save's time
# is (the hook gives it to the save announced before); the prefix of offloading's timers (their first line
# announces the run's offloading)
_LIST_ANCHOR, _SAVE_TIMER, _OFFLOADING = "time (ms)", "save-checkpoint", "offloading"
#: what the compiled core is handed to read plain timer lines as the hooks do (core/src/timers.rs;
#: tuimon.engine.rows builds the reader)
CORE = {"list_anchor": _LIST_ANCHOR, "minmax_shape": MINMAX_SHAPE, "comm_op": COMM_OP_NAME, "to_hook": (_SAVE_TIMER,),
        "announce": _OFFLOADING, "rank_anchor": RANK_ANCHOR, "rank_tag": RANK_TAG}  # (the rank: its first digits)
_SAVED = lazy(r"successfully saved checkpoint (?:from iteration|at iteration)\s+(\d+) to (\S+)")
_COMM_WORDS = ("allreduce", "all-reduce", "all_reduce", "allgather", "all-gather", "reduce-scatter",
               "reduce_scatter", "send", "recv", "broadcast", "grads-reduce", "params-all-gather")
_SETUP_WORDS = ("setup", "load-checkpoint", "model and optimizer", "data iterators", "init_optimizer",
                "model-and-optimizer", "iterators")


#: the group of a timer that times one communication call (DeepSpeed's comms logger), not an iteration
COMM_OP = "comm-op"

_group_cache: dict[str, str] = {}


def timer_group(name: str) -> str:
    """forward / backward / optimizer / offload / communication / setup / checkpoint / other."""
    group = _group_cache.get(name)
    if group is None:
        group = _classify(name)
        if len(_group_cache) < 4096:
            _group_cache[name] = group
    return group


def _classify(name: str) -> str:
    n = name.lower()
    if "offload" in n or "swap" in n:
        return "offload"
    if "save-checkpoint" in n or "save_checkpoint" in n:
        return "checkpoint"
    if any(w in n for w in _SETUP_WORDS):
        return "setup"
    if any(w in n for w in _COMM_WORDS):
        return "communication"
    if "forward" in n or n.startswith("fwd"):
        return "forward"
    if "backward" in n or n.startswith("bwd"):
        return "backward"
    if "optimizer" in n or n in ("step", "step_microstep") or n.startswith("step"):
        return "optimizer"
    return "other"


class TimerParser(LineParser):
    name = "timers"
    READS = ("timer breakdowns: Megatron time (ms), (min, max) timers, "
             "DeepSpeed wall-clock breakdown and comms logger, STRONGHOLD offloading-*")
    SNIFF = compile_sniff(r"time \(ms\)", r"time across ranks \(ms\)", r"saved checkpoint")
    ROUTES = ((r"time \(ms\)", "_on_time_line"), (r"\.\.: ", "_on_minmax"), (r"saved checkpoint", "_on_saved"))
    ONCE_FLAGS = ("_offload_announced",)
    CACHES = ("_groups",)
    # the core reads plain timer lines as _timers and _comm_op do; a save, the first offloading
    # timer or a number only to_float reads still comes here (core/src/timers.rs)
    COLUMNS = {"_on_time_line": "time-list", "_on_minmax": "minmax"}

    SAMPLES = (
        Sample("time (ms) | e2e-time: 6051.73 | forward-compute: 852.50 | backward-compute: 5188.55 | "
               "backward-embedding-all-reduce: 0.02 | optimizer: 2.45 | batch-generator: 1.21 | "
               "offloading-func-call-overhead: 14.16 | offloading-fwd-overhead: 751.53 | offloading-bwd-overhead: "
               "61.74 | offloading-fwd-2gpu-overhead: 348.26 | offloading-fwd-2cpu-overhead: 402.66 | "
               "offloading-bwd-2gpu-overhead: 0.76 | offloading-bwd-2cpu-overhead: 60.09",
               "timers", {"timers": {"e2e-time": 6051.73, "forward-compute": 852.5, "backward-compute": 5188.55,
                                     "backward-embedding-all-reduce": 0.02, "optimizer": 2.45,
                                     "batch-generator": 1.21, "offloading-func-call-overhead": 14.16,
                                     "offloading-fwd-overhead": 751.53, "offloading-bwd-overhead": 61.74,
                                     "offloading-fwd-2gpu-overhead": 348.26,
                                     "offloading-fwd-2cpu-overhead": 402.66,
                                     "offloading-bwd-2gpu-overhead": 0.76,
                                     "offloading-bwd-2cpu-overhead": 60.09}}),
        Sample("[2022-06-29 01:26:11,085] [INFO] [logging.py:69:log_dist] [Rank 0] rank=0 time (ms) | "
               "optimizer_allgather: 52.34 | optimizer_gradients: 270.08 | optimizer_step: 7393.54",
               "timers", {"rank": 0, "timers": {"optimizer_allgather": 52.34, "optimizer_gradients": 270.08,
                                                "optimizer_step": 7393.54},
                          "groups": {"optimizer_allgather": "communication", "optimizer_gradients": "optimizer",
                                     "optimizer_step": "optimizer"},
                          "wall_time": 1656465971.085}),
        Sample("time (ms) | model-and-optimizer-setup: 336.26 | train/valid/test-data-iterators-setup: 662.92",
               "timers", {"timers": {"model-and-optimizer-setup": 336.26,
                                     "train/valid/test-data-iterators-setup": 662.92},
                          "groups": {"model-and-optimizer-setup": "setup",
                                     "train/valid/test-data-iterators-setup": "setup"}}),
        Sample("    model-and-optimizer-setup ......................: (4228.35, 4670.69)", "timers",
               {"timers": {"model-and-optimizer-setup": 4670.69}}),
        Sample("    forward-backward ...............................: 4670.69", "timers",
               {"timers": {"forward-backward": 4670.69}}),
        Sample("    forward-backward ...............................: (4228.35)", None),
        Sample("time (ms) | save-checkpoint: 66891.40", "checkpoint", {"save_ms": 66891.40, "iteration": 50},
               context=("  successfully saved checkpoint at iteration      50 to checkpoints/gpt2",)),
        Sample("  successfully saved checkpoint at iteration      50 to checkpoints/gpt2", "checkpoint",
               {"iteration": 50, "path": "checkpoints/gpt2", "save_ms": None}),
        Sample("time (ms)", None),
        Sample("[2023-05-15 14:37:35,318] [INFO] [logging.py:96:log_dist] [Rank 0] rank=0 | comm op: broadcast | "
               "time (ms): 3907.38 | msg size: 576.0 B | algbw (Gbps): 0.00  | busbw (Gbps): 0.00 ",
               "timers", {"rank": 0, "timers": {"broadcast": 3907.38}, "groups": {"broadcast": COMM_OP},
                          "wall_time": 1684161455.318}),
        Sample("rank=0 | comm op: all_reduce | time (ms): n/a | msg size: 1 KB", None),
    )

    def __init__(self, file: str = "") -> None:
        super().__init__(file)
        self._saved_iteration: Optional[int] = None
        self._offload_announced = False
        self._groups: dict[tuple[str, ...], Mapping[str, str]] = {}

    def offload_said(self) -> bool:
        """Whether the run's offloading is known to be announced (the core then reads
        offloading timers; else their first line comes here)."""
        return self.reported("_offload_announced")

    def _on_saved(self, body: str, ctx: LineContext) -> list[Event]:
        m = _SAVED.search(body)
        if not m:
            return []
        self._saved_iteration = to_int(m.group(1))
        return [self.make(Checkpoint, ctx, iteration=self._saved_iteration, path=m.group(2))]

    def _on_minmax(self, body: str, ctx: LineContext) -> list[Event]:
        m = _MINMAX.match(body)
        if not m:
            return []
        # the slowest rank's time: it sets the step time
        value = to_float(m.group(3) if m.group(3) is not None else m.group(4))
        return self._timers({m.group(1).strip(): value}, body, ctx) if value is not None else []

    def _on_time_line(self, body: str, ctx: LineContext) -> list[Event]:
        pos = body.find(_LIST_ANCHOR)
        if pos < 0:
            return []
        tail = body[pos + len(_LIST_ANCHOR):]
        if tail.startswith(":"):  # one collective's time, not a breakdown: its sizes and bandwidths are no timers
            return self._comm_op(body, tail, ctx)
        return self._timers(pairs(tail), body, ctx)

    def _comm_op(self, body: str, tail: str, ctx: LineContext) -> list[Event]:
        """A line of DeepSpeed's comms logger: the op's time, as a timer named by the op, of
        the group :data:`COMM_OP` (one call, many a step: no part of an iteration's breakdown)."""
        m = _COMM_OP.search(body)
        value = to_float(tail[1:].partition("|")[0])
        if m is None or not m.group(1).strip() or value is None:
            return []
        op = m.group(1).strip()[:120]
        return [Timers(file=self.file, line=ctx.line, rank=rank_or(body, ctx.rank), node=ctx.node,
                       wall_time=ctx.wall_time, timers=frozen_map({op: value}),
                       groups=frozen_map({op: COMM_OP}))]

    def _timers(self, timers: dict[str, float], body: str, ctx: LineContext) -> list[Event]:
        if not timers:
            return []
        rank = rank_or(body, ctx.rank)
        events: list[Event] = []
        save = timers.pop(_SAVE_TIMER, None)
        if save is not None:  # the save it times was announced just before; once used, forgotten
            events.append(self.make(Checkpoint, ctx, iteration=self._saved_iteration, save_ms=save))
            self._saved_iteration = None
        if timers:
            groups = self._groups_of(tuple(timers))
            if self._offload_announced is not True and any(n.startswith(_OFFLOADING) for n in timers) and \
                    self.first_time("_offload_announced"):  # (True: said already; no need to look)
                events.append(self.make(RunConfig, ctx, framework="stronghold"))
            events.append(Timers(file=self.file, line=ctx.line, rank=rank, node=ctx.node, wall_time=ctx.wall_time,
                                 timers=frozen_map(timers), groups=groups))
        return events

    def _groups_of(self, names: tuple[str, ...]) -> Mapping[str, str]:
        """The group of each timer; the same timers come back every iteration, so
        they share one read-only map."""
        groups = self._groups.get(names)
        if groups is None:
            groups = frozen_map({name: timer_group(name) for name in names})
            if len(self._groups) < 256:
                self._groups[names] = groups
        return groups

def pairs(text: str) -> dict[str, float]:
    """A timer list's ``name: value`` pairs (the last colon of each ``|``-separated part), at most 256."""
    out: dict[str, float] = {}
    for seg in text.split("|"):
        name, sep, value = seg.rpartition(":")
        if not sep:
            continue
        v = to_float(value)
        name = name.strip()
        if v is not None and name and len(out) < 256:
            out[name] = v
    return out



# -- how frameworks nest their timers (read off their timer code) ----------------------------
#: timers that time the whole iteration: the root of the breakdown when a log prints one
WHOLE_TIMERS = ("e2e-time", "iteration-time", "interval-time")

#: timer -> the timers that hold it, most specific first; the first one a job logs is its parent.
#: A timer that none holds sits under the whole iteration.
TIMER_PARENTS: dict[str, tuple[str, ...]] = {
    # Megatron: the pipeline schedule's forward-backward holds the per-micro-batch compute and
    # p2p communication; pretrain_gpt's forward_step reads its batch inside forward-compute
    **{name: ("forward-backward",) for name in (
        "forward-compute", "backward-compute", "forward-recv", "forward-send", "backward-recv",
        "backward-send", "forward-send-backward-recv", "backward-send-forward-recv",
        "forward-backward-send-forward-backward-recv")},
    "batch-generator": ("forward-compute", "forward"),
    # Megatron's optimizer step and its parts
    **{name: ("optimizer",) for name in (
        "optimizer-copy-to-main-grad", "optimizer-unscale-and-check-inf", "optimizer-clip-main-grad",
        "optimizer-count-zeros", "optimizer-inner-step", "optimizer-copy-main-to-model-params")},
    # Megatron 1.x and GPT-NeoX: forward/backward around the engine's own
    "batch generator": ("forward",),
    "backward-backward": ("backward",),
    "backward-allreduce": ("backward",),
    # STRONGHOLD: offloading happens inside the forward and backward compute it overlaps
    "offloading-fwd-overhead": ("forward-compute", "forward"),
    "offloading-bwd-overhead": ("backward-compute", "backward"),
    "offloading-func-call-overhead": ("forward-compute", "forward"),
    "offloading-fwd-2gpu-overhead": ("offloading-fwd-overhead",),
    "offloading-fwd-2cpu-overhead": ("offloading-fwd-overhead",),
    "offloading-bwd-2gpu-overhead": ("offloading-bwd-overhead",),
    "offloading-bwd-2cpu-overhead": ("offloading-bwd-overhead",),
    # DeepSpeed's engine timers (names before and after v0.9): a global timer sums its
    # micro-steps over an optimizer step; backward is the inner backward plus the gradient
    # all-reduce; the ZeRO optimizer's parts run inside step
    "forward_microstep": ("forward",),
    "backward_microstep": ("backward",),
    "step_microstep": ("step",),
    # (inside Megatron 1.x's backward-backward, which calls the engine's backward, where both are)
    "backward_inner": ("backward-backward", "backward"),
    "backward_allreduce": ("backward-backward", "backward"),
    "backward_inner_microstep": ("backward_inner", "backward_microstep"),
    "backward_allreduce_microstep": ("backward_allreduce", "backward_microstep"),
    "fwd_microstep": ("fwd",),
    "bwd_microstep": ("bwd",),
    "bwd_inner": ("bwd",),
    "bwd_allreduce": ("bwd",),
    "bwd_inner_microstep": ("bwd_inner", "bwd_microstep"),
    "bwd_allreduce_microstep": ("bwd_allreduce", "bwd_microstep"),
    # Megatron-DeepSpeed: its forward-backward and optimizer timers wrap the DeepSpeed engine's
    **{name: ("forward-backward",) for name in ("fwd", "bwd", "forward", "backward")},
    "step": ("optimizer",),
    "optimizer_allgather": ("step", "step_microstep"),
    "optimizer_gradients": ("step", "step_microstep"),
    "optimizer_step": ("step", "step_microstep"),
}


def one_off_timer(name: str) -> bool:
    """A timer of setup, checkpointing or evaluation: timed now and then, no part of a
    training iteration."""
    return name.startswith(("startup", "eval")) or timer_group(name) in ("setup", "checkpoint")
