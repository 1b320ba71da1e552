"""Quick tests on lines (launcher prefixes, rank tags) must read what the full patterns read."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tuimon.parsers.prefix import _PREFIX, may_have_prefix, split_prefix

PIECES = ["12: ", "0:  ", "nid001234: ", "gpu-node7.cluster: ", "10.0.0.1: ", "localhost: ", "[default3]:",
          "[rank5]: ", "time (ms) | a: 1", "iteration 5/ 10 |", ":", " ", "a", "7", "-", ".", "x1:y "]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(PIECES), st.text(alphabet="a1:. -[]", max_size=4)), max_size=5))
def test_quick_test_never_hides_a_prefix(parts):
    line = "".join(parts)
    m = _PREFIX.match(line)
    if m is not None and m.end() > 0:
        assert may_have_prefix(line), line


def test_prefixes_still_split():
    assert split_prefix("12: iteration 5/ 10 |").rank == 12
    assert split_prefix("nid001234: [default3]: x").node == "nid001234"
    assert split_prefix("time (ms) | forward: 1.0").body == "time (ms) | forward: 1.0"
    assert not may_have_prefix("time (ms) | forward-compute: 612.0")
    # a colon before the first space is no prefix's end unless the space comes right after it: the
    # hand-written loops' step lines go past the pattern (in the core too: its framing of them)
    for line in ("s:1 trl:10.9598 lr:0.000002 norm:15.24", "step:3/15258 train_time:87406ms step_avg:nanms",
                 "x1:y z: w", "a:"):
        assert not may_have_prefix(line), line
        assert split_prefix(line).body == line
    assert may_have_prefix("x1: y") and split_prefix("x1: y").node == "x1"


TAG_PARTS = st.lists(st.one_of(st.sampled_from(["[Rank ", "[Rank", "]", "12", "1234567", "٣", " ", "x", "[Rank 7]"]),
                              st.text(alphabet="[]Rank 0", max_size=5)), max_size=6).map("".join)
