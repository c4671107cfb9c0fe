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
* Reads are independent after the open (any rank reads any byte), except
  :meth:`MPIContainer.read_extents_ordered`: a collective ``read_extents`` whose
  physical reads, of all ranks together, are issued one at a time in container order
  (data log, then offset). On storage where concurrent streams make the disk seek
  between them (a striped HDD), a reorganized file whose ranks' patterns lie one after
  another is then read as one sequential stream, without the exchange of two-phase
  collective I/O. The ranks pass the turn with ``send``/``recv`` of tag
  :data:`ORDER_TAG` on ``comm``.

Run it like any mpi4py program: ``mpirun -n 4 python prog.py``. ``mpi4py`` is imported
only by the caller: any communicator with ``rank``, ``size``, ``Barrier``, ``bcast``
and ``allgather`` (mpi4py's lowercase object methods; ``send`` and ``recv`` too for
ordered reads) works.
"""

from __future__ import annotations

from typing import Any

from ._args import PathArg, path_arg
from ._native import container_list_writers, container_read_logs, container_reader_from_parts
from .container import INDEX_MODES, MODES, Container, extent_pairs

__all__ = ["ORDER_TAG", "MPIContainer", "Turns", "open"]

#: The message tag of :meth:`MPIContainer.read_extents_ordered`'s turns.
ORDER_TAG = 0x7A71


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

    def read_extents_ordered(self, extents: Any) -> bytes:
        """Collective :meth:`read_extents`: this rank's bytes of ``extents``, with the
        physical reads of every rank issued one at a time in container order (data log,
        then offset; ties by rank), each rank waiting for the turn of the read before
        its own. Every rank must call it (with its own extents, empty included). An
        error on any rank is raised on every rank, after the turns have gone round."""
        reader = self._need_reader("read_extents_ordered")
        comm = self._comm
        error: BaseException | None = None
        pairs: list[tuple[int, int]] = []
        try:
            pairs = extent_pairs(extents)
            for offset, length in pairs:
                if offset + length > self.size:
                    raise ValueError(f"{self.name}: extent of {length} bytes at offset {offset} "
                                     f"ends past the end of the file ({self.size} bytes)")  # fmt: skip
        except Exception as e:  # noqa: BLE001 - re-raised on every rank below
            error = e
        _collective_error(comm, error)
        turns = Turns(comm)
        data = b""
        try:
            data, reads = reader.read_extents_paced(pairs, turns.schedule)
            self._extent_reads += 1
            self._physical_reads += int(reads)
        except Exception as e:  # noqa: BLE001
            error = e
        turns.finish()
        _collective_error(comm, error)
        return bytes(data)

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


class Turns:
    """The turns of one ordered read (collective over ``comm``): every rank's physical
    reads in the order of their places ``(file or data log, start, end)``, ties by
    rank; a read waits for the one before it (another rank's: a message) and hands on
    to the one after it. :meth:`schedule` takes this rank's places, in the order it
    will read them, and returns the ``pace(i, after)`` to call before and after its
    ``i``-th read; :meth:`finish` (always, also after an error) hands on what this rank
    did not, so no other rank waits forever. Used by
    :meth:`MPIContainer.read_extents_ordered` and, on plain files, by
    :func:`patio.reorg.sieve.read`'s ``schedule``."""

    def __init__(self, comm: Any) -> None:
        self._comm = comm
        self._prev: list[int | None] = []
        self._next: list[int | None] = []
        self._waited: list[bool] = []
        self._passed: list[bool] = []
        self._scheduled = False

    def schedule(self, places: list[tuple[int, int, int]]) -> Any:
        comm, rank = self._comm, self._comm.rank
        everyone = comm.allgather([(chunk, start) for chunk, start, _end in places])
        self._scheduled = True
        order = sorted((chunk, start, r, i) for r, mine in enumerate(everyone) for i, (chunk, start) in enumerate(mine))
        for k, (_, _, r, _) in enumerate(order):
            if r != rank:
                continue
            before = order[k - 1][2] if k > 0 else None
            after = order[k + 1][2] if k + 1 < len(order) else None
            self._prev.append(None if before == rank else before)
            self._next.append(None if after == rank else after)
        self._waited = [False] * len(self._prev)
        self._passed = [False] * len(self._prev)
        return self.pace

    def pace(self, i: int, after: bool) -> None:
        if not after:
            if self._prev[i] is not None:
                self._comm.recv(source=self._prev[i], tag=ORDER_TAG)
            self._waited[i] = True
        else:
            if self._next[i] is not None:
                self._comm.send(None, dest=self._next[i], tag=ORDER_TAG)
            self._passed[i] = True

    def finish(self) -> None:
        """Hands on every turn this rank has not (after a failed read); a rank that
        failed before the schedule joins its exchange with no reads."""
        if not self._scheduled:
            self.schedule([])
        for i in range(len(self._prev)):
            if not self._waited[i]:
                self.pace(i, False)
            if not self._passed[i]:
                self.pace(i, True)


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
