"""Walking followed directories: each real directory once, however it is reached.

A directory is known by its (device, inode), not its path: a symlink loop
(``self -> .``, ``sub/up -> ..``) or a second link to the same directory
(``latest -> run_42``) is entered at most once per walk, and depth is bounded,
so neither the walk's cost nor its memory grows with links.  A directory that
cannot be listed is retried on a timer (``chmod`` does not change its mtime, so
the mtime shortcut would never list it again) and reported once until it heals.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Callable, Optional

from .scope import LOG as SCOPE_LOG

MAX_DEPTH = 32
RETRY_UNREADABLE = 2.0  # seconds between attempts to list a directory that refused us


@dataclass
class Listing:
    mtime_ns: int
    subdirs: list[str]
    files: list[str]
    links: frozenset[str] = frozenset()  # the subdirectories reached through a symlink


@dataclass
class DirectoryWalker:
    """Lists directories under roots, relisting one only when its mtime changed."""

    wants: Callable[[str], bool]  # file name -> follow it?
    warn: Callable[[str], None]
    clock: Callable[[], float]
    #: (directory link, the real tree walked) -> enter it?  (tuimon.sources.scope.Scope.enters)
    enters: Callable[[str, str], bool] = lambda link, tree: True
    retries: bool = True  # a directory that cannot be listed is tried again (a follower); else skipped
    listings: dict[str, Listing] = field(default_factory=dict)
    unreadable: dict[str, float] = field(default_factory=dict)  # path -> when to try again
    _said: set[str] = field(default_factory=set)  # links not entered, said once each

    def walk(self, top: str) -> list[str]:
        """Matching files under ``top`` (its listing cache refreshed where needed)."""
        found: list[str] = []
        visited: set[tuple[int, int]] = set()
        stack: list[tuple[str, int]] = [(top, 0)]
        reached: set[str] = set()
        tree = os.path.realpath(top)
        while stack:
            directory, depth = stack.pop()
            try:
                st = os.stat(directory)  # follows a symlink: the real directory's identity
            except OSError:
                continue
            if not stat.S_ISDIR(st.st_mode):
                continue
            key = (st.st_dev, st.st_ino)
            if key in visited:
                continue  # a loop, or a second way into a directory already walked
            visited.add(key)
            reached.add(directory)
            listing = self._listing(directory, st.st_mtime_ns)
            if listing is None:
                continue
            found.extend(listing.files)
            if depth < MAX_DEPTH:
                # links after the real directories (popped last): a directory is named by its own path
                stack.extend((d, depth + 1) for d in reversed(listing.subdirs)
                             if d in listing.links and self._entered(d, tree))
                stack.extend((d, depth + 1) for d in reversed(listing.subdirs) if d not in listing.links)
        prefix = top.rstrip(os.sep) + os.sep
        for stale in [d for d in self.listings if (d == top or d.startswith(prefix)) and d not in reached]:
            del self.listings[stale]  # removed, or no longer reachable: forget its listing
        return found

    def _entered(self, link: str, tree: str) -> bool:
        if self.enters(link, tree):
            return True
        if link not in self._said:
            self._said.add(link)
            SCOPE_LOG.debug("not entered: %s (a directory link, under %s; --follow-links enters links)", link, tree)
        return False

    def forget(self, top: str) -> None:
        prefix = top.rstrip(os.sep) + os.sep
        for d in [d for d in self.listings if d == top or d.startswith(prefix)]:
            del self.listings[d]

    def _listing(self, directory: str, mtime_ns: int) -> Optional[Listing]:
        cached = self.listings.get(directory)
        if cached is not None and cached.mtime_ns == mtime_ns and directory not in self.unreadable:
            return cached
        retry_at = self.unreadable.get(directory)
        if retry_at is not None and self.clock() < retry_at:
            return cached
        try:
            with os.scandir(directory) as it:
                entries = list(it)
        except OSError as exc:
            if directory not in self.unreadable:  # once, until it heals
                self.warn(f"cannot list {directory}: {exc.strerror or exc}; "
                          + (f"retrying every {RETRY_UNREADABLE:.0f} s" if self.retries else "skipped"))
            self.unreadable[directory] = self.clock() + RETRY_UNREADABLE
            return cached
        if self.unreadable.pop(directory, None) is not None:
            self.warn(f"{directory} can be listed again")
        subdirs, files, links = [], [], []
        for entry in sorted(entries, key=lambda e: e.name):  # (in name order: a batch reads in this order)
            try:
                is_dir = entry.is_dir()  # follows symlinks; the walk checks identities
            except OSError:
                continue
            if is_dir:
                if not entry.name.startswith("."):
                    subdirs.append(entry.path)
                    if entry.is_symlink():
                        links.append(entry.path)
            elif self.wants(entry.name):
                files.append(entry.path)
        listing = Listing(mtime_ns, subdirs, files, frozenset(links))
        self.listings[directory] = listing
        return listing
