"""One cursor and fingerprint model for local files and SFTP (tuimon.sources.cursor), and one
ingest driver (tuimon.engine.ingest.Reading) under every verb's reads."""
from __future__ import annotations

import ast
import os
from pathlib import Path

from tests.conftest import ROOT
from tuimon.engine.ingest import Reading, parse_file
from tuimon.follow.remote import RemoteFile
from tuimon.sources import state as saved
from tuimon.sources.cursor import HEAD_BYTES, MARKER_BYTES, Cursor, Fingerprint, continues
from tuimon.sources.streams import Parked, Stream


def _read(cursor: Cursor, data: bytes, step: int = 700) -> None:
    for k in range(0, len(data), step):
        cursor.took(data[k:k + step])


LOG = b"".join(b"iteration %6d/  100 | lm loss: 1.0 |\n" % k for k in range(200))


def test_a_cursor_keeps_the_first_bytes_and_those_before_its_offset() -> None:
    c = Cursor()
    _read(c, LOG)
    assert c.offset == len(LOG) and c.head == LOG[:HEAD_BYTES] and c.last == LOG[-MARKER_BYTES:]
    f = c.fingerprint()
    assert f == Fingerprint(HEAD_BYTES, saved.head_digest(LOG[:HEAD_BYTES]), len(LOG), LOG[-MARKER_BYTES:])
    # a point before the offset (a saved position stops at the last complete line)
    early = c.fingerprint(upto=10, last=LOG[:10])
    assert (early.head_len, early.offset, early.last) == (10, 10, LOG[:10])
    c.rewind()
    assert (c.offset, c.head, c.last, c.known_by) == (0, b"", b"", None)


def test_a_sparse_hole_counts_as_nuls() -> None:
    c = Cursor()
    c.took(b"ab")
    c.stepped_over(5000)
    assert c.offset == 5002 and c.head == b"ab" + b"\0" * (HEAD_BYTES - 2) and c.last == b"\0" * MARKER_BYTES


def test_a_file_continues_what_was_read_only_with_the_same_start_and_bytes_before_the_offset(tmp_path: Path) -> None:
    c = Cursor()
    _read(c, LOG[:5000])
    path = tmp_path / "run.log"
    for content, holds in ((LOG, True),  # grown
                           (LOG[:5000], True),  # as read
                           (b"x" + LOG[1:], False),  # another start
                           (LOG[:4990] + b"XXXXXXXXXX" + LOG[5000:], False),  # rewritten before the offset
                           (LOG[:3000], False)):  # shorter: the bytes before the offset are not there
        path.write_bytes(content)
        fd = os.open(path, os.O_RDONLY)
        try:
            assert continues(fd, c) is holds, content[:20]
        finally:
            os.close(fd)


def test_a_fingerprint_alone_finds_its_file(tmp_path: Path) -> None:
    """A saved position knows a file by its first bytes' digest: a cursor looking for it holds the
    file that has them (and reads no first bytes into its head while it looks)."""
    read = Cursor()
    _read(read, LOG[:4000])
    c = Cursor()
    c.looking_for(read.fingerprint())
    assert c.head == b"" and c.offset == 4000 and c.wanted() == (HEAD_BYTES, MARKER_BYTES)
    path = tmp_path / "run.log.1"
    path.write_bytes(LOG)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert continues(fd, c)
        c.took(b"more\n")
        assert c.head == b""  # still looking: the head is the fingerprint's
        c.placed(4005, LOG[3973:4005], LOG[:HEAD_BYTES])
        assert c.known_by is None and c.head == LOG[:HEAD_BYTES]
    finally:
        os.close(fd)
    other = Cursor()
    other.looking_for(Fingerprint(HEAD_BYTES, saved.head_digest(b"y" * HEAD_BYTES), 4000, LOG[3968:4000]))
    assert not other.head_holds(LOG[:HEAD_BYTES])


def test_local_and_sftp_files_are_one_cursor_model_and_one_reading() -> None:
    assert issubclass(Stream, Cursor) and issubclass(RemoteFile, Cursor)
    s = Stream((1, 2), None, "/x.log", "/x.log", Reading("/x.log"))
    r = RemoteFile("x.log", "host:x.log", Reading("host:x.log"))
    for cursor in (s, r):
        cursor.took(LOG[:3000])
        cursor.reading.feed(LOG[:3000])
    assert s.fingerprint() == r.fingerprint()
    assert Parked.of(s).print == s.fingerprint() and Parked.of(s).next_line == s.reading.next_line == LOG[:3000].count(b"\n") + 1


def _assigned_attributes(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AugAssign) \
            else []
        for t in targets:
            for sub in ast.walk(t):
                if isinstance(sub, ast.Attribute):
                    found.add(sub.attr)
    return found


def test_the_followers_move_their_cursors_only_through_the_model() -> None:
    """The two followers (and what they use) set no cursor field themselves: offsets, first
    bytes and markers change through :class:`Cursor`'s methods alone, one model for both."""
    for path in [*(ROOT / "tuimon" / "follow").glob("*.py"), *(ROOT / "tuimon" / "sources").glob("*.py")]:
        if path.name == "cursor.py":
            continue
        touched = _assigned_attributes(path) & {"head", "last", "known_by"}
        assert not touched, f"{path.name} sets {touched} of a cursor itself"


def test_the_sources_never_parse() -> None:
    """Sources hand over bytes and offsets: none of them reads a parser, a cache entry or a writer."""
    for path in (ROOT / "tuimon" / "sources").glob("*.py"):
        text = path.read_text()
        for word in (".parser", ".writer", ".feed(", "FileParser", "skip_events"):
            assert word not in text, f"sources/{path.name} uses {word}"


def test_every_batch_and_live_read_goes_through_one_reading(tmp_path: Path, monkeypatch) -> None:
    """parse_file (events), parse_file_store (summary), both followers: each file's bytes go
    through Reading.feed (counted here), none through a parser of its own."""
    from tuimon.engine import ingest

    fed: list[str] = []
    real = Reading.feed

    def counted(self: Reading, data: bytes) -> list:
        fed.append(self.label)
        return real(self, data)

    monkeypatch.setattr(Reading, "feed", counted)
    path = tmp_path / "run.log"
    path.write_bytes(LOG)
    events, stats = parse_file(path)
    assert fed == [str(path)] and stats.lines == 200 and len(events) > 0
    ingest.parse_file_store(path)
    assert fed == [str(path)] * 2
