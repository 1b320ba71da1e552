"""Frame time of the app while logs pour in (issue 5).  Prints figures.

The app runs headless (Textual's test driver) on a live session following a
directory that a writer thread fills at --rate MB/s across --files logs.  It
reports the time each refresh takes on the UI thread (snapshot + table update),
how late a 50 ms UI timer fires (any blocking of the UI thread shows there),
and how long the first screen with jobs took.  Target: frame p99 <= 50 ms.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from summary_throughput import block  # noqa: E402

from tuimon.live.session import LiveSession  # noqa: E402
from tuimon.ui.app import TuimonApp  # noqa: E402

IDLE_FILES = 0


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, int(round(q / 100 * (len(s) - 1))))] if s else float("nan")


WRITER = r"""
import sys, time
sys.path.insert(0, sys.argv[4])
from summary_throughput import block
directory, files, rate = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
chunk = "".join(block(j) for j in range(1, 40)).encode()
handles = [open(f"{directory}/job-{i:04d}.out", "ab") for i in range(files)]
per_tick, k, total = rate * 1e6 / 20, 0, 0
try:
    while True:
        t0 = time.monotonic()
        done = 0
        while done < per_tick:
            h = handles[k % files]
            h.write(chunk)
            h.flush()
            done += len(chunk)
            k += 1
        total += done
        print(total, flush=True)
        time.sleep(max(0.0, 0.05 - (time.monotonic() - t0)))
except (KeyboardInterrupt, BrokenPipeError):
    pass
"""


async def measure(seconds: float, files: int, rate: float) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="tuimon-frames-"))
    (tmp / "seed-0000.out").write_bytes("".join(block(j) for j in range(1, 5)).encode())
    for i in range(IDLE_FILES):
        (tmp / f"idle-{i:05d}.log").write_text(f" iteration {i:8d}/ 10 | elapsed time per iteration (ms): 1.0 |\n")
    session = LiveSession([str(tmp)], poll=0.1, process=os.environ.get("INGEST", "process") == "process")
    session.start()  # as the CLI does: before the app (and its threads) start
    written = [0]
    app = TuimonApp(session, refresh_hz=float(os.environ.get("HZ", "4")))
    lateness: list[float] = []
    t_start = time.perf_counter()
    first_rows = None
    loaded_at = None  # frame index once every idle file's job is in the store
    async with app.run_test(size=(200, 50)) as pilot:
        w = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp), str(files), str(rate),
                              str(ROOT / "bench")], stdout=subprocess.PIPE, text=True)
        expected = time.perf_counter() + 0.05
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            await asyncio.sleep(max(0.0, expected - time.perf_counter()))
            now = time.perf_counter()
            lateness.append((now - expected) * 1000.0)
            expected = now + 0.05
            if first_rows is None and app.screen.query("#jobs") and app.screen.query_one("#jobs").row_count:
                first_rows = now - t_start
            if loaded_at is None and IDLE_FILES and len(session._cache) > IDLE_FILES:
                loaded_at = len(app.frame_ms)  # every job summarised once
        w.send_signal(signal.SIGINT)
        out, _ = w.communicate(timeout=10)
        written[0] = int(out.split()[-1]) if out.split() else 0
        frames = list(app.frame_ms)
        await pilot.press("q")
    session.stop()
    shutil.rmtree(tmp, ignore_errors=True)
    mb = written[0] / 1e6
    print(f"ingest ({'separate process' if session.process else 'thread'}): {mb / seconds:.1f} MB/s written "
          f"into {files} files for {seconds:.0f} s; read {session.progress()[0] / 1e6:.0f} MB of {mb:.0f} MB")
    print(f"refresh on the UI thread: {len(frames)} frames, p50 {pct(frames, 50):.1f} ms, "
          f"p99 {pct(frames, 99):.1f} ms, max {max(frames):.1f} ms  (target p99 <= 50 ms)")
    print(f"50 ms UI timer lateness: p50 {pct(lateness, 50):.1f} ms, p99 {pct(lateness, 99):.1f} ms")
    if loaded_at is not None:
        steady = frames[loaded_at:]
        print(f"after all {IDLE_FILES} idle jobs were loaded and summarised: {len(steady)} frames, p50 {pct(steady, 50):.1f} ms, "
              f"p99 {pct(steady, 99):.1f} ms")
    print(f"first screen with jobs after {first_rows * 1000 if first_rows else float('nan'):.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--rate", type=float, default=10.0, help="MB/s written")
    ap.add_argument("--idle-files", type=int, default=0, help="also follow this many idle one-job files")
    args = ap.parse_args()
    global IDLE_FILES
    IDLE_FILES = args.idle_files
    asyncio.run(measure(args.seconds, args.files, args.rate))


if __name__ == "__main__":
    main()
