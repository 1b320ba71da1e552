"""The parse cache: a log read before is not parsed again.

Per file it keeps the events parsed so far and the parser's state at the end of
the bytes they came from (framing and engine), in an SQLite database under
``$XDG_CACHE_HOME/tuimon/`` (mode 0600, WAL, a busy timeout: several tuimon
processes may use it at once).

A file is the one cached when its device and inode, a hash of its first bytes and
a hash of the bytes just before the saved offset all match (as the followers tell
files apart).  Then an unchanged file is not parsed at all, and one that grew is
parsed from the saved offset with the saved state.  A truncated, rotated or
replaced file, or a different format set (:attr:`Catalog.key`), is parsed again
from the start; so is a file of the size saved whose mtime or ctime changed (rewritten
in place, or deleted and recreated on a reused inode).  A database that cannot be
read is moved aside and rebuilt, with one warning.

It also keeps what commands made of files (``results``: the summaries of a group of
files, :mod:`tuimon.commands.reuse`), each in a slot, valid while the signature of the
inputs it was made of holds.

Nothing in the cache is trusted blindly: the directory and the database must be the
user's and writable by no one else, and no symlink (else one warning and no cache,
as pip does), and every blob carries a keyed BLAKE2b tag made with a per-user key
(``key``, 0600, beside the database).  A blob whose tag does not check is a miss and
is never unpickled: a database planted by someone else cannot run code as you.
"""
from __future__ import annotations

import errno
import hashlib
import hmac
import os
import pickle
import sqlite3
import stat
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

from ..parsers.columns import expand, weight
from ..paths import cache_home

SCHEMA = 11  # 11: series saved column by column (tuimon.store.series)
HEAD_BYTES = 4096  # hashed from the start of the file
TAIL_BYTES = 4096  # hashed just before the saved offset

DEFAULT_MAX_MB = 2048


EVICT_EVERY_BYTES = 1 << 20  # the size limit is looked at after this much is saved (or a 16th of the limit)


def max_bytes() -> int:
    """How big the cache may grow: ``TUIMON_CACHE_MAX_MB`` (default 2048) megabytes."""
    try:
        mb = float(os.environ.get("TUIMON_CACHE_MAX_MB", DEFAULT_MAX_MB))
    except ValueError:
        mb = DEFAULT_MAX_MB
    return int(max(mb, 1.0) * 1e6)


def cache_dir() -> Path:
    """Where the parse cache lives unless the settings say otherwise (``cache_dir`` in the
    config file, ``$TUIMON_CACHE_DIR``: :class:`tuimon.commands.settings.Settings`):
    ``$XDG_CACHE_HOME/tuimon``."""
    return cache_home()


def db_path(directory: Optional[Path] = None) -> Path:
    """The cache database in ``directory`` (by default :func:`cache_dir`)."""
    return (directory or cache_dir()) / "parse-cache.sqlite3"


class Untrusted(OSError):
    """The cache directory, database or key is not safe to use (one line saying why)."""


def _check_owned(path: str, what: str, want_dir: bool) -> None:
    """``path`` (not followed) must be a directory/regular file owned by the user and
    writable by no one else."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise Untrusted(f"{what} {path} is a symlink")
    if want_dir and not stat.S_ISDIR(st.st_mode):
        raise Untrusted(f"{what} {path} is not a directory")
    if not want_dir and not stat.S_ISREG(st.st_mode):
        raise Untrusted(f"{what} {path} is not a regular file")
    if st.st_uid != os.geteuid():
        raise Untrusted(f"{what} {path} is not yours (owner uid {st.st_uid})")
    if st.st_mode & 0o022:
        raise Untrusted(f"{what} {path} is writable by others (mode {stat.S_IMODE(st.st_mode):o})")


def check_trusted(path: Path) -> None:
    """Raise :class:`Untrusted` unless the database at ``path``, its directory and
    the files SQLite keeps beside it are the user's alone (missing files are fine)."""
    _check_owned(str(path.parent), "cache directory", True)
    for suffix in ("", "-wal", "-shm", "-journal"):
        try:
            _check_owned(f"{path}{suffix}", "cache database", False)
        except FileNotFoundError:
            pass


def _make_key(path: Path) -> None:
    """Write a new key whole, or not at all: a temporary file (0600) filled and synced, then
    linked to ``path`` (an existing key wins a race: two first runs at once share one).  A full
    disk left a 0-byte key, which then turned the cache off for good after space came back."""
    import tempfile  # (here: once a cache's life, and its import was paid by every start)

    fd, tmp = tempfile.mkstemp(prefix=".key-", dir=path.parent)  # 0600, O_EXCL
    try:
        try:
            data = os.urandom(32)
            if os.write(fd, data) != len(data):
                raise OSError(errno.ENOSPC, "short write")
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass
    finally:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def _load_key(directory: Path) -> bytes:
    """The per-user key the cache's blobs are tagged with, made on first use (0600).  A key that
    is ours but shorter than a key (written by a version that could leave it empty) never tagged
    a blob: it is replaced."""
    path = directory / "key"
    for attempt in range(2):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            _make_key(path)
            continue
        try:
            st = os.fstat(fd)
            if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o077 or not stat.S_ISREG(st.st_mode):
                raise Untrusted(f"cache key {path} is not yours alone (owner uid {st.st_uid}, "
                                f"mode {stat.S_IMODE(st.st_mode):o})")
            key = os.read(fd, 64)
        finally:
            os.close(fd)
        if len(key) >= 32:
            return key
        if attempt == 0:
            os.unlink(path)  # ours, and never usable: made again
            _make_key(path)
    raise Untrusted(f"cache key {path} is too short; remove it to make a new one")


TAG_BYTES = 32


class Sealer:
    """Keyed tags on blobs: :meth:`open` gives back only what :meth:`seal` made with
    the same key, so nothing unpickled comes from anyone but the user."""

    def __init__(self, key: bytes) -> None:
        self.key = key

    def _tag(self, blob: bytes) -> bytes:
        # HMAC-SHA256: three times keyed BLAKE2b's speed where the CPU hashes SHA-256 itself (80 MB of
        # stores checked on a reopen: 55 ms against 172 ms)
        return hmac.new(self.key, blob, hashlib.sha256).digest()

    def seal(self, blob: bytes) -> bytes:
        return self._tag(blob) + blob

    def open(self, sealed: bytes) -> bytes:
        tag, blob = sealed[:TAG_BYTES], sealed[TAG_BYTES:]
        if len(tag) != TAG_BYTES or not hmac.compare_digest(tag, self._tag(blob)):
            raise Forged("a cache blob's tag does not check")
        return blob


class Forged(ValueError):
    """A blob not sealed with the user's key."""


@dataclass
class Entry:
    offset: int  # bytes of the file the saved events and state cover
    parser: Any  # the FileParser state at ``offset``
    gen: int  # the generation whose chunks hold the events
    chunks: Optional[int]  # None: the events were not saved (a summary saves only the store)
    partial: Optional[bytes]  # the pickled store of the file's events alone (see JobStore.merge_file), sealed
    sealer: Optional[Sealer] = None

    def store(self) -> Any:
        """The saved store of the file's events (None if there is none or it cannot be read)."""
        if self.partial is None or self.sealer is None:
            return None
        try:
            return pickle.loads(self.sealer.open(self.partial))
        except Exception:
            return None


def _corrupt(exc: BaseException) -> bool:
    """Whether SQLite says the file is not a (sound) database: only then is it moved
    aside.  A busy or locked database, a full disk, are not reasons to drop the cache."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    name = getattr(exc, "sqlite_errorname", "")
    if name:
        return name in ("SQLITE_CORRUPT", "SQLITE_NOTADB") or name.startswith(("SQLITE_CORRUPT_", "SQLITE_IOERR_SHORT"))
    text = str(exc).lower()
    return "malformed" in text or "not a database" in text


def _key(path: str) -> bytes:
    """A path as the bytes the OS has (a name that is not UTF-8 keeps its bytes)."""
    return os.fsencode(path)


def _digest(data: bytes) -> bytes:
    return hashlib.blake2b(data, digest_size=16).digest()


def _read_at(fd: int, offset: int, size: int) -> bytes:
    return os.pread(fd, size, offset) if size > 0 else b""


class ParseCache:
    """One connection; use from one thread.  Every failure of the database turns
    into a miss (and one warning), never into an error of the command."""

    def __init__(self, path: Optional[Path] = None, key: str = "", host: str = "local",
                 on_warning: Callable[[str], None] = lambda message: None) -> None:
        self.path = path or db_path()
        self.key = key  # the format set and tuimon version
        self.host = host
        self.warn = on_warning
        self.hits = self.misses = self.grown = 0
        self._db: Optional[sqlite3.Connection] = None
        self._broken = False
        self.sealer: Optional[Sealer] = None
        #: bytes saved since the size limit was last looked at: the first save looks
        self._unchecked = EVICT_EVERY_BYTES

    # -- the database -----------------------------------------------------------------
    def _connect(self) -> Optional[sqlite3.Connection]:
        if self._db is not None or self._broken:
            return self._db
        try:
            self._db = self._open()
        except Untrusted as exc:
            self.warn(f"parse cache off: {exc}; use a directory only you can write (cache_dir)")
            self._broken = True
            return None
        except (sqlite3.DatabaseError, OSError) as exc:
            if _corrupt(exc) and self._move_aside(exc):
                try:
                    self._db = self._open()
                    return self._db
                except (sqlite3.DatabaseError, OSError) as again:
                    exc = again
            self.warn(f"parse cache off: {self.path}: {exc}")
            self._broken = True
        return self._db

    def _open(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        check_trusted(self.path)  # before anything is created or read in it
        self.sealer = Sealer(_load_key(self.path.parent))
        # created private, before SQLite opens it; never through a symlink
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        os.close(fd)  # the directory is the user's alone (checked): what is in it stays so
        # one thread at a time (a follower closes it after its polling thread ended)
        db = sqlite3.connect(self.path, timeout=10.0, isolation_level=None, check_same_thread=False)
        try:
            db.execute("PRAGMA busy_timeout = 10000")
            if db.execute("PRAGMA journal_mode = WAL").fetchone()[0].lower() != "wal":
                raise sqlite3.DatabaseError("cannot use write-ahead logging")
            # a cache, not a record: with the log, NORMAL syncs at checkpoints only, never a commit (each
            # file's entry is one: 4,096 small files spent 5.6 s of a 9.4 s summary in fsync). The file
            # stays whole on a crash; the last entries may be lost, and are parsed again
            db.execute("PRAGMA synchronous = NORMAL")
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version not in (0, SCHEMA):  # another layout: its entries are of no use
                db.execute("DROP TABLE IF EXISTS files")
                db.execute("DROP TABLE IF EXISTS chunks")
            db.execute("CREATE TABLE IF NOT EXISTS files (host TEXT, path BLOB, dev INTEGER, ino INTEGER, "
                       "head_len INTEGER, head BLOB, offset INTEGER, tail_len INTEGER, tail BLOB, formats TEXT, "
                       "gen INTEGER, size INTEGER, mtime_ns INTEGER, ctime_ns INTEGER, "
                       "chunks INTEGER, state BLOB, partial BLOB, saved REAL, PRIMARY KEY (host, path))")
            # events a chunk at a time, written as they are parsed: memory stays bounded
            db.execute("CREATE TABLE IF NOT EXISTS chunks (host TEXT, path BLOB, gen INTEGER, seq INTEGER, "
                       "events BLOB, PRIMARY KEY (host, path, gen, seq))")
            # what commands made of files (summaries), by a slot of the files, valid while the signature holds
            db.execute("CREATE TABLE IF NOT EXISTS results (host TEXT, slot BLOB, sig BLOB, blob BLOB, saved REAL, "
                       "PRIMARY KEY (host, slot))")
            db.execute(f"PRAGMA user_version = {SCHEMA}")
            db.execute("SELECT count(*) FROM files").fetchone()  # reads the pages: a corrupt file fails here
        except BaseException:
            db.close()
            raise
        for suffix in ("", "-wal", "-shm"):
            try:
                os.chmod(f"{self.path}{suffix}", 0o600)
            except OSError:
                pass
        return db

    def _move_aside(self, exc: BaseException) -> bool:
        """A database SQLite cannot read is renamed (kept for a look) and rebuilt."""
        if not self.path.exists():
            return False
        aside = self.path.with_name(f"{self.path.name}.corrupt-{int(time.time())}")
        try:
            os.replace(self.path, aside)
            for suffix in ("-wal", "-shm"):
                try:
                    os.unlink(f"{self.path}{suffix}")
                except FileNotFoundError:
                    pass
        except OSError:
            return False
        self.warn(f"parse cache {self.path} could not be read ({exc}); moved to {aside.name}, rebuilding")
        self._prune_aside(keep=aside)
        return True

    def _aside(self) -> list[tuple[Path, int]]:
        """Databases moved aside (kept for a look), oldest first, with their sizes."""
        out = []
        for p in sorted(self.path.parent.glob(f"{self.path.name}.corrupt-*"), key=lambda q: q.name):
            try:
                st = p.lstat()
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_uid == os.geteuid():
                out.append((p, st.st_size))
        return out

    def _prune_aside(self, keep: Optional[Path] = None, room: Optional[int] = None) -> None:
        """Only the latest database moved aside is kept, and only while it fits in the cache's
        size limit (``room``: what the live database leaves of it); they count in that limit."""
        aside = self._aside()
        left = max_bytes() if room is None else room
        for p, size in reversed(aside):
            if p == keep or (p == aside[-1][0] and size <= left):
                left -= size
                keep = p
                continue
            try:
                p.unlink()
            except OSError:
                pass

    def usable(self) -> bool:
        """Opens the database now (moving a corrupt one aside, with its warning, here
        rather than in a worker process); False when it cannot be used."""
        return self._connect() is not None

    def _query(self, sql: str, args: tuple) -> Optional[list]:
        db = self._connect()
        if db is None:
            return None
        try:
            return db.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            self.close()
            if _corrupt(exc) and self._move_aside(exc):
                return None  # rebuilt on the next use
            self.warn(f"parse cache off: {exc}")
            self._broken = True
            return None

    def close(self) -> None:
        """Close, folding the write-ahead log into the database: a log left behind (the
        batch commands end with os._exit) makes every later reader read through it."""
        if self._db is not None:
            try:
                self._db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            except sqlite3.Error:
                pass  # busy with another process: it folds it in when it closes
            try:
                self._db.close()
            except sqlite3.Error:
                pass
            self._db = None

    # -- entries ----------------------------------------------------------------------
    def load(self, path: str, fd: int, unchanged: bool = False) -> Optional[Entry]:
        """The saved entry of the open file ``fd`` at ``path`` if it is still that file
        (with ``unchanged``, only if it has not grown either: nothing else is read then)."""
        row = self.saved(path)
        st = os.fstat(fd)
        if row is None or (unchanged and row.offset != st.st_size):
            self.misses += 1
            return None
        head = _read_at(fd, 0, row.head_len)
        tail = _read_at(fd, row.offset - row.tail_len, row.tail_len) if row.offset >= row.tail_len else b""
        return self.check(row, Ident(st.st_dev, st.st_ino, head, tail, st.st_size, st.st_mtime_ns, st.st_ctime_ns),
                          st.st_size)

    def saved(self, path: str) -> Optional["Row"]:
        """The row saved for ``path``, unchecked: which bytes to read to check it (its
        state and store, the big part, are read once it checks out)."""
        rows = self._query("SELECT dev, ino, head_len, head, offset, tail_len, tail, formats, gen, chunks, "
                           "size, mtime_ns, ctime_ns FROM files WHERE host = ? AND path = ?", (self.host, _key(path)))
        return Row(path, *rows[0]) if rows else None

    def check(self, row: "Row", ident: "Ident", size: int) -> Optional[Entry]:
        """``row``'s entry if the file is still the one saved: ``ident`` holds its
        ``row.head_len`` first bytes and the ``row.tail_len`` bytes before ``row.offset``."""
        offset = row.offset
        if (row.dev, row.ino) != (ident.dev, ident.ino) or row.formats != self.key or size < offset or \
                len(ident.head) != row.head_len or _digest(ident.head) != row.head or \
                len(ident.tail) != row.tail_len or _digest(ident.tail) != row.tail or \
                _rewritten(row, ident, size):
            self.misses += 1
            return None
        blobs = self._query("SELECT state, partial FROM files WHERE host = ? AND path = ? AND gen = ?",
                            (self.host, _key(row.path), row.gen))
        try:
            state, partial = blobs[0]  # type: ignore[index]
            assert self.sealer is not None
            parser = pickle.loads(zlib.decompress(self.sealer.open(state)))  # only what this user sealed
        except Exception:  # gone meanwhile, forged, or an entry of another build: parse again
            self.misses += 1
            return None
        if size > offset:
            self.grown += 1
        else:
            self.hits += 1
        return Entry(offset, parser, row.gen, row.chunks, partial, self.sealer)

    def events(self, path: str, entry: Entry) -> Iterator[list]:
        """The saved events of ``entry``, a chunk at a time; an unreadable chunk raises
        :class:`CacheMiss` (the caller parses the file again)."""
        for seq in range(entry.chunks or 0):
            rows = self._query("SELECT events FROM chunks WHERE host = ? AND path = ? AND gen = ? AND seq = ?",
                               (self.host, _key(path), entry.gen, seq))
            if not rows or self.sealer is None:
                raise CacheMiss(path)
            try:
                events = pickle.loads(zlib.decompress(self.sealer.open(rows[0][0])))
            except Exception:
                raise CacheMiss(path) from None
            yield events

    def replay(self, path: str, entry: Entry, out: Callable[[list], None]) -> Optional[int]:
        """Hand ``entry``'s saved events to ``out``.  None when all went; else how many
        went before a chunk could not be read (the caller parses the file again from 0
        and skips that many: the same bytes give the same events)."""
        handed = 0
        try:
            for events in self.events(path, entry):
                out(events)
                handed += weight(events)  # in events: a parse from 0 skips events (its blocks may differ)
        except CacheMiss:
            return handed
        return None

    def writer(self, path: str, base: Optional[Entry], keep_store: bool = True) -> "EntryWriter":
        """``keep_store=False`` (a follower's): the entry saves the events, not their store,
        so a follower's memory does not grow with the file (``summary`` then parses it)."""
        return EntryWriter(self, path, base, keep_store)

    def save_store(self, path: str, fd: int, offset: int, parser: Any, store: Any) -> None:
        """An entry of the parser state and the store of the file's events, without the
        events themselves (what ``summary`` needs to take a file in again at once)."""
        if self._connect() is None or self.sealer is None:
            return
        try:
            state = self.sealer.seal(zlib.compress(pickle.dumps(parser, protocol=pickle.HIGHEST_PROTOCOL), 1))
            # kept as it is: a store is mostly numpy arrays, which compress little and load at memory speed
            partial = self.sealer.seal(pickle.dumps(store, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception:
            return
        _commit_row(self, _key(path), Ident.of(fd, offset), offset, 0, None, state, partial)

    def result(self, slot: bytes, sig: bytes) -> Optional[bytes]:
        """What :meth:`save_result` kept in ``slot``, if it was kept under ``sig`` (the inputs
        it was made of) and sealed by this user; else None."""
        rows = self._query("SELECT sig, blob FROM results WHERE host = ? AND slot = ?", (self.host, slot))
        if not rows or rows[0][0] != sig or self.sealer is None:
            return None
        try:
            return self.sealer.open(rows[0][1])
        except Forged:
            return None

    def save_result(self, slot: bytes, sig: bytes, blob: bytes) -> None:
        """Keep ``blob`` in ``slot`` (what was there goes), valid for ``sig``."""
        if self._connect() is None or self.sealer is None:
            return
        sealed = self.sealer.seal(blob)
        self._query("INSERT OR REPLACE INTO results VALUES (?, ?, ?, ?, ?)", (self.host, slot, sig, sealed, time.time()))
        self.wrote(len(sealed))

    def wrote(self, size: int, enforce: bool = True) -> None:
        """``size`` bytes were written: past :data:`EVICT_EVERY_BYTES` (or a 16th of the limit)
        since the last look, the size limit is enforced (with ``enforce``: a row was committed, not
        an entry's chunk, which a look could take from under its writer).  Looked at after each
        row, it was 7 queries and a directory listing for every file saved (a cold summary of 4,096
        small files: 28,672 queries and 4,096 listings).  The limit is overshot by that much at
        most, until the next look."""
        self._unchecked += size
        if enforce and self._unchecked >= min(EVICT_EVERY_BYTES, max_bytes() // 16):
            self._unchecked = 0
            self.evict()

    def used_bytes(self) -> int:
        """Bytes the database's live pages hold (free pages excluded)."""
        pages = self._query("PRAGMA page_count", ())
        free = self._query("PRAGMA freelist_count", ())
        size = self._query("PRAGMA page_size", ())
        if not pages or not free or not size:
            return 0
        return int((pages[0][0] - free[0][0]) * size[0][0])

    def evict(self) -> int:
        """Forget the least recently saved files while the database holds more than
        :func:`max_bytes` (a home directory on a cluster has a quota); returns how many."""
        limit = max_bytes()
        self._prune_aside(room=limit - self.used_bytes())
        limit -= sum(size for _, size in self._aside())
        gone = 0
        while self.used_bytes() > limit:
            rows = self._query("SELECT host, path FROM files ORDER BY saved LIMIT max(1, (SELECT count(*) FROM files) / 4)",
                               ())
            if not rows:
                break
            for host, path in rows:
                self._query("DELETE FROM files WHERE host = ? AND path = ?", (host, path))
                self._query("DELETE FROM chunks WHERE host = ? AND path = ?", (host, path))
            self._query("DELETE FROM results WHERE saved <= (SELECT max(saved) FROM (SELECT saved FROM results "
                        "ORDER BY saved LIMIT max(1, (SELECT count(*) FROM results) / 4)))", ())
            gone += len(rows)
        return gone

    def info(self) -> dict:
        rows = self._query("SELECT count(*), coalesce(sum(length(state) + coalesce(length(partial), 0)), 0), "
                           "coalesce(sum(offset), 0) FROM files", ())
        files, stored, covered = rows[0] if rows else (0, 0, 0)
        chunks = self._query("SELECT coalesce(sum(length(events)), 0) FROM chunks", ())
        stored += chunks[0][0] if chunks else 0
        results = self._query("SELECT coalesce(sum(length(blob)), 0) FROM results", ())
        stored += results[0][0] if results else 0
        size = sum(os.path.getsize(f"{self.path}{s}") for s in ("", "-wal") if os.path.exists(f"{self.path}{s}"))
        return {"path": str(self.path), "files": files, "stored_bytes": stored, "log_bytes": covered,
                "database_bytes": size, "limit_bytes": max_bytes(),
                "moved_aside_bytes": sum(n for _, n in self._aside())}

    def clear(self) -> int:
        self._prune_aside(room=0)
        rows = self._query("SELECT count(*) FROM files", ())
        self._query("DELETE FROM files", ())
        self._query("DELETE FROM chunks", ())
        self._query("DELETE FROM results", ())
        db = self._connect()
        if db is not None:
            try:
                db.execute("VACUUM")
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # VACUUM writes through the log
            except sqlite3.Error:
                pass
        return rows[0][0] if rows else 0


@dataclass
class Row:
    path: str
    dev: int
    ino: int
    head_len: int
    head: bytes
    offset: int
    tail_len: int
    tail: bytes
    formats: str
    gen: int
    chunks: Optional[int]
    size: Optional[int] = None  # the file's size, mtime and ctime when saved (0: not known, as over SFTP)
    mtime_ns: Optional[int] = None
    ctime_ns: Optional[int] = None


@dataclass
class Ident:
    """What tells a file apart: device and inode (0 and 0 where there are none, as
    over SFTP), its first bytes and the bytes just before the saved offset; and its
    size, mtime and ctime (0 where not known: SFTP has no ctime)."""

    dev: int
    ino: int
    head: bytes
    tail: bytes
    size: int = 0
    mtime_ns: int = 0
    ctime_ns: int = 0

    @classmethod
    def of(cls, fd: int, offset: int, st: Optional[os.stat_result] = None) -> "Ident":
        """The file open at ``fd``, its bytes before ``offset``; ``st``: its stat, when known."""
        st = st or os.fstat(fd)
        tail_len = min(offset, TAIL_BYTES)
        return cls(st.st_dev, st.st_ino, _read_at(fd, 0, min(offset, HEAD_BYTES)),
                   _read_at(fd, offset - tail_len, tail_len), st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _rewritten(row: Row, ident: Ident, size: int) -> bool:
    """A file of the size saved whose mtime or ctime moved was written again in place
    (or deleted and recreated on a reused inode): its hashed bytes may still match, its
    figures may not.  A file that grew is told apart by its bytes, as before."""
    if not row.size or size != row.size:
        return False
    return any(saved and now and saved != now
               for saved, now in ((row.mtime_ns, ident.mtime_ns), (row.ctime_ns, ident.ctime_ns)))


def _commit_row(c: ParseCache, path: bytes, ident: Ident, offset: int, gen: int, chunks: Optional[int],
                state: bytes, partial: Optional[bytes]) -> None:
    """The file's row; chunks of other generations go."""
    c._query("BEGIN IMMEDIATE", ())
    c._query("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
             (c.host, path, ident.dev, ident.ino, len(ident.head), _digest(ident.head), offset, len(ident.tail),
              _digest(ident.tail), c.key, gen, ident.size, ident.mtime_ns, ident.ctime_ns, chunks, state, partial,
              time.time()))
    c._query("DELETE FROM chunks WHERE host = ? AND path = ? AND gen != ?", (c.host, path, gen))
    c._query("COMMIT", ())
    c.wrote(len(state) + len(partial or b""))


def skipped(items: list, skip: int) -> tuple[list, int]:
    """``items`` without their first ``skip`` events (timer rows counted as their events:
    chunks end between blocks, so what was handed on is a prefix of the events in line
    order); and how many are still to be skipped."""
    events = expand(items)
    drop = min(skip, len(events))
    return events[drop:], skip - drop


class CacheMiss(Exception):
    """Saved events could not be read back."""


CHUNK_EVENTS = 20_000


class EntryWriter:
    """Events of one file written as they come, under a new generation: readers keep
    seeing the old entry until :meth:`commit` swaps it in (two processes parsing one
    file never mix their chunks).  A file that grew starts from a copy of its chunks."""

    def __init__(self, cache: ParseCache, path: str, base: Optional[Entry], keep_store: bool = True) -> None:
        self.cache, self.path = cache, _key(path)
        self.gen = int.from_bytes(os.urandom(7), "big")
        self.seq = 0
        self.buffer: list = []
        self.buffered = 0  # events (rows counted one each) in ``buffer``
        self.ok = True
        self.dirty = False  # events added since the last commit
        self.keep_store = keep_store
        from ..store.job_store import JobStore  # the store of the file's events alone, saved beside them

        self.store: Any = None
        if keep_store:
            self.store = (base.store() if base is not None else None) or JobStore()
            if base is not None and base.partial is None:
                self.ok = False  # an entry without its store cannot be extended: written anew next time
        if base is not None and base.chunks:
            done = cache._query("INSERT INTO chunks SELECT host, path, ?, seq, events FROM chunks "
                                "WHERE host = ? AND path = ? AND gen = ?", (self.gen, cache.host, self.path, base.gen))
            self.ok = self.ok and done is not None
            self.seq = base.chunks

    def add(self, events: list) -> None:
        if self.ok and events:
            self.dirty = True
            self.buffer.extend(events)
            # counted in events, not items: a block's rows are one item (counted as items, a follower
            # at 20,000 lines/s held millions of rows here: serve grew to 750 MB)
            self.buffered += weight(events)
            if self.store is not None:
                self.store.add(events)
            if self.buffered >= CHUNK_EVENTS:
                self._flush()

    def _flush(self) -> None:
        if not self.buffer or not self.ok:
            return
        try:
            assert self.cache.sealer is not None
            blob = self.cache.sealer.seal(zlib.compress(pickle.dumps(self.buffer, protocol=pickle.HIGHEST_PROTOCOL), 1))
        except Exception:
            self.ok = False
            return
        self.buffer, self.buffered = [], 0
        done = self.cache._query("INSERT INTO chunks VALUES (?, ?, ?, ?, ?)",
                                 (self.cache.host, self.path, self.gen, self.seq, blob))
        self.ok = done is not None
        self.cache.wrote(len(blob), enforce=False)
        self.seq += 1

    def commit(self, fd: int, offset: int, parser: Any) -> None:
        self.commit_as(Ident.of(fd, offset), offset, parser)

    def commit_as(self, ident: Ident, offset: int, parser: Any) -> None:
        """:meth:`commit` for a file known by ``ident`` (a remote one)."""
        self._flush()
        if not self.ok:
            self.abandon()
            return
        sealer = self.cache.sealer
        try:
            assert sealer is not None
            state = sealer.seal(zlib.compress(pickle.dumps(parser, protocol=pickle.HIGHEST_PROTOCOL), 1))
        except Exception:
            self.abandon()
            return
        partial: Optional[bytes] = None
        if self.store is not None:
            try:
                partial = sealer.seal(pickle.dumps(self.store, protocol=pickle.HIGHEST_PROTOCOL))
            except Exception:
                partial = None
        _commit_row(self.cache, self.path, ident, offset, self.gen, self.seq, state, partial)
        self.dirty = False  # events added later go on in this generation, the next commit covers them

    def restart(self) -> "EntryWriter":
        """A writer for the same path from nothing (the file was truncated or replaced)."""
        return EntryWriter(self.cache, os.fsdecode(self.path), None, self.keep_store)

    def abandon(self) -> None:
        self.cache._query("DELETE FROM chunks WHERE host = ? AND path = ? AND gen = ?",
                          (self.cache.host, self.path, self.gen))
