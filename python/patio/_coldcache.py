"""Cold reads for benchmarks: take files out of the page cache and check that they are.

``posix_fadvise(POSIX_FADV_DONTNEED)`` drops clean pages only; pages of a file just
written are dirty until written back, so a drop without ``fsync`` leaves them cached and
the "cold" read that follows is served from memory. :func:`drop` fsyncs each file, drops
it, and measures what is still resident with ``mincore(2)`` on a read-only mapping
(what ``fincore`` reports). On a file system whose pages cannot leave memory (tmpfs) the
resident fraction stays near 1: callers report it beside their timings.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import mmap
import os
from collections.abc import Iterable

_PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_MAP_FAILED = ctypes.c_void_p(-1).value
_BIT0 = bytes(b & 1 for b in range(256))  # mincore: bit 0 of each byte is "resident"


def resident_pages(path: str | os.PathLike[str]) -> tuple[int, int]:
    """``(resident, total)`` pages of ``path`` in the page cache (``mincore`` on a
    read-only shared mapping, which faults nothing in)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        total = (size + _PAGE - 1) // _PAGE
        if total == 0:
            return 0, 0
        addr = _libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr is None or addr == _MAP_FAILED:
            err = ctypes.get_errno()
            raise OSError(err, f"mmap: {os.strerror(err)}", str(path))
        try:
            vec = (ctypes.c_ubyte * total)()
            if _libc.mincore(addr, size, vec) != 0:
                err = ctypes.get_errno()
                raise OSError(err, f"mincore: {os.strerror(err)}", str(path))
            return bytes(vec).translate(_BIT0).count(1), total
        finally:
            _libc.munmap(addr, size)
    finally:
        os.close(fd)


def resident_fraction(paths: Iterable[str | os.PathLike[str]]) -> float:
    """The fraction of the pages of ``paths`` in the page cache (0 for empty files)."""
    res = tot = 0
    for p in paths:
        r, t = resident_pages(p)
        res, tot = res + r, tot + t
    return res / tot if tot else 0.0


def drop(paths: Iterable[str | os.PathLike[str]]) -> float:
    """fsync each file, drop it from the page cache, and return the resident fraction
    left (about 0 where the drop worked; near 1 on tmpfs). Missing files are skipped."""
    present = []
    for p in paths:
        try:
            fd = os.open(p, os.O_RDONLY)
        except FileNotFoundError:
            continue
        try:
            drop_fd(fd)
        finally:
            os.close(fd)
        present.append(p)
    return resident_fraction(present)


def drop_fd(fd: int) -> None:
    """fsync and drop an open file (for probes that hold their file open)."""
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


__all__ = ["drop", "drop_fd", "resident_fraction", "resident_pages"]
