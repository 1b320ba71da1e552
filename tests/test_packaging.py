"""Installs as users make them, offline (``--no-index``): the wheel with the compiled core; the pure-Python
wheel and the sdist on a machine without cargo (a cluster login node), which read with the Python engine
and say so once; the portable abi3 manylinux wheel (contrib/build-wheel.sh) in an environment whose PATH
has no cargo. Each installed tuimon reads a fixture to the same summary as the tree under test."""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import venv
import zipfile

import pytest

from tests.conftest import FIXTURES, ROOT

VERSION = tomllib.loads((ROOT / "core" / "Cargo.toml").read_text())["package"]["version"]
LOG = FIXTURES / "megatron-deepspeed-8gpu-1234567.log"


def _no_cargo_env() -> dict[str, str]:
    """This environment with every PATH entry that holds cargo left out (and no rustup home)."""
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (pathlib.Path(d) / "cargo").exists()]
    env = {k: v for k, v in os.environ.items() if k not in ("CARGO_HOME", "RUSTUP_HOME", "TUIMON_ENGINE")}
    env["PATH"] = os.pathsep.join(path)
    assert shutil.which("cargo", path=env["PATH"]) is None
    return env


def _pip_wheel(out: pathlib.Path, env=None) -> subprocess.CompletedProcess:
    # --no-build-isolation: the build's own needs (maturin, where cargo is) come from this environment, offline.
    # One build at a time (a lock file): two test workers building the checkout at once share its build
    # folders, and one of them failed now and then
    import fcntl

    lock = pathlib.Path(os.environ.get("TMPDIR", "/tmp")) / f"tuimon-wheel-build-{os.getuid()}.lock"
    with open(lock, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        return subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                               "-v", "-w", str(out), str(ROOT)], capture_output=True, text=True, env=env)


def _fresh_env(where: pathlib.Path) -> pathlib.Path:
    """A new virtual environment whose dependencies come from the one running the tests (after its own
    packages: tuimon is whatever gets installed into it). Returns its bin folder."""
    env_dir = where / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    code = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    own = subprocess.run([str(env_dir / "bin" / "python"), "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    (pathlib.Path(own) / "_test_deps.pth").write_text(
        "\n".join(dict.fromkeys([sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])) + "\n")
    return env_dir / "bin"


def _install(bin_dir: pathlib.Path, target: pathlib.Path, env=None) -> subprocess.CompletedProcess:
    r = subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--no-deps", "--no-index", "--force-reinstall",
                        str(target)], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    return r


def _summary(cmd: list[str], cwd, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([*cmd, "summary", str(LOG), "--no-cache", "--format", "json"], capture_output=True,
                          text=True, cwd=cwd, env=env)


@pytest.fixture(scope="module")
def reference_summary():
    env = {k: v for k, v in os.environ.items() if k != "TUIMON_ENGINE"}
    r = _summary([sys.executable, "-m", "tuimon"], ROOT, env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _same_figures(got: str, reference) -> None:
    assert json.loads(got) == reference


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    r = _pip_wheel(out)
    assert r.returncode == 0 and "tuimon build:" not in r.stderr, r.stderr[-3000:]
    (whl,) = out.glob("tuimon-*.whl")
    return whl


def test_wheel_contents(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "tuimon/parsers/__init__.py" in names and "tuimon/commands/cli.py" in names
    assert "tuimon/parsers/formats/__init__.py" in names and "tuimon/engine/blocks.py" in names
    assert any(n.startswith("tuimon/themes/") and n.endswith(".tcss") for n in names)
    assert any(n.startswith("tuimon/_core") and n.endswith(".so") for n in names), "the compiled core"
    # one top-level name: no generic `parsers` or `themes` beside it
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"tuimon"}, names
    # typed (PEP 561), licensed, its version from the one place it is written, every direct import declared
    assert "tuimon/py.typed" in names and "tuimon/parsers/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    meta = next(zipfile.ZipFile(wheel).read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
    assert f"Version: {VERSION}" in meta.splitlines()
    requires = {line.split()[1].split(">")[0].split(";")[0].lower() for line in meta.splitlines()
                if line.startswith("Requires-Dist:") and "extra ==" not in line}
    assert {"textual", "rich", "platformdirs", "numpy", "watchdog", "asyncssh", "regex"} <= requires, requires


def test_one_version_everywhere():
    """core/Cargo.toml is the one place; the package, the core and the installed metadata say it."""
    import tuimon
    from tuimon import _core
    assert tuimon.__version__ == _core.__version__ == VERSION
    assert 'version = "' not in (ROOT / "tuimon" / "__init__.py").read_text()
    assert "dynamic" in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def test_the_core_stub_matches_the_module():
    """tuimon/_core.pyi is what mypy checks callers against: mypy's stubtest holds it to the built module."""
    r = subprocess.run([sys.executable, "-m", "mypy.stubtest", "tuimon._core"], capture_output=True, text=True,
                       cwd=ROOT)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-1000:]


def test_installed_wheel_runs(wheel, tmp_path, reference_summary):
    bin_dir = _fresh_env(tmp_path)
    _install(bin_dir, wheel)
    py = bin_dir / "python"
    # one top-level name, tuimon: the repository's parsers/ and themes/ are installed inside it, so
    # no other distribution's `parsers` or `themes` is shadowed (nor shadows ours)
    code = ("import importlib.util, pathlib, sysconfig, tuimon; from tuimon import parsers, themes; "
            "base = pathlib.Path(tuimon.__file__).parent.parent; "
            "assert base == pathlib.Path(sysconfig.get_paths()['purelib']), base; "
            "assert pathlib.Path(parsers.__file__).parent.parent == base / 'tuimon', parsers.__file__; "
            "assert pathlib.Path(themes.__file__).parent.parent == base / 'tuimon', themes.__file__; "
            "assert not (base / 'parsers').exists() and not (base / 'themes').exists(); "
            "assert importlib.util.find_spec('parsers') is None and importlib.util.find_spec('themes') is None; "
            "assert list(pathlib.Path(themes.__file__).parent.glob('*.tcss')); print('ok')")
    r = subprocess.run([str(py), "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert r.stdout.strip() == "ok", r.stderr
    r = subprocess.run([str(bin_dir / "tuimon"), "--version"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0 and r.stdout.startswith(f"tuimon {VERSION}, engine: core {VERSION} (compiled, release)")
    assert "install: wheel cp311-abi3-" in r.stdout, r.stdout
    r = subprocess.run([str(bin_dir / "tuimon"), "--help"], capture_output=True, text=True)
    for verb in ("watch", "ssh", "summary", "events", "tflops", "demo"):
        assert verb in r.stdout
    r = _summary([str(bin_dir / "tuimon")], tmp_path)
    assert r.returncode == 0 and r.stderr.startswith("tuimon: parsed 1 file") and "warning" not in r.stderr, r.stderr
    _same_figures(r.stdout, reference_summary)


PURE_NOTE = "this tuimon was installed without its compiled core (no Rust toolchain where it was built)"


def _check_pure_install(bin_dir: pathlib.Path, cwd: pathlib.Path, reference) -> None:
    env = _no_cargo_env()
    r = subprocess.run([str(bin_dir / "tuimon"), "--version"], capture_output=True, text=True, cwd=cwd, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"tuimon {VERSION}, engine: python ({PURE_NOTE}), install: wheel py3-none-any"
    r = _summary([str(bin_dir / "tuimon")], cwd, env)
    assert r.returncode == 0, r.stderr
    # said once, and the figures are the core's
    lines = r.stderr.strip().splitlines()
    assert lines[0] == f"tuimon: warning: {PURE_NOTE}; reading with the Python engine (slower)", lines
    assert [line.startswith("tuimon: parsed 1 file") for line in lines[1:]] == [True], lines
    _same_figures(r.stdout, reference)


def test_without_cargo_the_wheel_is_pure_python_and_runs(tmp_path, reference_summary):
    out = tmp_path / "dist"
    r = _pip_wheel(out, _no_cargo_env())
    assert r.returncode == 0, r.stderr[-3000:]
    (whl,) = out.glob("tuimon-*.whl")
    assert whl.name == f"tuimon-{VERSION}-py3-none-any.whl"
    assert "no cargo on PATH: building tuimon without its compiled core" in r.stderr, r.stderr
    names = zipfile.ZipFile(whl).namelist()
    assert not [n for n in names if n.endswith((".so", ".pyd", ".pyc"))], names
    assert "tuimon/parsers/formats/__init__.py" in names and any(n.endswith(".tcss") for n in names)
    bin_dir = _fresh_env(tmp_path)
    _install(bin_dir, whl)  # pip checks the RECORD's hashes and sizes
    _check_pure_install(bin_dir, tmp_path, reference_summary)


def test_an_sdist_installs_where_there_is_no_cargo(tmp_path, reference_summary):
    pytest.importorskip("maturin", reason="building the sdist needs maturin (the test extra installs it)")
    out = tmp_path / "sdist"
    code = f"import sys; sys.path.insert(0, 'buildsys'); import tuimon_build; print(tuimon_build.build_sdist({str(out)!r}))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    sdist = out / r.stdout.strip().splitlines()[-1]
    assert sdist.name == f"tuimon-{VERSION}.tar.gz", sdist
    bin_dir = _fresh_env(tmp_path)
    # pip's isolated build, offline: the backend asks for nothing where cargo is missing
    r = _install(bin_dir, sdist, _no_cargo_env())
    _check_pure_install(bin_dir, tmp_path, reference_summary)


@pytest.mark.slow
def test_the_portable_wheel_installs_where_there_is_no_cargo(tmp_path, reference_summary):
    missing = [m for m in ("maturin", "ziglang", "auditwheel") if importlib.util.find_spec(m) is None]
    if missing:
        pytest.skip(f"the portable wheel needs {', '.join(missing)} (the test extra installs them)")
    env = {**os.environ, "CARGO_TARGET_DIR": str(tmp_path / "target")}  # the checkout's own builds stay warm
    r = subprocess.run([str(ROOT / "contrib" / "build-wheel.sh"), str(tmp_path / "dist")], capture_output=True,
                       text=True, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    whl = pathlib.Path(r.stdout.strip().splitlines()[-1])
    assert whl.name.startswith(f"tuimon-{VERSION}-cp311-abi3-manylinux2014_x86_64.manylinux_2_17_x86_64"), whl
    assert 'consistent with the following platform tag:\n"manylinux_2_17_x86_64"' in r.stderr, r.stderr
    bin_dir = _fresh_env(tmp_path)
    _install(bin_dir, whl, _no_cargo_env())
    r = subprocess.run([str(bin_dir / "tuimon"), "--version"], capture_output=True, text=True, cwd=tmp_path,
                       env=_no_cargo_env())
    assert r.stdout.startswith(f"tuimon {VERSION}, engine: core {VERSION} (compiled, release), install: wheel "
                               "cp311-abi3-manylinux"), r.stdout
    r = _summary([str(bin_dir / "tuimon")], tmp_path, _no_cargo_env())
    assert r.returncode == 0 and r.stderr.startswith("tuimon: parsed 1 file") and "warning" not in r.stderr, r.stderr
    _same_figures(r.stdout, reference_summary)


def test_a_core_built_from_other_sources_is_not_used_and_said_once(tmp_path):
    """A checkout whose core/src changed after its core was built (a git pull without a rebuild): the
    core's readers would be handed declarations they do not know, a traceback mid-read.  tuimon reads
    with Python instead and says why in one line; the same checkout with its own sources uses the core."""
    from tuimon.engine import native

    if native.core is None:
        pytest.skip(f"the compiled core is not importable here ({native.name()}): nothing to find stale")
    checkout = tmp_path / "checkout"
    shutil.copytree(ROOT / "tuimon", checkout / "tuimon", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "core" / "src", checkout / "core" / "src")
    log = tmp_path / "run.log"
    log.write_text(" iteration       10/     100 | elapsed time per iteration (ms): 1000.0 | lm loss: 2.5 |\n")
    env = {k: v for k, v in os.environ.items() if k != "TUIMON_ENGINE"}

    def summary() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "tuimon", "summary", "--no-cache", "--format", "json", str(log)],
                              cwd=checkout, env=env, capture_output=True, text=True, timeout=120)

    same = subprocess.run([sys.executable, "-m", "tuimon", "--version"], cwd=checkout, env=env, capture_output=True,
                          text=True, timeout=60)
    assert "core" in same.stdout and "python (" not in same.stdout, same.stdout
    with open(checkout / "core" / "src" / "lib.rs", "a") as fh:
        fh.write("// changed after the build\n")
    done = summary()
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    said = [line for line in done.stderr.splitlines() if "built from other sources" in line]
    assert len(said) == 1 and "rebuild it" in said[0] and "Python engine" in said[0], done.stderr
    assert json.loads(done.stdout)[0]["last_iteration"] == 10
