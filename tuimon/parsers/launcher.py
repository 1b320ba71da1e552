"""Launchers and job scripts: the start-of-job stamp, ezpz/ALCF logger lines,
torch.distributed initialisation and the training command line itself."""
from __future__ import annotations

from typing import ClassVar, Optional

from .base import LineContext, LineParser, Sample
from .common import config_from_args, flags_from_command
from .events import GLOG_LAUNCH, GLOG_START, Event, Milestone, RunConfig, Step
from .numbers import to_float, to_int
from .patterns import lazy
from .timestamps import glog_wall

# DeepSpeed's launcher, on each node: "[launch.py:152:main] nnodes=2, num_local_procs=8, node_rank=0"
_DS_NODES = lazy(r"nnodes=(\d{1,6}), num_local_procs=(\d{1,4}), node_rank=\d")
_EZPZ_RANK = lazy(r"\] - RANK: (\d+) / (\d+)")
# torchrun's command line ("torchrun --nproc_per_node=8 --nnodes=2 ...", "python -m torch.distributed.run
# --nproc-per-node 4 --nnodes 1:4"): the processes a node runs times the nodes (at most, when elastic)
_TORCHRUN = lazy(r"(?:torchrun|torch\.distributed\.(?:run|launch))\b(.{0,2000})")
_NPROC = lazy(r"--nproc[_-]per[_-]node[= ]['\"]?(\d{1,4})\b")
_NNODES = lazy(r"--nnodes[= ]['\"]?(?:\d{1,6}:)?(\d{1,6})\b")
# a script's or framework's print of it: "WORLD_SIZE=16", "world_size: 16", "world size = 16"
_WORLD = lazy(r"(?<![\w.-])(?:WORLD_SIZE|[Ww]orld[_ ]size)\s*[=:]\s*['\"]?(\d{1,7})\b(?![.\d])")
# torch's glog prefix: level, month and day, time to the microsecond, thread id, source file
_GLOG = lazy(r"^\s*[IWEF](\d{4} \d\d:\d\d:\d\d\.\d{6}) +\d+ \S+:\d+\]")
# the module of torchrun itself (torch/distributed/run.py, python -m torch.distributed.launch's launch.py)
_GLOG_LAUNCHER = lazy(r"torch/distributed/(?:run|launch)\.py:\d+\]")
_LAUNCH_GAP_S = 60.0  # a launcher's banner lines (several, one set a node) this close in time are one launch


def _glog_seconds(stamp: str) -> float:
    """A glog stamp (``MMDD HH:MM:SS.ffffff``) as seconds on a clock of its own (31-day months):
    enough to tell two of one launch (a second apart) from two launches (a run apart)."""
    return ((int(stamp[:2]) * 31 + int(stamp[2:4])) * 24 + int(stamp[5:7])) * 3600.0 + int(stamp[8:10]) * 60.0 \
        + float(stamp[11:])
# Python source a script prints into its log: a definition, a statement, an indented assignment
CODE = r"^\s*(?:def|class|return|if|elif|for|assert|with)\b|\bself\.|os\.environ|^\s{4,}[A-Za-z_][\w.]*\s*=\s"
# (the same, searched faster: re tried the unanchored branches at every character, 34 us a line of
# a 700-character argument dump; tests/test_families.py holds is_code to CODE)
_CODE_START = lazy(r"\s*(?:def|class|return|if|elif|for|assert|with)\b|\s{4,}[A-Za-z_][\w.]*\s*=\s")
_SELF = lazy(r"\bself\.")


def is_code(body: str) -> bool:
    """Whether ``body`` reads as a script's source (``re.search(CODE, body)``)."""
    return _CODE_START.match(body) is not None or "os.environ" in body or (
        "self." in body and _SELF.search(body) is not None)


# ezpz's history lines: "[2025-05-06 09:06:59][I][examples/minimal:61:__main__] iter=0 loss=2701.3 dt=0.62 ..."
_EZPZ_ITER = lazy(r"\]\s*iter=(\d{1,18}) ")
_EZPZ_PAIR = lazy(r"(?:^|\s)([A-Za-z_][\w/]*)=([-+]?(?:\d[\d.]*(?:[eE][-+]?\d+)?|nan|inf))(?=\s|$)")


class LauncherParser(LineParser):
    name = "launcher"
    READS = "launchers and schedulers: srun, pdsh, torchrun, mpiexec, deepspeed launcher, Slurm/PBS/Cobalt, ezpz (ALCF)"
    SNIFF = None  # always on: these lines appear in logs of every framework
    ROUTES = ((r"\] - RANK: \d", "_on_ezpz_rank"),
              (r"\]\s*iter=\d", "_on_ezpz_iter"),
              (r"--(?:num|hidden)[-_](?:layers|size)[ =]\d", "_on_flags"),
              (r"Initializing torch distributed", "_on_dist_init"), (r"init_process_group", "_on_dist_init"),
              (r"store[-_]based[ _]barrier", "_on_dist_init"),
              (r"torch\.distributed initialized", "_on_dist_init"), (r"nnodes=\d", "_on_ds_nodes"),
              # (a job script's variable spaces its words as it likes: "torch.distributed.launch     --nproc_per_node 4")
              (r"torchrun\s+--", "_on_torchrun"), (r"distributed\.run\s+--", "_on_torchrun"),
              (r"distributed\.launch\s+--", "_on_torchrun"),
              (r"WORLD_SIZE", "_on_world"), (r"world_size", "_on_world"), (r"orld size", "_on_world"),
              (r"W\d{4} \d\d:\d\d:\d\d\.\d{6} ", "_on_glog"))

    SAMPLES: ClassVar[tuple[Sample, ...]] = (
        Sample("[2024-01-01 10:00:01,000] [INFO] [launch.py:152:main] nnodes=2, num_local_procs=8, node_rank=0",
               "run_config", {"world_size": 16}),
        Sample("[2023-12-19 13:33:35][INFO][dist.py:307] - RANK: 0 / 47", "run_config", {"world_size": 48}),
        Sample("[2023-12-19 13:33:35][INFO][dist.py:307] - RANK: 0 / 47", "milestone",
               {"name": "ranks-up", "wall_time": 1702992815.0}),
        Sample("[2022-06-29 01:22:11,147] [INFO] [runner.py:398:main] cmd = /usr/bin/python3.9 -u -m "
               "deepspeed.launcher.launch --world_info=eyJsb2NhbGhvc3QiOiBbMF19 --master_addr=127.0.0.1 "
               "--master_port=29500 pretrain_gpt2.py --model-parallel-size 1 --num-layers 48 --hidden-size 2048 "
               "--num-attention-heads 16 --seq-length 1024 --max-position-embeddings 1024 --batch-size 4 "
               "--train-iters 50 --log-interval 10 --checkpoint-activations",
               "run_config", {"num_layers": 48, "hidden_size": 2048, "num_heads": 16, "seq_length": 1024,
                              "micro_batch": 4, "train_iters": 50, "tp": 1, "activation_checkpointing": True}),
        Sample("[2025-05-06 09:06:59][I][examples/minimal:61:__main__] iter=2 loss=2318.325195 dt=0.003961 "
               "dtf=0.000944 dtb=0.003016", "step",
               {"step": 2, "loss": 2318.325195, "elapsed_ms": 3.961, "wall_time": 1746522419.0}),
        Sample("[2025-12-31 12:15:32,154227][I][examples/vit:445:train_fn] iter=10 loss=7.111572 dt=0.744444 "
               "loss/mean=7.036184 dt/mean=0.744634", "step", {"step": 10, "loss": 7.111572, "elapsed_ms": 744.444}),
        Sample("[2025-05-06 09:06:59][I][examples/minimal:61:__main__] iter=2 dt=0.003961", None),
        Sample("PYTHONGIL=1 python pretrain_gpt.py --num-layers 32 --hidden-size 2048 --num-attention-heads 16 "
               "--seq-length 1024 --micro-batch-size 4 --global-batch-size 4 --max-position-embeddings 1024 "
               "--train-iters 50", "run_config",
               {"num_layers": 32, "global_batch": 4, "micro_batch": 4, "activation_checkpointing": None}),
    )

    SAMPLES += (
        Sample("+ torchrun --nproc_per_node=8 --nnodes=2 --rdzv_backend c10d --rdzv_endpoint=localhost:0 "
               "-m torchtitan.train --job.config_file llama3_8b.toml", "run_config", {"world_size": 16}),
        Sample("+ export 'LAUNCHER=python -u -m torch.distributed.launch     --nproc_per_node 4     --nnodes 16     "
               "--master_addr r8i2n3     --master_port 6000     '", "run_config", {"world_size": 64}),
        Sample("python -m torch.distributed.run --nproc-per-node 4 --nnodes 1:4 train.py", "run_config",
               {"world_size": 16}),
        Sample("torchrun --standalone --nproc_per_node=8 train_gpt.py", "run_config", {"world_size": 8}),
        Sample('torchrun --nproc_per_node="$NGPU" -m torchtitan.train', None),
        Sample("WORLD_SIZE=32", "run_config", {"world_size": 32}),
        Sample("[2025-01-01 10:00:00,000] INFO - world_size: 64, rank: 0", "run_config", {"world_size": 64}),
        Sample("torch.empty(torch.Size([numel * world_size]), dtype=dtype)", None),
        Sample("world_size: 8.5 GB", None),
        Sample("W0519 20:23:14.721000 140234 torch/distributed/run.py:793] Setting OMP_NUM_THREADS environment "
               "variable for each process to be 1 in default", "milestone",
               {"name": "glog-launch", "detail": "0519 20:23:14.721000"}),
        Sample("W0519 20:40:02.103000 140234 torch/distributed/elastic/multiprocessing/api.py:897] Sending "
               "process 141 closing signal SIGTERM", "milestone", {"name": "glog-start", "detail": "0519 20:40:02.103000"}),
        # a script's source printed into its log (modded-nanogpt prints its own): defaults, not the run's
        Sample("def __init__(self, rank=0, world_size=1, device='cuda'):", None),
        Sample("    world_size = int(os.environ['WORLD_SIZE'])", None),
        Sample("    dist_kwargs = dict(world_size=1)", None),
        Sample("assert world_size == 8 or world_size == 1", None),
    )

    ONCE_FLAGS = ("_ranks_seen", "_dist_seen", "_ezpz_announced", "_nodes_seen", "_glog_seen")

    def __init__(self, file: str = "") -> None:
        super().__init__(file)
        self._ranks_seen = False
        self._dist_seen = False
        self._ezpz_announced = False
        self._nodes_seen = False
        self._glog_seen = False
        self._launch_at: Optional[float] = None  # the stamp of the latest launcher glog line (_glog_seconds)

    def _on_ezpz_rank(self, body: str, ctx: LineContext) -> list[Event]:
        m = _EZPZ_RANK.search(body)
        if not m or not self.first_time("_ranks_seen"):
            return []
        world = to_int(m.group(2))
        return [self.make(RunConfig, ctx, world_size=world + 1 if world is not None else None),
                self.make(Milestone, ctx, name="ranks-up")]

    def _on_ds_nodes(self, body: str, ctx: LineContext) -> list[Event]:
        m = _DS_NODES.search(body)
        if not m or not self.first_time("_nodes_seen"):  # each node's launcher says it
            return []
        return [self.make(RunConfig, ctx, world_size=int(m.group(1)) * int(m.group(2)))]

    def _on_ezpz_iter(self, body: str, ctx: LineContext) -> list[Event]:
        """A training step as ezpz's examples log it: its loss and ``dt`` (seconds)."""
        m = _EZPZ_ITER.search(body)
        if not m:
            return []
        values = dict(_EZPZ_PAIR.findall(body, m.end() - 1))
        if "loss" not in values:
            return []
        dt = to_float(values.get("dt"))
        events: list[Event] = []
        if self.first_time("_ezpz_announced"):
            events.append(self.make(RunConfig, ctx, framework="ezpz"))
        events.append(self.make(Step, ctx, step=int(m.group(1)), loss=to_float(values["loss"]),
                                elapsed_ms=dt * 1000.0 if dt is not None else None))
        return events

    def _on_flags(self, body: str, ctx: LineContext) -> list[Event]:
        fields = config_from_args(flags_from_command(body))
        return [self.make(RunConfig, ctx, **fields)] if fields else []

    def _on_torchrun(self, body: str, ctx: LineContext) -> list[Event]:
        m = _TORCHRUN.search(body)
        nproc = _NPROC.search(m.group(1)) if m else None
        if nproc is None:
            return []
        nodes = _NNODES.search(m.group(1))  # type: ignore[union-attr]
        world = int(nproc.group(1)) * (int(nodes.group(1)) if nodes else 1)
        return [self.make(RunConfig, ctx, world_size=world)] if world else []

    def _on_world(self, body: str, ctx: LineContext) -> list[Event]:
        m = _WORLD.search(body)
        if not m or "--nproc" in body or "using world size" in body:  # torchrun's and Megatron's own
            return []
        if is_code(body) or (body[m.end():m.end() + 1] in (",", ")") and "(" in body[:m.start()]):
            return []  # a script's own source printed into its log (modded-nanogpt's): a default, no fact
        world = int(m.group(1))
        return [self.make(RunConfig, ctx, world_size=world)] if world else []

    def _on_glog(self, body: str, ctx: LineContext) -> list[Event]:
        """torch's first glog line of a file (torchrun warns as it launches: ``W0519 20:23:14.721000 140234
        torch/distributed/run.py:793] ...``): a stamp without its year, the summary's to place
        (figures.summary.startup: the year of the log's first full stamp).  The launcher's own lines
        (``torch/distributed/run.py``: its banner, several lines a node) are a launch each time they
        come back after a gap: a second torchrun in the same file starts there."""
        m = _GLOG.match(body)
        if not m:
            return []
        launcher = _GLOG_LAUNCHER.search(body, 0, m.end()) is not None
        if launcher:
            at = _glog_seconds(m.group(1))
            near = self._launch_at is not None and abs(at - self._launch_at) <= _LAUNCH_GAP_S
            self._launch_at = at
            first = self.first_time("_glog_seen")
            if near and not first:
                return []
            # its own stamp, in the year of the line's fill (the run before's): the next run starts there
            wall = glog_wall(m.group(1), ctx.wall_time) if ctx.wall_time is not None else None
            return [Milestone(file=ctx.file, line=ctx.line, rank=ctx.rank, node=ctx.node, wall_time=wall,
                              name=GLOG_LAUNCH, detail=m.group(1))]
        if not self.first_time("_glog_seen"):
            return []
        return [self.make(Milestone, ctx, name=GLOG_START, detail=m.group(1))]

    def _on_dist_init(self, body: str, ctx: LineContext) -> list[Event]:
        if not self.first_time("_dist_seen"):
            return []
        return [self.make(Milestone, ctx, name="init-distributed")]
