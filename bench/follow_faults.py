"""The fault cases of issue 16, run through ``tuimon events --follow`` as a user
would, against any checkout: prints lines lost and doubled, and whether the
follower kept going, for each case.

    python bench/follow_faults.py                 # this checkout
    python bench/follow_faults.py --repo /tmp/old # another one (e.g. a worktree of an older commit)

Runs as root (the /dev/null case uses a private character device made with
mknod, never /dev/null itself).  The remote cases need sshd: see
tests/test_remote.py (soak and the cut in the middle of a round).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LINE = b" iteration %8d/ 99999999 | elapsed time per iteration (ms): 1.0 |\n"


class Follower:
    def __init__(self, repo: Path, args: list[str], fd_limit: int | None = None) -> None:
        def limit() -> None:
            if fd_limit:
                resource.setrlimit(resource.RLIMIT_NOFILE, (fd_limit, fd_limit))
        self.out = tempfile.TemporaryFile()
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([sys.executable, "-m", "tuimon", "events", "--follow", *args],
                                     stdout=self.out, stderr=self.err, preexec_fn=limit, cwd=repo,
                                     env=dict(os.environ, PYTHONPATH=str(repo)))

    def stop(self) -> tuple[list[tuple[str, int]], str, int | None]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.out.seek(0)
        self.err.seek(0)
        got = []
        for text in self.out.read().splitlines():
            try:
                doc = json.loads(text)
            except ValueError:
                continue
            if doc.get("type") == "iteration":
                got.append((os.path.basename(doc["file"]), doc["iteration"]))
        return got, self.err.read().decode(errors="replace"), self.proc.returncode


def tally(got: list[tuple[str, int]], expected: set[int]) -> tuple[int, int]:
    its = [i for _, i in got]
    return len(expected - set(its)), len(its) - len(set(its))


def write(path: Path, start: int, n: int) -> None:
    with open(path, "ab") as fh:
        fh.write(b"".join(LINE % i for i in range(start, start + n)))


def case_rename_late(repo: Path, d: Path) -> str:
    log = d / "x.log"
    fh = open(log, "ab", buffering=0)
    fh.write(b"".join(LINE % i for i in range(1, 101)))
    f = Follower(repo, [str(d)])
    time.sleep(1.5)
    os.rename(log, d / "x.log.1")
    for k in range(3):
        fh.write(b"".join(LINE % i for i in range(101 + 50 * k, 151 + 50 * k)))
        time.sleep(1.0)
    fh.close()
    write(log, 251, 100)
    time.sleep(1.5)
    write(d / "other.log", 1001, 100)
    time.sleep(2.0)
    got, err, _ = f.stop()
    lost, doubled = tally(got, set(range(1, 351)) | set(range(1001, 1101)))
    alive = "ingest dead" if "Traceback" in err or not any(i > 1000 for _, i in got) else "alive"
    return f"lost {lost} of 450, doubled {doubled}, follower {alive}"


def case_symlink_loop(repo: Path, d: Path) -> str:
    (d / "sub").mkdir()
    write(d / "a.log", 1, 10)
    os.symlink(".", d / "self")
    os.symlink("..", d / "sub" / "up")
    f = Follower(repo, [str(d)])
    time.sleep(1.0)
    t0 = _cpu(f.proc.pid)
    time.sleep(5.0)
    cpu = (_cpu(f.proc.pid) - t0) / 5.0
    rss = _rss_mb(f.proc.pid)
    got, _, _ = f.stop()
    return f"{len(got)} of 10 lines out, {100 * cpu:.0f}% of a core, RSS {rss:.0f} MB after 6 s"


def case_shift_twice(repo: Path, d: Path) -> str:
    log = d / "x.log"
    write(log, 1, 10)
    f = Follower(repo, [str(d), "--poll", "4"])
    time.sleep(2.0)
    n = 11
    for _ in range(3):  # three rounds of two shifts 1.5 s apart, within one poll interval
        for _ in range(2):
            write(log, n, 5)
            n += 5
            for k in range(4, 0, -1):
                if (d / f"x.log.{k}").exists():
                    os.rename(d / f"x.log.{k}", d / f"x.log.{k + 1}")
            os.rename(log, d / "x.log.1")
            time.sleep(1.5)
        write(log, n, 5)
        n += 5
        time.sleep(4.5)
    got, _, _ = f.stop()
    lost, doubled = tally(got, set(range(1, n)))
    return f"lost {lost} of {n - 1}, doubled {doubled}"


def case_rotated_while_stopped(repo: Path, d: Path) -> str:
    log, state = d / "x.log", d.parent / f"{d.name}.state"
    write(log, 1, 50)
    f = Follower(repo, [str(d), "--state", str(state)])
    time.sleep(2.0)
    first, _, _ = f.stop()
    write(log, 51, 50)  # written while stopped, then rotated
    os.rename(log, d / "x.log.1")
    write(log, 101, 50)
    g = Follower(repo, [str(d), "--state", str(state)])
    time.sleep(2.5)
    second, _, _ = g.stop()
    lost, doubled = tally(first + second, set(range(1, 151)))
    return f"lost {lost} of 150, doubled {doubled}"


def case_copytruncate(repo: Path, d: Path) -> str:
    files = [d / f"f{i:03d}.log" for i in range(200)]
    for i, p in enumerate(files):
        write(p, i * 100_000 + 1, 1)
    f = Follower(repo, [str(d), "--poll", "1"])
    time.sleep(3.0)
    n = 2
    for k in range(4):
        for i, p in enumerate(files):  # lines the follower has not read yet...
            write(p, i * 100_000 + n, 3)
        for p in files:  # ...copied away, then the file truncated
            shutil.copyfile(p, f"{p}.{k + 1}")
            os.truncate(p, 0)
        n += 3
        time.sleep(1.2)
    time.sleep(3.0)
    got, _, _ = f.stop()
    expected = {i * 100_000 + j for i in range(200) for j in range(1, n)}
    lost, doubled = tally(got, expected)
    return f"lost {lost} of {len(expected)}, doubled {doubled}"


def case_fd_limit(repo: Path, d: Path) -> str:
    for i in range(4096):
        write(d / f"r{i:04d}.log", i + 1, 1)
    f = Follower(repo, [str(d)], fd_limit=1024)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        f.out.seek(0)
        if f.out.read().count(b'"type": "iteration"') >= 4096:
            break
        time.sleep(0.5)
    got, _, _ = f.stop()
    return f"{len({name for name, _ in got})} of 4096 files read (ulimit -n 1024)"


def case_fifo(repo: Path, d: Path) -> str:
    write(d / "a.log", 1, 1)
    os.mkfifo(d / "pipe.log")
    t0 = time.monotonic()
    try:
        r = subprocess.run([sys.executable, "-m", "tuimon", "summary", str(d)], capture_output=True, timeout=10,
                           cwd=repo, env=dict(os.environ, PYTHONPATH=str(repo)))
    except subprocess.TimeoutExpired:
        return "summary blocked (killed after 10 s)"
    return f"summary exit {r.returncode} in {time.monotonic() - t0:.1f} s"


def case_state_device(repo: Path, d: Path) -> str:
    write(d / "a.log", 1, 1)
    dev = d.parent / f"{d.name}-null"
    os.mknod(dev, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # a private /dev/null
    f = Follower(repo, [str(d), "--state", str(dev)])
    time.sleep(2.0)
    _, err, code = f.stop()
    kind = "still a device" if stat.S_ISCHR(os.lstat(dev).st_mode) else "REPLACED by a regular file"
    first = err.strip().splitlines()[-1] if err.strip() else ""
    return f"exit {code}, the device is {kind}; stderr: {first[:90]}"


CASES = {
    "1 rename away, recreate 3 s later": case_rename_late,
    "2 symlink loop": case_symlink_loop,
    "4 numbered shift twice per poll (4 s)": case_shift_twice,
    "5 rotated while stopped (--state)": case_rotated_while_stopped,
    "6 copytruncate, 200 files, --poll 1": case_copytruncate,
    "8 4,096 files, ulimit -n 1024": case_fd_limit,
    "9 FIFO named *.log (summary)": case_fifo,
    "10 --state naming a device": case_state_device,
}


def _cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        for text in fh:
            if text.startswith("VmRSS:"):
                return int(text.split()[1]) / 1024
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", type=Path, default=Path(__file__).resolve().parent.parent)
    ap.add_argument("--only", help="run the cases whose name contains this")
    args = ap.parse_args()
    print(f"tuimon at {args.repo}")
    for name, case in CASES.items():
        if args.only and args.only not in name:
            continue
        with tempfile.TemporaryDirectory(prefix="tuimon-fault-") as tmp:
            d = Path(tmp) / "logs"
            d.mkdir()
            print(f"{name:40s} {case(args.repo, d)}", flush=True)


if __name__ == "__main__":
    main()
