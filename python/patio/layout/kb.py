"""The layout knowledge base: what was read from an HDF5 file, the replicas built for
it, the storage budget and the measured device constants, in one SQLite file.

Location: ``<dir of the file>/.patio-layout/<file name>/kb.sqlite``, or, when
``PATIO_LAYOUT_DIR`` is set, ``$PATIO_LAYOUT_DIR/<file name>-<hash of its path>/``; the
replicas live beside it in ``replicas/``, the record logs in ``records/``. The
directory is usually on the file system of the data - NFS, Lustre, GPFS - and may be
reached through several mounts, so:

* **Recording never writes the database.** Each recording process appends its reads to
  a record log of its own (:mod:`patio.layout.kblog`); :meth:`KnowledgeBase.merge`
  moves them into ``access`` (at ``compact``, so at ``layout status|advise|build``, and
  when a recording process closes, MERGE_AT_CLOSE_LOGS logs wait and nobody else holds
  the database), each log's
  merged offset advancing in the same transaction as its rows are inserted, so every
  read is counted exactly once; a log is removed only after that transaction committed.
* **The database uses a rollback journal (``DELETE``) with dot-file locking**
  (SQLite's ``unix-dotfile`` VFS: a lock is the directory ``kb.sqlite.lock``, made with
  ``mkdir``). WAL keeps its index in shared memory (``kb.sqlite-shm``), which is
  coherent only between processes of one host: over NFS or from two hosts it corrupts
  the database. POSIX locks, which SQLite's default locking relies on, are not
  propagated by every layer either (NFS without lockd, Lustre without ``-o flock``,
  FUSE mounts, each of which locks on its own); ``mkdir`` is atomic on all of them. So
  readers and writers of every host exclude each other - transactions are short, and
  recorders no longer write - and a lock older than LOCK_STALE_SECONDS, left by a
  killed process, is broken (SQLite then rolls back its hot journal). The one read
  every file opened through ``patio.h5`` makes (schema version, ready replicas) is made
  without the lock when no write is in progress and checked afterwards like a sequence
  lock (:func:`_read_unlocked`): the lock's ``rmdir`` costs milliseconds on a busy disk.

Raw ``access`` rows are compacted into ``pattern`` rows: identical selections are
counted once, and boxes that differ only in their start along one axis (a sub-plane of
every time step) become one *family* whose starts are a pattern sequence of the engine
- so the table grows with the number of distinct patterns, not with the number of
reads. The schema is versioned (``meta.schema_version``) and documented in
docs/FORMATS.md.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import sqlite3
import time
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from . import kblog
from .selection import Hyperslab, Selection

if TYPE_CHECKING:
    from typing import Self

#: 2: record logs (``records/``, table ``record_log``), rollback journal, dot-file locks.
SCHEMA_VERSION = 2
#: Raw access rows kept before a merge compacts them.
COMPACT_THRESHOLD = 512
#: Rows merged per transaction, and the time after which a merge transaction reads no
#: further log: no transaction holds the lock anywhere near LOCK_STALE_SECONDS.
MERGE_ROWS = 50_000
MERGE_SECONDS = 10.0
#: Finished record logs that make a closing recorder merge them (when nobody else holds
#: the database): a merge commits twice (its rows, then the logs' removal), which costs
#: a recorder tens of milliseconds, so closing pays it once per this many recorders.
MERGE_AT_CLOSE_LOGS = 32
#: A database lock (``kb.sqlite.lock``) older than this was left by a killed process.
LOCK_STALE_SECONDS = 60.0
BUSY_MS = 10_000

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS access(
    id INTEGER PRIMARY KEY, dset TEXT NOT NULL, sel TEXT NOT NULL, points BLOB,
    nelem INTEGER NOT NULL, bytes INTEGER NOT NULL, pid INTEGER NOT NULL,
    run TEXT NOT NULL, t0 REAL NOT NULL, seconds REAL NOT NULL);
CREATE TABLE IF NOT EXISTS pattern(
    id INTEGER PRIMARY KEY, dset TEXT NOT NULL, key TEXT NOT NULL, sel TEXT NOT NULL,
    axis INTEGER, starts BLOB, nstarts INTEGER NOT NULL, points BLOB,
    nelem INTEGER NOT NULL, reads INTEGER NOT NULL, procs TEXT NOT NULL,
    bytes INTEGER NOT NULL, seconds REAL NOT NULL, first_seen REAL NOT NULL,
    last_seen REAL NOT NULL, UNIQUE(dset, key));
CREATE TABLE IF NOT EXISTS replica(
    id INTEGER PRIMARY KEY, dset TEXT NOT NULL, kind TEXT NOT NULL, params TEXT NOT NULL,
    sel TEXT, points BLOB, path TEXT NOT NULL, bytes INTEGER NOT NULL,
    meta_bytes INTEGER NOT NULL, state TEXT NOT NULL, source TEXT NOT NULL,
    created REAL NOT NULL, last_used REAL, uses INTEGER NOT NULL DEFAULT 0,
    benefit REAL NOT NULL DEFAULT 0, note TEXT);
CREATE TABLE IF NOT EXISTS setting(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS record_log(
    name TEXT PRIMARY KEY, offset INTEGER NOT NULL, updated REAL NOT NULL);
"""


class KnowledgeBaseError(Exception):
    """The knowledge base cannot be used (locked, damaged, newer version, no access)."""


def kb_dir(source: str | os.PathLike[str]) -> Path:
    """The directory holding the knowledge base and replicas of ``source`` (the layout
    core's definition, which the VOL connector uses too)."""
    from patio._native import layout_kb_dir

    return Path(layout_kb_dir(source))


def encode_ints(values: np.ndarray) -> bytes:
    """A sorted or unsorted int64 sequence as the pattern engine's encoding (the layout
    core's definition, which the VOL connector's point blobs use too)."""
    from patio._native import layout_ints_blob

    return bytes(layout_ints_blob(np.ascontiguousarray(values, dtype=np.int64)))


def decode_ints(blob: bytes | None) -> np.ndarray:
    from patio import PatternSeq

    if not blob:
        return np.zeros(0, np.int64)
    return np.asarray(PatternSeq.decode(blob).expand(), dtype=np.int64)


@dataclass
class Pattern:
    """One compacted pattern row: a selection, or a family of equal boxes whose start
    along ``axis`` takes each value of ``starts``."""

    id: int
    dset: str
    sel: Selection
    axis: int | None
    starts: np.ndarray
    reads: int
    procs: int
    bytes: int
    seconds: float
    last_seen: float

    def members(self) -> Iterator[Selection]:
        """Every selection of the family (one when not a family)."""
        if self.axis is None:
            yield self.sel
            return
        for s in self.starts:
            yield shift_start(self.sel, self.axis, int(s))

    def union(self) -> Selection:
        """The family as one selection (a product over the varying axis)."""
        if self.axis is None:
            return self.sel
        slabs = [m.slabs[0] for m in self.members()]
        out = (len(slabs),) + slabs[0].extent() if slabs else ()
        return Selection.union(self.sel.shape, slabs, out)


def shift_start(sel: Selection, axis: int, start: int) -> Selection:
    slab = sel.slabs[0]
    st = list(slab.start)
    st[axis] = start
    return Selection.hyperslab(sel.shape, Hyperslab(tuple(st), slab.stride, slab.count,
                                                    slab.block), sel.out_shape)


@dataclass
class ReplicaRow:
    id: int
    dset: str
    kind: str
    params: dict[str, Any]
    sel: Selection | None
    path: str
    bytes: int
    meta_bytes: int
    state: str
    source: dict[str, Any]
    created: float
    last_used: float | None
    uses: int
    benefit: float
    note: str | None


def _unstick(path: Path) -> bool:
    """Breaks the database lock ``<path>.lock`` when it is older than
    LOCK_STALE_SECONDS (its holder was killed); True when it did."""
    lock = path.with_name(path.name + ".lock")
    try:
        if time.time() - lock.stat().st_mtime <= LOCK_STALE_SECONDS:
            return False
        os.rmdir(lock)
    except OSError:
        return False
    return True


def _leave_wal(path: Path) -> None:
    """Turns a database of schema version 1 (WAL mode) into a rollback-journal one, which
    needs that no other process has it open."""
    try:
        with open(path, "rb") as f:
            head = f.read(20)
    except OSError:
        return
    if len(head) < 20 or head[:16] != b"SQLite format 3\0" or head[18] != 2:
        return
    deadline = time.monotonic() + BUSY_MS / 1000
    while True:
        db = sqlite3.connect(path, timeout=BUSY_MS / 1000, isolation_level=None)
        try:
            mode = str(db.execute("PRAGMA journal_mode=DELETE").fetchone()[0])
        except sqlite3.OperationalError:
            mode = "wal"
        finally:
            db.close()
        if mode.lower() == "delete":
            return
        if time.monotonic() > deadline:
            raise KnowledgeBaseError(
                f"knowledge base {path} is in WAL mode (an older patio) and open in another "
                "process: close it there and retry")
        time.sleep(0.1)


def _connect(path: Path) -> sqlite3.Connection:
    uri = f"file:{urllib.parse.quote(str(path))}?vfs=unix-dotfile"
    db = sqlite3.connect(uri, uri=True, timeout=BUSY_MS / 1000, isolation_level=None)
    db.execute(f"PRAGMA busy_timeout={BUSY_MS}")
    return db


def _state(path: Path) -> bytes | None:
    """What says the database at ``path`` has not changed - its identity (device, inode,
    size, modification and change times) and SQLite's header (the file change counter
    SQLite advances at every commit, the page count, the schema cookie) - when it is a
    rollback-journal database with no journal beside it (no write in progress); None
    otherwise. The layout core's one definition (``kbserve::kb_state``), which serving
    applies too."""
    from patio._native import layout_kb_state

    state: bytes | None = layout_kb_state(path)
    return state


def _read_unlocked(path: Path) -> tuple[object, list[ReplicaRow]] | None:
    """The schema version (None when there is none) and the ``ready`` replicas of the
    database at ``path``, read without its dot-file lock, or None when the read cannot
    be trusted.

    The lock costs a reader ``mkdir`` and ``rmdir`` of ``kb.sqlite.lock``, and ``rmdir``
    takes milliseconds on a loaded local disk (more over NFS), which every file opened
    through ``patio.h5`` paid. Instead, like a sequence lock: the file's state
    (:func:`_state`: identity and header, change counter included) is read, the journal's
    absence checked, the rows read through a read-only connection that takes no lock
    (SQLite's ``unix-none`` VFS), and the state read (and the journal's absence checked)
    again. In rollback-journal mode every
    write to the database file happens while its journal exists, and every commit
    advances the change counter; so a write overlapping the read either left its journal
    at one of the two checks or happened wholly between them, and then changed the
    counter. Any difference, and any SQLite error (a torn page), means: read under the
    lock instead. The read-only connection cannot roll back a journal it takes for hot:
    SQLite refuses (``SQLITE_READONLY_ROLLBACK``)."""
    before = _state(path)
    if before is None:
        return None
    seen = _SEEN.get(str(path))
    if seen is not None and seen[0] == before:  # not written since: the same rows
        return seen[1], [copy.copy(r) for r in seen[2]]
    uri = f"file:{urllib.parse.quote(str(path))}?mode=ro&vfs=unix-none"
    try:
        db = sqlite3.connect(uri, uri=True, isolation_level=None, check_same_thread=False)
    except sqlite3.Error:
        return None
    try:
        row = db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
        version = row[0] if row is not None else None
        rows = (_replica_rows(db, state="ready")
                if version is not None and str(version) == str(SCHEMA_VERSION) else [])
    except (sqlite3.Error, ValueError, KeyError, TypeError):
        return None
    finally:
        db.close()
    if _state(path) != before:
        return None
    _SEEN[str(path)] = (before, version, rows)
    return version, [copy.copy(r) for r in rows]


#: Per database, the last rows :func:`_read_unlocked` trusted and the state (:func:`_state`)
#: they were read at: while the state is unchanged and no journal lies beside the file,
#: the database holds the same rows - SQLite validates its own page cache between
#: connections by the same counter - so a process opening a file again reads its header
#: instead of querying.
_SEEN: dict[str, tuple[bytes, object, list[ReplicaRow]]] = {}


class KnowledgeBase:
    """One source file's knowledge base (see the module docstring)."""

    def __init__(self, source: str | os.PathLike[str], create: bool = True,
                 ready: bool = False) -> None:
        """``ready``: also read the ready replicas (:attr:`ready_rows`) under the same lock as
        the schema check - each locked statement costs a dot-file lock's ``mkdir`` and
        ``rmdir`` (about 2 ms on a local ext4 under load, more over NFS), and a reader
        opening a file needs both."""
        self.source = Path(source).resolve()
        #: The replicas in state ``ready`` when the base was opened (with ``ready``), or
        #: None.
        self.ready_rows: list[ReplicaRow] | None = None
        self.dir = kb_dir(self.source)
        self.path = self.dir / "kb.sqlite"
        self.log = kblog.RecordLog(self.dir / "records")
        if not create and not self.path.exists():
            raise KnowledgeBaseError(f"{self.source}: nothing recorded yet (no {self.path})")
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
            (self.dir / "replicas").mkdir(exist_ok=True)
        except OSError as e:
            raise KnowledgeBaseError(
                f"cannot create the knowledge base directory {self.dir}: {e.strerror} "
                "(set PATIO_LAYOUT_DIR to a writable directory)") from None
        try:
            _unstick(self.path)
            _leave_wal(self.path)
            self.db = _connect(self.path)
            if not (ready and self._open_unlocked()):
                self._migrate(ready)
        except sqlite3.OperationalError as e:
            raise KnowledgeBaseError(f"knowledge base {self.path}: {e}") from None
        except sqlite3.DatabaseError as e:
            raise KnowledgeBaseError(f"knowledge base {self.path} is damaged: {e}") from None

    def _check_version(self, value: object) -> int:
        if not str(value).isdigit():
            raise KnowledgeBaseError(
                f"knowledge base {self.path} is damaged: schema version {value!r}")
        if int(str(value)) > SCHEMA_VERSION:
            raise KnowledgeBaseError(
                f"knowledge base {self.path} has schema version {value}, newer than this "
                f"patio's {SCHEMA_VERSION}: upgrade patio or set PATIO_LAYOUT_DIR")
        return int(str(value))

    def _open_unlocked(self) -> bool:
        """The schema check and the ready replicas read without taking the database
        lock (:func:`_read_unlocked`); False when that read could not be trusted or the
        schema is not current (then :meth:`_migrate` reads under the lock)."""
        got = _read_unlocked(self.path)
        if got is None:
            return False
        version, rows = got
        if version is None or self._check_version(version) != SCHEMA_VERSION:
            return False
        self.ready_rows = rows
        return True

    def read_ready(self) -> list[ReplicaRow]:
        """The replicas in state ``ready`` now (without the lock when that read can be
        trusted, see :func:`_read_unlocked`)."""
        got = _read_unlocked(self.path)
        if got is not None and got[0] is not None and str(got[0]) == str(SCHEMA_VERSION):
            return got[1]
        return self.replicas(state="ready")

    def _migrate(self, ready: bool = False) -> None:
        # The common case, a current database, in one read transaction (one lock).
        self.db.execute("BEGIN")
        try:
            row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            current = row is not None and self._check_version(row[0]) == SCHEMA_VERSION
            if current and ready:
                self.ready_rows = self.replicas(state="ready")
        except sqlite3.OperationalError as e:
            if "no such table" not in str(e):
                raise
            row, current = None, False
        finally:
            if self.db.in_transaction:
                self.db.execute("COMMIT")
        if current:
            return
        with self.transaction():
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    self.db.execute(statement)
            row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                self.db.execute("INSERT INTO meta VALUES('schema_version', ?)",
                                (str(SCHEMA_VERSION),))
            elif self._check_version(row[0]) < SCHEMA_VERSION:  # 1: record_log made above
                self.db.execute("UPDATE meta SET value=? WHERE key='schema_version'",
                                (str(SCHEMA_VERSION),))

    def close(self) -> None:
        """Ends this process's record log and, when MERGE_AT_CLOSE_LOGS logs or more wait
        and nobody else holds the database at this moment, merges what the finished logs
        hold (``compact`` merges every log in any case)."""
        if self.log.finish() and self.pending_logs() >= MERGE_AT_CLOSE_LOGS:
            try:
                self.merge(wait=False)
            except (KnowledgeBaseError, sqlite3.Error, OSError):
                pass  # the logs stay; the next merge takes them
        self.db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- transactions --------------------------------------------------------------
    class _Tx:
        def __init__(self, kb: KnowledgeBase) -> None:
            self.kb = kb
            self.db = kb.db

        def __enter__(self) -> sqlite3.Connection:
            try:
                self.db.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) or not _unstick(self.kb.path):
                    raise
                self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, exc_type: object, *rest: object) -> None:
            self.db.execute("ROLLBACK" if exc_type else "COMMIT")

    def transaction(self) -> KnowledgeBase._Tx:
        """``with kb.transaction() as db:`` - one write transaction (BEGIN IMMEDIATE)."""
        return KnowledgeBase._Tx(self)

    # -- settings --------------------------------------------------------------------
    def setting(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM setting WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else default

    def set_setting(self, key: str, value: Any) -> None:
        with self.transaction() as db:
            db.execute("INSERT OR REPLACE INTO setting VALUES(?, ?)", (key, json.dumps(value)))

    # -- recording -------------------------------------------------------------------
    def record(self, rows: Iterable[tuple[str, Selection, int, int, str, float, float]]) -> int:
        """Appends raw access rows ``(dset, sel, bytes, pid, run, t0, seconds)`` to this
        process's record log (merged into the database later, see :meth:`merge`).
        Returns the rows written."""
        batch: list[kblog.Row] = []
        for dset, sel, nbytes, pid, run, t0, seconds in rows:
            blob = encode_ints(sel.linear_indices()) if sel.kind == "points" else None
            batch.append((dset, sel.to_json(), blob, sel.nelements(), nbytes, pid, run, t0,
                          seconds))
        if not batch:
            return 0
        try:
            self.log.append(batch)
        except OSError as e:
            raise KnowledgeBaseError(f"cannot append to a record log in {self.log.directory}: "
                                     f"{e.strerror or e}") from None
        return len(batch)

    def merge(self, wait: bool = True) -> int:
        """Moves the records of every record log into ``access``, exactly once (a log's
        merged offset advances in the transaction that inserts its rows), compacts when
        enough raw rows accumulated, and removes the logs that are merged and finished
        (an end frame, or their writer is gone: a torn last frame is then dropped).
        ``wait=False``: return at once when another process holds the database. Returns
        the rows merged."""
        total = 0
        if not wait:
            self.db.execute("PRAGMA busy_timeout=0")
        try:
            while True:
                n, done, more = self._merge_some()
                total += n
                if done:
                    self._remove_logs(done, wait)
                if n and self.raw_rows() >= COMPACT_THRESHOLD:
                    self._fold()
                if not more or not n:  # nothing merged: leave the rest to the next merge
                    return total
        except sqlite3.OperationalError:
            if wait:
                raise
            return total
        finally:
            if not wait:
                self.db.execute(f"PRAGMA busy_timeout={BUSY_MS}")

    def _remove_logs(self, names: list[str], wait: bool) -> None:
        """Removes merged, complete logs (their rows are committed), then their
        ``record_log`` rows - waiting for the lock even in a ``wait=False`` merge, so that
        only a process killed in between leaves a row (dropped a day later)."""
        for name in names:
            try:
                os.unlink(self.log.directory / name)
            except FileNotFoundError:
                pass
        if not wait:
            self.db.execute(f"PRAGMA busy_timeout={BUSY_MS}")
        try:
            with self.transaction() as db:
                db.executemany("DELETE FROM record_log WHERE name=?", [(n,) for n in names])
        finally:
            if not wait:
                self.db.execute("PRAGMA busy_timeout=0")

    def _merge_some(self) -> tuple[int, list[str], bool]:
        """One merge transaction of at most about MERGE_ROWS rows or MERGE_SECONDS:
        (rows, finished logs, whether logs were left for another transaction)."""
        names = kblog.log_names(self.log.directory)
        if not names:
            return 0, [], False
        n, done, more = 0, [], False
        with self.transaction() as db:
            began = time.monotonic()
            merged, listed, old = {}, set(names), time.time() - kblog.IDLE_SECONDS
            for name, offset, updated in db.execute("SELECT name, offset, updated FROM record_log").fetchall():
                merged[name] = offset
                if name not in listed and updated < old:  # its remover was killed
                    db.execute("DELETE FROM record_log WHERE name=?", (name,))
            for name in names:
                if n >= MERGE_ROWS or time.monotonic() - began > MERGE_SECONDS:
                    more = True
                    break
                path = self.log.directory / name
                start = int(merged.get(name, 0))
                try:
                    # Gone before reading: then nothing can be appended after the read.
                    gone = kblog.writer_gone(name, path.stat().st_mtime)
                    dec, _ = kblog.read_log(path, start)
                except (OSError, kblog.LogError):
                    continue  # removed meanwhile, unreadable, or a newer patio's
                end, complete = start, True
                for frame in dec.frames:
                    if frame.rows and n >= MERGE_ROWS:
                        complete, more = False, True
                        break
                    if frame.rows:
                        db.executemany(
                            "INSERT INTO access(dset, sel, points, nelem, bytes, pid, run, t0, "
                            "seconds) VALUES(?,?,?,?,?,?,?,?,?)", frame.rows)
                        n += len(frame.rows)
                    if frame.served:  # reads served from replicas (the VOL connector's)
                        db.executemany(
                            "UPDATE replica SET uses=uses+?, benefit=benefit+?, last_used="
                            "MAX(COALESCE(last_used, 0), ?) WHERE id=? AND path=?", frame.served)
                    end = frame.end
                if end != start:
                    db.execute("INSERT OR REPLACE INTO record_log VALUES(?,?,?)",
                               (name, end, time.time()))
                if complete and (dec.finished or gone):
                    done.append(name)
        return n, done, more

    def pending_logs(self) -> int:
        """Record logs not yet merged and removed."""
        return len(kblog.log_names(self.log.directory))

    def compact(self) -> int:
        """Merges the record logs, then folds every raw access row into pattern rows;
        returns the rows folded."""
        self.merge()
        return self._fold()

    def _fold(self) -> int:
        """Folds every raw access row into pattern rows; returns the rows folded."""
        with self.transaction() as db:
            rows = db.execute(
                "SELECT id, dset, sel, points, nelem, bytes, pid, t0, seconds FROM access"
            ).fetchall()
            if not rows:
                return 0
            groups: dict[tuple[str, str], list[Any]] = {}
            for r in rows:
                _, dset, sel_json, points, nelem, nbytes, pid, t0, seconds = r
                sel = Selection.from_json(sel_json)
                fam_key, axis, start = family_key(sel, points)
                g = groups.setdefault((dset, fam_key), [sel, axis, set(), 0, set(), 0, 0.0,
                                                          t0, t0, points, nelem])
                if start is not None:
                    g[2].add(start)
                g[3] += 1
                g[4].add(pid)
                g[5] += nbytes
                g[6] += seconds
                g[7] = min(g[7], t0)
                g[8] = max(g[8], t0)
            for (dset, key), (sel, axis, starts, reads, pids, nbytes, secs, first, last,
                              points, nelem) in groups.items():
                old = db.execute(
                    "SELECT id, starts, reads, procs, bytes, seconds, first_seen, last_seen "
                    "FROM pattern WHERE dset=? AND key=?", (dset, key)).fetchone()
                if old is not None:
                    starts |= set(decode_ints(old[1]).tolist())
                    reads += old[2]
                    pids |= set(json.loads(old[3]))
                    nbytes += old[4]
                    secs += old[5]
                    first = min(first, old[6])
                    last = max(last, old[7])
                starts_arr = np.array(sorted(starts), dtype=np.int64)
                starts_blob = encode_ints(starts_arr) if axis is not None else None
                procs = json.dumps(sorted(pids)[:4096])
                if old is None:
                    db.execute(
                        "INSERT INTO pattern(dset, key, sel, axis, starts, nstarts, points, "
                        "nelem, reads, procs, bytes, seconds, first_seen, last_seen) "
                        "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                        (dset, key, sel.to_json(), axis, starts_blob, len(starts_arr), points,
                         nelem, reads, procs, nbytes, secs, first, last))
                else:
                    db.execute(
                        "UPDATE pattern SET starts=?, nstarts=?, reads=?, procs=?, bytes=?, "
                        "seconds=?, first_seen=?, last_seen=? WHERE id=?",
                        (starts_blob, len(starts_arr), reads, procs, nbytes, secs, first, last,
                         old[0]))
            db.execute("DELETE FROM access WHERE id <= ?", (max(r[0] for r in rows),))
            return len(rows)

    def patterns(self, dset: str | None = None) -> list[Pattern]:
        q = ("SELECT id, dset, sel, axis, starts, points, reads, procs, bytes, seconds, "
             "last_seen FROM pattern")
        args: tuple[Any, ...] = ()
        if dset is not None:
            q += " WHERE dset=?"
            args = (dset,)
        out = []
        for pid, d, sel_json, axis, starts, points, reads, procs, nbytes, secs, last in \
                self.db.execute(q + " ORDER BY id", args):
            pts = None
            sel0 = json.loads(sel_json)
            if sel0["kind"] == "points":
                lin = decode_ints(points)
                pts = np.stack(np.unravel_index(lin, tuple(sel0["shape"])), axis=1)
            sel = Selection.from_json(sel_json, pts)
            out.append(Pattern(pid, d, sel, axis, decode_ints(starts), reads,
                               len(json.loads(procs)), nbytes, secs, last))
        return out

    def raw_rows(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM access").fetchone()[0])

    def datasets(self) -> list[tuple[str, int]]:
        """``(dataset, reads)`` for every dataset with recorded reads."""
        counts: dict[str, int] = {}
        for d, n in self.db.execute("SELECT dset, SUM(reads) FROM pattern GROUP BY dset"):
            counts[d] = counts.get(d, 0) + int(n)
        for d, n in self.db.execute("SELECT dset, COUNT(*) FROM access GROUP BY dset"):
            counts[d] = counts.get(d, 0) + int(n)
        return sorted(counts.items())

    # -- replicas ----------------------------------------------------------------------
    def add_replica(self, dset: str, kind: str, params: dict[str, Any], sel: Selection | None,
                    path: str, source: dict[str, Any]) -> int:
        """A new replica row in state ``building`` (not served until :meth:`ready`)."""
        blob = encode_ints(sel.linear_indices()) if sel is not None and sel.kind == "points" \
            else None
        with self.transaction() as db:
            cur = db.execute(
                "INSERT INTO replica(dset, kind, params, sel, points, path, bytes, meta_bytes, "
                "state, source, created) VALUES(?,?,?,?,?,?,0,0,'building',?,?)",
                (dset, kind, json.dumps(params), sel.to_json() if sel is not None else None,
                 blob, path, json.dumps(source), time.time()))
            return int(cur.lastrowid or 0)

    def ready(self, rid: int, path: str, nbytes: int, meta_bytes: int) -> None:
        with self.transaction() as db:
            db.execute("UPDATE replica SET state='ready', path=?, bytes=?, meta_bytes=? "
                       "WHERE id=?", (path, nbytes, meta_bytes, rid))

    def set_state(self, rid: int, state: str, note: str | None = None) -> None:
        with self.transaction() as db:
            db.execute("UPDATE replica SET state=?, note=? WHERE id=?", (state, note, rid))

    def mark_dataset_stale(self, dset: str, note: str) -> None:
        with self.transaction() as db:
            db.execute("UPDATE replica SET state='stale', note=? WHERE dset=? AND "
                       "state IN ('ready', 'building')", (note, dset))

    def used(self, rid: int, benefit: float) -> None:
        with self.transaction() as db:
            db.execute("UPDATE replica SET uses=uses+1, last_used=?, benefit=benefit+? "
                       "WHERE id=?", (time.time(), benefit, rid))

    def replicas(self, dset: str | None = None, state: str | None = None) -> list[ReplicaRow]:
        return _replica_rows(self.db, dset, state)

    def delete_replica(self, rid: int) -> None:
        with self.transaction() as db:
            db.execute("DELETE FROM replica WHERE id=?", (rid,))


def _replica_rows(db: sqlite3.Connection, dset: str | None = None, state: str | None = None
                  ) -> list[ReplicaRow]:
    q = ("SELECT id, dset, kind, params, sel, points, path, bytes, meta_bytes, state, "
         "source, created, last_used, uses, benefit, note FROM replica")
    cond, args = [], []
    if dset is not None:
        cond.append("dset=?")
        args.append(dset)
    if state is not None:
        cond.append("state=?")
        args.append(state)
    if cond:
        q += " WHERE " + " AND ".join(cond)
    out = []
    for r in db.execute(q + " ORDER BY id", args):
        sel = None
        if r[4] is not None:
            d = json.loads(r[4])
            pts = None
            if d["kind"] == "points":
                lin = decode_ints(r[5])
                pts = np.stack(np.unravel_index(lin, tuple(d["shape"])), axis=1)
            sel = Selection.from_json(r[4], pts)
        out.append(ReplicaRow(r[0], r[1], r[2], json.loads(r[3]), sel, r[6], r[7], r[8],
                              r[9], json.loads(r[10]), r[11], r[12], r[13], r[14], r[15]))
    return out


def family_key(sel: Selection, points: bytes | None) -> tuple[str, int | None, int | None]:
    """The compaction key of a selection: single boxes/hyperslabs are keyed without their
    start along the axis whose start varies between members of a family (by convention
    the first axis whose extent is one element, e.g. a time step, else the first axis);
    everything else is keyed by its exact content."""
    if sel.kind == "points":
        digest = hashlib.sha1(points or b"").hexdigest()
        return f"p:{sel.shape}:{digest}", None, None
    if sel.kind == "hyperslab":
        slab = sel.slabs[0]
        axis = next((a for a, e in enumerate(slab.extent()) if e == 1), 0)
        start = list(slab.start)
        varying = start[axis]
        start[axis] = -1
        key = json.dumps([list(sel.shape), axis, start, list(slab.stride), list(slab.count),
                          list(slab.block), list(sel.out_shape)])
        return "h:" + hashlib.sha1(key.encode()).hexdigest(), axis, varying
    return "u:" + hashlib.sha1(sel.to_json().encode()).hexdigest(), None, None
