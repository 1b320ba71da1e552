"""The block engine: where blocks end never changes what a file gives; a hook that
raises is counted and reported, never silently dropped; rules are skipped on blocks
without their anchors but never miss a line."""
from __future__ import annotations

import random

import pytest

from tuimon.parsers.megatron import MegatronParser
from tests.conftest import FIXTURE_LOGS, SHARED
from tuimon.commands.cli import _report
from tuimon.engine.ingest import FileParser, ParseStats, parse_file
from tuimon.parsers.columns import expand

CORPUS = sorted((SHARED / "corpus").rglob("*.log"))[::7] if (SHARED / "corpus").exists() else []


def _chunked(path, seed: int) -> list[dict]:
    """Events of ``path`` fed in random pieces (1 byte to 1 MB; seed 0: one piece),
    with every parser its text switches on woken first: when a parser wakes depends
    on the block its SNIFF shows up in (it then reads that whole block), and this
    test is about the rest."""
    rng = random.Random(seed)
    data = path.read_bytes()
    fp = FileParser(str(path))
    fp.engine.sniff(data.decode("utf-8", "replace"))
    events, at = [], 0
    while at < len(data):
        step = rng.choice((1, 7, 100, 4096, 65536, 1 << 20)) if seed else len(data)
        events += fp.feed(data[at:at + step])
        at += step
    return [e.to_dict() for e in expand(events + fp.finish())]


@pytest.mark.parametrize("path", FIXTURE_LOGS + CORPUS, ids=lambda p: p.name)
def test_block_boundaries_do_not_matter(path):
    whole = _chunked(path, 0)
    assert whole, "every one of these files gives events"
    for seed in (1, 2):
        assert _chunked(path, seed) == whole


def test_a_hook_that_raises_is_counted_and_reported(tmp_path, monkeypatch, capsys):
    def broken(self, body, ctx):
        raise ValueError("a parser bug")

    monkeypatch.setattr(MegatronParser, "_on_effective", broken)  # (the Python engine's reader)
    monkeypatch.setattr(MegatronParser, "effective_into", broken)  # (the core's lines' maker)
    log = tmp_path / "run.log"
    log.write_text(" iteration 1/ 10 | elapsed time per iteration (ms): 5.0 | lm loss: 1.0 |\n"
                   "Effective Tera Flops per GPU: 41.9 and total parameters 52.0 B\n" * 3)
    events, stats = parse_file(log)
    assert stats.failed == 3
    assert [e.iteration for e in events if e.type == "iteration"] == [1, 1, 1], "the other lines still count"
    _report(stats, 1, 0.1)
    assert "3 lines failed to parse" in capsys.readouterr().err
    _report(ParseStats(lines=5), 1, 0.1)
    assert "failed" not in capsys.readouterr().err


def test_every_trigger_has_a_presence_test_and_it_never_drops_a_match():
    """A rule runs its regex on a block only when one of its anchors is there. A trigger
    whose only literal is short (DeepSpeed's ``^\\}\\s*$``) gets that short anchor: without
    it the regex scanned every block of every log (10 ms a MB on a Megatron log)."""
    import re

    from tuimon.engine import catalog
    from tuimon.engine.rules import anchors_of

    assert anchors_of(r"^\}\s*$") == ("}",)
    assert anchors_of(r"(?:zero_config \.+ |json = )\{\s*$") == ("{",)
    assert anchors_of(r"iteration[ =]+\d+/") == ("iteration ", "iteration=")
    lines = {str(p): p.read_text(errors="replace").splitlines() for p in FIXTURE_LOGS}
    triggers = {t for cls in catalog.current().parsers for t, _ in cls.ROUTES}
    assert r"(?:^|:) ?\}[ \t\r]*$" in triggers and anchors_of(r"(?:^|:) ?\}[ \t\r]*$") == ("}",)
    for trigger in triggers:
        anchors = anchors_of(trigger)
        if anchors is None:
            continue
        rx = re.compile(trigger)
        for name, text in lines.items():
            for line in text:
                if rx.search(line):
                    assert any(a in line for a in anchors), (trigger, anchors, name, line)


def test_every_built_in_block_finds_its_markers_and_pairs_by_literals():
    """A block entry whose begin or end regex has no literal the engine can read off is looked for
    on every line of every log (a dash rule written ``-{10,}`` cost 20-60 % more CPU on every
    shape); its pairs' anchor is looked for between its markers only, never in the block scan."""
    from tuimon.engine import catalog
    from tuimon.engine.block_rules import BlockRule, BlockState

    formats = catalog.current().builtin
    entries = [(fmt, entry) for fmt in formats for entry in fmt.blocks]
    assert len(entries) >= 2
    for fmt, entry in entries:
        rule = BlockRule(fmt, entry, 0, BlockState(), "x.log")
        assert rule.markers, (fmt.name, entry.begin, entry.end)
        assert rule.literals_of(entry) == rule.markers and all(len(m) >= 3 for m in rule.markers), (fmt.name, rule.markers)


def test_a_regex_run_on_its_anchors_lines_finds_what_a_scan_of_the_block_finds(monkeypatch):
    """Where a rule's anchors are rare, its regex runs only on the lines holding them;
    the matches must be those a search over the whole block gives, at line ends too
    (a lookahead seeing the newline, a match that would run into the next line)."""
    from tuimon.parsers.schema import Format, compile_line
    from tuimon.engine import blocks, rules

    regexes = [r'^\s*"(stage|device)": (\d+)', r"(?<![\w-])(bf16|fp16)=True,", r"x(\d+)(?=\s)", r"x(\d+)\s+y",
               r"(ab)?c", r"^\}\s*$"]
    pieces = ['  "stage": 3', '"device": 1', "bf16=True,", "-fp16=True,", "x12", "x7 y", "x7", "y", "c", "abc",
              "}", "}  ", " }", "noise", "", "\t"]
    rng = random.Random(5)
    for _ in range(400):
        text = "\n".join(" ".join(rng.choice(pieces) for _ in range(rng.randint(1, 3)))
                         for _ in range(rng.randint(1, 12))) + rng.choice(["\n", ""])
        for regex in regexes:
            fmt = Format(name="t", description="", lines=(compile_line({"event": "failure", "regex": regex}),))
            rule = blocks.DataRule(fmt, fmt.lines[0], False, 0)
            hook = rules.HookRule(regex, "print", (0, 0))
            assert rule.anchors and hook.anchors
            rule.by_line = hook.by_line = True  # as for a regex re cannot find by a literal prefix
            found: dict[bool, tuple[list, list]] = {}
            for few in (True, False):
                if not few:
                    monkeypatch.setattr(blocks, "lines_holding", lambda *a, **k: None)
                    monkeypatch.setattr(rules, "lines_holding", lambda *a, **k: None)
                data: list = []
                blocks._data_hits(text, rule, data)
                lines: list = []
                hook.lines(text, 0, lines)
                found[few] = ([(s, m.span(), m.groups()) for s, _, _, m in data], [s for s, *_ in lines])
                monkeypatch.undo()
            assert found[True] == found[False], (regex, text)
    assert rules.lines_holding("a\nb\n" * 10_000, ("a",)) is None  # too many: the regex scans the block


def test_a_dormant_parser_s_sniff_has_a_presence_test():
    """A parser that a log does not use is woken by its SNIFF, which must not scan every
    block of every log: each pattern has texts one of which a match holds (a SNIFF with
    an alternation of two shapes cost every DeepSpeed-timer log 7 % of its parse)."""
    from tuimon.parsers import ALL_PARSERS
    from tuimon.engine.blocks import _sniff_needles

    for cls in ALL_PARSERS:
        if cls.SNIFF is not None:
            assert _sniff_needles(cls), cls.name


def test_the_literals_a_block_holds_are_found_in_one_pass_as_asking_each_would():
    """Presence answers which of many literals a block holds (one pass over its byte
    pairs, then an exact look at the few that may be there): the same set as asking
    each literal, for blocks small and large, ASCII or not, and one-byte literals."""
    from tuimon.engine.presence import SMALL, Presence

    rng = random.Random(11)
    alphabet = "abcdefgh |:=-()\n0123456789é█\ufffd"
    literals = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 6))) for _ in range(300)]
    literals += ["time (ms)", "iteration ", "}", "█", "é=", "Xid (PCI:"]
    presence = Presence(literals)
    for size in (0, 10, 1000, SMALL + 1, 200_000):
        for _ in range(3):
            text = "".join(rng.choice(alphabet) for _ in range(size))
            assert presence.of(text) == {lit for lit in set(literals) if lit in text}
    text = "x" * SMALL + "time (ms) | forward: 1.0\n"
    assert presence.of(text) >= {"time (ms)"} and "Xid (PCI:" not in presence.of(text)


def test_one_line_holding_two_ranks_memory_reports_gives_two_events(tmp_path):
    """Ranks printing at once write two reports on one physical line (2021 BigScience logs):
    each is its own rank with its own values, not the first rank with the last one's values."""
    line = ("[Rank 0] (after 1 iterations) memory (MB) | allocated: 15382.8 | max allocated: 19070.7 | "
            "reserved: 26762.0 | max reserved: 26762.0[Rank 3] (after 1 iterations) memory (MB) | allocated: 1.5 | "
            "max allocated: 2.5 | reserved: 3.5 | max reserved: 4.5\n")
    log = tmp_path / "mem.log"
    log.write_text(" iteration        1/      10 | lm loss: 1.0 |\n" + line)
    events, _ = parse_file(log)
    mem = [(e.rank, e.gpu_allocated_mb, e.gpu_max_allocated_mb, e.gpu_reserved_mb, e.gpu_max_reserved_mb, e.line)
           for e in events if e.type == "memory"]
    assert mem == [(0, 15382.8, 19070.7, 26762.0, 26762.0, 2), (3, 1.5, 2.5, 3.5, 4.5, 2)]
