"""What a walk of the user's directories reads: one rule for every verb, batch or following.

* A file found in a directory is read when its name matches ``include`` and not ``exclude``,
  and its first bytes look like text (``a.out`` matches ``*.out``; a database named ``*.log``
  is not a log).  A file the user names is always read.
* A directory reached through a symlink is not entered unless asked (``--follow-links``):
  ``DIR/sys -> /usr`` made a follower read 1,211 files of /usr while ``summary`` of the same DIR
  did not enter it.  A link within the tree (``latest -> run_42``) leads where the walk goes by
  the directory's own name, which names its files (a name that stays when ``latest`` moves on).
  Asked, links are entered after the real directories, each real directory once.
* Hidden directories (``.git``, ``.cache``) are not entered.

What is skipped is said at debug level (``--debug``), once per path.
"""
from __future__ import annotations

import fnmatch
import logging
from dataclasses import dataclass
from typing import Optional, Sequence

LOG = logging.getLogger("tuimon.scope")

#: PBS names a job's streams ``NAME.o<job id>`` and ``NAME.e<job id>`` (Aurora, Polaris)
DEFAULT_INCLUDE = ("*.log", "*.out", "*.err", "*.txt", "*.o[0-9]*", "*.e[0-9]*")
DEFAULT_EXCLUDE = ("*.swp", "*~", ".*")

SNIFF_BYTES = 4096  # a file is judged on its first bytes
SNIFF_MIN = 64  # ... once it has this many past any leading NULs (a file being written is not judged yet)
#: bytes no text log holds (controls but tab, newlines, form feed, backspace, escape; DEL)
_NOT_TEXT = bytes(b for b in range(32) if b not in (8, 9, 10, 12, 13, 27)) + b"\x7f"


def matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def looks_binary(head: bytes) -> bool:
    """Whether a file whose first bytes are ``head`` is not text: over a tenth of them are control
    bytes or not UTF-8.  Leading NULs are not counted (copytruncate, with a writer that keeps its
    offset, leaves them); a head too short to tell is text (it is judged again as it grows)."""
    if refused_encoding(head):
        return True
    sample = head.lstrip(b"\x00")[:SNIFF_BYTES]
    if len(sample) < SNIFF_MIN:
        return False
    controls = len(sample) - len(sample.translate(None, _NOT_TEXT))
    invalid = sample.decode("utf-8", "replace").count("\ufffd")  # (a cut last character counts: noise)
    return controls + invalid > len(sample) // 10


_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
         (b"\xfe\xff", "UTF-16"))


def refused_encoding(head: bytes) -> Optional[str]:
    """The encoding a file's byte-order mark names, where tuimon does not read it (UTF-16 and
    UTF-32: every other byte a NUL, no line of theirs would match): said, not read as garbage."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    return None


def refusal(path: str, encoding: str) -> str:
    return (f"{path} is {encoding} (its byte-order mark says so): not read; "
            f"iconv -f {encoding} -t UTF-8 makes a copy tuimon reads")


@dataclass(frozen=True)
class Scope:
    include: tuple[str, ...] = DEFAULT_INCLUDE
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    follow_links: bool = False  # enter directory links that leave the tree

    def wants(self, name: str) -> bool:
        return matches(name, self.include) and not matches(name, self.exclude)

    def enters(self, link: str, tree: str) -> bool:
        """Whether the directory link ``link`` (found walking ``tree``) is entered."""
        return self.follow_links
