"""The config file (precedence, `config show`, bad files), shell completion, and
`summary --columns` (seed tables headless)."""
from __future__ import annotations

import csv
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES, ROOT
from tuimon.figures.record import SCHEMA_VERSION

MEGATRON = FIXTURES / "megatron-deepspeed-8gpu-1234567.log"


def cli(*argv: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tuimon", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def write_config(tmp_path: Path, text: str) -> dict:
    (tmp_path / "tuimon").mkdir(exist_ok=True)
    (tmp_path / "tuimon" / "config.toml").write_text(text)
    return {"XDG_CONFIG_HOME": str(tmp_path)}


def peak_source(out: str) -> str:
    return json.loads(out)[0]["gpu_peak_source"]


def test_flags_override_the_file_which_overrides_the_defaults(tmp_path):
    assert peak_source(cli("summary", "--format", "json", str(MEGATRON),
                           env={"XDG_CONFIG_HOME": str(tmp_path)}).stdout) is None  # built-in: no GPU
    env = write_config(tmp_path, 'gpu = "h100"\nstartup_timeout = 900\n[alerts]\nloss-spike = { k = 8 }\n')
    assert peak_source(cli("summary", "--format", "json", str(MEGATRON), env=env).stdout) == "--gpu: h100 bf16"
    assert peak_source(cli("summary", "--format", "json", "--gpu", "a100", str(MEGATRON), env=env).stdout) \
        == "--gpu: a100 bf16"
    # --config FILE, before or after the verb, instead of the default place
    other = tmp_path / "other.toml"
    other.write_text('gpu = "b200"\n')
    for argv in (("--config", str(other), "summary"), ("summary", f"--config={other}")):
        out = cli(*argv, "--format", "json", str(MEGATRON), env=env)
        assert peak_source(out.stdout) == "--gpu: b200 bf16", out.stderr
    shown = cli("config", "show", env=env).stdout
    config_file = tmp_path / "tuimon" / "config.toml"
    settings = {line.split()[0]: line for line in shown.splitlines()[1:]}
    assert re.match(r'gpu +=  ?"h100" +# ' + re.escape(f"{config_file}:1"), settings["gpu"]), settings["gpu"]
    assert re.match(r"startup_timeout += 900 +# " + re.escape(f"{config_file}:2"), settings["startup_timeout"])
    assert re.match(r'theme += "dark" +# default', settings["theme"])
    assert "loss-spike.k=8" in shown
    # every value, and every origin, starts in one column, the longest rule name included
    rows = shown.splitlines()[1:]
    assert len({line.index(" = ") if " = " in line else line.index(" : ") for line in rows}) == 1, shown
    assert len({line.index(" # ") for line in rows}) == 1, shown


def test_alert_rules_and_cache_dir_from_the_file(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = "".join(f" iteration {i:8d}/ 1000 | elapsed time per iteration (ms): 1000.0 | lm loss: "
                    f"{3.0 - 0.002 * i + (1.2 if i == 120 else 0):.6E} |\n" for i in range(1, 200))
    (logs / "spike-1.log").write_text(lines)
    base = cli("alerts", "--format", "json", str(logs), env={"XDG_CONFIG_HOME": str(tmp_path / "none")})
    assert [a["kind"] for a in json.loads(base.stdout)] == ["loss-spike"]
    env = write_config(tmp_path, f'cache_dir = "{tmp_path / "mycache"}"\n[alerts]\nloss-spike = "off"\n')
    assert json.loads(cli("alerts", "--format", "json", str(logs), env=env).stdout) == []
    assert json.loads(cli("alerts", "--format", "json", "--alert", "loss-spike=on", str(logs), env=env).stdout)
    cli("summary", str(logs), env=env)
    assert (tmp_path / "mycache" / "parse-cache.sqlite3").exists()
    # the environment beats the file (the settings' order: file, environment, flags)
    cli("summary", str(logs), env={**env, "TUIMON_CACHE_DIR": str(tmp_path / "envcache")})
    assert (tmp_path / "envcache" / "parse-cache.sqlite3").exists()


@pytest.mark.parametrize("text,want", [
    ('gpu = "h100\n', "bad TOML"),
    ("colour = 1\n", ":1: unknown key 'colour'"),
    ('gpu = "h100"\n[serve]\nmax_jobs = "many"\n', ":3: serve.max_jobs = 'many': expected a positive whole number"),
    ('theme = "purple"\n', ":1: theme = 'purple': expected dark, light or high-contrast"),
    ('[alerts]\nloss-spike = { q = 1 }\n', "alerts.loss-spike.q: unknown setting"),
    ("poll = -1\n", ":1: poll = -1: expected a positive number of seconds"),
])
def test_a_bad_file_is_one_line_naming_file_line_and_key_and_exit_2(tmp_path, text, want):
    env = write_config(tmp_path, text)
    out = cli("summary", str(MEGATRON), env=env)
    assert out.returncode == 2, out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr
    assert str(tmp_path / "tuimon" / "config.toml") in out.stderr and want in out.stderr, out.stderr
    missing = cli("--config", str(tmp_path / "nope.toml"), "summary", str(MEGATRON))
    assert missing.returncode == 2 and "no such config file" in missing.stderr


def test_completion_scripts_load_and_complete(tmp_path):
    bash = shutil.which("bash")
    if bash is None:
        pytest.skip("SKIPPED: bash is not installed")
    script = cli("completion", "bash").stdout
    (tmp_path / "c.bash").write_text(script)
    assert subprocess.run([bash, "-n", str(tmp_path / "c.bash")]).returncode == 0
    for shell in ("zsh", "fish"):
        assert "tuimon" in cli("completion", shell).stdout
    shim = tmp_path / "bin" / "tuimon"
    shim.parent.mkdir()
    shim.write_text(f"#!/bin/sh\ncd {ROOT} && exec {sys.executable} -m tuimon \"$@\"\n")
    shim.chmod(0o755)

    def complete(line: str) -> set[str]:
        words = line.split(" ")
        program = (f'source {tmp_path / "c.bash"}; COMP_LINE="{line}"; COMP_POINT=${{#COMP_LINE}}; '
                   f'COMP_WORDS=({" ".join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}; '
                   '_python_argcomplete tuimon; printf "%s\\n" "${COMPREPLY[@]}"')
        out = subprocess.run([bash, "-c", program], capture_output=True, text=True, timeout=60,
                             env={**os.environ, "PATH": f"{shim.parent}:{os.environ['PATH']}"})
        return {w.strip() for w in out.stdout.splitlines() if w.strip()}

    assert complete("tuimon su") == {"summary"}  # a verb
    assert "--startup-timeout" in complete("tuimon summary --st")  # a flag
    assert complete("tuimon watch x --theme hi") == {"high-contrast"}  # a theme
    assert complete("tuimon summary --gpu h1") == {"h100", "h100-pcie"}  # GPU names
    assert complete("tuimon summary --columns job,tfl") == {"job,tflops", "job,tflops_reported",
                                                            "job,tflops_computed", "job,tflops_hardware"}


def test_summary_columns_give_seed_tables_in_every_format():
    names = "job,method,gpus,size,layers,hidden,heads,seq,dp,pp,mbs,gbs,gas,speed,tflops,mfu,memory,loss"
    table = cli("summary", "--columns", names, str(FIXTURES)).stdout
    assert table.splitlines()[0].split()[:3] == ["Job", "Method", "GPUs"]
    rows = list(csv.DictReader(io.StringIO(cli("summary", "--columns", names, "--format", "csv",
                                               str(FIXTURES)).stdout)))
    assert list(rows[0]) == names.split(",")
    for row in rows:  # numbers or empty, one value a cell
        for name, cell in row.items():
            assert cell != "-" and "/" not in cell or name in ("job",), (name, cell)
            if name not in ("job", "method") and cell:
                float(cell)
    stronghold = next(r for r in rows if r["job"] == "stronghold-run")
    assert stronghold["method"] == "stronghold" and stronghold["speed"] and stronghold["gpus"]
    data = json.loads(cli("summary", "--columns", "job,speed,gas", "--format", "json", str(FIXTURES)).stdout)
    assert all(set(r) == {"schema_version", "job", "speed", "gas"} and r["schema_version"] == SCHEMA_VERSION
               for r in data)
    md = cli("summary", "--columns", "job,speed", "--format", "markdown", str(FIXTURES)).stdout
    assert md.splitlines()[1] == "| --- | --: |"
    bad = cli("summary", "--columns", "job,bogus", str(FIXTURES))
    assert bad.returncode == 2 and "unknown column 'bogus'" in bad.stderr and "columns: job, method" in bad.stderr
    assert "tokens_per_gpu_per_sec" in cli("summary", "--help").stdout


def test_default_csv_is_numbers_or_empty_one_value_a_cell():
    rows = list(csv.DictReader(io.StringIO(cli("summary", "--format", "csv", str(FIXTURES)).stdout)))
    assert len(rows) == 6
    text_columns = {"job", "method", "framework", "status", "gpu", "checks", "flops_formula", "size_source"}
    for row in rows:
        for name, cell in row.items():
            assert cell != "-", (name, row)
            if name not in text_columns and cell:
                float(cell)  # iterations and train_iters apart, not "12/20"
    deepspeed = next(r for r in rows if r["job"] == "megatron-deepspeed-8gpu-1234567")
    assert deepspeed["iterations"] == "20" and deepspeed["train_iters"] == "100"
    assert "differ by" in deepspeed["checks"]


@pytest.mark.parametrize("text, line, says", [
    ("a = " + "[" * 3000 + "]" * 3000 + "\n", None, "nested too deeply"),
    ("[" + ".".join(["t"] * 3000) + "]\n", None, "nested too deeply"),
    ("gpu = \"h100\"\npoll = 1e400\n", 2, "poll = inf"),
    ("poll = 100000000000000000000000000000000000\n", 1, "at most 1e7"),
    ("[alerts]\nloss-spike = { k = 1e400 }\n", 2, "alerts.loss-spike.k"),
    ("[serve]\nretain = \"2h\"\nlisten = \"0:9464\"\n", 3, "serve.listen"),
    ("[serve]\nlisten = \"[]:9464\"\n", 2, "serve.listen"),
    ("[serve]\nretain = \"soon\"\n", 2, "serve.retain"),
    ("[alerts]\nbell = true\non_alert = \"notify 'unclosed\"\n", 3, "alerts.on_alert"),
    ("[keymap]\nfilter = 3\n", 2, "keymap.filter = 3: expected keys"),
    ("poll = " + "9" * 400 + "\n", 1, "at most 1e7"),  # an integer too big for a float: no traceback
    ("[alerts]\nloss-spike = { k = " + "9" * 400 + " }\n", 2, "alerts.loss-spike.k"),
    ("formats = [\"/nonexistent/formats\"]\n", 1, "expected a list of existing directories"),
    ("[keymap]\nfilter = \"f; rm -rf\"\n", 2, "keymap.filter"),
])
def test_a_bad_value_in_the_file_is_one_line_naming_file_and_line(tmp_path, text, line, says):
    env = write_config(tmp_path, text)
    path = tmp_path / "tuimon" / "config.toml"
    for argv in (["config", "show"], ["summary", str(MEGATRON)], ["serve", str(MEGATRON)]):
        r = cli(*argv, env=env)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
        where = f"{path}:{line}:" if line else f"{path}:"
        assert where in r.stderr and says in r.stderr, r.stderr


@pytest.mark.parametrize("argv", [["summary", "--bogus", "x"], ["serve", "--retain", "-5", "x"],
                                  ["events", "--follow", "--poll", "1e300", "x"], ["events", "--follow", "--poll", "nan", "x"],
                                  ["summary"], ["bogus-verb"], ["formats", "nope"]])
def test_misuse_is_one_line_and_exit_2(argv):
    r = cli(*argv)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert "usage:" not in r.stderr and "-h" in r.stderr


@pytest.mark.parametrize("text, line, says", [
    ("[keymap]\nfilter = \"F\"\nbogus = \"b\"\n", 3, "keymap.bogus: no such key name (names, as ? lists them: "),
    ("theme = \"dark\"\n[keymap]\nfilter = \"f\"\n", None, "f would be both fold-all and filter on the Alerts screen"),
])
def test_a_keymap_the_dashboard_cannot_use_is_one_line_and_exit_2(tmp_path, text, line, says):
    """Names are the bindings' (``?`` lists them); a key that two bindings of one screen would share
    is refused rather than one of them silently lost. Only the dashboard's verbs read the keymap."""
    env = write_config(tmp_path, text)
    path = tmp_path / "tuimon" / "config.toml"
    for verb in ("watch", "demo"):
        r = cli(verb, *([str(FIXTURES)] if verb == "watch" else []), env=env)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
        assert (f"{path}:{line}:" if line else f"{path}: [keymap]:") in r.stderr and says in r.stderr, r.stderr
    assert cli("summary", str(MEGATRON), env=env).returncode == 0
