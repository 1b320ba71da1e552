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


TAG_PARTS = st.lists(st.one_of(st.sampled_from(["[Rank ", "[Rank", "]", "12", "1234567", "٣", " ", "x", "[Rank 7]"]),
                              st.text(alphabet="[]Rank 0", max_size=5)), max_size=6).map("".join)
