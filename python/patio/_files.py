"""Writing a file that readers see either as it was or complete, never half-written:
the data goes to a temporary file beside the target, which is fsynced, renamed over the
target, and the directory fsynced; on any failure the temporary file is removed and the
target is untouched. One definition for every writer of patio's Python side (layout
replicas, reordered Chombo files, plots and arrays of ``patio amr``)."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


def commit(tmp: str | os.PathLike[str], final: str | os.PathLike[str]) -> None:
    """Makes the complete ``tmp`` durable and renames it to ``final`` (then syncs the
    directory, so the rename survives a crash too)."""
    with open(tmp, "rb+") as f:
        os.fsync(f.fileno())
    os.replace(tmp, final)
    dfd = os.open(os.path.dirname(os.path.abspath(final)), os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def temp_beside(dst: str | os.PathLike[str], prefix: str = ".patio-") -> str:
    """A new empty temporary file in ``dst``'s directory, with the permissions a new
    file gets under the current umask (``mkstemp`` alone would make it 0600)."""
    fd, tmp = tempfile.mkstemp(prefix=prefix, suffix=".tmp",
                               dir=os.path.dirname(os.path.abspath(dst)))
    os.close(fd)
    mask = os.umask(0)
    os.umask(mask)
    os.chmod(tmp, 0o666 & ~mask)
    return tmp


@contextmanager
def replacing(dst: str | os.PathLike[str], tmp: str | os.PathLike[str] | None = None,
              prefix: str = ".patio-") -> Iterator[str]:
    """``with replacing(dst) as tmp:`` write ``tmp``; when the block ends normally it
    becomes ``dst`` (:func:`commit`), otherwise it is removed. ``tmp`` may name the
    temporary file (one that clean-up code can find), else one is made beside ``dst``."""
    path = os.fspath(tmp) if tmp is not None else temp_beside(dst, prefix)
    try:
        yield path
        commit(path, dst)
    except BaseException:
        if os.path.exists(path):
            os.unlink(path)
        raise
