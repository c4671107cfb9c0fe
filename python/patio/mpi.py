"""patio containers under MPI (mpi4py): ``patio.mpi.open(comm, path, mode)``.

Every rank writes its part of one logical file through a writer of its own; on read
open the ranks split the index logs among themselves and exchange them, so that each
index log is read from the (shared) file system by one rank only.

    from mpi4py import MPI
    import patio.mpi

    comm = MPI.COMM_WORLD
    with patio.mpi.open(comm, "ckpt.patio", "w") as c:   # collective
        for i in range(n):
            c.write_at((i * comm.size + comm.rank) * block, data[i])
    with patio.mpi.open(comm, "ckpt.patio") as c:        # collective; mode "r"
        mine = c.read_array(numpy.float64, count, offset)

* **Write** (``"w"``, ``"a"``): rank 0 creates the container (``"w"`` also truncates an
  existing one to 0 bytes), a barrier, then every other rank opens a writer of its own
  with ``"a"``. :meth:`MPIContainer.flush` and :meth:`MPIContainer.close` are
  collective: every rank flushes, then a barrier, so that afterwards every rank's
  writes are durable, visible to readers opened after the call, and ordered before
  any later write of any rank.
* **Read** (``"r"``): rank 0 lists the writers and broadcasts the list; rank ``r`` of
  ``P`` reads the index logs ``r, r+P, r+2P, ...`` of it (the intact bytes: the compact
  encoded records, pattern entries in a ``pattern`` container); the ranks
  ``allgather`` them and each builds the same reader from all parts, without touching
  the other ranks' logs. :meth:`MPIContainer.stats` adds ``index_logs_read``,
  ``index_bytes_read`` (from disk by this rank) and ``index_bytes_received`` (from the
  other ranks) to the reader's figures.
* Reads are independent after the open (any rank reads any byte).

Run it like any mpi4py program: ``mpirun -n 4 python prog.py``. ``mpi4py`` is imported
only by the caller: any communicator with ``rank``, ``size``, ``Barrier``, ``bcast``
and ``allgather`` (mpi4py's lowercase object methods) works.
"""

from __future__ import annotations

from typing import Any

from ._args import PathArg, path_arg
from ._native import container_list_writers, container_read_logs, container_reader_from_parts
from .container import INDEX_MODES, MODES, Container

__all__ = ["MPIContainer", "open"]


def _collective_error(comm: Any, error: BaseException | None) -> None:
    """Raises on every rank when any rank failed (so no rank waits forever in a later
    collective); the failing rank re-raises its own error, the others a summary."""
    failures = comm.allgather(None if error is None else f"{type(error).__name__}: {error}")
    if error is not None:
        raise error
    bad = [(r, f) for r, f in enumerate(failures) if f is not None]
    if bad:
        rank, what = bad[0]
        raise RuntimeError(f"patio.mpi: rank {rank} failed: {what}")


class MPIContainer(Container):
    """A :class:`patio.Container` opened collectively by every rank of ``comm``
    (see the module documentation)."""

    _comm: Any
    _split: dict[str, int]

    def flush(self) -> None:
        """Collective: every rank flushes its writer, then a barrier."""
        error: BaseException | None = None
        try:
            super().flush()
        except Exception as e:  # noqa: BLE001 - re-raised on every rank below
            error = e
        _collective_error(self._comm, error)

    def close(self) -> None:
        """Collective: flushes and closes every rank's writer (or reader), then a
        barrier: after it returns on any rank, every rank's writes are visible to
        readers opened afterwards. Closing twice does nothing (and is not collective)."""
        if self.closed:
            return
        error: BaseException | None = None
        try:
            super().close()
        except Exception as e:  # noqa: BLE001 - re-raised on every rank below
            error = e
        _collective_error(self._comm, error)

    def stats(self) -> dict[str, Any]:
        """The reader's figures (:meth:`patio.Container.stats`) plus, for a split
        open, ``index_logs_read`` and ``index_bytes_read`` (this rank's share, from
        disk), ``index_bytes_received`` (packed logs from the other ranks) and
        ``ranks``."""
        out = super().stats()
        out.update(self._split)
        return out

    def __repr__(self) -> str:
        state = "closed " if self.closed else ""
        return (
            f"<patio.mpi.MPIContainer {state}name={self.name!r} mode={self._mode!r} "
            f"rank={self._comm.rank}/{self._comm.size}>"
        )


def open(
    comm: Any,
    path: PathArg,
    mode: str = "r",
    *,
    index: str | None = None,
    index_buffer: int | None = None,
) -> MPIContainer:
    """Opens the container at ``path`` on every rank of ``comm`` (collective).

    ``mode`` is ``"r"``, ``"w"`` or ``"a"`` as for :class:`patio.Container`; ``index``
    (``"pattern"`` or ``"raw"``) applies when rank 0 creates the container.
    Errors are raised on every rank: the failing rank raises its own, the others a
    ``RuntimeError`` naming it.
    """
    if mode not in MODES:
        raise ValueError(f"invalid mode {mode!r}: must be 'r', 'w' or 'a'")
    if index is not None and index not in INDEX_MODES:
        raise ValueError(f"index={index!r}: must be 'pattern' or 'raw'")
    fspath = path_arg(path)
    name = path if isinstance(path, (str, bytes)) else fspath
    rank, size = comm.rank, comm.size
    error: BaseException | None = None
    if mode == "r":
        if index is not None or index_buffer is not None:
            raise ValueError("index= and index_buffer= apply to modes 'w' and 'a'")
        names: list[str] | None = None
        if rank == 0:
            try:
                names = container_list_writers(fspath)
            except Exception as e:  # noqa: BLE001 - re-raised on every rank below
                error = e
        _collective_error(comm, error)
        names = comm.bcast(names, root=0)
        assert names is not None
        share = names[rank::size]
        packed: bytes | None = None
        disk = 0
        try:
            packed, disk = container_read_logs(fspath, share)
        except Exception as e:  # noqa: BLE001
            error = e
        _collective_error(comm, error)
        parts: list[bytes] = comm.allgather(packed)
        reader = None
        try:
            reader = container_reader_from_parts(fspath, parts)
        except Exception as e:  # noqa: BLE001
            error = e
        _collective_error(comm, error)
        out = MPIContainer._from_reader(reader, name)
        out._comm = comm
        out._split = {
            "ranks": size,
            "index_logs_read": len(share),
            "index_bytes_read": int(disk),
            "index_bytes_received": sum(len(p) for r, p in enumerate(parts) if r != rank),
        }
        return out

    out = MPIContainer.__new__(MPIContainer)
    out._comm = comm
    out._split = {}
    if rank == 0:
        try:
            Container.__init__(out, fspath, mode, index=index, index_buffer=index_buffer)
        except Exception as e:  # noqa: BLE001
            error = e
    _collective_error(comm, error)
    if rank != 0:
        try:
            Container.__init__(out, fspath, "a", index=None, index_buffer=index_buffer)
            out._mode = mode
        except Exception as e:  # noqa: BLE001
            error = e
    _collective_error(comm, error)
    out.name = name
    return out
