"""The multi-pattern scanner finds exactly the lines the stdlib scanner finds."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from parsers import ALL_PARSERS
from parsers.events import expand
from parsers.lanes import group_by
from parsers.triggers import FindScanner, leading_literal, lines_of, literal_of, required_literal
from tests.conftest import SHARED
from tuimon import scan
from tuimon.sources.framing import Framer

TRIGGERS = tuple(p for cls in ALL_PARSERS for p, _ in cls.ROUTES)
needs_ac = pytest.mark.skipif(scan.ahocorasick_rs is None, reason="SKIPPED: ahocorasick_rs is not installed")


def norm(hits):
    return {start: sorted(set(ids)) for start, ids in hits.items()}


def same_lines(scanner, text):
    """The scanner's lines (ends and line numbers too) are the stdlib scanner's."""
    found = scanner.lines(text)
    ref = lines_of(text, FindScanner(scanner.triggers).scan(text))
    assert found[:5] == ref[:5]  # heads are the scanner's own extra (tests/test_heads.py)
    if found.groups is not None:  # rows by trigger, as the dispatcher would group them itself
        assert not found.more
        assert list(found.groups.items()) == list(group_by(found.firsts).items())
    hits = FindScanner(scanner.triggers).scan(text)
    assert ref[2] == [min(hits[start]) for start in ref[0]]  # the reference itself, from the hits
    assert ref[4] == {row: sorted(set(hits[start])) for row, start in enumerate(ref[0]) if len(set(hits[start])) > 1}
    if text.isascii():  # the framing's bytes and newlines, handed over, change nothing (heads included)
        data = text.encode("ascii")
        assert scanner.lines(text, (data, np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10))) == found
    return len(found[0])


@pytest.mark.parametrize("pattern,required,leading", [
    (r"iteration[ =]+\d+/", "iteration", "iteration"),
    (r"\] - RANK: \d", "] - RANK: ", "] - RANK: "),
    (r"step=\d+, skipped=", ", skipped=", "step="),
    (r"ab+cde", "cde", "a"),
    (r" arguments -{3}", " arguments ", " arguments "),
    (r"building (?:GPT|BERT|T5)", "building ", "building "),
    (r"--(?:num-layers|hidden-size)[ =]\d", None, "--"),
    (r"a|bcd", None, ""),
    (r"(?i)abcd", None, ""),
    (r"x[)(|]yzw", "yzw", "x"),
    (r"Error\n", "Error", "Error"),
])
def test_literals_read_off_patterns(pattern, required, leading):
    assert required_literal(pattern) == required
    assert leading_literal(pattern) == leading


def test_literal_of_only_for_plain_text():
    assert literal_of(r"time \(ms\)") == "time (ms)"
    assert literal_of(r"x{2}y") is None and literal_of(r"\d") is None


@needs_ac
def test_every_trigger_is_anchored_or_scanned():
    s = scan.AnchorScanner(TRIGGERS)
    anchored = {idx for group in s._confirm for idx, _, _ in group}
    regex_only = {idx for idx, _ in s._regex_only}
    assert anchored | regex_only == set(range(len(TRIGGERS))) and not anchored & regex_only
    assert not regex_only  # the point is one pass: every trigger has an anchor


FRAGMENTS = [p.replace("\\", "").replace("[ =]+", " ").replace("\\d+", "7").replace("\\d", "3")
             for p in TRIGGERS] + ["iteration    12/ 100 |", "iteration=5/9|", "nccl", "ncclInternalError", "Error",
                                   "Exception", "\u00e9t\u00e9", "\u2400", "time (ms", "..: (", "] - RANK: x"]


@needs_ac
@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), max_size=6), max_size=12))
def test_same_hits_as_stdlib_scanner_on_generated_lines(lines):
    text = "".join("".join(parts).replace("\n", " ") + "\n" for parts in lines)
    assert norm(scan.AnchorScanner(TRIGGERS).scan(text)) == norm(FindScanner(TRIGGERS).scan(text))
    same_lines(scan.AnchorScanner(TRIGGERS), text)
    same_lines(scan.AnchorScanner(TRIGGERS), text.rstrip("\n"))  # a last line without its newline
    same_lines(scan.AnchorScanner(TRIGGERS), text.encode("ascii", "replace").decode())  # the bytes path


def overlapped_anchors() -> list[str]:
    """Lines where one anchor starts inside another: a leftmost scan passes over the
    second, so the scanner must find it some other way."""
    anchors = scan.AnchorScanner(TRIGGERS)._anchors
    lines = []
    for a in anchors:
        for b in anchors:
            for off in range(1, len(a)):
                if b.startswith(a[off:off + len(b)]):
                    lines.append("x " + a[:off] + b + " 7 |" if len(b) > len(a) - off else "x " + a + " 7 |")
    return lines


@needs_ac
def test_same_hits_where_anchors_overlap():
    lines = overlapped_anchors()
    assert len(lines) > 20  # the trigger set has such pairs: this test is not vacuous
    text = "".join(line + "\n" for line in lines)
    assert norm(scan.AnchorScanner(TRIGGERS).scan(text)) == norm(FindScanner(TRIGGERS).scan(text))
    same_lines(scan.AnchorScanner(TRIGGERS), text)


CORPUS = sorted((SHARED / "corpus").rglob("*.log")) if (SHARED / "corpus").exists() else []


@needs_ac
def test_same_hits_as_stdlib_scanner_on_the_corpus():
    if not CORPUS:
        pytest.skip(f"SKIPPED: {SHARED / 'corpus'} not found")
    ac, ref = scan.AnchorScanner(TRIGGERS), FindScanner(TRIGGERS)
    lines = 0
    for path in CORPUS:
        f = Framer()
        block = f.feed(path.read_bytes())
        text = block.text + f.flush().text
        if block.layout is not None:  # what the framing hands the scanner is the block's own
            data, newlines = block.layout
            assert data.decode("ascii") == block.text
            assert newlines.tolist() == [i for i, ch in enumerate(block.text) if ch == "\n"]
            assert ac.lines(block.text, block.layout) == ac.lines(block.text)
        hits = norm(ac.scan(text))
        assert hits == norm(ref.scan(text)), path
        same_lines(ac, text)
        lines += len(hits)
    assert lines > 10_000


@pytest.mark.parametrize("pattern,anchors", [
    (r"iteration[ =]+\d+/", ["iteration ", "iteration="]),
    (r"abc[de]?x", ["abc"]),
    (r"abc[de]*x", ["abc"]),
    (r"x(abc)abc[de]", ["abc"]),  # spelled twice: not extended
    (r"nccl[A-Z]", ["nccl"]),
    (r"--(?:num-layers|hidden_size)[ =]\d", ["--num-layers", "--hidden_size"]),  # plain choices
    (r"(?:abc|def)|xyz", None),  # a top-level choice: no text every match needs
    (r"x(?:ab|c)?", None),  # the choice is optional
    (r"x(?:ab|c)", None),  # "xc" is too short to be worth scanning for
])
def test_anchors_extend_over_a_small_class_or_choice(pattern, anchors):
    from parsers.triggers import required_anchors
    assert required_anchors(pattern) == anchors


def test_without_the_native_scanner_parsing_is_the_same(monkeypatch):
    """Where the ahocorasick-rs wheel is missing, the stdlib scanner takes over."""
    from tests.conftest import FIXTURES
    from tuimon.ingest import parse_file

    path = FIXTURES / "stronghold-run.log"
    with_ac, _ = parse_file(path)
    monkeypatch.setattr(scan, "ahocorasick_rs", None)
    scan.trigger_scanner.cache_clear()
    try:
        assert isinstance(scan.trigger_scanner(TRIGGERS), FindScanner)
        without, _ = parse_file(path)
    finally:
        scan.trigger_scanner.cache_clear()
    assert [e.to_dict() for e in without] == [e.to_dict() for e in with_ac]


@needs_ac
def test_lines_holding_an_anchor_twice():
    """A regex trigger is confirmed at a line's first anchor, and at the next ones
    only where that failed: whichever holds the match, the line is found once."""
    lines = ["elapsed time per iteration (ms): 5 | iteration 7/ 10 |",  # the second one matches
             " iteration 7/ 10 | elapsed time per iteration (ms): 5 |",  # the first one matches
             "iteration 1/ 2 | iteration 3/ 4 |",  # both
             "per iteration (ms) and per iteration (s)",  # neither
             "lr step= 3 step=4, skipped=0 step=",  # the anchor of another trigger, twice
             "time (ms) | a: 1 | time (ms) | b: 2",
             "x time (ms) y time (ms)"]
    text = "".join(line + "\n" for line in lines * 3)
    assert norm(scan.AnchorScanner(TRIGGERS).scan(text)) == norm(FindScanner(TRIGGERS).scan(text))
    same_lines(scan.AnchorScanner(TRIGGERS), text)
    found = scan.AnchorScanner(TRIGGERS).scan(text)
    assert {start // 1 for start in found} >= {text.index(lines[0]), text.index(lines[2]), text.index(lines[4])}


SNIFFING = [cls for cls in ALL_PARSERS if cls.SNIFF is not None]
SNIFF_FRAGMENTS = sorted({n for cls in SNIFFING for n in cls.SNIFF.needles or ()}) + [
    "7", " ", "log_dist]", ":stop]", "-----", "|", "\n", "[logging.py:12:log_dist]", "iteration 3/ 9 |"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(SNIFF_FRAGMENTS), st.text(max_size=5)), max_size=12).map("".join))
def test_sniff_finds_what_its_regex_finds(text):
    """A SNIFF runs its regex only where one of the texts its matches need appears:
    it switches a parser on exactly where the plain regex would."""
    assert SNIFFING and all(cls.SNIFF.needles for cls in SNIFFING)  # every SNIFF is prefiltered
    for cls in SNIFFING:
        assert bool(cls.SNIFF.search(text)) == bool(cls.SNIFF.regex.search(text)), cls.__name__


def test_sniff_on_the_corpus():
    files = sorted((SHARED / "corpus").rglob("*.log")) if (SHARED / "corpus").exists() else []
    if not files:
        pytest.skip(f"SKIPPED LOUDLY: no corpus at {SHARED / 'corpus'}")
    for path in files:
        text = path.read_text(errors="replace")[:1 << 20]
        for cls in SNIFFING:
            assert bool(cls.SNIFF.search(text)) == bool(cls.SNIFF.regex.search(text)), (path, cls.__name__)


@pytest.mark.parametrize("scanner", ["stdlib", "aho-corasick"])
def test_dormant_parsers_are_woken_by_the_scan_of_their_block(scanner):
    """A dormant parser's SNIFF patterns are looked for in the scan of each block
    (beside the active parsers' triggers): found anywhere in a block, the parser is
    on for the whole block, its first line included; never found, it stays dormant."""
    from parsers import parser_set
    from tuimon.scan import trigger_scanner
    ps = parser_set("run.log", scanner=trigger_scanner if scanner == "aho-corasick" else None, lanes=True)
    chatter = "".join(f"chatter {i}\n" for i in range(50))
    assert ps.feed_block(chatter, 1) == [] and "megatron" not in ps.active_names
    block = ("[Rank 0] (after 10 iterations) memory (MB) | allocated: 10.5 | max allocated: 20.0 | "
             "reserved: 30.0 | max reserved: 31.0\n" + chatter +
             " iteration       10/     100 | elapsed time per iteration (ms): 5.0 | lm loss: 1.0 |\n")
    events = expand(ps.feed_block(block, 51))
    assert "megatron" in ps.active_names and "deepspeed" not in ps.active_names
    assert [(e.type, e.line) for e in events if e.type in ("memory", "iteration")] == [("memory", 51),
                                                                                        ("iteration", 102)]
    ds = "[2024-01-01 10:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=3, skipped=0, lr=[0.1]\n"
    events = expand(ps.feed_block(ds, 103))
    assert "deepspeed" in ps.active_names and [e.type for e in events if e.type == "step"] == ["step"]


@needs_ac
@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=6)), max_size=6), max_size=12),
       st.sampled_from([1, 5, 16, 40]))
def test_anchors_split_between_automata_find_the_same_lines(lines, per_automaton):
    """Past scan.MAX_PACKED anchors the scanner runs several automata and merges
    their matches (overlaps looked for within each): the lines found are the
    stdlib scanner's, at any split."""
    size = per_automaton
    text = "".join("".join(parts).replace("\n", " ") + "\n" for parts in lines)
    saved = scan.MAX_PACKED
    scan.MAX_PACKED = size
    try:
        scanner = scan.AnchorScanner(TRIGGERS)
    finally:
        scan.MAX_PACKED = saved
    assert len(scanner._parts) == -(-len(scanner._anchors) // size)
    assert norm(scanner.scan(text)) == norm(FindScanner(TRIGGERS).scan(text))
    same_lines(scanner, text)
    same_lines(scanner, text.encode("ascii", "replace").decode())


@needs_ac
def test_anchors_held_by_other_anchors_are_found_through_them():
    """'> building train, validation' holds 'building ': only the shorter one is
    looked for, and the longer trigger is confirmed on its lines."""
    s = scan.AnchorScanner(("building ", "> building train, validation", "Error:", r"Error\n"))
    assert sorted(s._anchors) == ["Error", "building "]
    text = "> building train, validation, and test datasets ...\nbuilding GPT model\nError: x\nno Error\n"
    assert norm(s.scan(text)) == norm(FindScanner(s.triggers).scan(text))
    same_lines(s, text)


@needs_ac
def test_the_common_parser_sets_fit_one_automaton():
    """aho-corasick's packed search takes at most 64 patterns (MAX_PACKED): a
    65th made the scan of a 1 MB block four times slower.  A file of one framework,
    or Megatron-DeepSpeed's (Megatron, DeepSpeed and timers on), fits one automaton;
    a parser or pattern more must stay within it (or make a second automaton)."""
    from parsers.dispatch import ParserSet
    by_name = {cls.name: cls for cls in ALL_PARSERS}
    for woken in ([], ["megatron"], ["deepspeed"], ["megatron", "timers"], ["megatron", "deepspeed", "timers"],
                  ["hf-trainer"], ["torchtitan"], ["mlperf"], ["progress"]):
        ps = ParserSet("x.log", ALL_PARSERS, scanner=scan.trigger_scanner)
        ps._wake([by_name[n] for n in woken])
        assert len(ps._scanner._parts) == 1, (woken, len(ps._scanner._anchors))
