"""The progress line of a batch read: on a terminal's stderr after a second, never on a
pipe, wiped before the figures."""
from __future__ import annotations

import io
import os
import pty
import subprocess
import sys

from tests.conftest import ROOT
from rich.text import Text

from tuimon.ui.progress import ReadProgress


def test_the_line_waits_a_second_redraws_sparingly_and_is_wiped():
    now = [0.0]
    out = io.StringIO()
    p = ReadProgress(stream=out, clock=lambda: now[0], force=True, width=120)
    p.begin(200_000_000, 4)
    p.advance(50_000_000, 1)
    assert out.getvalue() == ""  # under a second: silent
    now[0] = 2.0
    p.advance(50_000_000, 1)
    drawn = out.getvalue()
    plain = Text.from_ansi(drawn).plain
    assert "tuimon: reading 2/4 files" in plain and "100.0/200.0 MB" in plain and "50 MB/s" in plain, plain
    assert plain.count("tuimon: reading") == 1  # drawn once: rich's own timer does not draw between our calls
    now[0] = 2.05
    p.advance(1, 0)
    assert out.getvalue() == drawn  # at most every REDRAW_S
    now[0] = 3.0
    p.advance(50_000_000, 1)
    assert "150.0/200.0 MB" in Text.from_ansi(out.getvalue()[len(drawn):]).plain
    p.done()
    assert out.getvalue().endswith("\x1b[2K")  # wiped (rich's transient display erases its line)


def test_not_a_terminal_no_line():
    out = io.StringIO()
    p = ReadProgress(stream=out, clock=iter([0.0, 5.0, 6.0]).__next__)
    p.begin(10, 1)
    p.advance(10, 1)
    p.done()
    assert out.getvalue() == ""


def _big_log(path, mb: int) -> None:
    line = (" iteration {i:8d}/ 1000000 | consumed samples: {c} | elapsed time per iteration (ms): 1234.5 | "
            "learning rate: 1.000E-04 | global batch size:   512 | lm loss: 2.345678E+00 | loss scale: 1.0 |\n")
    with open(path, "w") as fh:
        i = 0
        while fh.tell() < mb * 1_000_000:
            fh.write("".join(line.format(i=j, c=j * 512) for j in range(i, i + 5000)))
            i += 5000


def test_a_long_read_shows_progress_on_a_terminal_and_keeps_stdout_clean(tmp_path):
    log = tmp_path / "big-123.out"
    _big_log(log, 60)
    leader, follower = pty.openpty()
    # (the line waits a second; this log is read in less on a quiet machine (0.9 s): it waits a tenth here)
    proc = subprocess.Popen([sys.executable, "-m", "tuimon", "summary", "--no-cache", "--jobs", "1", "--format",
                             "csv", str(log)], cwd=ROOT, stdout=subprocess.PIPE, stderr=follower,
                            env={**os.environ, "TUIMON_PROGRESS_AFTER_S": "0.1"})
    os.close(follower)
    err = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    out, _ = proc.communicate(timeout=300)
    os.close(leader)
    assert proc.returncode == 0
    text = err.decode()
    assert "tuimon: reading 0/1 files" in text and "MB/s" in text, text[:500]
    assert text.endswith("\x1b[2K") or "\x1b[2K" in text.split("tuimon: parsed")[0][-40:], text[-300:]  # wiped
    assert b"reading" not in out and out.startswith(b"job,")
    piped = subprocess.run([sys.executable, "-m", "tuimon", "summary", "--no-cache", "--jobs", "1", str(log)],
                           cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert "reading" not in piped.stderr


def test_the_wait_is_the_environments_where_it_is_a_number(monkeypatch):
    for value, wait in (("0.1", 0.1), ("0", 0.0), ("2", 2.0), ("soon", 1.0), ("-1", 1.0), ("inf", 1.0), ("nan", 1.0)):
        monkeypatch.setenv("TUIMON_PROGRESS_AFTER_S", value)
        assert ReadProgress(stream=io.StringIO()).after_s == wait, value
    monkeypatch.delenv("TUIMON_PROGRESS_AFTER_S")
    assert ReadProgress(stream=io.StringIO()).after_s == 1.0
