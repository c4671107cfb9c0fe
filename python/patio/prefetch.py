"""Prefetching binary files: ``patio.open(path, prefetch="pattern")``.

:func:`open` returns a :class:`PrefetchFile`, a read-only, unbuffered binary file
object (an :class:`io.RawIOBase`, like ``open(path, "rb", buffering=0)``) whose reads go
through patio's prefetch engine: a policy watches the file's read requests and worker
threads fetch what it predicts into a cache before it is asked for.

* ``read``, ``readinto``, ``readall``, ``seek`` (``SEEK_SET``/``SEEK_CUR``/``SEEK_END``),
  ``tell``, ``with`` blocks, and :meth:`PrefetchFile.pread`, a positional read that does
  not move the position. Bytes are always the file's own, whatever the policy.
* Every call is one request to the engine, as the application made it, so the policy
  sees the application's pattern. Wrap the object in :class:`io.BufferedReader` for
  many tiny or line-by-line reads (the policy then sees the buffer's refills).
* Policies: ``none``, ``readahead`` (Linux-like), ``stride`` (Lustre-like), ``markov``
  (block transitions; starts empty and learns while reading, or from ``model=``) and
  ``pattern`` (patio's online pattern analyzer; also takes ``model=``). ``save_model=``
  writes the learned model at close (the format of ``patio replay --save-model``).
* One engine per process, created on first use: all open files share its cache budget
  (``cache_mib``, 64 MiB by default) and its two prefetch worker threads.
* The data is read with ``O_DIRECT`` where the file system allows it (else buffered
  without the page cache), so that prefetching, not the kernel, hides the latency. A
  slow store can be modelled per file: ``latency_ms`` per request plus the transfer at
  ``bandwidth_mbps``; by default there is no modelled cost.
* The file's size is taken at open; reads stop there.
* Reads release the GIL; ``readinto`` fills the caller's buffer (``bytearray``,
  ``memoryview``, a C-contiguous NumPy array, ...) without an intermediate copy.
* :meth:`PrefetchFile.stats` gives the file's counters; :func:`prefetch_stats` those of
  the whole engine.

There is no OS file descriptor to hand out (``fileno()`` raises
:class:`io.UnsupportedOperation`), so APIs that need one, like ``numpy.fromfile``, take
``numpy.frombuffer(f.read(n), dtype)`` or ``f.readinto(array)`` instead.
"""

from __future__ import annotations

import errno
import io
import os
from typing import Any

from ._args import PathArg, index_arg, non_negative, writable_bytes
from ._native import PrefetchStream, open_prefetch_stream
from ._native import prefetch_stats as _engine_stats

__all__ = ["POLICIES", "PrefetchFile", "open", "prefetch_stats"]

#: The policies :func:`open` accepts.
POLICIES = ("none", "readahead", "stride", "markov", "pattern")


class PrefetchFile(io.RawIOBase):
    """A read-only binary file read through patio's prefetch engine (see :func:`open`)."""

    def __init__(self, stream: PrefetchStream, name: str | bytes) -> None:
        super().__init__()
        self._stream = stream
        self._pos = 0
        self.name = name

    # -- state -------------------------------------------------------------------------

    @property
    def mode(self) -> str:
        return "rb"

    @property
    def policy(self) -> str:
        """The prefetch policy's name."""
        return self._stream.policy

    @property
    def size(self) -> int:
        """The file's size at open (reads stop there)."""
        return self._stream.size

    @property
    def io_mode(self) -> str:
        """How the data is read: ``O_DIRECT`` or buffered without the page cache."""
        return self._stream.io_mode

    def _check(self) -> None:
        if self.closed:
            raise ValueError("I/O operation on closed file.")

    def readable(self) -> bool:
        self._check()
        return True

    def seekable(self) -> bool:
        self._check()
        return True

    def writable(self) -> bool:
        self._check()
        return False

    def fileno(self) -> int:
        self._check()
        raise io.UnsupportedOperation(
            "patio.open files have no OS file descriptor (reads go through the prefetch "
            "engine); use read() or readinto()"
        )

    def write(self, data: Any) -> int:
        self._check()
        raise io.UnsupportedOperation("write: patio.open files are read-only")

    def isatty(self) -> bool:
        self._check()
        return False

    # -- position ----------------------------------------------------------------------

    def tell(self) -> int:
        self._check()
        return self._pos

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        self._check()
        offset = index_arg("offset", offset)
        if whence == os.SEEK_SET:
            at = offset
        elif whence == os.SEEK_CUR:
            at = self._pos + offset
        elif whence == os.SEEK_END:
            at = self._stream.size + offset
        else:
            raise ValueError(
                f"invalid whence ({whence}, should be {os.SEEK_SET}, {os.SEEK_CUR} or "
                f"{os.SEEK_END})"
            )
        if at < 0:
            raise OSError(errno.EINVAL, os.strerror(errno.EINVAL), self.name)
        self._pos = at
        return at

    # -- reads -------------------------------------------------------------------------

    def readinto(self, buffer: Any) -> int:
        """Reads up to ``len(buffer)`` bytes at the position into ``buffer``; returns
        how many (0 at the end of the file)."""
        self._check()
        n = self._readinto_at(buffer, self._pos)
        self._pos += n
        return n

    def read(self, size: int | None = -1) -> bytes:
        """Up to ``size`` bytes from the position (all the rest when ``size`` is
        negative or ``None``); ``b""`` at the end of the file."""
        self._check()
        if size is None:
            return self.readall()
        size = index_arg("size", size)
        if size < 0:
            return self.readall()
        data = self._stream.pread(size, self._pos)
        self._pos += len(data)
        return data

    def readall(self) -> bytes:
        """The rest of the file from the position, as one read."""
        self._check()
        data = self._stream.pread(max(self._stream.size - self._pos, 0), self._pos)
        self._pos += len(data)
        return data

    def pread(self, size: int, offset: int) -> bytes:
        """Up to ``size`` bytes at ``offset`` (like :func:`os.pread`); the position
        does not move."""
        self._check()
        size = non_negative("size", size)
        offset = non_negative("offset", offset)
        return self._stream.pread(size, offset)

    def preadinto(self, buffer: Any, offset: int) -> int:
        """Reads up to ``len(buffer)`` bytes at ``offset`` into ``buffer``; the
        position does not move."""
        self._check()
        return self._readinto_at(buffer, non_negative("offset", offset))

    def _readinto_at(self, buffer: Any, offset: int) -> int:
        view = writable_bytes(buffer)
        length = len(view)
        if length == 0 or offset >= self._stream.size:
            return 0
        import ctypes  # deferred: importing patio stays cheap

        # The ctypes array holds the buffer exported (not freed, not resized) while
        # the engine writes into it without the GIL.
        array = (ctypes.c_char * length).from_buffer(view)
        try:
            return self._stream._readinto_address(ctypes.addressof(array), length, offset)
        finally:
            del array

    # -- counters and closing ----------------------------------------------------------

    def stats(self) -> dict[str, float]:
        """This file's prefetch counters: ``reads`` (requests that reached the engine:
        non-empty reads before the end of the file), ``hits``, ``late_hits`` (waited
        for a prefetch in flight), ``misses`` (some byte came from the file), with
        ``hits + late_hits + misses == reads``; ``accuracy`` (used / prefetched
        bytes; ``None`` when nothing was prefetched), ``coverage`` (read bytes served from prefetches / read bytes),
        ``wasted_bytes``, ``backend_requests`` / ``backend_bytes`` (reads of the file,
        demand and prefetch), and more. Also available after :meth:`close` (then
        final: unused prefetches counted as waste)."""
        return dict(self._stream.stats())

    def close(self) -> None:
        """Ends the stream (unused prefetches are dropped) and writes the model when
        ``save_model`` was given. Closing twice does nothing."""
        if self.closed:
            return
        try:
            self._stream.close()
        finally:
            super().close()

    def __repr__(self) -> str:
        state = "closed " if self.closed else ""
        return f"<patio.PrefetchFile {state}name={self.name!r} prefetch={self.policy!r}>"


def open(
    path: PathArg,
    mode: str = "rb",
    *,
    prefetch: str | None = "pattern",
    model: PathArg | None = None,
    save_model: PathArg | None = None,
    latency_ms: float = 0.0,
    bandwidth_mbps: float = 0.0,
    concurrency: int = 4,
    cache_mib: int | None = None,
) -> PrefetchFile:
    """Opens ``path`` for reading through patio's prefetch engine.

    ``mode`` must be ``"rb"``. ``prefetch`` is one of :data:`POLICIES` (``None`` means
    ``"none"``). ``model`` is a model saved by an earlier run (``markov``,
    ``pattern``) and ``save_model`` where to save the model learned by this one at
    close. ``latency_ms`` and ``bandwidth_mbps`` model a slow store for this file
    (each request costs ``latency + bytes / bandwidth``, ``concurrency`` at a time;
    0 means no cost); ``cache_mib`` sets the shared cache budget of the process's
    engine (it can change only while no patio file is open).

    Raises ``FileNotFoundError``, ``IsADirectoryError``, ``PermissionError``, ... (with
    errno and file name) for paths that cannot be read and ``ValueError`` for bad
    arguments.
    """
    if not isinstance(mode, str):
        raise TypeError(f"open() argument 'mode' must be str, not {type(mode).__name__}")
    if mode != "rb":
        raise ValueError(f"invalid mode {mode!r}: patio.open reads binary files only (mode 'rb')")
    if prefetch is None:
        prefetch = "none"
    if not isinstance(prefetch, str):
        raise TypeError(f"prefetch must be a str, not {type(prefetch).__name__}")
    if prefetch not in POLICIES:
        if prefetch == "oracle":
            raise ValueError(
                "prefetch='oracle' needs the future requests in advance; it exists for "
                "`patio replay` only"
            )
        raise ValueError(f"prefetch={prefetch!r}: must be one of {', '.join(POLICIES)}")
    for name, value in (("latency_ms", latency_ms), ("bandwidth_mbps", bandwidth_mbps)):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number, not {type(value).__name__}")
    concurrency = non_negative("concurrency", concurrency)
    if cache_mib is not None:
        cache_mib = non_negative("cache_mib", cache_mib)
    fspath = os.fsdecode(path)
    stream = open_prefetch_stream(
        fspath,
        prefetch,
        model=None if model is None else os.fsdecode(model),
        save_model=None if save_model is None else os.fsdecode(save_model),
        latency_ms=float(latency_ms),
        bandwidth_mbps=float(bandwidth_mbps),
        concurrency=concurrency,
        cache_mib=cache_mib,
    )
    name = path if isinstance(path, (str, bytes)) else fspath
    return PrefetchFile(stream, name)


def prefetch_stats() -> dict[str, float]:
    """The counters of the process's prefetch engine: every file read through it since
    it started (the keys of :meth:`PrefetchFile.stats`)."""
    return dict(_engine_stats())
