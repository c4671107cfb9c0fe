"""Writing a file that readers see either as it was or complete, never half-written:
the data goes to a temporary file beside the target, which is fsynced, renamed over the
target, and the directory fsynced; on any failure the temporary file is removed and the
target is untouched. One definition for every writer of patio's Python side (layout
replicas, reordered Chombo files, plots and arrays of ``patio amr``). Temporary names
say which process on which host writes them, so what a killed process left is
removed by the next writer in the same directory."""

from __future__ import annotations

import os
import shutil
import socket
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


def host_name() -> str:
    """This host's name as patio's temporary and writer names spell it (the Rust
    side's ``layout::claim_base``): letters, digits and ``-``, anything else ``_``."""
    return "".join(c if c.isascii() and (c.isalnum() or c == "-") else "_"
                   for c in socket.gethostname())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return pid > 0


def remove_leftovers(directory: str | os.PathLike[str], prefix: str) -> int:
    """Removes the temporary files ``prefix<host>.<pid>-…`` in ``directory`` that a
    killed process of this host left (its pid is gone); another host's are left alone,
    their process may be running. Returns how many were removed."""
    mine = f"{prefix}{host_name()}."
    removed = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    for name in names:
        if not name.startswith(mine):
            continue
        pid = name[len(mine):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            path = os.path.join(directory, name)
            try:
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path)
                else:
                    os.unlink(path)
                removed += 1
            except FileNotFoundError:
                pass
    return removed


def temp_beside(dst: str | os.PathLike[str], prefix: str = ".patio-") -> str:
    """A new empty temporary file in ``dst``'s directory, with the permissions a new
    file gets under the current umask (``mkstemp`` alone would make it 0600), named
    ``prefix<host>.<pid>-…``; what killed processes of this host left there under the
    same prefix is removed first."""
    directory = os.path.dirname(os.path.abspath(dst))
    remove_leftovers(directory, prefix)
    fd, tmp = tempfile.mkstemp(prefix=f"{prefix}{host_name()}.{os.getpid()}-", suffix=".tmp",
                               dir=directory)
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
