from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tuimon.sources.framing import Framer


def frame_all(chunks, max_line=1 << 20):
    f = Framer(max_line=max_line)
    blocks = [f.feed(c) for c in chunks] + [f.flush()]
    for block in blocks:
        checked_layout(block)
    return "".join(block.text for block in blocks), f


def checked_layout(block):
    """A block's line count is its text's newlines: segments of one line (a lone carriage
    return ended one) are text lines that share a number."""
    newlines = block.text.count("\n")
    assert newlines == block.lines + len(block.continued) - (1 if 0 in block.continued else 0)


def test_partial_line_is_held_until_newline():
    f = Framer()
    assert f.feed(b"iteration 1 | abc").lines == 0
    block = f.feed(b"def\nnext")
    assert block.text == "iteration 1 | abcdef\n" and block.first_line == 1
    assert f.flush().text == "next\n"


def test_multibyte_character_split_across_reads():
    data = "é€😀\n".encode()
    text, f = frame_all([data[:1], data[1:3], data[3:]])
    assert text == "é€😀\n" and f.invalid_utf8 == 0


def test_only_newline_splits_lines():
    text, _ = frame_all([b"a\xe2\x80\xa8b\x0bc\x1cd\x85e\n"])
    assert text.count("\n") == 1


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n\x00"),
                        max_size=40), max_size=30),
       st.lists(st.integers(min_value=1, max_value=64), min_size=1, max_size=20))
def test_any_chunking_gives_the_same_lines(lines, cuts):
    data = "".join(line + "\n" for line in lines).encode()
    chunks, i, k = [], 0, 0
    while i < len(data):
        step = cuts[k % len(cuts)]
        chunks.append(data[i:i + step])
        i += step
        k += 1
    text, f = frame_all(chunks)
    assert text.split("\n")[:-1] == lines
    assert f.next_line == len(lines) + 1


def test_carriage_returns_before_newline_are_dropped_and_bars_keep_their_last_segment():
    data = b"a\r\nb\r\r\nc\r\r\r\r\r\n\rbar 10%\rbar 50%\rbar 100%\nplain\n"
    text, _ = frame_all([data])
    assert text == "a\nb\nc\nbar 100%\nplain\n"


def test_a_lone_carriage_return_ending_a_record_loses_nothing():
    """print(line, end="\\r") a hundred times: a hundred lines (the last segment alone
    kept one in a hundred), at any chunking, with or without a newline at the end."""
    from tests.test_cache import _lines
    from tuimon.engine.ingest import FileParser

    records = _lines(1, 101).splitlines()
    for tail in ("", "\n", "\r\n", "done\n"):
        data = ("\r".join(records) + "\r" + tail).encode()
        for cut in (1, 7, 4096, len(data)):
            fp = FileParser("cr.log")
            events = []
            for i in range(0, len(data), cut):
                events += fp.feed(data[i:i + cut])
            events += fp.finish()
            its = [e for e in events if e.to_dict()["type"] == "iteration"]
            assert len(its) == 100, (tail, cut)
            assert {e.line for e in its} == {1}, "segments of one line keep its number (as grep -n counts)"
            assert fp.stats.lines == 1


def test_segment_lines_keep_the_file_line_numbers():
    from tuimon.engine.ingest import FileParser

    data = b"x 1\nstep 1 loss 2.0\rstep 2 loss 2.0\rstep 3 loss 2.0\nstep 4 loss 2.0\n\rbar\rbar 2\nstep 5 loss 1\n"
    for cut in range(1, len(data) + 1):
        fp = FileParser("seg.log")
        lines: list = []
        fp.on_block = lambda label, text, first: lines.extend(
            (first + k, t) for k, t in enumerate(text.split("\n")[:-1]))
        for i in range(0, len(data), cut):
            fp.feed(data[i:i + cut])
        fp.finish()
        assert lines == [(1, "x 1"), (2, "step 1 loss 2.0"), (2, "step 2 loss 2.0"), (2, "step 3 loss 2.0"),
                         (3, "step 4 loss 2.0"), (4, "bar 2"), (5, "step 5 loss 1")], cut
        assert fp.stats.lines == 5


def test_a_trailing_carriage_return_ends_no_line_early():
    for data in (b"a\r\nb\n", b"a\r\r\nb\n", b"\rbar 1\rbar 2\r\nb\n"):
        want, _ = frame_all([data])
        for cut in range(1, len(data)):
            assert frame_all([data[:cut], data[cut:]])[0] == want, (data, cut)


def test_a_writer_that_never_writes_a_newline_is_read_as_it_goes():
    from tuimon.sources.framing import Framer

    f = Framer(max_line=1000)
    got = "".join(f.feed(f"step {i} loss 2.5\r".encode()).text for i in range(100_000))
    assert got.count("\n") == 99_999 and f.pending < 100 and f.too_long == 0  # the last waits for its end
    bar = Framer(max_line=1000)
    bar.feed(b"\r")
    for i in range(100_000):
        bar.feed(f" {i}%|###| {i}/100000\r".encode())
    assert bar.pending < 100 and bar.too_long == 0  # a bar with no end holds its last update only
    assert bar.feed(b"\n").text == " 99999%|###| 99999/100000\n"


def _reference(raw: str) -> str:
    """Drop every run of CR before LF; a line that starts with CR keeps what follows its
    last CR, any other line holding CR is one line per non-empty segment."""
    import re

    out = []
    for line in re.sub(r"\r+(?=\n)", "", raw).split("\n")[:-1]:
        if line.startswith("\r"):
            out.append(line[line.rfind("\r") + 1:])
        elif "\r" in line:
            out.extend(seg for seg in line.split("\r") if seg)
        else:
            out.append(line)
    return "".join(line + "\n" for line in out)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab\r é", max_size=12), max_size=40), st.integers(min_value=1, max_value=50))
def test_carriage_returns_match_the_reference(lines, cut):
    raw = "".join(line + "\n" for line in lines)
    data = raw.encode()
    text, _ = frame_all([data[i:i + cut] for i in range(0, len(data), cut)])
    assert text == _reference(raw)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=40), max_size=30), st.integers(min_value=1, max_value=20),
       st.integers(min_value=1, max_value=70))
def test_lines_longer_than_the_limit_become_one_marker_each(lengths, limit, cut):
    """Reference: every line of more than ``limit`` bytes is replaced by the marker, at any chunking."""
    from tuimon.sources.framing import TOO_LONG_MARKER
    lines = [("x" * n) for n in lengths]
    data = "".join(line + "\n" for line in lines).encode()
    text, f = frame_all([data[i:i + cut] for i in range(0, len(data), cut)], max_line=limit)
    assert text.split("\n")[:-1] == [TOO_LONG_MARKER if len(line) > limit else line for line in lines]
    assert f.too_long == sum(len(line) > limit for line in lines)
