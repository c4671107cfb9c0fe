"""Record logs of the layout knowledge base: how reads are recorded where SQLite cannot
be shared safely (NFS, Lustre, GPFS, several mounts of one directory).

Every recording process appends its access records to a log of its own,
``records/<host>.<pid>-<random>.log`` beside ``kb.sqlite``, opened ``O_APPEND``; each
batch is one length-prefixed, checksummed frame written with one ``write``, so a log
has one writer and needs no lock. A reader meets at most one torn or corrupt frame, at
the tail of a log whose writer was killed mid-write (or is still writing it), and
stops there: everything before it is kept, the torn frame is ignored. The knowledge
base merges the logs into SQLite (``KnowledgeBase.merge``). The format is documented in
docs/FORMATS.md ("Record log").

A log may instead count reads served from replicas (a ``served`` frame, version 2: the
layout core writes one per replica set when the VOL connector closes a file), which the
merge adds to the replicas' ``uses``, ``benefit`` and ``last_used``.
"""

from __future__ import annotations

import os
import secrets
import struct
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .._files import _alive, host_name

MAGIC = b"PKBL"
#: The newest log version this patio reads: 2 adds the served frame (KIND_SERVED).
VERSION = 2
#: The version of logs of reads alone (what RecordLog writes; older patio reads it).
READS_VERSION = 1
HEADER = struct.Struct("<4sHH")  # magic, version, reserved (0)
FRAME = struct.Struct("<II")  # payload length, CRC-32 (zlib) of the payload
KIND = struct.Struct("<B3xI")  # frame kind, 3 reserved bytes, row count
KIND_READS = 1
KIND_END = 2
KIND_SERVED = 3
#: Frames longer than this are damage, not data.
MAX_PAYLOAD = 64 << 20
#: Rows per frame when a batch is written (so no frame comes near MAX_PAYLOAD).
ROWS_PER_FRAME = 4096
#: A log of another host unchanged for this long is treated as finished: its owner
#: cannot be asked whether it still runs.
IDLE_SECONDS = 24 * 3600.0
SUFFIX = ".log"

_NUMS = struct.Struct("<qqq")  # nelem, bytes, pid
_TIMES = struct.Struct("<dd")  # t0, seconds
_SERVED = struct.Struct("<qqdd")  # replica id, reads served, benefit, last used

#: One raw access row as the ``access`` table holds it:
#: ``(dset, sel JSON, points blob or None, nelem, bytes, pid, run, t0, seconds)``.
Row = tuple[str, str, "bytes | None", int, int, int, str, float, float]
#: Reads served from one replica, in the order the merge's UPDATE takes them:
#: ``(reads, benefit, last_used, replica id, replica path)``.
Served = tuple[int, float, float, int, str]


class LogError(Exception):
    """A record log that this patio cannot read (not a record log, or a newer version)."""


def header() -> bytes:
    return HEADER.pack(MAGIC, READS_VERSION, 0)


def _frame(payload: bytes) -> bytes:
    return FRAME.pack(len(payload), zlib.crc32(payload)) + payload


def _text(data: bytes, pos: int, width: struct.Struct) -> tuple[str, int]:
    (n,) = width.unpack_from(data, pos)
    pos += width.size
    return data[pos:pos + n].decode(), pos + n


_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")


def encode_reads(rows: Sequence[Row]) -> bytes:
    """One frame holding ``rows``."""
    parts = [KIND.pack(KIND_READS, len(rows))]
    for dset, sel, points, nelem, nbytes, pid, run, t0, seconds in rows:
        d, s, r, p = dset.encode(), sel.encode(), run.encode(), points or b""
        parts += [_U16.pack(len(d)), d, _U32.pack(len(s)), s, _U32.pack(len(p)), p,
                  _NUMS.pack(nelem, nbytes, pid), _U16.pack(len(r)), r,
                  _TIMES.pack(t0, seconds)]
    return _frame(b"".join(parts))


def encode_end() -> bytes:
    """The frame a writer appends when it closes its log: nothing follows it."""
    return _frame(KIND.pack(KIND_END, 0))


def _decode_served(payload: bytes, count: int) -> list[Served]:
    pos, out = KIND.size, []
    for _ in range(count):
        rid, uses, benefit, last_used = _SERVED.unpack_from(payload, pos)
        path, pos = _text(payload, pos + _SERVED.size, _U16)
        out.append((uses, benefit, last_used, rid, path))
    if pos != len(payload):
        raise ValueError(f"{len(payload) - pos} bytes after the last count")
    return out


def _decode_payload(payload: bytes) -> tuple[int, list[Row], list[Served]]:
    kind, count = KIND.unpack_from(payload, 0)
    if kind == KIND_SERVED:
        return kind, [], _decode_served(payload, count)
    if kind not in (KIND_READS, KIND_END):
        raise ValueError(f"unknown frame kind {kind}")
    pos = KIND.size
    rows: list[Row] = []
    for _ in range(count):
        dset, pos = _text(payload, pos, _U16)
        sel, pos = _text(payload, pos, _U32)
        (n,) = _U32.unpack_from(payload, pos)
        pos += _U32.size
        points = payload[pos:pos + n] or None
        pos += n
        nelem, nbytes, pid = _NUMS.unpack_from(payload, pos)
        pos += _NUMS.size
        run, pos = _text(payload, pos, _U16)
        t0, seconds = _TIMES.unpack_from(payload, pos)
        pos += _TIMES.size
        rows.append((dset, sel, points, nelem, nbytes, pid, run, t0, seconds))
    if pos != len(payload):
        raise ValueError(f"{len(payload) - pos} bytes after the last row")
    return kind, rows, []


@dataclass
class Frame:
    kind: int
    rows: list[Row]
    end: int  # offset just after the frame in the log
    #: A served frame's counts (empty for the other kinds).
    served: list[Served] = field(default_factory=list)


@dataclass
class Decoded:
    """What could be read of a log from some offset on."""

    frames: list[Frame] = field(default_factory=list)
    #: Offset after the last intact frame (where the next read starts).
    end: int = 0
    #: Why reading stopped before the end of the data (None: it did not).
    problem: str | None = None

    @property
    def finished(self) -> bool:
        return bool(self.frames) and self.frames[-1].kind == KIND_END


def check_header(head: bytes, name: str) -> bool:
    """True when ``head`` is a complete header this patio reads; False when the log is
    shorter than a header (its writer was killed before writing one); LogError
    otherwise."""
    if len(head) < HEADER.size:
        return False
    magic, version, _ = HEADER.unpack_from(head, 0)
    if magic != MAGIC:
        raise LogError(f"{name}: not a patio record log (magic {magic!r})")
    if version == 0 or version > VERSION:
        raise LogError(f"{name}: record log version {version}, this patio reads {VERSION}")
    return True


def decode(data: bytes, base: int) -> Decoded:
    """The intact frames of ``data``, the bytes of a log from offset ``base`` (after the
    header). Reading stops at the first torn or corrupt frame."""
    out = Decoded(end=base)
    pos = 0
    while pos < len(data):
        if len(data) - pos < FRAME.size:
            out.problem = f"torn frame header at offset {base + pos}"
            break
        n, crc = FRAME.unpack_from(data, pos)
        if n < KIND.size or n > MAX_PAYLOAD:
            out.problem = f"bad frame length {n} at offset {base + pos}"
            break
        payload = data[pos + FRAME.size:pos + FRAME.size + n]
        if len(payload) < n:
            out.problem = f"torn frame at offset {base + pos}"
            break
        if zlib.crc32(payload) != crc:
            out.problem = f"checksum mismatch at offset {base + pos}"
            break
        try:
            kind, rows, served = _decode_payload(payload)
        except (ValueError, struct.error, UnicodeDecodeError) as e:
            out.problem = f"bad frame at offset {base + pos}: {e}"
            break
        pos += FRAME.size + n
        out.frames.append(Frame(kind, rows, base + pos, served))
        out.end = base + pos
        if kind == KIND_END:
            if pos < len(data):
                out.problem = f"{len(data) - pos} bytes after the end frame"
            break
    return out


def read_log(path: Path, offset: int) -> tuple[Decoded, float]:
    """The intact frames of the log at ``path`` from ``offset`` (0 or the end of a frame
    read before), and the log's modification time."""
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        if not check_header(f.read(HEADER.size), str(path)):
            return Decoded(end=0), st.st_mtime
        start = max(offset, HEADER.size)
        f.seek(start)
        return decode(f.read(), start), st.st_mtime


def log_names(directory: Path) -> list[str]:
    """The record logs in ``directory`` (oldest name first: the order is only for
    reproducible merges)."""
    try:
        return sorted(n for n in os.listdir(directory)
                      if n.endswith(SUFFIX) and not n.startswith("."))
    except FileNotFoundError:
        return []


def writer_gone(name: str, mtime: float, now: float | None = None) -> bool:
    """Whether the process that wrote log ``name`` is known to be gone: on this host,
    its pid is not alive; on another, the log is unchanged for IDLE_SECONDS."""
    stem = name[:-len(SUFFIX)]
    host, dot, rest = stem.rpartition(".")
    pid = rest.split("-", 1)[0]
    if dot and host == host_name() and pid.isdigit():
        return not _alive(int(pid))
    return (now if now is not None else time.time()) - mtime > IDLE_SECONDS


class RecordLog:
    """The appending side: the log of one recording process (a forked child starts a
    log of its own; a log removed by a merge while open is replaced by a new one)."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path: Path | None = None
        self._fd: int | None = None
        self._pid = 0
        self._ident: tuple[int, int] = (0, 0)
        self._lock = threading.Lock()

    def _open(self) -> tuple[int, bytes]:
        if self._fd is not None and self._pid == os.getpid() and self.path is not None:
            try:
                st = os.stat(self.path)
                if (st.st_dev, st.st_ino) == self._ident:
                    return self._fd, b""
            except FileNotFoundError:
                pass
        self._drop()
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"{host_name()}.{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"
        path = self.directory / name
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC,
                     0o666)
        st = os.fstat(fd)
        self._fd, self._pid, self.path, self._ident = fd, os.getpid(), path, (st.st_dev,
                                                                             st.st_ino)
        return fd, header()

    def _drop(self) -> None:
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
        self._fd, self.path = None, None

    def _write(self, data: bytes) -> None:
        fd, head = self._open()
        data = head + data
        try:
            written = os.write(fd, data)
        except OSError:
            self._drop()  # the tail may be torn: never append behind it
            raise
        if written != len(data):
            self._drop()
            raise OSError(f"{self.path}: short write ({written} of {len(data)} bytes)")

    def append(self, rows: Sequence[Row]) -> None:
        """Appends ``rows`` (one frame per ROWS_PER_FRAME rows, each one ``write``)."""
        with self._lock:
            for i in range(0, len(rows), ROWS_PER_FRAME):
                self._write(encode_reads(rows[i:i + ROWS_PER_FRAME]))

    def finish(self) -> bool:
        """Ends this process's log (an end frame, then close); True when it had one."""
        with self._lock:
            if self._fd is None or self._pid != os.getpid():
                self._drop()  # a forked child's copy: the parent ends its log
                return False
            try:
                os.write(self._fd, encode_end())
            except OSError:
                pass  # the log ends when its writer is gone, as after a kill
            self._drop()
            return True
