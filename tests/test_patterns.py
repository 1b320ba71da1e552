"""Regexes compiled on first use (tuimon.parsers.patterns) and the anchors read off them at start."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tuimon.engine import anchors
from tuimon.engine.rules import anchors_of
from tuimon.parsers import ALL_PARSERS
from tuimon.parsers.patterns import LazyPattern, lazy

ROOT = Path(__file__).resolve().parents[1]

TEXTS = ["", "iteration 5/ 10 |", "a\nb\nc", "ERROR: x\nKilled\n", "é ü \x00 tab\t", "aaa" * 50]
SOURCES = [r"iteration[ =]+(\d+)/ *(\d+) *\|", r"^Killed$", r"(?P<k>\w+): (?P<v>[\d.]+)", r"a|b", r"\s+", "é"]


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize("flags", [0, re.MULTILINE, re.IGNORECASE])
def test_a_lazy_pattern_answers_as_the_compiled_one(source, flags):
    eager = re.compile(source, flags)
    for text in TEXTS:
        pat = lazy(source, flags)  # fresh each time: each method may be the first use
        assert pat.pattern == source and pat.pattern == eager.pattern
        assert type(pat) is LazyPattern and pat._compiled is None  # reading the source compiles nothing
        for call in (lambda p: p.search(text), lambda p: p.match(text), lambda p: p.fullmatch(text)):
            a, b = call(pat), call(eager)
            assert (a and (a.span(), a.groups())) == (b and (b.span(), b.groups()))
        assert pat.findall(text) == eager.findall(text)
        assert [m.span() for m in pat.finditer(text, 1)] == [m.span() for m in eager.finditer(text, 1)]
        assert pat.sub("<>", text) == eager.sub("<>", text) and pat.split(text) == eager.split(text)
        assert pat.subn("", text, 1) == eager.subn("", text, 1)
        assert (pat.flags, pat.groups, dict(pat.groupindex)) == (eager.flags, eager.groups, dict(eager.groupindex))
        assert pat.compiled() is pat._compiled and isinstance(pat.compiled(), re.Pattern)


def test_a_lazy_pattern_is_compiled_once_and_fails_as_re_does():
    pat = lazy(rb"(\d+) ms")
    assert pat.search(b"took 12 ms").group(1) == b"12"
    first = pat._compiled
    assert pat.match(b"3 ms") and pat._compiled is first and pat.compiled() is first
    with pytest.raises(AttributeError):
        pat.no_such_method  # noqa: B018
    broken = lazy("(unclosed")
    with pytest.raises(re.error):
        broken.search("x")
    assert repr(lazy("a+")) == "lazy('a+')"


def _module_level_compiles(path: Path) -> list[int]:
    tree = ast.parse(path.read_text())
    found = []
    for node in tree.body:
        for sub in ast.walk(node) if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Expr)) else ():
            if (isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "compile"
                    and isinstance(sub.func.value, ast.Name) and sub.func.value.id == "re"):
                found.append(sub.lineno)
    return found


def test_no_reader_compiles_a_regex_as_its_module_is_imported():
    """Every start imports every reader; a regex compiled at import is paid by each start even where
    no line needs it (250 of them were 15-20 ms of a 100-line summary): they are :func:`lazy`."""
    bad = [f"{path.relative_to(ROOT)}:{line}" for pkg in ("parsers", "engine")
           for path in sorted((ROOT / "tuimon" / pkg).rglob("*.py")) for line in _module_level_compiles(path)]
    assert not bad, f"re.compile at import (use tuimon.parsers.patterns.lazy): {bad}"


def test_importing_the_readers_compiles_none_of_their_regexes():
    code = ("import sys, tuimon.engine.catalog, tuimon.engine.ingest\n"
            "from tuimon.parsers.patterns import LazyPattern\n"
            "seen = [v for m in list(sys.modules.values()) if m and m.__name__.startswith('tuimon')\n"
            "        for v in vars(m).values() if isinstance(v, LazyPattern)]\n"
            "print(len(seen), sum(v._compiled is not None for v in seen))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    held, done = map(int, out.stdout.split())
    assert held >= 100 and done == 0, out.stdout


def _run_ends_everywhere(pattern: str, run: str) -> list[int]:
    """The definition: every offset tried."""
    return [at + len(anchors._prefix_for(pattern[at:], run)) for at in range(len(pattern))
            if anchors.literal_of(anchors._prefix_for(pattern[at:], run)) == run]


def _builtin_regexes() -> list[str]:
    found = {trigger for cls in ALL_PARSERS for trigger, _ in cls.ROUTES}
    for module in list(sys.modules.values()):
        if module and module.__name__.startswith("tuimon.parsers"):
            found.update(v.pattern for v in vars(module).values()
                         if isinstance(v, LazyPattern) and isinstance(v.pattern, str))
    return sorted(found)


def test_run_ends_of_every_builtin_regex_are_the_definitions():
    regexes = _builtin_regexes()
    assert len(regexes) > 150
    tried = 0
    for pattern in regexes:
        for run in anchors._literal_runs(pattern) or ():
            assert anchors._run_ends(pattern, run) == _run_ends_everywhere(pattern, run), (pattern, run)
            tried += 1
        anchors_of(pattern)  # and no regex of ours trips the reading
    assert tried > 150


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab\\.[]()|*+?{}1 -", max_size=24), st.text(alphabet="ab\\.-[ ", min_size=1, max_size=4))
def test_run_ends_are_the_definitions(pattern, run):
    assert anchors._run_ends(pattern, run) == _run_ends_everywhere(pattern, run)
