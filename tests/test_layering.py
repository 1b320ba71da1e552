"""Data flows one way: parsers (stdlib only) -> store (no Textual) -> UI (only via the CLI)."""
from __future__ import annotations

import ast
import subprocess
import sys

from tests.conftest import ROOT

STDLIB = set(sys.stdlib_module_names)


def imports_of(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name.split(".")[0], node.lineno
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0], node.lineno


def test_parsers_use_only_the_standard_library():
    for path in (ROOT / "parsers").glob("*.py"):
        for name, line in imports_of(path):
            assert name in STDLIB, f"{path.name}:{line} imports {name}"


def test_core_modules_do_not_import_textual():
    for path in (ROOT / "tuimon").rglob("*.py"):
        if "ui" in path.relative_to(ROOT / "tuimon").parts or path.name == "cli.py":
            continue
        for name, line in imports_of(path):
            assert name not in ("textual", "rich"), f"{path}:{line} imports {name}"


def test_store_and_summary_load_without_textual():
    code = ("import sys, tuimon.store.job_store, tuimon.figures.summary, tuimon.engine.ingest, parsers; "
            "bad=[m for m in sys.modules if m.split('.')[0] in ('textual','rich')]; print(bad); assert not bad")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_store_point_is_4_bytes_a_registry_field_and_6_for_where():
    from tuimon.store.fields import FIELDS
    from tuimon.store.series import POINT_DTYPE, Series

    s = Series()
    for i in range(100_000):
        s.append(i, 1e9 + i, elapsed_ms=1.0, loss=2.0, tflops=4.0)
    # the fields, the wall time, and where the point was logged (file index u2, line u4: an alert's line)
    assert POINT_DTYPE.itemsize == 4 * (len(FIELDS) + 1) + 6
    assert s.bytes_allocated / len(s) <= POINT_DTYPE.itemsize * 1.13, s.bytes_allocated / len(s)
    assert s.last("loss") == 2.0 and s.last("tokens_per_sec") != s.last("tokens_per_sec")  # absent: NaN


def test_only_the_cli_imports_the_ui():
    for path in (ROOT / "tuimon").rglob("*.py"):
        rel = path.relative_to(ROOT / "tuimon")
        if rel.parts[0] == "ui" or path.name == "cli.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                module = ("." * node.level) + (node.module or "")
                assert "ui" not in module.replace(".", " ").split() and not module.endswith(".ui"), \
                    f"{rel}:{node.lineno} imports {module}"


def test_importing_the_package_has_no_side_effects():
    code = ("import sys, tuimon, tuimon.commands.cli, parsers, themes; "
            "bad=[m for m in sys.modules if m.split('.')[0] in ('textual','watchdog','asyncssh')]; "
            "print(bad); assert not bad")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_xdg_paths_are_resolved_in_one_place(monkeypatch, tmp_path):
    """The config file, user formats and the cache follow $XDG_CONFIG_HOME and $XDG_CACHE_HOME
    through tuimon.paths (an empty or relative value is ignored, as the specification says)."""
    from tuimon.commands.config import default_path
    from tuimon.engine.cache import cache_dir
    from tuimon.engine.catalog import config_dir
    monkeypatch.delenv("TUIMON_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "c"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "k"))
    assert default_path() == str(tmp_path / "c" / "tuimon" / "config.toml")
    assert config_dir() == tmp_path / "c" / "tuimon" and cache_dir() == tmp_path / "k" / "tuimon"
    monkeypatch.setenv("XDG_CONFIG_HOME", "relative/dir")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert config_dir() == tmp_path / "home" / ".config" / "tuimon"
    for path in ROOT.glob("tuimon/**/*.py"):
        if path.name != "paths.py":
            text = path.read_text()
            assert 'environ.get("XDG_CONFIG_HOME"' not in text and 'environ.get("XDG_CACHE_HOME"' not in text, path
