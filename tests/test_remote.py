"""Following logs over SSH against a real OpenSSH sshd on 127.0.0.1."""
from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT
from tests.helpers import sshd
from tests.helpers.output import EventStream
from tuimon.follow.remote import parse_spec, sftp_path
from tuimon.parsers.columns import expand


def test_spec_parsing():
    assert parse_spec("jz:~/runs") == parse_spec("ssh://jz/~/runs")
    s = parse_spec("alice@login.cluster:2222:/scratch/run 1")
    assert (s.user, s.host, s.port, s.path) == ("alice", "login.cluster", 2222, "/scratch/run 1")
    assert parse_spec("/local/dir") is None and parse_spec("./a:b") is None and parse_spec("dir/sub") is None
    assert sftp_path("~/runs") == "runs" and sftp_path("~") == "." and sftp_path("/abs") == "/abs"


@pytest.fixture
def server(tmp_path):
    srv = sshd.start(tmp_path / "sshd")
    if srv.kind != "OpenSSH sshd":
        import warnings
        warnings.warn(f"OpenSSH sshd not installed: remote tests run against the {srv.kind}")
        print(f"NOTE: OpenSSH sshd not installed; using the {srv.kind}")
    yield srv
    srv.stop()


def cli(*args, timeout: float = 120):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tuimon", *args], capture_output=True, text=True, env=env,
                          timeout=timeout)


def copy_fixtures(dst: Path) -> Path:
    dst.mkdir(parents=True)
    for f in FIXTURES.iterdir():
        shutil.copy(f, dst / f.name)
        os.utime(dst / f.name, (1_000_000_000, 1_000_000_000))
    return dst


def test_remote_summary_equals_local(server, tmp_path):
    logs = copy_fixtures(tmp_path / "logs")
    local = json.loads(cli("summary", str(logs), "--format", "json").stdout)
    r = cli("summary", f"tuimon-test:{logs}", "--format", "json", "--ssh-config", str(server.config))
    assert r.returncode == 0, r.stderr
    remote = json.loads(r.stdout)

    def comparable(rows):
        out = {}
        for row in rows:
            row = dict(row, files=None, failure=(dict(row["failure"], file=None) if row["failure"] else None))
            out[row["job"]] = row
        return out

    assert comparable(remote) == comparable(local)
    # the counts say what was read, as for local files
    want = cli("summary", str(logs), "--format", "json", "--no-cache").stderr
    got = cli("summary", f"tuimon-test:{logs}", "--format", "json", "--no-cache", "--ssh-config",
              str(server.config)).stderr
    counts = re.compile(r"parsed (\d+) files?, ([\d,]+) lines, ([\d.]+) MB")
    assert counts.search(got) and counts.search(got).groups() == counts.search(want).groups(), (got, want)
    assert not counts.search(got).group(1) == "0"


def test_hostile_remote_paths(server, tmp_path):
    names = ["with space", "quote'\"s", "$(touch pwned)", "semi;colon", "new\nline", "-leading-dash"]
    base = tmp_path / "hostile"
    for i, name in enumerate(names):
        d = base / name
        d.mkdir(parents=True)
        (d / f"{name}.log").write_text(f" iteration {i + 1:8d}/ 10 | elapsed time per iteration (ms): 1.0 |\n")
    r = cli("events", f"tuimon-test:{base}", "--ssh-config", str(server.config))
    assert r.returncode == 0, r.stderr
    its = sorted(json.loads(line)["iteration"] for line in r.stdout.splitlines()
                 if json.loads(line)["type"] == "iteration")
    assert its == list(range(1, len(names) + 1))
    assert not (Path.home() / "pwned").exists() and not Path("pwned").exists()


def test_changed_host_key_is_refused(server, tmp_path):
    other = tmp_path / "other_key"
    sshd.keygen(other)
    pub = other.with_suffix(".pub").read_text().split()
    server.known_hosts.write_text(f"[127.0.0.1]:{server.port} {pub[0]} {pub[1]}\n")
    r = cli("summary", "tuimon-test:/tmp", "--ssh-config", str(server.config))
    assert r.returncode == 2
    assert "host key not verifiable" in r.stderr and "known_hosts" in r.stderr
    assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr


def test_the_known_hosts_beside_a_given_ssh_config_is_used(server, tmp_path):
    """`--ssh-config DIR/config` with no UserKnownHostsFile of its own: the host key is checked against
    DIR/known_hosts (as ~/.ssh/known_hosts beside ~/.ssh/config), not refused as unknown; a wrong key there
    is still refused."""
    logs = copy_fixtures(tmp_path / "logs")
    kit = tmp_path / "kit"
    kit.mkdir()
    (kit / "config").write_text("".join(line + "\n" for line in server.config.read_text().splitlines()
                                        if "UserKnownHostsFile" not in line))
    (kit / "known_hosts").write_text(server.known_hosts.read_text())
    r = cli("summary", f"tuimon-test:{logs}", "--format", "json", "--no-cache", "--ssh-config", str(kit / "config"))
    assert r.returncode == 0, r.stderr
    assert len(json.loads(r.stdout)) == len(list(FIXTURES.iterdir()))
    other = tmp_path / "other_key"
    sshd.keygen(other)
    pub = other.with_suffix(".pub").read_text().split()
    (kit / "known_hosts").write_text(f"[127.0.0.1]:{server.port} {pub[0]} {pub[1]}\n")
    r = cli("summary", f"tuimon-test:{logs}", "--ssh-config", str(kit / "config"))
    assert r.returncode == 2 and "host key not verifiable" in r.stderr


def test_unknown_host_key_is_refused(server):
    server.known_hosts.write_text("")
    r = cli("summary", "tuimon-test:/tmp", "--ssh-config", str(server.config))
    assert r.returncode == 2 and "host key not verifiable" in r.stderr and "Traceback" not in r.stderr


def test_auth_failure_is_one_line_without_retry_storm(server, tmp_path):
    wrong = tmp_path / "wrong_key"
    sshd.keygen(wrong)
    cfg = server.config.read_text().replace(str(server.client_key), str(wrong))
    bad = tmp_path / "bad_config"
    bad.write_text(cfg)
    t0 = time.monotonic()
    r = cli("events", "--follow", "tuimon-test:/tmp", "--ssh-config", str(bad), timeout=60)
    assert r.returncode == 2
    assert "authentication failed" in r.stderr and "Traceback" not in r.stderr
    assert time.monotonic() - t0 < 30  # gave up instead of retrying


@pytest.mark.slow
def test_follow_survives_connections_killed_twice(server, tmp_path):
    d = tmp_path / "live"
    d.mkdir()
    log = d / "train.log"
    line = " iteration {:8d}/   1000 | elapsed time per iteration (ms): 10.0 |\n"
    log.write_text(line.format(1))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "tuimon", "events", "--follow", f"tuimon-test:{d}",
                             "--ssh-config", str(server.config), "--poll", "0.2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen: list[int] = []
    os.set_blocking(proc.stdout.fileno(), False)

    def collect(until: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (not seen or max(seen) < until):
            out = proc.stdout.readline()
            if not out:
                time.sleep(0.05)
                continue
            ev = json.loads(out)
            if ev["type"] == "iteration":
                seen.append(ev["iteration"])

    try:
        collect(1)
        n = 1
        for _ in range(2):
            server.kill_connections()
            for _ in range(5):
                n += 1
                with open(log, "a") as fh:
                    fh.write(line.format(n))
                time.sleep(0.1)
            collect(n)
        # rotation while disconnected: the rest of the old file must still arrive
        server.kill_connections()
        with open(log, "a") as fh:
            fh.write(line.format(n + 1))
        os.rename(log, d / "train.log.1")
        log.write_text(line.format(n + 2))
        collect(n + 2)
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert seen == list(range(1, n + 3)), (seen, err)
    assert proc.returncode == 0
    assert "retrying" in err or "connection lost" in err


async def test_dashboard_on_remote_and_local_mixed(server, tmp_path):
    from tuimon.live.session import LiveSession
    from tuimon.ui.app import TuimonApp

    remote_dir = copy_fixtures(tmp_path / "remote")
    local_dir = tmp_path / "local"
    local_dir.mkdir()
    (local_dir / "here-777.log").write_text(" iteration        3/      10 | elapsed time per iteration (ms): 1.0 |\n")
    session = LiveSession([f"tuimon-test:{remote_dir}", str(local_dir)], poll=0.2, ssh_config=str(server.config))
    session.start()
    app = TuimonApp(session, refresh_hz=10)
    try:
        async with app.run_test(size=(170, 48)) as pilot:
            for _ in range(100):
                await pilot.pause(0.1)
                if len(app.screen.query_one("#jobs").rows) >= 7:
                    break
            assert len(app.screen.query_one("#jobs").rows) == 7
            assert session.statuses().get("ssh tuimon-test") == "connected"
            progress = str(app.screen.query_one("#progress").render())
            assert "tuimon-test: connected" in progress
            # the log view pages a remote job's file whole, over a connection of its own
            from tuimon.sources.remote_log import RemoteLogFile

            key = next(k for k, job in session.store.jobs.items() if job.files[0].startswith("tuimon-test:"))
            (source,) = session.log_sources(key)[:1]
            assert isinstance(source, RemoteLogFile)
            while not source.index():
                pass
            name = source.name.rsplit("/", 1)[-1]
            whole = (remote_dir / name).read_text().split("\n")
            assert source.failed is None and len(source) == len(whole) - (whole[-1] == "")
            assert source.lines(0, 1) == [whole[0]]
            source.close()
    finally:
        session.stop()


def test_ssh_verb_rejects_local_paths(tmp_path):
    r = cli("ssh", str(tmp_path))
    assert r.returncode == 2 and "not a remote spec" in r.stderr and "Traceback" not in r.stderr


def test_unreachable_host_is_one_line(tmp_path):
    from tests.helpers.sshd import free_port

    cfg = tmp_path / "cfg"
    cfg.write_text(f"Host down\n    HostName 127.0.0.1\n    Port {free_port()}\n")  # nothing listens there
    r = cli("summary", "down:/tmp", "--ssh-config", str(cfg), timeout=60)
    assert r.returncode == 2 and r.stderr.startswith("tuimon: error: down:") and "Traceback" not in r.stderr
    assert r.stderr.strip().count("\n") == 0


def test_one_host_down_never_stalls_the_others(server, tmp_path):
    d = tmp_path / "up"
    d.mkdir()
    (d / "ok.log").write_text(" iteration        5/      10 | elapsed time per iteration (ms): 1.0 |\n")
    cfg = tmp_path / "cfg"
    cfg.write_text(server.config.read_text() + f"\nHost down\n    HostName 127.0.0.1\n    Port {sshd.free_port()}\n")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen([sys.executable, "-m", "tuimon", "events", "--follow", "down:/x", f"tuimon-test:{d}",
                             "--ssh-config", str(cfg)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        deadline = time.monotonic() + 20
        got = ""
        os.set_blocking(proc.stdout.fileno(), False)
        while time.monotonic() < deadline and '"iteration": 5,' not in got:
            got += proc.stdout.readline() or ""
            time.sleep(0.05)
        assert '"iteration": 5,' in got
        time.sleep(1.5)  # host states are reported twice a second
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert "down: retrying" in err and "tuimon-test: connected" in err


def test_failed_login_in_a_mixed_follow_is_exit_2(server, tmp_path):
    wrong = tmp_path / "wrong_key"
    sshd.keygen(wrong)
    bad = tmp_path / "bad_config"
    bad.write_text(server.config.read_text().replace(str(server.client_key), str(wrong)))
    local = tmp_path / "local"
    local.mkdir()
    (local / "a.log").write_text(" iteration        1/      10 | elapsed time per iteration (ms): 1.0 |\n")
    r = cli("events", "--follow", str(local), "tuimon-test:/tmp", "--ssh-config", str(bad), timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("tuimon: error: tuimon-test: authentication failed") and "Traceback" not in r.stderr


@pytest.mark.parametrize("verb", [["events", "--follow"], ["summary"], ["events"]])
def test_host_key_refusal_is_exit_2(server, tmp_path, verb):
    other = tmp_path / "other_key"
    sshd.keygen(other)
    pub = other.with_suffix(".pub").read_text().split()
    server.known_hosts.write_text(f"[127.0.0.1]:{server.port} {pub[0]} {pub[1]}\n")
    r = cli(*verb, "tuimon-test:/tmp", "--ssh-config", str(server.config), timeout=60)
    assert r.returncode == 2, r.stderr
    assert "host key not verifiable" in r.stderr and r.stderr.strip().count("\n") == 0


@pytest.mark.parametrize("verb", [["events", "--follow"], ["summary"], ["events"]])
def test_missing_remote_path_is_exit_2(server, tmp_path, verb):
    r = cli(*verb, f"tuimon-test:{tmp_path}/nowhere", "--ssh-config", str(server.config), timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.strip() == f"tuimon: error: tuimon-test:{tmp_path}/nowhere: no such file or directory"


def test_remote_fifo_is_skipped_and_freezes_nothing(server, tmp_path):
    d = tmp_path / "withfifo"
    d.mkdir()
    os.mkfifo(d / "a-pipe.log")
    log = d / "train.log"
    line = " iteration {:8d}/   1000 | elapsed time per iteration (ms): 10.0 |\n"
    log.write_text(line.format(1))
    r = cli("events", f"tuimon-test:{d}", "--ssh-config", str(server.config), timeout=30)
    assert r.returncode == 0 and '"iteration": 1,' in r.stdout
    assert r.stderr.count("a-pipe.log is not a regular file: skipped") == 1, r.stderr
    proc = subprocess.Popen([sys.executable, "-m", "tuimon", "events", "--follow", f"tuimon-test:{d}",
                             "--ssh-config", str(server.config), "--poll", "0.2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    try:
        os.set_blocking(proc.stdout.fileno(), False)
        got, deadline = "", time.monotonic() + 20
        with open(log, "a") as fh:
            fh.write(line.format(2))
        while time.monotonic() < deadline and '"iteration": 2,' not in got:
            got += proc.stdout.readline() or ""
            time.sleep(0.05)
        assert '"iteration": 2,' in got
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=30)


SOAK_WRITER = """
import random, sys, time
d, seconds = sys.argv[1], float(sys.argv[2])
fhs = [open(f"{d}/rank{i:02d}.log", "ab", buffering=0) for i in range(50)]
n, end = 0, time.monotonic() + seconds
while time.monotonic() < end:
    n += 1
    fhs[n % 50].write(b" iteration %8d/ 99999999 | elapsed time per iteration (ms): 10.0 |\\n" % n)
    time.sleep(0.001)
print(n)
"""


@pytest.mark.slow
def test_remote_soak_sessions_killed_every_2s(server, tmp_path):
    """50 files growing for 60 s while the SSH session is killed every 2 s: 0 lost, 0 doubled."""
    d = tmp_path / "soak"
    d.mkdir()
    seconds = float(os.environ.get("TUIMON_SOAK_SECONDS", "60"))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    follower = subprocess.Popen([sys.executable, "-m", "tuimon", "events", "--follow", f"tuimon-test:{d}",
                                 "--ssh-config", str(server.config), "--poll", "0.2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    for i in range(50):
        (d / f"rank{i:02d}.log").touch()
    time.sleep(1.0)
    writer = subprocess.Popen([sys.executable, "-c", SOAK_WRITER, str(d), str(seconds)], stdout=subprocess.PIPE,
                              text=True)
    kills = 0
    while writer.poll() is None:
        time.sleep(2.0)
        server.kill_connections()
        kills += 1
    written = int(writer.stdout.read())
    got: list = []
    out = EventStream(follower.stdout)
    try:
        out.iterations_until(lambda: len(got) >= written, 60, got)
        time.sleep(2.0)  # late duplicates would show now
        out.iterations_until(lambda: False, 0.5, got)
        seen = [i for _, i in got]
    finally:
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=30)
    lost = set(range(1, written + 1)) - set(seen)
    doubled = len(seen) - len(set(seen))
    print(f"soak: {written} lines, {kills} sessions killed, {len(lost)} lost, {doubled} doubled")
    assert kills >= seconds / 2 - 2
    assert not lost and not doubled, (len(lost), doubled, err.decode(errors="replace")[-2000:])


@pytest.mark.slow
async def test_a_cut_in_the_middle_of_a_round_loses_nothing(server, tmp_path, monkeypatch):
    """The session is killed between two files of one polling round (on the 10th
    file of the second round): events of the files read before the cut are handed
    on with their offsets, so after the reconnect nothing is missing or doubled."""

    import asyncssh

    from tuimon.follow.remote import RemoteHost

    d = tmp_path / "cut"
    d.mkdir()
    line = " iteration {:8d}/ 99999999 | elapsed time per iteration (ms): 10.0 |\n"
    for i in range(50):
        (d / f"rank{i:02d}.log").write_text(line.format(i + 1))
    got: list[int] = []
    host = RemoteHost(("tuimon-test", None, None), [str(d)],
                      lambda evs: got.extend(e.iteration for e in expand(evs) if e.type == "iteration"),
                      ssh_config=str(server.config), poll=0.2)
    opens = {"n": 0}
    real_open = asyncssh.SFTPClient.open

    def cutting_open(self, path, *a, **kw):
        opens["n"] += 1
        if opens["n"] == 60:
            server.kill_connections()
        return real_open(self, path, *a, **kw)

    monkeypatch.setattr(asyncssh.SFTPClient, "open", cutting_open)
    stop = asyncio.Event()
    task = asyncio.ensure_future(host.run(stop))
    try:
        for _ in range(200):
            if len(got) >= 50:
                break
            await asyncio.sleep(0.05)
        assert sorted(got) == list(range(1, 51))
        for i in range(50):
            with open(d / f"rank{i:02d}.log", "a") as fh:
                fh.write(line.format(100 + i))
        for _ in range(300):
            if len(set(got)) >= 100:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # late duplicates would show now
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)
    assert opens["n"] > 60, "the cut never happened"
    assert sorted(got) == list(range(1, 51)) + list(range(100, 150))


def test_remote_files_use_the_parse_cache_keyed_by_host(server, tmp_path):
    """A remote file read before comes from the cache (keyed by host: no inode over
    SFTP, its first bytes and those before the saved offset tell it is the same);
    one that grew is read from the saved offset, one replaced from the start."""
    logs = copy_fixtures(tmp_path / "logs")
    spec = f"tuimon-test:{logs}"
    args = ("summary", spec, "--format", "json", "--ssh-config", str(server.config))
    home = tmp_path / "cache-home"

    def cli(*argv):  # this test's own cache: its counts are of its entries alone
        env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(home))
        return subprocess.run([sys.executable, "-m", "tuimon", *argv], capture_output=True, text=True, env=env,
                              timeout=120)

    plain = json.loads(cli(*args, "--no-cache").stdout)
    first = cli(*args)
    assert first.returncode == 0 and json.loads(first.stdout) == plain, first.stderr
    n = len(list(logs.iterdir()))
    assert f"files: {n} " in cli("cache", "info").stdout
    again = cli(*args)
    assert json.loads(again.stdout) == plain
    events_plain = cli("events", spec, "--ssh-config", str(server.config), "--no-cache").stdout
    assert cli("events", spec, "--ssh-config", str(server.config)).stdout == events_plain
    # rows are keyed by host: the same paths read locally are entries of their own
    assert json.loads(cli("summary", str(logs), "--format", "json").stdout)
    assert f"files: {2 * n} " in cli("cache", "info").stdout
    target = logs / "stronghold-run.log"
    with open(target, "a") as fh:
        fh.write(" iteration       51/      50 | elapsed time per iteration (ms): 7777.0 | lm loss: 9.9E+00 |\n")
    grown = cli("events", spec, "--ssh-config", str(server.config)).stdout
    assert grown == cli("events", spec, "--ssh-config", str(server.config), "--no-cache").stdout
    assert '"iteration": 51' in grown
    target.write_text(target.read_text().replace("lm loss", "lm  loss"))  # same file name, other content
    replaced = cli("events", spec, "--ssh-config", str(server.config)).stdout
    assert replaced == cli("events", spec, "--ssh-config", str(server.config), "--no-cache").stdout


@pytest.mark.slow
def test_a_remote_file_that_grows_by_hundreds_of_mb_streams_in_bounded_memory(server, tmp_path):
    """events --follow host:dir while a file gains 240 MB: events come out as blocks are
    read (not after the whole backlog), RSS stays bounded, Ctrl-C stops it at once."""
    import signal
    import threading

    d = tmp_path / "grow"
    d.mkdir()
    log = d / "big.log"
    line = (" iteration {i:8d}/ 9999999 | consumed samples: {s:12d} | elapsed time per iteration (ms): 2500.0 | "
            "learning rate: 3.000E-04 | global batch size:    64 | lm loss: 2.500000E+00 | loss scale: 4096.0 |\n")
    log.write_text(line.format(i=1, s=64))
    proc = subprocess.Popen([sys.executable, "-m", "tuimon", "events", "--follow", "--no-cache", f"tuimon-test:{d}",
                             "--ssh-config", str(server.config), "--poll", "0.2"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    seen = [0]

    def read() -> None:
        for out_line in proc.stdout:  # type: ignore[union-attr]
            if b'"type": "iteration"' in out_line:
                seen[0] += 1
    threading.Thread(target=read, daemon=True).start()
    try:
        deadline = time.monotonic() + 30
        while seen[0] < 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert seen[0] == 1, proc.stderr.read1(4096) if proc.poll() is not None else "no first event"
        block = "".join(line.format(i=i, s=i * 64) for i in range(2, 20002))
        with open(log, "a") as fh:
            for _ in range(120):  # 240 MB
                fh.write(block)
        total = 1 + 120 * 20000
        t0 = time.monotonic()
        peak, counts = 0.0, []
        def partway() -> int:
            return len({c for c in counts if 1 < c < total})
        # RSS watched for 25 s of the read (longer on a loaded machine, until the stream shows)
        while seen[0] < total and (time.monotonic() - t0 < 25 or (partway() < 3 and time.monotonic() - t0 < 120)):
            time.sleep(0.25)
            counts.append(seen[0])
            status = Path(f"/proc/{proc.pid}/status").read_text()
            peak = max(peak, int(next(ln for ln in status.splitlines() if ln.startswith("VmRSS:")).split()[1]) / 1024)
        # events come out while the backlog is read, not after it: counts part-way through, however slow the
        # machine (a follower that waited for the whole backlog would jump from 1 to all of it)
        assert partway() >= 3, counts[-10:]
        assert peak < 500, f"RSS peaked at {peak:.0f} MB while reading 240 MB (bounded by blocks, not the backlog)"
        assert seen[0] > 1
        t1 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=15)
        assert time.monotonic() - t1 < 2.0, "Ctrl-C stops a remote follow within a second or so"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        for pipe in (proc.stdout, proc.stderr):  # (left open, a pipe warns when collected: an error in pytest)
            if pipe is not None:
                pipe.close()


ROTATING_WRITER = """
import os, shutil, sys, time
d, seconds, kind = sys.argv[1], float(sys.argv[2]), sys.argv[3]
names = [f"{d}/rank{i:02d}.log" for i in range(10)]
fhs = [open(p, "ab", buffering=0) for p in names]
n, end, next_turn, turn = 0, time.monotonic() + seconds, time.monotonic() + 1.3, 0
while time.monotonic() < end:
    n += 1
    fhs[n % 10].write(b" iteration %8d/ 99999999 | elapsed time per iteration (ms): 10.0 |\\n" % n)
    time.sleep(0.002)
    if time.monotonic() >= next_turn:  # one file a turn, in order
        k, turn, next_turn = turn % 10, turn + 1, time.monotonic() + 1.3
        p = names[k]
        if kind == "rename":  # logrotate's numbered rotation, then a new file at the name
            fhs[k].close()
            for j in (3, 2, 1):
                if os.path.exists(f"{p}.{j}"):
                    os.replace(f"{p}.{j}", f"{p}.{j + 1}")
            os.replace(p, f"{p}.1")
            fhs[k] = open(p, "ab", buffering=0)
        elif kind == "copytruncate":
            shutil.copyfile(p, f"{p}.1")
            os.truncate(p, 0)
        elif kind == "late-recreate":  # gone for a while, then a new file
            fhs[k].close()
            os.replace(p, f"{p}.1")
            time.sleep(0.3)
            fhs[k] = open(p, "ab", buffering=0)
print(n)
"""


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["rename", "late-recreate", "copytruncate"])
def test_remote_soak_rotations_during_cuts(server, tmp_path, kind):
    """10 files rotated one every 1.3 s while the session is killed every 2 s: the
    generation renamed away during a cut is found among its siblings by content and
    drained first (rename, late recreate): 0 lost, 0 doubled.  copytruncate may double
    or lose only what was written between its copy and its truncate (as local)."""
    d = tmp_path / "rot"
    d.mkdir()
    seconds = float(os.environ.get("TUIMON_SOAK_SECONDS", "30"))
    for i in range(10):
        (d / f"rank{i:02d}.log").touch()
    follower = subprocess.Popen([sys.executable, "-m", "tuimon", "events", "--follow", "--no-cache", f"tuimon-test:{d}",
                                 "--ssh-config", str(server.config), "--poll", "0.2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    time.sleep(1.5)
    writer = subprocess.Popen([sys.executable, "-c", ROTATING_WRITER, str(d), str(seconds), kind],
                              stdout=subprocess.PIPE, text=True)
    kills = 0
    got: list = []
    out = EventStream(follower.stdout)
    while writer.poll() is None:
        out.iterations_until(lambda: False, 2.0, got)
        server.kill_connections()
        kills += 1
    written = int(writer.stdout.read())
    try:
        out.iterations_until(lambda: len(got) >= written, 60, got)
        out.iterations_until(lambda: False, 2.0, got)  # late duplicates would show now
    finally:
        follower.send_signal(signal.SIGINT)
        _, err = follower.communicate(timeout=30)
    seen = [i for _, i in got]
    lost = set(range(1, written + 1)) - set(seen)
    doubled = len(seen) - len(set(seen))
    print(f"rotation soak ({kind}): {written} lines, {kills} cuts, {len(lost)} lost, {doubled} doubled")
    if kind == "copytruncate":
        assert len(lost) + doubled <= written // 50, (len(lost), doubled)
    else:
        assert not lost and not doubled, (len(lost), doubled, sorted(lost)[:20], err.decode(errors="replace")[-1500:])


async def test_a_host_waiting_to_reconnect_tries_at_once_when_asked(tmp_path, monkeypatch):
    """A host that cannot be reached waits before trying again (here 30 s, the backoff's jitter pinned);
    `retry_now` (the dashboard's R) ends the wait: the next attempt comes at once, and the backoff starts
    over from a second."""
    import socket

    from tuimon.follow import remote as remote_mod
    from tuimon.follow.remote import RemoteHost

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setattr(remote_mod.random, "uniform", lambda a, b: 30.0)
    host = RemoteHost(("127.0.0.1", None, port), ["/tmp"], lambda events: None, connect_timeout=5)
    attempts: list[float] = []
    real = host._connect

    async def counted():
        attempts.append(time.monotonic())
        return await real()
    host._connect = counted  # type: ignore[method-assign]
    stop = asyncio.Event()
    task = asyncio.ensure_future(host.run(stop))
    try:
        deadline = time.monotonic() + 20
        while not (host.state.status == "retrying" and host._retry is not None) and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert host.state.status == "retrying" and len(attempts) == 1
        assert host.state.retry_at - time.monotonic() > 20  # waiting half a minute
        asked = time.monotonic()
        host.retry_now()
        while len(attempts) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert len(attempts) == 2 and attempts[1] - asked < 2.0
        while host._retry is None and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        assert 20 < host.state.retry_at - time.monotonic() < 45  # delay back to 1 s (x the pinned 30), not 2
    finally:
        stop.set()
        await asyncio.wait_for(task, 10)


class _Follower:
    """``tuimon events --follow --state F`` of a remote spec, its iteration numbers collected."""

    LINE = " iteration {:8d}/ 100000 | elapsed time per iteration (ms): 10.0 | lm loss: 2.5E+00 |\n"

    def __init__(self, server, spec: str, state: Path, *more: str) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        self.proc = subprocess.Popen([sys.executable, "-m", "tuimon", "events", "--follow", spec, *more, "--state",
                                      str(state), "--ssh-config", str(server.config), "--poll", "0.2"],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self.seen: list[int] = []
        self._part = ""

    def collect(self, until: int, timeout: float = 60.0, count: int = 0) -> list[int]:
        """Until iteration ``until`` is seen (or, with ``count``, that many iterations)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and (len(self.seen) < count if count else
                                               (not self.seen or max(self.seen) < until)):
            out = self.proc.stdout.readline()
            if not out:
                time.sleep(0.05)
                continue
            if not out.endswith("\n"):  # the rest of the line is yet to come
                self._part += out
                continue
            out, self._part = self._part + out, ""
            ev = json.loads(out)
            if ev["type"] == "iteration":
                self.seen.append(ev["iteration"])
        return self.seen

    def stop(self, sig=signal.SIGINT) -> str:
        self.proc.send_signal(sig)
        _, err = self.proc.communicate(timeout=30)
        return err


@pytest.mark.parametrize("between", ["append", "rotate", "kill -9", "sigterm"])
def test_follow_with_state_resumes_a_remote_file(server, tmp_path, between):
    """`events --follow --state F host:DIR`, stopped, the file grown (or rotated), restarted with
    the same F: every line once (before: the state held no remote position, and every line came
    out again)."""
    d = tmp_path / "live"
    d.mkdir()
    log = d / "train.log"
    line = _Follower.LINE
    log.write_text("".join(line.format(i) for i in range(1, 1501)))
    state = tmp_path / "state" / "follow.json"
    first = _Follower(server, f"tuimon-test:{d}", state)
    try:
        assert first.collect(1500) == list(range(1, 1501))
    finally:
        if between == "kill -9":
            time.sleep(1.5)  # past the save bound: a kill -9 then repeats nothing
        err = first.stop({"kill -9": signal.SIGKILL, "sigterm": signal.SIGTERM}.get(between, signal.SIGINT))
    if between == "sigterm":  # stopped as Ctrl-C stops it, its state saved at the output's end
        assert first.proc.returncode == 0, err
    assert "positions" in state.read_text() and f":{log}" in state.read_text(), err
    with open(log, "a") as fh:
        fh.write("".join(line.format(i) for i in range(1501, 1751)))
    if between == "rotate":  # rotated while tuimon was stopped: the rest of the old file, then the new one
        os.rename(log, d / "train.log.1")
        log.write_text("".join(line.format(i) for i in range(1751, 2001)))
    else:
        with open(log, "a") as fh:
            fh.write("".join(line.format(i) for i in range(1751, 2001)))
    second = _Follower(server, f"tuimon-test:{d}", state)
    try:
        got = second.collect(2000)
    finally:
        err = second.stop()
    assert got == list(range(1501, 2001)), (got[:5], len(got), err)


def test_one_state_file_resumes_local_and_remote_files_alike(server, tmp_path):
    line = _Follower.LINE
    remote, local = tmp_path / "remote", tmp_path / "local"
    remote.mkdir()
    local.mkdir()
    (remote / "a.log").write_text("".join(line.format(i) for i in range(1, 101)))
    (local / "b.log").write_text("".join(line.format(i) for i in range(1001, 1101)))
    state = tmp_path / "follow.json"
    first = _Follower(server, f"tuimon-test:{remote}", state, str(local))
    try:
        assert sorted(first.collect(0, count=200)) == [*range(1, 101), *range(1001, 1101)]
    finally:
        first.stop()
    with open(remote / "a.log", "a") as fh:
        fh.write("".join(line.format(i) for i in range(101, 151)))
    with open(local / "b.log", "a") as fh:
        fh.write("".join(line.format(i) for i in range(1101, 1151)))
    second = _Follower(server, f"tuimon-test:{remote}", state, str(local))
    try:
        got = second.collect(0, count=100)
    finally:
        err = second.stop()
    assert sorted(got) == [*range(101, 151), *range(1101, 1151)], (len(got), err)
    assert f"{local / 'b.log'}" in state.read_text() and f":{remote / 'a.log'}" in state.read_text()


class _CuttingSFTP:
    """An SFTP client whose link is dropped (the server's processes killed) at the second
    block read of a chosen file: a cut at a known point of a drain, not a timing's luck."""

    def __init__(self, conn, sftp, server, name: str, block: int) -> None:
        self.conn, self.sftp, self.server, self.name, self.block = conn, sftp, server, name, block
        self.blocks, self.cut = 0, False

    def __getattr__(self, attr):
        return getattr(self.sftp, attr)

    def open(self, path, *args, **kw):
        return _CuttingOpen(self, self.sftp.open(path, *args, **kw), os.path.basename(path) == self.name)


class _CuttingOpen:
    def __init__(self, owner, opener, watched: bool) -> None:
        self.owner, self.opener, self.watched = owner, opener, watched

    async def __aenter__(self):
        return _CuttingHandle(self.owner, await self.opener.__aenter__(), self.watched)

    async def __aexit__(self, *exc):
        return await self.opener.__aexit__(*exc)


class _CuttingHandle:
    def __init__(self, owner, fh, watched: bool) -> None:
        self.owner, self.fh, self.watched = owner, fh, watched

    async def read(self, size, offset):
        if self.watched and size == self.owner.block:
            self.owner.blocks += 1
            if self.owner.blocks == 2:
                self.owner.cut = True
                self.owner.server.kill_connections()
                await asyncio.wait_for(self.owner.conn.wait_closed(), 30)  # the read below meets the cut
        return await self.fh.read(size, offset)


@pytest.mark.parametrize("cut_in", ["generation read on", "generation read whole"])
async def test_a_cut_while_draining_rotated_generations_loses_and_doubles_nothing(server, tmp_path, cut_in):
    """The link dropped in the middle of a rotated generation (the one that continues what was
    read, or one never seen, read whole): the read is not over, the reconnection reads on from
    where the cut left it.  Before, the drain took the cut for a file gone: the path's new file
    was read over the half-read generation, whose whole was read again at the next rotation
    (612 lines doubled in the rotation soak)."""
    import asyncssh

    from tuimon.follow import remote

    d = tmp_path / "gen"
    d.mkdir()
    log = d / "rank0.log"
    line = " iteration {:8d}/ 99999999 | elapsed time per iteration (ms): 10.0 |\n"
    big = remote.READ_SIZE * 5 // (2 * len(line.format(0)))  # lines in 2.5 read blocks
    at = [0]

    def lines(n: int) -> str:
        text = "".join(line.format(at[0] + i + 1) for i in range(n))
        at[0] += n
        return text

    def rotate(new: str) -> None:
        for j in (3, 2, 1):
            if (d / f"rank0.log.{j}").exists():
                os.replace(d / f"rank0.log.{j}", d / f"rank0.log.{j + 1}")
        os.replace(log, d / "rank0.log.1")
        log.write_text(new)

    got: list[int] = []
    host = remote.RemoteHost(("tuimon-test", None, None), [str(d)],
                             lambda evs: got.extend(e.iteration for e in expand(evs) if e.type == "iteration"),
                             ssh_config=str(server.config))
    rf = host._add(str(log))

    async def read(sftp) -> None:
        attrs = await sftp.stat(str(log))
        await host._read_file(sftp, rf, attrs.size, attrs.mtime)

    log.write_text(lines(100))
    async with await host._connect() as conn:
        await read(await conn.start_sftp_client())
    assert got == list(range(1, 101))
    with open(log, "a") as fh:
        fh.write(lines(big))  # the rest of the file read, then renamed away
    rotate(lines(big) if cut_in == "generation read whole" else lines(10))
    if cut_in == "generation read whole":  # rotated again before the next look: never seen
        rotate(lines(10))
    conn = await host._connect()
    cutting = _CuttingSFTP(conn, await conn.start_sftp_client(), server, "rank0.log.1", remote.READ_SIZE)
    with pytest.raises((asyncssh.Error, OSError)):
        await read(cutting)
    conn.abort()
    assert cutting.cut and 100 < len(got) < at[0]
    async with await host._connect() as conn:
        await read(await conn.start_sftp_client())
    assert got == list(range(1, at[0] + 1)), (len(got), len(set(got)), at[0])
    rotate(lines(10))  # a later rotation: the half-read generation is not read again whole
    async with await host._connect() as conn:
        await read(await conn.start_sftp_client())
    assert got == list(range(1, at[0] + 1)), (len(got), len(set(got)), at[0])
