"""The scanner's bulk reading of line heads answers what the line-by-line tests answer."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from parsers.prefix import may_have_prefix
from parsers.timestamps import line_stamp
from tuimon.heads import read_heads

HEADS = ["[2022-06-29 01:26:11,085] [INFO] x", "[2022-06-29 01:26:11] x", "2021-05-27T21:42:11 x",
         " [2026-04-15 11:19:02.524672] iteration", " 2026-04-15 11:19:02 x", "[titan] 2026-05-19 23:02:48,804 - r",
         "[2022-13-29 01:26:11,085] bad month", "[0000-01-01 00:00:00] year 0", "[2024-02-31 23:59:61.5] rolls over",
         "[2022-06-29 01:26:11,0123456789] long", "[2022-06-29 01:26:11.] dot", "[Rank 3] (after 5 iterations)",
         "[default3]: [2022-06-29 01:26:11,085] x", "[rank1]: y", "12: [2022-06-29 01:26:11,085] x",
         "nid001234: iteration 5/ 10 |", "time (ms) | forward: 1.0", " iteration 5/ 10 |", "\t2022-06-29 01:26:11 x",
         "  [2022-06-29 01:26:11] two spaces", " [x] 2022-06-29 01:26:11", "", "x", "[", " ", "9", "a:b c",
         "gpu-node7.cluster.example.org.very.long.name: x", "[abcdefghijklmnopqrstu] 2022-06-29 01:26:11",
         "[ab] 2022-06-29 01:26:11.9", "[abcdefghijklmnop] 2022-06-29 01:26:11", "1999-12-31 23:59:59.999999999 end", "2024-05-01 01:01:07,001]"]
PIECES = st.one_of(st.sampled_from(HEADS), st.text(alphabet="[]0129-: ,.Tx\tar", max_size=45),
                   st.builds(lambda a, b: a + b, st.sampled_from(HEADS), st.text(alphabet="[]0-: ,.9", max_size=6)),
                   st.builds(lambda a, b: a + b, st.text(alphabet="[ 1:a", max_size=4), st.sampled_from(HEADS)))


def check(lines: list[str]) -> None:
    text = "\n".join(lines) + "\n"
    codes = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    starts, at = [], 0
    for line in lines:
        starts.append(at)
        at += len(line) + 1
    heads = read_heads(codes, np.array(starts))
    must = [i for i, line in enumerate(lines) if may_have_prefix(line)]
    assert set(must) <= set(heads.prefixed), [lines[i] for i in set(must) - set(heads.prefixed)]
    assert set(heads.prefixed) <= set(heads.unsure)
    unsure = set(heads.unsure)
    for i, line in enumerate(lines):
        if i not in unsure:
            assert heads.stamps[i] == line_stamp(line), line


def test_known_heads():
    check(HEADS)
    heads_ = read_heads(np.frombuffer(b"[2022-06-29 01:26:11,085] x\n", dtype=np.uint8), np.array([0]))
    assert heads_.unsure == [] and heads_.stamps == [line_stamp("[2022-06-29 01:26:11,085] x")]


@settings(max_examples=400, deadline=None)
@given(st.lists(PIECES, min_size=1, max_size=12))
def test_generated_heads(lines):
    check([line.replace("\n", " ") for line in lines])


LAUNCH = ["", "3: ", "nid001234: ", "[default1]:", "[rank2]: ", "0: [default0]: "]
STAMP = ["", "[2024-05-01 01:01:07,001] [INFO] [logging.py:96:log_dist] ", "[2024-05-01 23:59:59] ", " [2024-05-02 00:00:01.5] ",
         "[titan] 2024-05-02 00:00:02,250 - root - ", "[2024-13-01 00:00:00] "]
BODY = [" iteration       12/ 1000 | consumed samples: 768 | elapsed time per iteration (ms): 2500.1 | lm loss: 2.5E+00 |",
        "[Rank 0] step=12, skipped=0, lr=[0.0003], mom=[(0.9, 0.95)]",
        "time (ms) | forward-compute: 612.5 | backward-compute: 1501.2 | optimizer: 250.1",
        "[Rank 3] (after 12 iterations) memory (MB) | allocated: 1.5 | max allocated: 2.5 | reserved: 3.0 | max reserved: 3.0"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(LAUNCH), st.sampled_from(STAMP), st.sampled_from(BODY)), min_size=1, max_size=40))
def test_block_events_same_with_and_without_heads(parts):
    """A block parsed with the scanner's heads gives the events of the plain path."""
    from parsers import parser_set
    from parsers.events import expand
    from parsers.triggers import FindScanner
    from tuimon.scan import trigger_scanner

    text = "".join(a + b + c + "\n" for a, b, c in parts)
    events = []
    for scanner in (trigger_scanner, FindScanner):
        ps = parser_set("job.log", scanner=scanner, lanes=True)
        events.append([e.to_dict() for e in expand(ps.feed_block(text, 1) + ps.flush())])
    assert events[0] == events[1]


def test_block_walls_from_heads():
    from parsers import parser_set
    from parsers.events import expand
    from tuimon.scan import trigger_scanner

    text = "".join(a + b + c + "\n" for a, b, c in zip(LAUNCH[:4], STAMP[1:5], BODY))
    ps = parser_set("job.log", scanner=trigger_scanner, lanes=True)
    walls = {e.line: e.wall_time for e in expand(ps.feed_block(text, 1))}
    assert walls == {1: 1714525267.001, 2: 1714607999.0, 3: 1714608001.5, 4: 1714608002.25}
