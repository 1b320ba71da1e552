"""What the local follower keeps of files it no longer holds open: files that left
their path and were closed (*parked*), known again by their content under any name and
read on from where they were left; and what each generation of a path started with,
so that a copy of data already read (copytruncate's) is not read as new."""
from __future__ import annotations

from collections import OrderedDict
from typing import Iterator

from .streams import Parked, Stream

MAX_PARKED = 4096  # files remembered, the least recently parked forgotten first
COPY_HEAD = 256  # bytes of a generation's start that tell a copy of it
GENERATIONS = 64  # generations remembered per path


class Parking:
    def __init__(self) -> None:
        #: by identity (dev, ino); the positions saved and restored share it (tuimon.sources.positions)
        self.files: OrderedDict[tuple[int, int], Parked] = OrderedDict()
        self._generations: dict[str, list[tuple[bytes, int]]] = {}

    def park(self, s: Stream) -> None:
        """``s`` is closed (its parser finished): remember it by identity and content."""
        self.keep(Parked.of(s))

    def keep(self, p: Parked) -> None:
        """Remember ``p`` (a closed file, or one a state file says was read up to an offset)."""
        self.files[p.key] = p
        self.files.move_to_end(p.key)
        while len(self.files) > MAX_PARKED:
            self.files.popitem(last=False)

    def take(self, key: tuple[int, int]) -> Parked | None:
        return self.files.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self.files

    def __iter__(self) -> Iterator[Parked]:
        return iter(list(self.files.values()))

    def candidates(self, label: str, key: tuple[int, int], size: int) -> list[Parked]:
        """Parked files of ``label`` a file of ``size`` bytes may continue (read on from
        their offset), the one with the file's own identity first."""
        found = [p for p in self.files.values() if p.label == label and p.offset and p.offset <= size]
        found.sort(key=lambda p: p.key != key)
        return found

    def remember(self, s: Stream) -> None:
        """What one generation of a path started with and how much of it was read: a copy
        of it (copytruncate's) found next to the path is not new data."""
        if s.head:
            gens = self._generations.setdefault(s.label, [])
            gens.append((s.head[:COPY_HEAD], s.offset))
            del gens[:-GENERATIONS]

    def knows_generations(self, label: str) -> bool:
        return bool(self._generations.get(label))

    def is_copy(self, label: str, head: bytes, size: int) -> bool:
        """Whether a file starting with ``head`` (its first :data:`COPY_HEAD` bytes), of
        ``size`` bytes, is a copy of data already read at ``label``."""
        return any(head == g[:len(head)] and size <= n for g, n in self._generations.get(label, ()))
