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
    """A block's layout, when given, is its text's bytes and newline offsets; and
    only a text with a non-ASCII character (or none at all) comes without one."""
    if block.layout is None:
        assert not block.text or not block.text.isascii()
        return
    data, newlines = block.layout
    assert data.decode("ascii") == block.text
    assert newlines.tolist() == [i for i, ch in enumerate(block.text) if ch == "\n"]
    assert len(newlines) == block.lines


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
    data = b"a\r\nb\r\r\nc\r\r\r\r\r\nbar 10%\rbar 50%\rbar 100%\nplain\n"
    text, _ = frame_all([data])
    assert text == "a\nb\nc\nbar 100%\nplain\n"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(alphabet="ab\r é", max_size=12), max_size=40), st.integers(min_value=1, max_value=50))
def test_carriage_returns_match_the_reference(lines, cut):
    """Reference: drop every run of CR before LF, then keep what follows a line's last CR."""
    import re

    raw = "".join(line + "\n" for line in lines)
    ref = "".join(line[line.rfind("\r") + 1:] + "\n" for line in re.sub(r"\r+(?=\n)", "", raw).split("\n")[:-1])
    data = raw.encode()
    text, _ = frame_all([data[i:i + cut] for i in range(0, len(data), cut)])
    assert text == ref


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
