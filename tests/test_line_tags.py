"""Quick tests on lines (launcher prefixes, rank tags) must read what the full patterns read."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from parsers.prefix import _PREFIX, may_have_prefix, split_prefix

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


@settings(max_examples=300, deadline=None)
@given(st.lists(TAG_PARTS, min_size=1, max_size=5), st.one_of(st.none(), st.integers(0, 9)))
def test_bulk_rank_tags_read_what_the_regex_reads(bodies, default):
    from parsers.common import rank_tag, rank_tags
    expected = [rank_tag(body) for body in bodies]
    assert rank_tags(bodies, [default] * len(bodies)) == [default if r is None else r for r in expected]


def test_bulk_rank_tags_when_every_line_is_tagged():
    from parsers.common import rank_tag, rank_tags
    for bodies in (["[x] [Rank 0] a", "[Rank 12] b", "y [Rank 999999] c [Rank 1]"],
                   ["[Rank ٣] a", "[Rank 5] b"],  # other decimal digits, as int() reads them
                   ["[Rank 1234567] a", "[Rank 5] b [Rank 6]"],  # too long: the regex finds the next tag
                   ["[Rank 5] a", "[Rank ] b [Rank 7]", "[Rank 3"]):
        assert rank_tags(bodies, [None] * len(bodies)) == [rank_tag(b) for b in bodies], bodies


def test_bulk_rank_tags_of_one_ranks_lines():
    """The usual DeepSpeed block (every line tagged by one rank) is read at once;
    a block that only looks like one (as many tags as lines, but two on a line and
    none on another, or another rank) is read line by line, as the regex reads it."""
    from parsers.common import rank_tag, rank_tags
    one = [f"[2024-05-01 10:00:00,123] [INFO] [logging.py:96:log_dist] [Rank 7] step={i}" for i in range(50)]
    assert rank_tags(one, [None] * 50) == [7] * 50
    for bodies in (["[Rank 3] a [Rank 3]", "b"], ["[Rank 3] a", "[Rank 4] b"], ["[Rank 3] a", "[Rank 3 b"],
                   ["[Rank 3] [Rank 3] a", "[Rank 3] b", "c"], ["x [Rank \u0663] a", "[Rank \u0663]"],
                   ["[Rank 1234567] a", "[Rank 1234567] b"], ["[Rank ] a", "[Rank ] b"]):
        assert rank_tags(bodies, [9] * len(bodies)) == [9 if rank_tag(b) is None else rank_tag(b) for b in bodies]
