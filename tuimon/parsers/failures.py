"""How jobs die: Slurm cancellation, CUDA OOM, NCCL errors and timeouts, Python
tracebacks, the kernel's OOM killer.  Always on, whatever the framework."""
from __future__ import annotations

from typing import Optional

from .base import LineContext, LineParser, Sample
from .common import message_of
from .events import Event, Exit, Failure
from .patterns import lazy
from .timestamps import parse_iso

_CANCELLED = lazy(r"\*\*\* (?:JOB|STEP) (\S+) ON (\S+) CANCELLED AT (\S+)(?: DUE TO ([^*]+?))? \*\*\*")
_OOM = lazy(r"CUDA out of memory|OutOfMemoryError|CUDA error: out of memory|XPU out of memory"
            r"|HIP out of memory|torch\.OutOfMemoryError")
_NCCL = lazy(r"NCCL error|DistBackendError|ncclUnhandledCudaError|ncclSystemError|ncclInternalError"
             r"|ncclInvalidUsage|ncclRemoteError|Watchdog caught collective operation timeout"
             r"|NCCL communicator was aborted|NCCL WARN .*(?:[Ee]rror|[Tt]imeout)"
             # oneCCL, the collectives of Intel GPUs (Aurora): "|CCL_ERROR| atl_ofi.cpp:..."
             r"|\|CCL_ERROR\|")
# what a traceback's closing exception says when the device ran out of memory in words the
# OOM triggers do not catch: SYCL/Level Zero on Intel GPUs (Aurora), ROCm, cuBLAS's allocation
_DEVICE_OOM = lazy(r"OUT_OF_DEVICE_MEMORY|PI_ERROR_OUT_OF_RESOURCES|UR_RESULT_ERROR_OUT_OF_RESOURCES"
                   r"|hipErrorOutOfMemory|CUBLAS_STATUS_ALLOC_FAILED|cudaErrorMemoryAllocation")
_KILLED = lazy(r"^Killed$|^Killed by signal|: Killed$|oom-kill|Out of memory: Killed process"
               r"|exit code 137|exited on signal 9"
               # bash's report of a child it lost: "slurm_script: line 42: 12345 Killed   python train.py"
               r"|: line \d+: +\d+ (?:Killed|Segmentation fault|Aborted|Bus error)"
               r"|^Segmentation fault(?: \(core dumped\))?$"
               # srun's report of a task that crashed: "srun: error: nid001: task 3: Segmentation fault (core dumped)"
               r"|: tasks? [\d\-,]+: Segmentation fault(?: \(core dumped\))?$")
# Slurm's cgroup OOM killer: "slurmstepd: error: Detected 1 oom_kill event in StepId=1234567.0. ..."
_HOST_OOM = lazy(r"Detected \d+ oom[_-]kill events?|OOM Killed")
# PBS: "=>> PBS: job killed: walltime 3620 exceeded limit 3600", "... mem 270gb exceeded limit 256gb"
_PBS_KILLED = lazy(r"PBS: job killed: (\w+)(.*)")
# LSF's job report (Summit, Lassen): "TERM_RUNLIMIT: job killed after reaching LSF run time limit."
_LSF_TERM = lazy(r"^\s*TERM_([A-Z_]{3,24}): (job killed.*|.*limit.*)$")
_LSF_KIND = {"RUNLIMIT": "cancelled", "CPULIMIT": "cancelled", "DEADLINE": "cancelled", "PREEMPT": "cancelled",
             "OWNER": "cancelled", "FORCE_OWNER": "cancelled", "ADMIN": "cancelled", "FORCE_ADMIN": "cancelled",
             "MEMLIMIT": "oom", "SWAP": "oom"}
# the machine, not the program: Slurm's lost node, a GPU's ECC error or Xid, a GPU gone from the bus
_HARDWARE = lazy(r"Node failure on [\w.-]+|uncorrectable ECC error|ECC error(?:s)? detected|fallen off the bus"
                 r"|NVRM: Xid|\bXid \(PCI:")
# a CUDA fault other than memory (that is an OOM) or a machine error (hardware): an illegal memory
# access, a device-side assert, a launch failure... what an NCCL watchdog or a kernel reports first
_CUDA = lazy(r"CUDA error: (?!out of memory)(?!uncorrectable ECC)[a-z][\w ,'-]{2,80}|cudaErrorIllegalAddress"
             r"|device-side assert triggered|CUBLAS_STATUS_EXECUTION_FAILED|CUDNN_STATUS_EXECUTION_FAILED")
_ABORT = lazy(r"Fatal Python error: (?:Aborted|Segmentation fault|Bus error|Floating point exception)"
              r"|terminate called after throwing an instance of")
# a batch script's own verdict on a step it ran: "Job failed (exit 1) -- see train.err", "Step 3 failed",
# "ERROR: training failed", "FAILED: pretrain_gpt.py", "python exited with exit code 2"
_SCRIPT = lazy(r"^(?:\W{0,4}\s*)?(?:(?:ERROR|Error|error)\s*[:!-]?\s*)?(?:(?:[Jj]ob|[Rr]un|[Tt]raining|[Ss]tep"
               r"(?: \w{1,24})?|[Ss]tage(?: \w{1,24})?|[Tt]ask(?: \w{1,24})?|[Cc]ommand)\s+(?:has\s+)?failed\b.{0,400}"
               r"|FAILED(?:\s*$|[:!(]|\s+[-(:]|\s+with\b).{0,400}"
               r"|.{0,200}\bexited with (?:exit )?(?:code|status) [1-9]\d{0,5}\b.{0,200})$")
# The exception line that closes a traceback: "ValueError: msg", "torch.distributed.DistBackendError: ..."
# (Python's StopIteration ends no such word: a data loader run dry raises it)
_EXC_LINE = lazy(r"^\s*([A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Failure)|(?:Stop|StopAsync)Iteration)"
                 r"(?::\s?(.*))?$")
_SLURM_EXIT = lazy(r"srun: error: \S+: tasks? [\d\-,]+: Exited with exit code (\d+)")
# torchrun's report of a worker it lost: "...multiprocessing.api:failed (exitcode: -9) local_rank: 3 (pid: 4242)
# of binary: /usr/bin/python" (a negative code is the signal that killed it: the host's OOM killer's 9, say)
# DeepSpeed's launcher on a rank it lost: "[launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', 'train.py',
# '--local_rank=3'] exits with return code = -9"
_DS_LAUNCH_EXIT = lazy(r"\] exits with return code = (-?\d{1,6})\s*$")
# PALS mpiexec (Polaris, Aurora): "x1921c0s0b0n0.hostmgmt2000...: rank 5 died from signal 9",
# "x3004c0s13b0n0: rank 3 exited with code 1"
# (the host is the line's launcher prefix: its node)
_PALS_EXIT = lazy(r"^rank (\d{1,7}) (?:died from signal (\d{1,3})|exited with code (\d{1,3}))\s*$")
# MPICH: "application called MPI_Abort(MPI_COMM_WORLD, 1) - process 3"
_MPI_ABORT = lazy(r"application called MPI_Abort\([^,()]*, (-?\d{1,6})\) - process (\d{1,7})")
# torchrun's error report, a field a line: "  rank      : 3 (local_rank: 3)", "  exitcode  : -9 (pid: 12345)"
_TORCHRUN_RANK = lazy(r"^\s*rank\s*: (\d{1,7}) \(local_rank: \d+\)")
_TORCHRUN_CODE = lazy(r"^\s*exitcode\s*: (-?\d{1,6}) \(pid: \d+\)")
_TORCHRUN_EXIT = lazy(r"failed \(exitcode: (-?\d+)\) local_rank: \d+")


class FailureParser(LineParser):
    name = "failures"
    READS = "failures: OOM, CUDA, NCCL, tracebacks, Slurm/PBS/Cobalt/LSF job verdicts, cancellations"
    SNIFF = None
    ROUTES = (
        (r"Traceback \(most recent", "_on_traceback"),
        # Python's word that the traceback after it was ignored (an atexit callback, a __del__): no failure
        (r"Exception ignored in", "_on_ignored"), (r"Error in atexit._run_exitfuncs", "_on_ignored"),
        (r"CANCELLED AT", "_on_cancelled"),
        (r"out of memory", "_on_oom"), (r"OutOfMemory", "_on_oom"),
        (r"NCCL error", "_on_nccl"), (r"NCCL WARN", "_on_nccl"), (r"nccl[A-Z]", "_on_nccl"),
        (r"NCCL communicator", "_on_nccl"), (r"DistBackendError", "_on_nccl"), (r"Watchdog caught", "_on_nccl"),
        (r"\|CCL_ERROR\|", "_on_nccl"),
        (r"Exited with exit code", "_on_slurm_exit"), (r"failed \(exitcode: ", "_on_torchrun_exit"),
        (r"exits with return code = ", "_on_launcher_exit"), (r"rank \d+ (?:died from|exited with)", "_on_pals_exit"),
        (r"MPI_Abort\(", "_on_mpi_abort"), (r"rank\s*: \d+ \(local_rank", "_on_torchrun_report"),
        (r"exitcode\s*: -?\d+ \(pid", "_on_torchrun_report"),
        # Slurm's "... oom_kill event ... OOM Killed." comes through "Killed"
        (r"Killed", "_on_killed"), (r"oom-kill", "_on_killed"),
        (r"exit code 137", "_on_killed"), (r"exited on signal", "_on_killed"),
        (r"Segmentation fault", "_on_killed"),
        (r": line \d+: +\d+ (?:Aborted|Bus error)", "_on_killed"),
        (r"PBS: job killed", "_on_pbs_killed"), (r"TERM_[A-Z_]+: ", "_on_lsf_term"),
        (r"Node failure on", "_on_hardware"), (r"ECC error", "_on_hardware"), (r"fallen off the bus", "_on_hardware"),
        (r"Xid", "_on_hardware"),
        # llm.c's cudaCheck: "[CUDA ERROR] at file train_gpt2.cu:265:", then the error's string on a line of its own
        (r"\[CUDA ERROR\] at file ", "_on_cuda_check"), (r"out of memory", "_on_cuda_check_string"),
        (r"CUDA error: ", "_on_cuda"), (r"cudaErrorIllegal", "_on_cuda"), (r"device-side assert", "_on_cuda"),
        (r"_STATUS_EXECUTION_FAILED", "_on_cuda"),
        (r"Fatal Python error: ", "_on_abort"), (r"terminate called after throwing", "_on_abort"),
        (r"failed", "_on_script"), (r"FAILED", "_on_script"), (r"exited with ", "_on_script"),
        (r"Error(?::|\n)", "_on_exception"), (r"Exception(?::|\n)", "_on_exception"), (r"Interrupt", "_on_exception"),
        (r"Exit:", "_on_exception"), (r"Failure:", "_on_exception"), (r"StopIteration", "_on_exception"),
    )

    SAMPLES = (
        Sample("slurmstepd: error: *** JOB 1999616 ON r6i4n5 CANCELLED AT 2021-05-27T21:42:11 DUE TO TIME LIMIT ***",
               "failure", {"kind": "cancelled", "wall_time": 1622151731.0}),
        Sample("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB (GPU 0; 79.33 GiB total "
               "capacity; 27.16 GiB already allocated; 244.44 MiB free; 31.59 GiB reserved in total by PyTorch)",
               "failure", {"kind": "oom"}),
        Sample("[rank0]:[rank0]: torch.distributed.DistBackendError: NCCL error in: .../ProcessGroupNCCL.cpp:3907, "
               "invalid usage", "failure", {"kind": "nccl", "rank": 0}),
        Sample("[E ProcessGroupNCCL.cpp:475] [Rank 3] Watchdog caught collective operation timeout: "
               "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800102 milliseconds before "
               "timing out.", "failure", {"kind": "nccl"}),
        Sample("ValueError: Interleaved 1F1B requires the number of microbatches to be a multiple of the number of "
               "rounds (2), but got 5.", "failure",
               {"kind": "traceback", "message": "ValueError: Interleaved 1F1B requires the number of microbatches "
                                                "to be a multiple of the number of rounds (2), but got 5."},
               context=("Traceback (most recent call last):", '  File "train.py", line 3, in <module>')),
        Sample("ValueError: not inside a traceback", None),
        Sample("RuntimeError: Native API failed. Native API returns: -5 (PI_ERROR_OUT_OF_RESOURCES) "
               "-5 (PI_ERROR_OUT_OF_RESOURCES)", "failure", {"kind": "oom"},
               context=("Traceback (most recent call last):", '  File "train.py", line 3, in <module>')),
        Sample("RuntimeError: CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`", "failure",
               {"kind": "oom"}, context=("Traceback (most recent call last):",)),
        Sample("Killed", "failure", {"kind": "killed"}),
        Sample("/var/spool/slurmd/job1234567/slurm_script: line 42: 12345 Killed                  python train.py",
               "failure", {"kind": "killed"}),
        Sample("/var/spool/pbs/mom_priv/jobs/123.polaris.SC: line 12: 4567 Segmentation fault      (core dumped) "
               "python train.py", "failure", {"kind": "killed"}),
        Sample("slurmstepd: error: Detected 1 oom_kill event in StepId=1234567.0. Some of the step tasks have been "
               "OOM Killed.", "failure", {"kind": "oom"}),
        Sample("=>> PBS: job killed: walltime 3620 exceeded limit 3600", "failure",
               {"kind": "cancelled", "message": "PBS killed the job: walltime 3620 exceeded limit 3600"}),
        Sample("=>> PBS: job killed: mem 270gb exceeded limit 256gb", "failure", {"kind": "oom"}),
        Sample("TERM_RUNLIMIT: job killed after reaching LSF run time limit.", "failure",
               {"kind": "cancelled", "message": "LSF killed the job: TERM_RUNLIMIT: job killed after reaching LSF run "
                                                "time limit."}),
        Sample("TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.", "failure", {"kind": "oom"}),
        Sample("TERM_OWNER: job killed by owner.", "failure", {"kind": "cancelled"}),
        Sample("TERM_ENV: no such word in LSF's list", None),
        Sample("the run was not Killed by anything", None),
        Sample("srun: error: nid001234: task 3: Segmentation fault (core dumped)", "failure", {"kind": "killed"}),
        Sample("job.sh: line 7: 8812 Aborted                 (core dumped) ./train", "failure", {"kind": "killed"}),
        Sample("Aborted: not a shell's report", None),
        Sample("2024:05:01-10:00:00:(12345) |CCL_ERROR| atl_ofi.cpp:1234 atl_ofi_init: fi_getinfo error: ret -61, "
               "providers 0", "failure", {"kind": "nccl"}),
        Sample("2024:05:01-10:00:00:(12345) |CCL_WARN| did not find MPI-launcher specific variables", None),
        Sample("srun: error: r6i4n5: task 0: Exited with exit code 1", "exit", {"status": 1}),
        Sample("out of memory", "failure", {"kind": "oom"}, context=("[CUDA ERROR] at file train_gpt2.cu:265:",)),
        Sample("out of memory", None),  # no cudaCheck before it
        Sample("[rank0]: StopIteration", "failure", {"kind": "traceback"},
               context=("[rank0]: Traceback (most recent call last):", "[rank0]:     data = next(data_iterator)")),
        # Python ignored it (an atexit callback after the run, a __del__): no failure
        Sample("TimeoutError: The client socket has timed out after 600000ms while trying to connect to (10.0.0.1, "
               "29500).", None, context=("Exception ignored in atexit callback: <function shutdown at 0x7f>",
                                         "Traceback (most recent call last):",
                                         '  File "/usr/lib/python3.11/logging/__init__.py", line 2192, in shutdown')),
        Sample("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error",
               None, context=("Exception ignored in: <function ProcessGroupNCCL.__del__ at 0x7f>",
                              "Traceback (most recent call last):")),
        Sample("ValueError: bad", "failure", {"kind": "traceback"},
               context=("Exception ignored in atexit callback: <function f at 0x7f>", "Traceback (most recent call "
                        "last):", "TimeoutError: x", "Traceback (most recent call last):")),  # a later one counts
        Sample("ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: -9) local_rank: 3 (pid: 4242) "
               "of binary: /usr/bin/python", "exit", {"status": -9}),
        Sample("E0521 10:11:12.123000 140 torch/distributed/elastic/multiprocessing/api.py:826] failed (exitcode: 1) "
               "local_rank: 0 (pid: 77) of binary: /opt/conda/bin/python3", "exit", {"status": 1}),
        Sample("NCCL INFO Channel 00/02 :    0   1   2   3", None),
        Sample("x1921c0s0b0n0.hostmgmt2000.cm.americas.sgi.com: rank 5 died from signal 9", "exit",
               {"status": -9, "rank": 5, "node": "x1921c0s0b0n0.hostmgmt2000.cm.americas.sgi.com"}),
        Sample("x3004c0s13b0n0: rank 3 exited with code 1", "exit", {"status": 1, "rank": 3}),
        Sample("x3004c0s13b0n0: rank 3 exited with code 0", None),
        Sample("application called MPI_Abort(MPI_COMM_WORLD, 1) - process 3", "exit", {"status": 1, "rank": 3}),
        Sample("  exitcode  : -9 (pid: 12345)", "exit", {"status": -9, "rank": 3},
               context=("Root Cause (first observed failure):", "[0]:", "  time      : 2024-05-01_10:00:00",
                        "  host      : nid001234", "  rank      : 3 (local_rank: 3)")),
        Sample("[2024-01-01 10:05:00,000] [ERROR] [launch.py:321:sigkill_handler] ['/usr/bin/python', '-u', "
               "'train.py', '--local_rank=3'] exits with return code = -9", "exit", {"status": -9}),
        Sample("srun: error: Node failure on nid001234", "failure", {"kind": "hardware", "node": "nid001234"}),
        Sample("srun: error: Node failure on nid7[bold]x", "failure", {"kind": "hardware", "node": "nid7"}),
        Sample("slurmstepd: error: *** JOB 99 ON nid001234 CANCELLED AT 2024-05-01T10:00:00 DUE TO NODE FAILURE, "
               "SEE SLURMCTLD LOG FOR DETAILS ***", "failure",
               {"kind": "hardware", "message": "Slurm cancelled 99 due to node failure, see slurmctld log for details"}),
        Sample("RuntimeError: CUDA error: uncorrectable ECC error encountered", "failure", {"kind": "hardware"},
               context=("Traceback (most recent call last):",)),
        Sample("[rank5]:[E1124 05:00:00.123 77 ProcessGroupNCCL.cpp:1316] CUDA error: uncorrectable ECC error "
               "encountered", "failure", {"kind": "hardware", "rank": 5}),
        Sample("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.", "failure", {"kind": "hardware"}),
        Sample("checking ECC error counters: none", None),
        Sample("[rank3]:[E1124 05:00:00.123456 77 ProcessGroupNCCL.cpp:1895] [PG ID 0 PG GUID 0(default_pg) Rank 3] "
               "Process group watchdog thread terminated with exception: CUDA error: an illegal memory access was "
               "encountered", "failure", {"kind": "cuda", "rank": 3}),
        Sample("RuntimeError: CUDA error: device-side assert triggered", "failure", {"kind": "cuda"},
               context=("Traceback (most recent call last):",)),
        Sample("Job failed (exit 1) -- see logs/train-42.err", "failure",
               {"kind": "script", "message": "Job failed (exit 1) -- see logs/train-42.err"}),
        Sample("3: Step 3 failed", "failure", {"kind": "script", "rank": 3}),
        Sample("FAILED", "failure", {"kind": "script"}),
        Sample("ERROR: training failed, giving up", "failure", {"kind": "script"}),
        Sample("python pretrain_gpt.py exited with exit code 2", "failure", {"kind": "script"}),
        Sample("pretrain exited with exit code 0", None),
        Sample("x3004c0s13b0n0: rank 3 exited with code 1", "exit", {"status": 1}),  # PALS: an exit, not a verdict
        Sample("NCCL INFO Connection to 10.0.0.3 failed, retrying", None),
        Sample("tests/test_x.py::test_y FAILED", None),
        Sample("[rank5]: Fatal Python error: Aborted", "failure", {"kind": "killed", "rank": 5}),
        Sample("terminate called after throwing an instance of 'c10::Error'", "failure", {"kind": "killed"}),
        Sample("terminate called after throwing an instance of 'c10::DistBackendError'", "failure", {"kind": "nccl"}),
        Sample("srun: error: r6i4n5: task 0: Exited with exit code 1", "exit", {"status": 1}),
    )

    def __init__(self, file: str = "") -> None:
        super().__init__(file)
        self._in_traceback: Optional[int] = None  # line number of the open traceback
        self._report_rank: Optional[int] = None  # the rank torchrun's error report names
        self._ignored_at: Optional[int] = None  # the line of Python's "Exception ignored in ..."
        self._cuda_check_at: Optional[int] = None  # the line of llm.c's "[CUDA ERROR] at file ...:N:"
        self._ignoring = False  # inside a traceback Python ignored, until its exception line
        self._ignored_end: Optional[int] = None  # the line of that exception

    def _on_cuda_check(self, body: str, ctx: LineContext) -> list[Event]:
        self._cuda_check_at = ctx.line
        return []

    def _on_cuda_check_string(self, body: str, ctx: LineContext) -> list[Event]:
        """The line after llm.c's ``[CUDA ERROR] at file ...:N:``: cudaGetErrorString's words."""
        if self._cuda_check_at is None or ctx.line - self._cuda_check_at != 1 or body.strip() != "out of memory":
            return []
        self._cuda_check_at = None
        return [self.make(Failure, ctx, kind="oom", message="CUDA out of memory (llm.c cudaCheck)")]

    def _on_ignored(self, body: str, ctx: LineContext) -> list[Event]:
        self._ignored_at = ctx.line
        return []

    def _on_traceback(self, body: str, ctx: LineContext) -> list[Event]:
        if self._ignored_at is not None and 0 < ctx.line - self._ignored_at <= 1:
            self._ignored_at, self._in_traceback, self._ignoring = None, None, True
            return []
        self._in_traceback = ctx.line
        self._ignoring = False
        return []

    def _ignored(self, body: str, ctx: LineContext) -> bool:
        """A line of a traceback Python ignored, its closing exception line included (which
        several routes may read)."""
        if self._ignoring:
            if _EXC_LINE.match(body):
                self._ignoring, self._ignored_end = False, ctx.line
            return True
        return ctx.line == self._ignored_end

    def _on_cancelled(self, body: str, ctx: LineContext) -> list[Event]:
        m = _CANCELLED.search(body)
        if not m:
            return []
        wall = parse_iso(m.group(3))
        reason = f" due to {m.group(4).strip().lower()}" if m.group(4) else ""
        kind = "hardware" if "node fail" in reason else "cancelled"  # Slurm's NODE_FAIL: the machine died
        return [Failure(file=self.file, line=ctx.line, rank=ctx.rank, node=m.group(2),
                        wall_time=wall if wall is not None else ctx.wall_time, kind=kind,
                        message=f"Slurm cancelled {m.group(1)}{reason}")]

    def _on_oom(self, body: str, ctx: LineContext) -> list[Event]:
        if self._ignored(body, ctx):
            return []
        if not _OOM.search(body):
            return []
        self._in_traceback = None
        return [self.make(Failure, ctx, kind="oom", message=message_of(body))]

    def _on_nccl(self, body: str, ctx: LineContext) -> list[Event]:
        if self._ignored(body, ctx):
            return []
        if not _NCCL.search(body):
            return []
        self._in_traceback = None
        return [self.make(Failure, ctx, kind="nccl", message=message_of(body))]

    def _on_slurm_exit(self, body: str, ctx: LineContext) -> list[Event]:
        m = _SLURM_EXIT.search(body)
        return [self.make(Exit, ctx, status=int(m.group(1)))] if m else []

    def _on_torchrun_exit(self, body: str, ctx: LineContext) -> list[Event]:
        m = _TORCHRUN_EXIT.search(body)
        if not m:
            return []
        return [self.make(Exit, ctx, status=int(m.group(1)))]  # its local_rank is no global rank

    def _on_launcher_exit(self, body: str, ctx: LineContext) -> list[Event]:
        m = _DS_LAUNCH_EXIT.search(body)
        return [self.make(Exit, ctx, status=int(m.group(1)))] if m and m.group(1) != "0" else []

    def _on_pals_exit(self, body: str, ctx: LineContext) -> list[Event]:
        m = _PALS_EXIT.match(body)
        if not m:
            return []
        status = -int(m.group(2)) if m.group(2) is not None else int(m.group(3))
        if not status:
            return []
        return [Exit(file=self.file, line=ctx.line, rank=int(m.group(1)), node=ctx.node, wall_time=ctx.wall_time,
                     status=status)]

    def _on_mpi_abort(self, body: str, ctx: LineContext) -> list[Event]:
        m = _MPI_ABORT.search(body)
        if not m:
            return []
        return [Exit(file=self.file, line=ctx.line, rank=int(m.group(2)), node=ctx.node, wall_time=ctx.wall_time,
                     status=int(m.group(1)) or 1)]  # an abort is a failure, whatever code it passes

    def _on_torchrun_report(self, body: str, ctx: LineContext) -> list[Event]:
        rank = _TORCHRUN_RANK.match(body)
        if rank:
            self._report_rank = int(rank.group(1))
            return []
        m = _TORCHRUN_CODE.match(body)
        if not m or m.group(1) == "0":
            return []
        which, self._report_rank = self._report_rank, None
        return [Exit(file=self.file, line=ctx.line, rank=which if which is not None else ctx.rank, node=ctx.node,
                     wall_time=ctx.wall_time, status=int(m.group(1)))]

    def _on_killed(self, body: str, ctx: LineContext) -> list[Event]:
        if _HOST_OOM.search(body):  # the node ran out of memory: an OOM, if not the GPU's
            return [self.make(Failure, ctx, kind="oom", message=message_of(body))]
        if not _KILLED.search(body.strip()):
            return []
        return [self.make(Failure, ctx, kind="killed", message=message_of(body))]

    def _on_hardware(self, body: str, ctx: LineContext) -> list[Event]:
        m = _HARDWARE.search(body)
        if not m:
            return []
        self._in_traceback = None  # the exception closing the traceback says this again
        node = m.group(0).rpartition(" ")[2] if m.group(0).startswith("Node failure") else ctx.node
        return [Failure(file=self.file, line=ctx.line, rank=ctx.rank, node=node, wall_time=ctx.wall_time,
                        kind="hardware", message=message_of(body))]

    def _on_pbs_killed(self, body: str, ctx: LineContext) -> list[Event]:
        m = _PBS_KILLED.search(body)
        if not m:
            return []
        limit = m.group(1).lower()
        kind = "cancelled" if limit in ("walltime", "cput") else "oom" if limit in ("mem", "vmem", "pmem") \
            else "killed"
        return [self.make(Failure, ctx, kind=kind, message=f"PBS killed the job: {(limit + m.group(2)).strip()}"[:500])]

    def _on_lsf_term(self, body: str, ctx: LineContext) -> list[Event]:
        """LSF's reason for ending a job, in the report it appends to the job's output."""
        m = _LSF_TERM.match(body)
        kind = _LSF_KIND.get(m.group(1)) if m else None
        if kind is None:
            return []
        return [self.make(Failure, ctx, kind=kind, message=f"LSF killed the job: {body.strip()}"[:500])]

    def _on_cuda(self, body: str, ctx: LineContext) -> list[Event]:
        if self._ignored(body, ctx):
            return []
        if _HARDWARE.search(body) or _OOM.search(body) or not _CUDA.search(body):
            return []  # a machine's error, or an OOM: their own routes
        if self._in_traceback is not None and _EXC_LINE.match(body):
            self._in_traceback = None  # the exception that closes a traceback: one failure
        return [self.make(Failure, ctx, kind="cuda", message=message_of(body))]

    def _on_abort(self, body: str, ctx: LineContext) -> list[Event]:
        """A process that died at exit: faulthandler's ``Fatal Python error: Aborted`` (its ``Stack
        (most recent call first)`` follows), C++'s ``terminate called after throwing ...``."""
        if _NCCL.search(body):
            return []  # an NCCL error's own route says it
        m = _ABORT.search(body)
        return [self.make(Failure, ctx, kind="killed", message=message_of(body))] if m else []

    def _on_script(self, body: str, ctx: LineContext) -> list[Event]:
        """A job script's own word that a step failed (no stamp needed: many scripts print none)."""
        if "srun: error:" in body or "exitcode" in body or _PALS_EXIT.match(body) or not _SCRIPT.match(body):
            return []  # srun's and torchrun's reports are exits (_on_slurm_exit, _on_torchrun_exit)
        return [self.make(Failure, ctx, kind="script", message=message_of(body))]

    def _on_exception(self, body: str, ctx: LineContext) -> list[Event]:
        if self._ignored(body, ctx) or self._in_traceback is None:
            return []
        m = _EXC_LINE.match(body)
        if not m:
            return []
        self._in_traceback = None
        kind = "oom" if _DEVICE_OOM.search(body) else "hardware" if _HARDWARE.search(body) else \
            "cuda" if _CUDA.search(body) else "traceback"
        return [self.make(Failure, ctx, kind=kind, message=message_of(body))]
