"""Regexes compiled when first used, not when their module is imported.

tuimon's readers hold some 250 regexes, most of them for lines a given log never has
(another framework's, a failure's).  Compiled at import they were 15-20 ms of every start:
a tenth of ``tuimon summary`` of a 100-line file.  :func:`lazy` gives an object that
compiles its pattern on the first attribute asked of it other than ``pattern``, then holds
the compiled pattern's methods as its own attributes, so a later ``search`` is one
attribute lookup, as on an ``re.Pattern``.

Only attribute use is lazy: ``re.sub(lazy(p), ...)`` and ``isinstance(x, re.Pattern)``
need the ``re.Pattern`` itself (:meth:`LazyPattern.compiled`); no reader does either.
"""
from __future__ import annotations

import re
from typing import Any, AnyStr, Generic, Union, overload

#: the ``re.Pattern`` attributes a compiled pattern's first use copies onto the lazy one
_COPIED = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split",
           "scanner", "flags", "groups", "groupindex")


class LazyPattern(Generic[AnyStr]):
    """A regex that is compiled by its first use (see the module's docstring)."""

    def __init__(self, pattern: AnyStr, flags: int = 0) -> None:
        self.pattern: AnyStr = pattern  # read without compiling: the anchors and the core read the source
        self._flags = flags
        self._compiled: Union[re.Pattern[AnyStr], None] = None

    def compiled(self) -> re.Pattern[AnyStr]:
        if self._compiled is None:
            self._compiled = compiled = re.compile(self.pattern, self._flags)
            for name in _COPIED:
                setattr(self, name, getattr(compiled, name))
        return self._compiled

    def __getattr__(self, name: str) -> Any:
        # called only for an attribute not set yet: the first use of one of _COPIED
        if name.startswith("__") or name not in _COPIED:
            raise AttributeError(name)
        return getattr(self.compiled(), name)

    def __repr__(self) -> str:
        return f"lazy({self.pattern!r})"


@overload
def lazy(pattern: str, flags: int = 0) -> re.Pattern[str]: ...
@overload
def lazy(pattern: bytes, flags: int = 0) -> re.Pattern[bytes]: ...
def lazy(pattern: Union[str, bytes], flags: int = 0) -> Any:
    """``re.compile(pattern, flags)``, done when the pattern is first used."""
    # typed as the pattern it stands for: its users call re.Pattern's methods on it
    return LazyPattern(pattern, flags)
