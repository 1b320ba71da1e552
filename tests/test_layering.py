"""Data flows one way: parsers (stdlib only) -> store (no Textual) -> UI (only via the CLI)."""
from __future__ import annotations

import ast
from pathlib import Path
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
        rel = path.relative_to(ROOT / "tuimon")
        if rel.parts[0] in ("ui", "themes") or path.name == "cli.py":  # the themes are the UI's (Textual themes)
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


def _module_graph() -> dict[str, set[str]]:
    """tuimon's modules and what each imports of tuimon, function-level imports included."""
    graph: dict[str, set[str]] = {}
    base = ROOT / "tuimon"
    for path in base.rglob("*.py"):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        name = ".".join(parts)
        package = parts if path.name == "__init__.py" else parts[:-1]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    target = package[:len(package) - node.level + 1] + (node.module.split(".") if node.module else [])
                else:
                    target = (node.module or "").split(".")
                if target[:1] != ["tuimon"]:
                    continue
                for alias in node.names:  # "from . import x" names a module x
                    candidate = ".".join(target + [alias.name])
                    deps.add(candidate if (ROOT / Path(*candidate.split("."))).with_suffix(".py").exists()
                             else ".".join(target))
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.split(".")[0] == "tuimon")
        graph[name] = {d for d in deps if d != name}
    return graph


def test_no_import_circles():
    """No module of tuimon reaches itself through its imports (lazy ones included): data
    flows one way (issue 30: cli <-> demo <-> formats, columns <-> summary were circles)."""
    graph = _module_graph()
    cycles = []

    def visit(node: str, stack: list[str], done: set[str]) -> None:
        for dep in sorted(graph.get(node, ())):
            if dep in stack:
                cycles.append(stack[stack.index(dep):] + [dep])
            elif dep not in done and dep in graph:
                visit(dep, stack + [dep], done)
        done.add(node)

    done: set[str] = set()
    for module in sorted(graph):
        if module not in done:
            visit(module, [module], done)
    packages = {m for m in graph if (ROOT / Path(*m.split(".")) / "__init__.py").exists()}
    real = [c for c in cycles if not set(c) & packages]  # a package and its own modules are no circle
    assert not real, "\n".join(" -> ".join(c) for c in real[:10])


def test_no_argparse_namespace_below_the_cli_parser():
    """Settings are built once (tuimon.commands.settings) and passed down typed: only the
    parser and the settings builder know argparse; nothing reads options by getattr."""
    for path in (ROOT / "tuimon").rglob("*.py"):
        text = path.read_text()
        if path.name not in ("cli.py", "settings.py"):  # the parser, and the settings built from what it parsed
            assert "Namespace" not in text, path
        if "commands" not in path.relative_to(ROOT / "tuimon").parts:  # verbs add their options to the parser
            assert "import argparse" not in text, path
        assert "getattr(args" not in text and "getattr(settings" not in text, path


def test_settings_reach_the_layers_as_values_not_through_the_environment():
    """The cache directory (a setting of the file and the environment) is read in the
    commands and handed down as a path; nothing sets the environment to pass it on (a
    spawned ingest process gets what it is given, test_user_formats)."""
    for path in (ROOT / "tuimon").rglob("*.py"):
        text = path.read_text()
        assert 'environ.setdefault("TUIMON' not in text and 'environ["TUIMON' not in text, path
        if "commands" not in path.relative_to(ROOT / "tuimon").parts:
            assert 'environ.get("TUIMON_CACHE_DIR"' not in text, path


def test_every_option_of_every_verb_is_a_setting():
    from tuimon.commands.cli import build_parser
    from tuimon.commands.settings import Settings

    parser = build_parser()
    minimal = {"summary": ["x"], "events": ["x"], "alerts": ["x"], "watch": ["x"], "serve": ["x"], "ssh": ["h:x"],
               "demo": [], "tflops": ["--params", "1B", "--seq", "1", "--gbs", "1", "--iter-time", "1", "--gpus", "1"],
               "completion": ["bash"], "config": ["show"], "cache": ["info"], "formats": ["list"]}
    verbs = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    assert set(verbs) == set(minimal), "a new verb: add it here"
    for verb, rest in minimal.items():
        settings = Settings.from_args(parser.parse_args([verb, *rest]))
        assert settings.verb == verb
    got = Settings.from_args(parser.parse_args(["serve", "x", "--retain", "2h", "--max-jobs", "5"]))
    assert (got.retain, got.max_jobs, got.listen) == (7200.0, 5, "127.0.0.1:9464")
    assert Settings.from_args(parser.parse_args(["summary", "x"])).retain == 86400.0  # a verb without it: the default


def test_the_options_load_without_numpy_or_the_parsers():
    """``tuimon --help``, ``--version`` and a usage error build the options alone: numpy,
    the parsers, the store and the figures load with the verb that uses them (numpy's
    import alone was half the 0.3 s these took)."""
    for argv in (["--version"], ["--help"], ["summary", "--no-such-option"]):
        code = ("import sys\nfrom tuimon.commands.cli import entry\n"
                f"try:\n    entry({argv!r})\nexcept SystemExit:\n    pass\n"
                "heavy = sorted(m for m in sys.modules if m == 'numpy' or m.startswith(('tuimon.parsers', "
                "'tuimon.store.job_store', 'tuimon.engine.ingest', 'tuimon.figures.summary', 'tuimon.live')))\n"
                "print('HEAVY:' + ' '.join(heavy))\n")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
        assert "HEAVY:" in out.stdout, out.stdout + out.stderr
        assert out.stdout.split("HEAVY:")[-1].strip() == "", f"{argv} imported: {out.stdout.split('HEAVY:')[-1]}"


#: tuimon's sub-packages, lowest first: each may import only from the ones below it (data flows one way:
#: sources hand over bytes, the engine parses, the store keeps, figures compute, the live drivers follow
#: files with the engine, the UI and exports show, the commands wire them)
LAYERS = {"text": 0, "paths": 0, "_core": 0, "__init__": 1, "parsers": 2, "themes": 2, "sources": 3, "store": 3,
          "engine": 4, "figures": 5, "follow": 5, "live": 6, "exports": 7, "ui": 7, "commands": 8, "__main__": 9}


def _package_imports():
    """(importer's sub-package, imported sub-package, file, line) of every import between two of them,
    relative or absolute, at module level or inside a function."""
    base = ROOT / "tuimon"
    for path in base.rglob("*.py"):
        rel = path.relative_to(base)
        pkg = rel.parts[0] if len(rel.parts) > 1 else rel.stem
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name.split(".")[1] for a in node.names if a.name.startswith("tuimon.")]
            elif isinstance(node, ast.ImportFrom):
                if node.level == 0 and (node.module or "").startswith("tuimon."):
                    targets = [node.module.split(".")[1]]
                elif node.level > 0:
                    up = rel.parts[:-1][:len(rel.parts) - node.level]  # the package the dots name
                    named = list(up) + (node.module.split(".") if node.module else [])
                    targets = [named[0] if named else "__init__"]  # (from .. import __version__)
            for target in targets:
                if target != pkg:
                    yield pkg, target, rel, node.lineno


def test_sub_packages_import_only_the_layers_below():
    found = list(_package_imports())
    assert any(t == "engine" for _, t, _, _ in found), "the scan found no import of the engine: it is wrong"
    upward = [f"{rel}:{line} ({pkg} imports {target})" for pkg, target, rel, line in found
              if target in LAYERS and LAYERS[target] >= LAYERS.get(pkg, 99)]
    unknown = sorted({t for _, t, _, _ in found if t not in LAYERS} | {p for p, _, _, _ in found if p not in LAYERS})
    assert not unknown, f"sub-packages the layering does not place: {unknown}"
    assert not upward, "imports of a layer not below: " + "; ".join(upward)


def test_sources_hand_over_bytes_and_import_no_parser_or_engine():
    bad = [f"{rel}:{line} imports {target}" for pkg, target, rel, line in _package_imports()
           if pkg == "sources" and target not in ("text", "paths")]
    bad += [f"{path.relative_to(ROOT)} imports parsers" for path in (ROOT / "tuimon" / "sources").glob("*.py")
            if "tuimon.parsers" in path.read_text()]
    assert not bad, bad
