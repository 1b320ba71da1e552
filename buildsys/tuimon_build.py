"""tuimon's build backend (PEP 517 and 660): maturin where the compiled core can be built, a pure-Python
wheel where it cannot.

Cluster login nodes often have no Rust toolchain and no way out to fetch one (maturin's own answer,
without cargo, is to download Rust).  tuimon runs on its Python engine alone, slower, and says so
once; so a machine without cargo still installs it: this backend asks for maturin only when cargo is
on PATH, and otherwise writes the wheel itself from pyproject.toml (nothing but the standard library).
A core build that fails falls back the same way, saying why.  ``TUIMON_BUILD=core`` insists on the
core (a failed build is an error), ``TUIMON_BUILD=python`` builds the pure wheel even with cargo.

The portable wheel with the core in it (abi3, manylinux, for machines without a compiler) is built
by ``contrib/build-wheel.sh`` with maturin and zig, not here.
"""
from __future__ import annotations

import base64
import hashlib
import os
import re
import shutil
import sys
import tomllib
import zipfile
from pathlib import Path
from typing import Any, Mapping, Optional

ROOT = Path(__file__).resolve().parent.parent
ENV = "TUIMON_BUILD"
MATURIN = "maturin>=1.5,<2"
TAG = "py3-none-any"


def _choice() -> str:
    choice = os.environ.get(ENV, "").strip().lower() or "auto"
    if choice not in ("auto", "core", "python"):
        raise SystemExit(f"{ENV}={choice!r} is not one of auto, core, python")
    return choice


def _with_core() -> bool:
    """Build with maturin: asked for, or cargo is here and not refused."""
    choice = _choice()
    return choice == "core" or (choice == "auto" and shutil.which("cargo") is not None)


def _say(text: str) -> None:
    sys.stderr.write(f"tuimon build: {text}\n")
    sys.stderr.flush()


def _maturin() -> Any:
    import maturin  # type: ignore[import-untyped]  # only when cargo is here: get_requires_* asked for it

    return maturin


# --- PEP 517 / 660 hooks ------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings: Optional[Mapping[str, Any]] = None) -> list[str]:
    return [MATURIN] if _with_core() else []


get_requires_for_build_editable = get_requires_for_build_wheel


def get_requires_for_build_sdist(config_settings: Optional[Mapping[str, Any]] = None) -> list[str]:
    return [MATURIN]  # an sdist carries core/ as source: maturin writes it (cargo vendors nothing)


def build_sdist(sdist_directory: str, config_settings: Optional[Mapping[str, Any]] = None) -> str:
    return str(_maturin().build_sdist(sdist_directory, config_settings))


def prepare_metadata_for_build_wheel(metadata_directory: str,
                                     config_settings: Optional[Mapping[str, Any]] = None) -> str:
    if _with_core():
        return str(_maturin().prepare_metadata_for_build_wheel(metadata_directory, config_settings))
    return _write_dist_info(Path(metadata_directory), _project())


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory: str, config_settings: Optional[Mapping[str, Any]] = None,
                metadata_directory: Optional[str] = None) -> str:
    return _build(wheel_directory, config_settings, metadata_directory, editable=False)


def build_editable(wheel_directory: str, config_settings: Optional[Mapping[str, Any]] = None,
                   metadata_directory: Optional[str] = None) -> str:
    return _build(wheel_directory, config_settings, metadata_directory, editable=True)


def _build(wheel_directory: str, config_settings: Optional[Mapping[str, Any]], metadata_directory: Optional[str],
           editable: bool) -> str:
    if _with_core():
        m = _maturin()
        try:
            if editable:
                return str(m.build_editable(wheel_directory, config_settings, metadata_directory))
            return str(m.build_wheel(wheel_directory, config_settings, metadata_directory))
        except (SystemExit, OSError) as exc:  # maturin exits 1 on a failed cargo build
            if _choice() == "core":
                raise
            _say(f"the compiled core did not build ({exc!r}, cargo's output above); "
                 f"building the Python engine alone ({ENV}=core makes this an error)")
    else:
        _say("no cargo on PATH: building tuimon without its compiled core; it reads with the Python "
             "engine (slower). Install Rust (rustup) and reinstall for the core, or install the "
             "portable wheel that contrib/build-wheel.sh builds")
    return _pure_wheel(Path(wheel_directory), _project(), editable)


# --- the pure-Python wheel ----------------------------------------------------------------------

def _project() -> dict[str, Any]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    project = dict(meta["project"])
    cargo = tomllib.loads((ROOT / "core" / "Cargo.toml").read_text(encoding="utf-8"))
    project["version"] = cargo["package"]["version"]  # the one place it is written (maturin reads it too)
    return project


def _dist_name(project: Mapping[str, Any]) -> str:
    return f"{re.sub(r'[-_.]+', '_', project['name']).lower()}-{project['version']}"


def _metadata(project: Mapping[str, Any]) -> str:
    lines = ["Metadata-Version: 2.4", f"Name: {project['name']}", f"Version: {project['version']}",
             f"Summary: {project['description']}", f"Requires-Python: {project['requires-python']}"]
    license_ = project.get("license")
    if isinstance(license_, dict) and "text" in license_:
        lines.append(f"License: {license_['text']}")
    lines += [f"License-File: {name}" for name in project.get("license-files", [])]
    lines += [f"Requires-Dist: {req}" for req in project.get("dependencies", [])]
    for extra, reqs in project.get("optional-dependencies", {}).items():
        lines.append(f"Provides-Extra: {extra}")
        lines += [f"Requires-Dist: {req}; extra == \"{extra}\"" for req in reqs]
    readme = project.get("readme")
    body = ""
    if isinstance(readme, str):
        lines.append("Description-Content-Type: text/markdown")
        body = (ROOT / readme).read_text(encoding="utf-8")
    return "\n".join(lines) + "\n\n" + body


def _dist_info_files(project: Mapping[str, Any]) -> dict[str, bytes]:
    files = {"METADATA": _metadata(project).encode(),
             "WHEEL": (f"Wheel-Version: 1.0\nGenerator: tuimon_build\nRoot-Is-Purelib: true\nTag: {TAG}\n").encode()}
    scripts = project.get("scripts", {})
    if scripts:
        files["entry_points.txt"] = ("[console_scripts]\n"
                                     + "".join(f"{k} = {v}\n" for k, v in scripts.items())).encode()
    for name in project.get("license-files", []):
        files[f"licenses/{name}"] = (ROOT / name).read_bytes()
    return files


def _write_dist_info(directory: Path, project: Mapping[str, Any]) -> str:
    info = f"{_dist_name(project)}.dist-info"
    for name, data in _dist_info_files(project).items():
        path = directory / info / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return info


def _package_files() -> list[Path]:
    """tuimon/ as the wheel ships it: sources, formats, themes; no bytecode, no compiled core (a stale
    ``_core*.so`` from an editable build must not ride in a wheel that says it has none)."""
    out = []
    for path in sorted((ROOT / "tuimon").rglob("*")):
        rel = path.relative_to(ROOT)
        if path.is_dir() or "__pycache__" in rel.parts or path.suffix in (".pyc", ".so", ".pyd"):
            continue
        out.append(path)
    return out


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def _pure_wheel(directory: Path, project: Mapping[str, Any], editable: bool) -> str:
    dist = _dist_name(project)
    wheel_name = f"{dist}-{TAG}.whl"
    members: list[tuple[str, bytes]] = []
    if editable:  # PEP 660: the checkout itself on sys.path
        members.append((f"_{dist.split('-')[0]}_editable.pth", f"{ROOT}\n".encode()))
    else:
        members += [(path.relative_to(ROOT).as_posix(), path.read_bytes()) for path in _package_files()]
    info = f"{dist}.dist-info"
    members += [(f"{info}/{name}", data) for name, data in _dist_info_files(project).items()]
    record = "".join(_record_line(name, data) + "\n" for name, data in members) + f"{info}/RECORD,,\n"
    directory.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(directory / wheel_name, "w", compression=zipfile.ZIP_DEFLATED) as whl:
        for name, data in [*members, (f"{info}/RECORD", record.encode())]:
            entry = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # reproducible: no build time
            entry.external_attr = 0o644 << 16
            whl.writestr(entry, data, zipfile.ZIP_DEFLATED)
    return wheel_name
