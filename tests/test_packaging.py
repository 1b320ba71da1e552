"""A non-editable install from the built wheel ships parsers/, themes/ (with .tcss) and the CLI."""
from __future__ import annotations

import pathlib
import subprocess
import sys
import sysconfig
import venv
import zipfile

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    (whl,) = out.glob("tuimon-*.whl")
    return whl


def test_wheel_contents(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "tuimon/parsers/__init__.py" in names and "tuimon/commands/cli.py" in names
    assert "tuimon/parsers/formats/__init__.py" in names and "tuimon/engine/blocks.py" in names
    assert any(n.startswith("tuimon/themes/") and n.endswith(".tcss") for n in names)
    # one top-level name: no generic `parsers` or `themes` beside it
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"tuimon"}, names
    # typed (PEP 561), licensed, its version from the one place it is written, every direct import declared
    assert "tuimon/py.typed" in names and "tuimon/parsers/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    meta = next(zipfile.ZipFile(wheel).read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    from tuimon import __version__
    assert f"Version: {__version__}" in meta.splitlines()
    requires = {line.split()[1].split(">")[0].split(";")[0].lower() for line in meta.splitlines()
                if line.startswith("Requires-Dist:") and "extra ==" not in line}
    assert {"textual", "rich", "platformdirs", "numpy", "watchdog", "asyncssh", "regex"} <= requires, requires


def test_installed_wheel_runs(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    # the dependencies come from the environment running the tests (whatever its base
    # interpreter holds), after the new environment's own packages: tuimon is the wheel's
    own = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True).stdout.strip()
    (pathlib.Path(own) / "_test_deps.pth").write_text(
        "\n".join(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])) + "\n")
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    # one top-level name, tuimon: the repository's parsers/ and themes/ are installed inside it, so
    # no other distribution's `parsers` or `themes` is shadowed (nor shadows ours)
    code = ("import importlib.util, pathlib, tuimon; from tuimon import parsers, themes; "
            "base = pathlib.Path(tuimon.__file__).parent.parent; "
            f"assert base == pathlib.Path({own!r}), base; "
            "assert pathlib.Path(parsers.__file__).parent.parent == base / 'tuimon', parsers.__file__; "
            "assert pathlib.Path(themes.__file__).parent.parent == base / 'tuimon', themes.__file__; "
            "assert not (base / 'parsers').exists() and not (base / 'themes').exists(); "
            "assert importlib.util.find_spec('parsers') is None and importlib.util.find_spec('themes') is None; "
            "assert list(pathlib.Path(themes.__file__).parent.glob('*.tcss')); print('ok')")
    r = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert r.stdout.strip() == "ok", r.stderr
    r = subprocess.run([str(env_dir / "bin" / "tuimon"), "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("tuimon ")
    r = subprocess.run([str(env_dir / "bin" / "tuimon"), "--help"], capture_output=True, text=True)
    for verb in ("watch", "ssh", "summary", "events", "tflops", "demo"):
        assert verb in r.stdout
