"""Hand-written training loops whose step lines are fixed shapes, as data.

* llm.c's ``main.log`` (``llmc/logger.h``): ``s:%d trl:%.4f lr:%.6f norm:%.2f`` a step (the
  Python trainers write ``s:%d trl:%f`` alone); its ``tel`` and ``eval`` lines are
  evaluations (:mod:`parsers.evals`).
* modded-nanogpt (``train_gpt.py`` and its records): ``step:100/1390 train_time:14741ms
  step_avg:163.79ms``, with ``train_loss:3.2841`` before the time in older records.  The
  time is a running total that leaves out evaluations, so a step's time is the difference
  from the step logged before, over the steps between (``cumulative``); the total restarts
  after the warm-up steps (``step_avg:nanms``), whose first line then has no time.
"""
from __future__ import annotations

LLMC = {
    "name": "llm.c",
    "description": "llm.c's main.log, and its run table on stdout",
    "lines": [
        {
            # train_gpt2.cu's table: printf0("| num_processes         | %-50d |\n", ...); a single GPU says 1
            "event": "run_config",
            "anchor": "| num_processes ",
            "regex": r"^\| num_processes +\| (?P<world_size>\d{1,7}) +\|\s*$",
            "samples": [
                {"line": "| num_processes         | 8                                                  |",
                 "expect": {"world_size": 8}},
            ],
        },
        {
            # printf0("num_parameters: %zu => bytes: %zu\n", ...) (==> in train_gpt2.c): the size it counted
            "event": "run_config",
            "anchor": "num_parameters: ",
            "regex": r"^num_parameters: (?P<total_params>\d{1,15}) =+> bytes: \d+\s*$",
            "samples": [
                {"line": "num_parameters: 124475904 => bytes: 248951808", "expect": {"total_params": 124475904}},
                {"line": "num_parameters: 124475904 ==> bytes: 497903616", "expect": {"total_params": 124475904}},
            ],
        },
        {
            "event": "iteration",
            "anchor": " trl:",
            "regex": r"^s:(?P<iteration>\d{1,12}) trl:(?P<loss>[-+]?(?:\d[\d.]*(?:e[-+]?\d+)?|nan|inf|-?nan))"
                     r"(?: lr:(?P<lr>[-+.\de]{1,32}))?(?: norm:(?P<grad_norm>[-+.\de]{1,32}|nan|inf))?[ \t\r]*$",
            "samples": [
                {"line": "s:1 trl:10.9598 lr:0.000002 norm:15.24",
                 "expect": {"iteration": 1, "loss": 10.9598, "lr": 2e-06, "grad_norm": 15.24}},
                {"line": "s:74 trl:3.283470", "expect": {"iteration": 74, "loss": 3.28347}},
            ],
        },
    ],
}

MODDED_NANOGPT = {
    "name": "modded-nanogpt",
    "description": "modded-nanogpt's step lines",
    "lines": [
        {
            "event": "iteration",
            "anchor": " train_time:",
            "regex": r"^step:(?P<iteration>\d{1,12})/(?P<train_iters>\d{1,12}) "
                     r"(?:train_loss:(?P<loss>[-+]?(?:\d[\d.]*|nan|inf)) )?train_time:(?P<elapsed_ms>\d{1,15})ms "
                     r"step_avg:",
            "cumulative": ["elapsed_ms"],
            "samples": [
                {"line": "step:100/1390 train_time:14741ms step_avg:163.79ms",
                 "context": ["step:99/1390 train_time:14577ms step_avg:163.79ms"],
                 "expect": {"iteration": 100, "train_iters": 1390, "elapsed_ms": 164.0}},
                {"line": "step:20/1390 train_time:3000ms step_avg:150.00ms",
                 "context": ["step:10/1390 train_time:1500ms step_avg:150.00ms"],
                 "expect": {"iteration": 20, "elapsed_ms": 150.0}},
                {"line": "step:3/15258 train_loss:8.9781 train_time:87406ms step_avg:nanms",
                 "context": ["step:2/15258 train_loss:9.6518 train_time:85695ms step_avg:nanms"],
                 "expect": {"iteration": 3, "loss": 8.9781, "elapsed_ms": 1711.0}},
                {"line": "step:11/1390 train_time:130ms step_avg:nanms",
                 "context": ["step:10/1390 train_time:9000ms step_avg:nanms"],
                 "expect": {"iteration": 11, "train_iters": 1390}},  # the total restarted: no time
            ],
        },
    ],
}
