"""patio's log-structured container from Python: ``patio.Container``.

A container is one logical file stored as a directory: every writer (a process, or
one ``Container`` opened for writing) appends to its own data and index logs and never
waits on another; readers merge every writer's index (pattern entries, or one entry per
write in ``raw`` mode) into one map and read through it.

    with patio.Container("ckpt.patio", "w") as c:      # creates it (or empties it)
        c.write_at(rank * 4096, block)
    with patio.Container("ckpt.patio") as c:           # mode "r"
        a = c.read_array(numpy.float64, count=512, offset=0)

* Modes: ``"r"`` reads; ``"w"`` creates the container (or truncates an existing one to
  0 bytes) and opens a writer; ``"a"`` opens a writer and keeps what is there (creating
  the container when it is missing). Many processes write one container at once: one
  of them opens it with ``"w"`` (or it is created beforehand), the others with ``"a"``.
* ``index="pattern"`` (default) or ``"raw"`` is chosen when the container is created;
  an existing container keeps its own (asking for the other one is a ``ValueError``).
* Writes are positional: :meth:`Container.write_at` / :meth:`Container.pwrite` take
  ``bytes``, ``bytearray``, ``memoryview``, NumPy arrays (any C-contiguous buffer),
  written from the caller's memory without a copy; the GIL is released.
* Ordering: a writer's writes are ordered among themselves; a write is ordered after
  another writer's write only when that writer flushed (or published) in between.
  :meth:`Container.flush` makes the writes durable and visible to readers opened
  afterwards; closing flushes.
* A reader sees the container as it was when it was opened. Holes read as zeros;
  reads past the end are short. :meth:`Container.readinto` fills any writable buffer
  (NumPy arrays included) without an intermediate copy; the GIL is released, and
  several threads may read one ``Container`` at once.
* Module functions: :func:`stat` (size and mtime, usually without reading any index),
  :func:`truncate`, :func:`remove`, :func:`check` (verifies every index record),
  :func:`flatten` (to a plain file), :func:`list_writers`.

Errors: a missing path is ``FileNotFoundError``, a path that is not a directory
``NotADirectoryError``, an unreadable one ``PermissionError`` (with errno and file name);
a directory that is not a container, or a damaged one, :class:`ContainerError` (an
``OSError``, with ``filename``); bad arguments ``ValueError``/``TypeError``; a write to a
reader or a read from a writer ``io.UnsupportedOperation``.
"""

from __future__ import annotations

import io
import os
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ._args import PathArg, index_arg, non_negative, path_arg, writable_bytes
from ._native import (
    ContainerError,
    ContainerReader,
    ContainerWriter,
    container_check,
    container_compact,
    container_flatten,
    container_list_writers,
    container_remove,
    container_stat,
    container_truncate,
    open_container_reader,
    open_container_writer,
)

if TYPE_CHECKING:
    from typing import Self

__all__ = [
    "INDEX_MODES",
    "MODES",
    "Container",
    "ContainerError",
    "check",
    "compact",
    "flatten",
    "list_writers",
    "remove",
    "stat",
    "truncate",
]

#: The modes :class:`Container` accepts.
MODES = ("r", "w", "a")
#: The index modes of a container.
INDEX_MODES = ("pattern", "raw")

#: The largest logical offset a container holds (2^63 - 1).
MAX_OFFSET = (1 << 63) - 1


def _offset(name: str, value: Any) -> int:
    return non_negative(name, value, MAX_OFFSET, "2^63-1, the largest container offset")


def extent_pairs(extents: Any) -> list[tuple[int, int]]:
    """``(offset, length)`` pairs checked as :meth:`Container.read_extents` takes them."""
    pairs = []
    for item in extents:
        offset, length = item
        pairs.append((_offset("offset", offset), non_negative("length", length)))
    return pairs


class Container:
    """One patio container opened for reading (``"r"``) or for writing by one writer
    (``"w"``, ``"a"``); see the module documentation."""

    def __init__(
        self,
        path: PathArg,
        mode: str = "r",
        *,
        index: str | None = None,
        index_buffer: int | None = None,
    ) -> None:
        if not isinstance(mode, str):
            raise TypeError(f"mode must be str, not {type(mode).__name__}")
        if mode not in MODES:
            raise ValueError(f"invalid mode {mode!r}: must be 'r', 'w' or 'a'")
        if index is not None:
            if not isinstance(index, str):
                raise TypeError(f"index must be str, not {type(index).__name__}")
            if index not in INDEX_MODES:
                raise ValueError(f"index={index!r}: must be 'pattern' or 'raw'")
        if index_buffer is not None:
            index_buffer = index_arg("index_buffer", index_buffer)
            if index_buffer < 1:
                raise ValueError(f"index_buffer must be at least 1, not {index_buffer}")
        self._path = path_arg(path)
        self.name = path if isinstance(path, (str, bytes)) else self._path
        self._mode = mode
        self._reader: ContainerReader | None = None
        self._writer: ContainerWriter | None = None
        # One past the last byte written since the last flush (for `size`).
        self._pending_end = 0
        self._extent_reads = 0
        self._physical_reads = 0
        if mode == "r":
            if index is not None or index_buffer is not None:
                raise ValueError("index= and index_buffer= apply to modes 'w' and 'a'")
            self._reader = open_container_reader(self._path)
        else:
            self._writer = open_container_writer(
                self._path,
                index=index,
                create=True,
                truncate=mode == "w",
                index_buffer=index_buffer,
            )

    @classmethod
    def _from_reader(cls, reader: ContainerReader, name: str | bytes) -> Self:
        """A read-mode container around a reader built elsewhere (``patio.mpi``)."""
        self = cls.__new__(cls)
        self.name = name
        self._path = os.fspath(reader.path)
        self._mode = "r"
        self._reader = reader
        self._writer = None
        self._pending_end = 0
        self._extent_reads = 0
        self._physical_reads = 0
        return self

    # -- state ---------------------------------------------------------------------------

    @property
    def mode(self) -> str:
        return self._mode

    @property
    def path(self) -> str:
        return self._path

    @property
    def closed(self) -> bool:
        if self._reader is not None:
            return bool(self._reader.closed)
        assert self._writer is not None
        return bool(self._writer.closed)

    @property
    def index(self) -> str:
        """The container's index mode: ``"pattern"`` or ``"raw"``."""
        part = self._reader if self._reader is not None else self._writer
        return str(part.index)  # type: ignore[union-attr]

    @property
    def writer_name(self) -> str | None:
        """The writer's name in modes ``"w"``/``"a"`` (its logs are ``data.<name>``,
        ``index.<name>``, ``meta.<name>``); ``None`` when reading."""
        return None if self._writer is None else str(self._writer.name)

    @property
    def size(self) -> int:
        """The logical file's size. Reading: as of the open. Writing: what a reader
        opened now would see, counting this writer's unflushed writes."""
        if self._reader is not None:
            self._check()
            return int(self._reader.size)
        self._check()
        return max(int(container_stat(self._path)["size"]), self._pending_end)

    def _check(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed container.")

    def _need_reader(self, what: str) -> ContainerReader:
        self._check()
        if self._reader is None:
            raise io.UnsupportedOperation(
                f"{what}: container opened for writing (mode {self._mode!r}); open it "
                "with mode 'r' to read"
            )
        return self._reader

    def _need_writer(self, what: str) -> ContainerWriter:
        self._check()
        if self._writer is None:
            raise io.UnsupportedOperation(
                f"{what}: container opened for reading; open it with mode 'w' or 'a' to write"
            )
        return self._writer

    def readable(self) -> bool:
        self._check()
        return self._reader is not None

    def writable(self) -> bool:
        self._check()
        return self._writer is not None

    # -- writes --------------------------------------------------------------------------

    def write_at(self, offset: int, data: Any) -> int:
        """Writes ``data`` (any bytes-like object) at ``offset``; returns its length."""
        writer = self._writer
        if (
            writer is not None
            and type(data) is bytes
            and type(offset) is int
            and 0 <= offset <= MAX_OFFSET
        ):
            # The common case, checked here and (closed, range) by the writer itself.
            n = int(writer.write_at(offset, data))
            if n and offset + n > self._pending_end:
                self._pending_end = offset + n
            return n
        writer = self._need_writer("write_at")
        offset = _offset("offset", offset)
        if isinstance(data, bytes):
            n = int(writer.write_at(offset, data))
        else:
            try:
                view = memoryview(data)
            except TypeError:
                raise TypeError(
                    f"data must be a bytes-like object, not {type(data).__name__}"
                ) from None
            if "O" in view.format:
                raise TypeError("data holds Python objects, not plain data")
            if not view.c_contiguous:
                n = int(writer.write_at(offset, view.tobytes()))
            elif view.nbytes == 0:
                n = int(writer._write_address(0, 0, offset))
            else:
                import numpy  # deferred: importing patio stays cheap

                # The array holds the buffer exported (not freed, not resized) while
                # the writer reads it without the GIL.
                array = numpy.frombuffer(view, dtype=numpy.uint8)
                try:
                    address = array.__array_interface__["data"][0]
                    n = int(writer._write_address(address, array.nbytes, offset))
                finally:
                    del array
        if n:
            self._pending_end = max(self._pending_end, offset + n)
        return n

    def pwrite(self, data: Any, offset: int) -> int:
        """Like :func:`os.pwrite`: writes ``data`` at ``offset``; returns its length."""
        return self.write_at(offset, data)

    def flush(self) -> None:
        """Makes every write so far durable (synced) and visible to readers opened
        afterwards, and orders later writes of other writers after them."""
        writer = self._need_writer("flush")
        writer.flush()
        self._pending_end = 0

    def publish(self) -> None:
        """Like :meth:`flush` (visible and ordered) without syncing the index."""
        writer = self._need_writer("publish")
        writer.publish()
        self._pending_end = 0

    def truncate(self, size: int) -> int:
        """Truncates (or extends with a hole) the logical file to ``size`` bytes,
        ordered after this writer's writes and every write flushed before."""
        writer = self._need_writer("truncate")
        size = _offset("size", size)
        writer.truncate(size)
        self._pending_end = 0
        return size

    def compact(self, *, wait: bool = True) -> dict[str, Any]:
        """:func:`compact` of this container: the logs of writers that ended are
        rewritten (this object's own writer, while open, is left alone)."""
        self._check()
        return compact(self._path, wait=wait)

    # -- reads ---------------------------------------------------------------------------

    def read_at(self, n: int, offset: int) -> bytes:
        """Up to ``n`` bytes at ``offset`` (fewer at the end; holes read as zeros)."""
        reader = self._reader
        if (
            reader is not None
            and type(n) is int
            and type(offset) is int
            and 0 <= n <= MAX_OFFSET
            and 0 <= offset <= MAX_OFFSET
        ):
            # The common case; the reader itself refuses when closed.
            return reader.pread(n, offset)  # type: ignore[no-any-return]
        reader = self._need_reader("read_at")
        n = non_negative("n", n)
        return bytes(reader.pread(n, _offset("offset", offset)))

    def pread(self, n: int, offset: int) -> bytes:
        """Like :func:`os.pread`: up to ``n`` bytes at ``offset``."""
        return self.read_at(n, offset)

    def readinto(self, buffer: Any, offset: int = 0) -> int:
        """Reads up to ``len(buffer)`` bytes (its size in bytes) at ``offset`` into
        ``buffer`` (``bytearray``, writable ``memoryview``, C-contiguous NumPy array,
        ...); returns how many (0 at or past the end)."""
        reader = self._need_reader("readinto")
        offset = _offset("offset", offset)
        view = writable_bytes(buffer)
        length = len(view)
        if length == 0 or offset >= reader.size:
            return 0
        import ctypes  # deferred: importing patio stays cheap

        # The ctypes array holds the buffer exported (not freed, not resized) while
        # the reader fills it without the GIL.
        array = (ctypes.c_char * length).from_buffer(view)
        try:
            return int(reader._readinto_address(ctypes.addressof(array), length, offset))
        finally:
            del array

    def read_extents(self, extents: Any) -> bytes:
        """The bytes of the logical ``extents`` (``(offset, length)`` pairs, each inside
        the file) one after another. Pieces stored one after another in the container
        — a pattern made contiguous by ``patio reorg apply`` — are fetched in one read;
        ``stats()["physical_reads"]`` counts the reads issued so far."""
        reader = self._need_reader("read_extents")
        data, reads = reader.read_extents(extent_pairs(extents))
        self._extent_reads += 1
        self._physical_reads += int(reads)
        return bytes(data)

    def read_array(self, dtype: Any, count: int = -1, offset: int = 0) -> Any:
        """``count`` items of ``dtype`` at ``offset`` as a new NumPy array (all
        whole items up to the end when ``count`` is negative; fewer at the end)."""
        import numpy  # deferred: importing patio stays cheap

        reader = self._need_reader("read_array")
        dt = numpy.dtype(dtype)
        if dt.itemsize == 0:
            raise ValueError(f"dtype {dt} has no size")
        if dt.hasobject:
            raise TypeError(f"dtype {dt} holds Python objects; containers hold bytes")
        count = index_arg("count", count)
        offset = _offset("offset", offset)
        avail = max(int(reader.size) - offset, 0) // dt.itemsize
        count = avail if count < 0 else min(count, avail)
        out = numpy.empty(count, dtype=dt)
        if count:
            got = self.readinto(out, offset)
            if got != count * dt.itemsize:  # the size was taken at open: cannot happen
                raise ContainerError(f"{self._path}: short read at offset {offset}")
        return out

    # -- index ---------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """Reading: the index as read and merged — ``size``, ``index`` (mode),
        ``writers``, ``records`` (index records), ``writes``, ``raw_entries`` (entries
        a one-per-write index would hold), ``index_disk_bytes``,
        ``compression_ratio`` (24 bytes per raw entry over the index bytes on disk),
        ``index_mem_bytes``, ``tiles``, ``global_patterns``, ``rest_entries``,
        ``loose_writes``, ``damaged_logs``, and ``extent_reads`` / ``physical_reads``
        (calls of :meth:`read_extents` and the reads they issued). Writing: this
        writer's ``name``, the ``index`` mode and its ``end`` (one past the last byte
        it wrote)."""
        if self._reader is not None:
            stats = dict(self._reader.stats())
            stats["extent_reads"] = self._extent_reads
            stats["physical_reads"] = self._physical_reads
            return stats
        writer = self._need_writer("stats")
        return {"name": str(writer.name), "index": str(writer.index), "end": int(writer.end)}

    def damage(self) -> list[dict[str, Any]]:
        """Damaged index records found at open (``path``, ``offset``, ``reason``,
        ``lost_bytes``); their logs were used up to them."""
        return list(self._need_reader("damage").damage())

    def writers(self) -> list[str]:
        """The names of the writers whose logs the reader merged."""
        return list(self._need_reader("writers").writers())

    # -- closing -------------------------------------------------------------------------

    def close(self) -> None:
        """Flushes (writing) and closes. Closing twice does nothing."""
        if self._writer is not None:
            if not self._writer.closed:
                self._writer.close()
                self._pending_end = 0
        elif self._reader is not None:
            self._reader.close()

    def __enter__(self) -> Self:
        self._check()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed " if self.closed else ""
        return f"<patio.Container {state}name={self.name!r} mode={self._mode!r}>"


def stat(path: PathArg) -> dict[str, Any]:
    """``{size, mtime_ns, from_meta}``: the logical size and modification time, from
    the writers' meta files (``from_meta``) or, when they do not suffice, the index."""
    return dict(container_stat(path_arg(path)))


def truncate(path: PathArg, size: int) -> None:
    """Truncates (or extends with a hole) the logical file to ``size``; ordered after
    every write flushed before (flush your own writers first)."""
    container_truncate(path_arg(path), _offset("size", size))


def remove(path: PathArg) -> None:
    """Removes the container (a directory that is not a container is refused)."""
    container_remove(path_arg(path))


def check(path: PathArg) -> dict[str, Any]:
    """Verifies every index record and log: ``{logs, records, writes, clean, damage,
    unindexed_tail_bytes}`` where ``damage`` lists ``{path, offset, reason,
    lost_bytes}`` (damaged records, data logs without an index, unreadable logs,
    stray entries named like logs) and ``unindexed_tail_bytes`` counts data written
    after a writer's last indexed write (an unflushed tail, never acknowledged)."""
    return dict(container_check(path_arg(path)))


def flatten(path: PathArg, out: PathArg, *, force: bool = False) -> int:
    """Writes the logical file as a plain (sparse) file ``out``, crash-safely; returns
    its size. A damaged container raises :class:`ContainerError` unless ``force``
    (its lost writes would read as zeros)."""
    return int(container_flatten(path_arg(path), path_arg(out), bool(force)))


def compact(path: PathArg, *, wait: bool = True) -> dict[str, Any]:
    """Compacts the container: the logs of its *ended* writers (writers still open
    are left alone) become one log set holding their live bytes, crash-safely; logs
    with nothing live go. Waits for a compaction already running unless ``wait`` is
    false (then ``busy`` is true and nothing was done). Returns ``{sources,
    active_writers, new_log_set, live_bytes, records, bytes_before, bytes_after,
    files_removed, truncations_dropped, recovered_files, busy}`` (``sources`` 0:
    nothing to compact)."""
    return dict(container_compact(path_arg(path), bool(wait)))


def list_writers(path: PathArg) -> list[str]:
    """The container's writer names (from the index logs present), sorted."""
    return list(container_list_writers(path_arg(path)))
