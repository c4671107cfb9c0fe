"""Read Darshan DXT logs into patio trace streams and write them as patio trace CSV.

Darshan's extended tracing (DXT) records every POSIX and MPI-IO request a process made:
offset, length and start/end time, per file and rank. This module turns such a log into
patio's trace model, one :class:`Stream` per ``module x rank x file x op``, using the
``darshan`` Python package (PyDarshan), and writes the patio trace CSV that the Rust
``patio analyze`` reads. It is also what ``patio analyze`` runs for ``.darshan`` inputs::

    python -m patio.dxt LOG.darshan -o OUT.csv     # "-o -" (the default) writes to stdout

Trace CSV format (``docs/FORMATS.md``): the header line is exactly
``module,file,rank,op,offset,length,start,end``; then one row per request: module
(``POSIX`` or ``MPIIO``), file name (quoted by the ``csv`` module's minimal quoting when it
needs it), rank (integer), op (``read`` or ``write``), offset and length (unsigned
integers, bytes), start and end (seconds since the job started, Python ``repr`` precision).
Rows are grouped by stream, streams in order of their key ``(module, file, rank, op)``, and
within a stream by start time (stable, so equal start times keep Darshan's order).

Every failure to read a log is a :class:`DxtError` whose message is one line naming the
file and what to do about it. The Darshan C library is not trusted with damaged files: it
prints diagnostics to file descriptor 2 and carries on with fewer records (a truncated
log reads as an empty one), and on some corrupt logs it aborts or segfaults. So before it
sees a file, the header is checked (magic number; regions within the file size) and every
compressed region is decompressed once to verify its checksums; the log is then decoded
in a child process, with descriptor 2 captured, and whatever the library printed or a
crash becomes a ``DxtError`` instead of noise on the terminal or a dead interpreter.
Because of that capture, :func:`read_dxt` should not run concurrently with other threads
that write to stderr.
"""

from __future__ import annotations

import argparse
import bz2
import contextlib
import csv
import io
import operator
import os
import struct
import sys
import tempfile
import warnings
import zlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import numpy as np

__all__ = [
    "CSV_HEADER",
    "DxtError",
    "DxtWarning",
    "Stream",
    "main",
    "read_dxt",
    "write_csv",
]

#: The exact first line of a patio trace CSV.
CSV_HEADER = "module,file,rank,op,offset,length,start,end"

#: Darshan DXT module name -> patio module name.
_MODULES: dict[str, str] = {"DXT_POSIX": "POSIX", "DXT_MPIIO": "MPIIO"}

#: ``DARSHAN_MAGIC_NR`` from darshan-log-format.h, the int64 at byte 8 of every log.
_DARSHAN_MAGIC = 6567223
#: Darshan 3.x header: version[8], magic int64, comp_type + partial_flag (8 bytes),
#: name map {off, len} and DARSHAN_MAX_MODS (16) module maps {off, len}, as uint64.
_MAX_MODS = 16
_MAPS_AT = 24
_HEADER_MIN = _MAPS_AT + 16 * (1 + _MAX_MODS)
#: Whole header (maps plus ``mod_ver[16]``) in the versions verified against real logs.
_HEADER_SIZE = _HEADER_MIN + 4 * _MAX_MODS
_KNOWN_HEADER_VERSIONS = (b"3.10", b"3.21")
#: ``enum darshan_comp_type`` values (byte 16 of the header).
_ZLIB_COMP = 0
_BZIP2_COMP = 1
#: Read and decompress in pieces of this many bytes.
_CHUNK = 1 << 20

_NO_DXT_HINT = (
    "rerun the application with DXT enabled (export DXT_ENABLE_IO_TRACE=1) "
    "or use a log recorded with it"
)
_BAD_LOG_HINT = "check the file is a complete .darshan log"

#: One row per request while assembling streams; offsets/lengths are int64 in Darshan.
_SEGMENT_DTYPE = np.dtype(
    [("offset", np.int64), ("length", np.int64), ("start", np.float64), ("end", np.float64)]
)
_SEGMENT_FIELDS = operator.itemgetter("offset", "length", "start_time", "end_time")


class DxtError(Exception):
    """A Darshan log could not be read as DXT trace data; the message is one line."""


class DxtWarning(UserWarning):
    """The log was read, but what it holds is incomplete (e.g. Darshan ran out of memory)."""


@dataclass(eq=False)
class Stream:
    """The requests of one ``module x rank x file x op``, ordered by start time.

    ``offset`` and ``length`` are ``uint64`` byte counts; ``start`` and ``end`` are
    ``float64`` seconds since the job started. All four arrays have the same length.
    """

    module: str
    file: str
    rank: int
    op: str
    offset: np.ndarray = field(repr=False)
    length: np.ndarray = field(repr=False)
    start: np.ndarray = field(repr=False)
    end: np.ndarray = field(repr=False)

    @property
    def key(self) -> tuple[str, str, int, str]:
        """The stream key ``(module, file, rank, op)``; streams and CSV rows sort by it."""
        return (self.module, self.file, self.rank, self.op)

    def __len__(self) -> int:
        return int(self.offset.shape[0])


# --------------------------------------------------------------------------- reading


def read_dxt(path: str | os.PathLike[str], *, isolate: bool = True) -> list[Stream]:
    """Read the DXT_POSIX and DXT_MPIIO records of a Darshan log into streams.

    Returns one :class:`Stream` per non-empty ``module x rank x file x op``, sorted by
    :attr:`Stream.key`. Raises :class:`DxtError` if the file is missing, is not a complete
    Darshan log, or holds no DXT module. Emits :class:`DxtWarning` when Darshan marked a
    DXT module as partial or when segments with negative offsets or lengths were skipped.

    The Darshan C library aborts or segfaults on some corrupt logs, so by default the log
    is decoded in a child process (forked when this process has a single thread, spawned
    otherwise) and a crash becomes a ``DxtError``. ``isolate=False`` decodes in this
    process: slightly faster, but a corrupt log that passes the checks could then kill the
    interpreter. A daemonic process (e.g. a ``multiprocessing.Pool`` worker) may not start
    children, so there the log is always decoded in-process.
    """
    p = Path(path)
    _check_header(p)
    if isolate and _can_isolate():
        outcome, crash, stderr_text = _decode_isolated(p)
    else:
        with _capture_fd2() as captured:
            outcome, crash = _decode(p), ""
        stderr_text = captured()
    streams, notes = _verdict(p, outcome, crash, stderr_text)
    for note in notes:
        warnings.warn(note, DxtWarning, stacklevel=2)
    return streams


# What decoding produced, as plain picklable data so a child process can send it back:
# ("ok", streams, warnings), ("dxt", DxtError message) or ("exc", "Type: message").
_Outcome = tuple[Any, ...]


def _decode(p: Path) -> _Outcome:
    """Decode the log with PyDarshan in this process; never raises."""
    try:
        import darshan  # imported late: it is slow to import and only this needs it
    except ImportError as e:
        return (
            "dxt",
            (
                f"cannot read {p}: the 'darshan' Python package (PyDarshan) is not installed "
                f"({e}): pip install darshan"
            ),
        )
    except OSError as e:  # its C library (libdarshan-util) failed to load
        return ("dxt", _library_missing(p, e))
    notes: list[str] = []
    parts: dict[tuple[str, str, int, str], list[np.ndarray]] = {}
    try:
        with darshan.DarshanReport(str(p), read_all=False) as report:
            present = [m for m in _MODULES if m in report.modules]
            if not present:
                return ("dxt", f"{p} has no DXT trace data: {_NO_DXT_HINT}")
            for mod in present:
                if report.modules[mod].get("partial_flag"):
                    notes.append(
                        f"{p}: Darshan marked {mod} as partial (it ran out of DXT memory), "
                        "so requests after that point are missing"
                    )
                report.mod_read_all_dxt_records(mod, warnings=False)
            # Name records are loaded by the first mod_read_all_dxt_records call.
            names: dict[int, str] = dict(report.name_records)
            for mod in present:
                _collect(report.records.get(mod, ()), _MODULES[mod], names, parts)
        streams, dropped = _assemble(parts)
    except OSError as e:
        if _is_library_error(e):
            return ("dxt", _library_missing(p, e))
        return ("exc", f"{type(e).__name__}: {e}".strip().rstrip(":"))
    except Exception as e:  # noqa: BLE001 - the C library fails on garbage in many shapes
        return ("exc", f"{type(e).__name__}: {e}".strip().rstrip(":"))
    if dropped:
        notes.append(f"{p}: skipped {dropped} DXT segment(s) with a negative offset or length")
    return ("ok", streams, notes)


def _is_library_error(e: OSError) -> bool:
    """Whether ``e`` is PyDarshan failing to load libdarshan-util (not a bad log)."""
    text = str(e)
    return "darshan-util" in text or "libdarshan" in text or "cannot load library" in text


def _library_missing(p: Path, e: OSError) -> str:
    return (
        f"cannot read {p}: PyDarshan cannot load its C library libdarshan-util ({e}); the log "
        "itself was not read: reinstall PyDarshan (pip install --force-reinstall darshan) or "
        "install darshan-util"
    )


def _decode_worker(conn: Any, path: str) -> None:
    """Child-process entry point: decode ``path`` and send the outcome back."""
    try:
        conn.send(_decode(Path(path)))
    finally:
        conn.close()


def _can_isolate() -> bool:
    """Whether a child process can be started (daemonic processes may not have children)."""
    import multiprocessing

    return not multiprocessing.current_process().daemon


def _decode_isolated(p: Path) -> tuple[_Outcome | None, str, str]:
    """Decode in a child process: ``(outcome or None if it died, why it died, its stderr)``."""
    import multiprocessing
    import signal
    import threading

    single = hasattr(os, "fork") and threading.active_count() == 1
    ctx = multiprocessing.get_context("fork" if single else "spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_decode_worker, args=(sender, str(p)), daemon=True)
    outcome: _Outcome | None = None
    # The child inherits descriptor 2, so this also catches what it prints as it dies.
    with _capture_fd2() as captured:
        child.start()
        sender.close()
        try:
            outcome = receiver.recv()
        except (EOFError, OSError):
            outcome = None
        finally:
            receiver.close()
        child.join()
    crash = ""
    code = child.exitcode
    if outcome is None:
        if code is not None and code < 0:
            try:
                crash = f"the Darshan library crashed with {signal.Signals(-code).name}"
            except ValueError:
                crash = f"the Darshan library crashed with signal {-code}"
        else:
            crash = f"the decoding process exited with status {code}"
    return outcome, crash, captured()


def _verdict(
    p: Path, outcome: _Outcome | None, crash: str, stderr_text: str
) -> tuple[list[Stream], list[str]]:
    """Turn a decoding outcome plus what the C library printed into streams or a DxtError."""
    reason = _first_error(stderr_text)
    if outcome is not None and outcome[0] == "dxt":
        raise DxtError(outcome[1])
    if outcome is None:
        detail = f"{crash}: {reason}" if reason else crash
    elif outcome[0] == "exc":
        detail = reason or outcome[1]
    else:
        detail = reason
    if detail:
        raise DxtError(f"{p} is not a readable Darshan log ({detail}): {_BAD_LOG_HINT}")
    return outcome[1], outcome[2]


def _collect(
    records: Iterable[Any],
    module: str,
    names: dict[int, str],
    parts: dict[tuple[str, str, int, str], list[np.ndarray]],
) -> None:
    """Append each record's write and read segments to ``parts`` under their stream key."""
    # DarshanRecordCollection wraps each item on indexing; its plain dicts are faster.
    raw = getattr(records, "_records", None)
    items: Iterable[Any] = raw if isinstance(raw, list) else records
    for rec in items:
        rid = int(rec["id"])
        name = names.get(rid)
        if name is None:
            name = f"{rid:016x}"
        rank = int(rec["rank"])
        for op in ("write", "read"):
            seg = _segments(rec[f"{op}_segments"])
            if seg.shape[0]:
                parts.setdefault((module, name, rank, op), []).append(seg)


def _segments(segs: Any) -> np.ndarray:
    """Segments as a structured array, from a list of dicts or a pandas DataFrame."""
    if segs is None:
        return np.empty(0, _SEGMENT_DTYPE)
    if hasattr(segs, "columns"):  # pandas DataFrame (dtype="pandas" reports)
        out = np.empty(len(segs), _SEGMENT_DTYPE)
        if len(segs):
            out["offset"] = segs["offset"].to_numpy(np.int64)
            out["length"] = segs["length"].to_numpy(np.int64)
            out["start"] = segs["start_time"].to_numpy(np.float64)
            out["end"] = segs["end_time"].to_numpy(np.float64)
        return out
    if len(segs) == 0:
        return np.empty(0, _SEGMENT_DTYPE)
    return np.array(list(map(_SEGMENT_FIELDS, segs)), dtype=_SEGMENT_DTYPE)


def _assemble(
    parts: dict[tuple[str, str, int, str], list[np.ndarray]],
) -> tuple[list[Stream], int]:
    """Merge each key's segments, order them by start time; also count dropped segments."""
    streams: list[Stream] = []
    dropped = 0
    for key in sorted(parts):
        chunks = parts[key]
        seg = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
        bad = (seg["offset"] < 0) | (seg["length"] < 0)
        if bad.any():
            dropped += int(bad.sum())
            seg = seg[~bad]
            if seg.shape[0] == 0:
                continue
        order = np.argsort(seg["start"], kind="stable")
        seg = seg[order]
        module, name, rank, op = key
        streams.append(
            Stream(
                module=module,
                file=name,
                rank=rank,
                op=op,
                offset=seg["offset"].astype(np.uint64),
                length=seg["length"].astype(np.uint64),
                start=np.ascontiguousarray(seg["start"]),
                end=np.ascontiguousarray(seg["end"]),
            )
        )
    return streams, dropped


def _check_header(p: Path) -> None:
    """Reject what is plainly not a complete, intact Darshan 3 log before the C library
    sees it: wrong magic, a header promising more bytes than the file has (truncation),
    or compressed regions that do not decompress cleanly (corruption; libdarshan-util
    would otherwise stop at the damage and silently return fewer records)."""
    try:
        size = p.stat().st_size
        if p.is_dir():
            raise DxtError(f"{p} is a directory, not a Darshan log: give the .darshan file")
        with p.open("rb") as f:
            head = f.read(_HEADER_MIN)
            reason = _header_problem(head, size) or _region_problem(f, head)
    except FileNotFoundError:
        raise DxtError(f"{p} does not exist: check the path to the .darshan log") from None
    except OSError as e:
        raise DxtError(
            f"cannot open {p} ({e.strerror or e}): check the path and permissions"
        ) from None
    if reason:
        raise DxtError(f"{p} is not a readable Darshan log ({reason}): {_BAD_LOG_HINT}")


def _endian(head: bytes) -> str | None:
    """Struct byte order of the log (Darshan writes native order), None without a magic."""
    for endian in ("<", ">"):
        if struct.unpack_from(endian + "q", head, 8)[0] == _DARSHAN_MAGIC:
            return endian
    return None


def _regions(head: bytes) -> list[tuple[int, int]]:
    """``(offset, length)`` of the name map and every non-empty module region."""
    endian = _endian(head) or "<"
    maps = [
        struct.unpack_from(endian + "QQ", head, _MAPS_AT + 16 * i) for i in range(1 + _MAX_MODS)
    ]
    return [(off, length) for off, length in maps if length]


def _job_region(head: bytes) -> list[tuple[int, int]]:
    """The job record, between the header and the name map, for log versions whose header
    size is known (it is not in the header's maps)."""
    version = head[:8].split(b"\0", 1)[0]
    if version not in _KNOWN_HEADER_VERSIONS:
        return []
    name_off = struct.unpack_from((_endian(head) or "<") + "Q", head, _MAPS_AT)[0]
    return [(_HEADER_SIZE, name_off - _HEADER_SIZE)] if name_off > _HEADER_SIZE else []


def _header_problem(head: bytes, size: int) -> str:
    if size == 0:
        return "the file is empty"
    if len(head) < 16:
        return f"only {size} bytes, too short for a Darshan header"
    if _endian(head) is None:
        return "no Darshan magic number at byte 8"
    version = head[:8].split(b"\0", 1)[0].decode("ascii", "replace")
    if not version.startswith("3."):
        return ""  # other layouts: leave the judgement to libdarshan-util
    if len(head) < _HEADER_MIN:
        return f"only {size} bytes, shorter than the Darshan {version} header"
    needed = max((off + length for off, length in _regions(head)), default=0)
    if needed > size:
        return (
            f"truncated or corrupt: its header says the data ends at byte {needed}, "
            f"the file has {size} bytes"
        )
    return ""


def _region_problem(f: BinaryIO, head: bytes) -> str:
    """Decompress every region of a Darshan 3 log (output discarded) and report damage.

    A region is one or more concatenated zlib or bzip2 streams (one per writing rank);
    each carries a checksum, so corruption anywhere in it shows up here.
    """
    if head[:2] != b"3." or len(head) < _HEADER_MIN:
        return ""
    comp = head[16]
    if comp == _ZLIB_COMP:
        new: Callable[[], Any] = zlib.decompressobj
    elif comp == _BZIP2_COMP:
        new = bz2.BZ2Decompressor
    else:
        return ""  # uncompressed (or unknown): nothing to verify
    for off, length in _job_region(head) + _regions(head):
        f.seek(off)
        left = length
        d = new()
        fresh = True  # no byte of the current stream seen yet
        pending = b""
        while left or pending:
            if not pending:
                pending = f.read(min(_CHUNK, left))
                if not pending:
                    return f"the region at byte {off} is cut short"
                left -= len(pending)
            try:
                _drain(d, pending)
            except (zlib.error, OSError, EOFError, ValueError) as e:
                return f"corrupt compressed data in the region at byte {off}: {e}"
            fresh = False
            if d.eof:  # one rank's stream done; what is left starts the next one
                pending = d.unused_data
                d = new()
                fresh = True
            else:
                pending = b""
        if not fresh:
            return f"compressed data in the region at byte {off} ends early"
    return ""


def _drain(d: Any, data: bytes) -> None:
    """Feed ``data`` to a zlib or bz2 decompressor, discarding output in bounded pieces."""
    if isinstance(d, bz2.BZ2Decompressor):
        d.decompress(data, _CHUNK)
        while not d.eof and not d.needs_input:
            d.decompress(b"", _CHUNK)
        return
    d.decompress(data, _CHUNK)
    while not d.eof and d.unconsumed_tail:
        d.decompress(d.unconsumed_tail, _CHUNK)


@contextlib.contextmanager
def _capture_fd2() -> Iterator[Callable[[], str]]:
    """Redirect file descriptor 2 to a temporary file; yield a getter for what was written.

    libdarshan-util writes its diagnostics with ``fprintf(stderr, ...)``; they belong in
    our error message, not on the terminal. If descriptor 2 cannot be redirected the
    getter returns "" and diagnostics go where they would have gone.
    """
    try:
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):
        pass
    try:
        saved = os.dup(2)
    except OSError:
        yield lambda: ""
        return
    final: list[str] = []  # what was written, once the redirection has ended
    with tempfile.TemporaryFile() as tmp:
        fd = tmp.fileno()

        def read_back() -> str:
            # pread leaves the shared file offset alone, so later writes still append.
            size = os.fstat(fd).st_size
            return os.pread(fd, size, 0).decode("utf-8", "replace") if size else ""

        def captured() -> str:
            return final[0] if final else read_back()

        os.dup2(fd, 2)
        try:
            yield captured
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            final.append(read_back())


def _first_error(stderr_text: str) -> str:
    """The first diagnostic the Darshan library printed, tidied to one short clause."""
    for line in stderr_text.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.lower().startswith("error:"):
            line = line[len("error:") :].strip()
        return line.rstrip(".")
    return ""


# --------------------------------------------------------------------------- writing


def write_csv(streams: Iterable[Stream], out: str | os.PathLike[str] | TextIO) -> int:
    """Write streams as patio trace CSV to a path or an open text file; return the row count.

    Rows are grouped by stream in order of :attr:`Stream.key`, then by start time.
    """
    ordered = sorted(streams, key=lambda s: s.key)
    if isinstance(out, (str, os.PathLike)):
        with open(out, "w", newline="", encoding="utf-8") as f:
            return _write_rows(ordered, f)
    return _write_rows(ordered, out)


def _write_rows(streams: list[Stream], f: TextIO) -> int:
    f.write(CSV_HEADER + "\n")
    rows = 0
    buf = io.StringIO()
    # "\r\n" as terminator makes minimal quoting quote names holding either character.
    key_writer = csv.writer(buf, lineterminator="\r\n")
    for s in streams:
        # Quote the file name once per stream; module, rank and op never need quoting.
        buf.seek(0)
        buf.truncate()
        key_writer.writerow([s.module, s.file, int(s.rank), s.op])
        prefix = buf.getvalue()[:-2] + ","
        f.writelines(
            f"{prefix}{o},{n},{a!r},{b!r}\n"
            for o, n, a, b in zip(
                s.offset.tolist(), s.length.tolist(), s.start.tolist(), s.end.tolist()
            )
        )
        rows += len(s)
    return rows


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    """``python -m patio.dxt LOG.darshan -o OUT.csv``: convert a DXT log to trace CSV."""
    parser = argparse.ArgumentParser(
        prog="python -m patio.dxt",
        description=f"Convert a Darshan DXT log to patio trace CSV (header: {CSV_HEADER}).",
    )
    parser.add_argument("log", help="Darshan log recorded with DXT (.darshan)")
    parser.add_argument(
        "-o", "--output", default="-", help="CSV file to write, or - for stdout (default)"
    )
    args = parser.parse_args(argv)

    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", DxtWarning)
            streams = read_dxt(args.log)
        for w in caught:
            print(f"patio: warning: {w.message}", file=sys.stderr)
    except DxtError as e:
        print(f"patio: error: {e}", file=sys.stderr)
        return 2

    if args.output == "-":
        try:
            write_csv(streams, sys.stdout)
            sys.stdout.flush()
        except BrokenPipeError:
            # The reader went away (e.g. `| head`); that is not our error.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 1
        return 0
    try:
        write_csv(streams, args.output)
    except OSError as e:
        print(
            f"patio: error: cannot write {args.output} ({e.strerror or e}): "
            "check the directory exists and is writable",
            file=sys.stderr,
        )
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
