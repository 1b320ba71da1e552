"""tuimon: live terminal monitor for distributed deep-learning training logs."""
from typing import Any


def __getattr__(name: str) -> Any:
    # The version is written in one place, core/Cargo.toml: both build paths (maturin, and the pure-Python
    # wheel of buildsys/) put it in the install's metadata, read here once, when first asked for.
    if name == "__version__":
        try:  # the compiled core carries it (and is loaded to read logs anyway): no metadata scan
            from ._core import __version__ as found
        except ImportError:
            from importlib.metadata import PackageNotFoundError, version
            try:
                found = version("tuimon")
            except PackageNotFoundError:  # imported from a checkout that was never installed
                found = "0+unknown"
        globals()["__version__"] = found
        return found
    raise AttributeError(f"module 'tuimon' has no attribute {name!r}")
