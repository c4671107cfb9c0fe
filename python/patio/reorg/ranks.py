"""The program every rank of ``patio bench reorg`` runs under ``mpirun``:
``python -m patio.reorg.ranks SPEC.json``.

The spec names the case, the mode, the file (through the storage-model mount, or on
the real file system), the source (read directly, to verify) and an optional
perturbation. Modes:

* ``original``: MPI-IO independent reads, one ``Read_at`` per request, as the program
  issues them;
* ``original_batched``: the rank's requests in one call with the reorganized read's
  data sieving (:mod:`patio.reorg.sieve`: pieces in offset order, forward gaps up to
  256 KiB read through), one independent ``Read_at`` per sieved run — what ROMIO's data
  sieving does for independent non-contiguous reads;
* ``original_ordered``: the same sieved reads, the physical reads of all ranks one
  at a time in file order (``patio.mpi.Turns``, as ``reorganized_ordered`` reads the
  container) — the control that tells the order's gain from the layout's;
* ``collective``: the rank's bytes as an MPI file view and one ``Read_at_all`` (the
  library's two-phase collective I/O; with a perturbation, the view is the perturbed
  extents as an ``hindexed`` type);
* ``reorganized``: ``patio.mpi.open`` on the reorganized container and one
  ``read_extents`` of the rank's requests (one read per physical run);
* ``reorganized_ordered``: the same container read collectively with
  ``read_extents_ordered``: the physical reads of all ranks one at a time, in
  container order (one sequential stream instead of one stream per rank);
* ``reorganized_pieces``: the same container read with one ``read_at`` per request
  (an unmodified program's requests, remapped);
* ``write_original``, ``write_collective``: the rank's bytes written to a new plain
  file, one ``Write_at`` per request or one ``Write_at_all`` through the file view,
  then ``Sync``;
* ``write_container``: the same requests written to a new container with
  ``patio.mpi`` (each rank appends to its own log), closed collectively (flushed).

Every rank times from a barrier after the open-free setup to a barrier after its
reads (opens included), checks its bytes against the source (CRC-32, read after the
clock stops so that the real-disk mode does not warm the page cache for the timed
reads), and rank 0 writes ``{"seconds", "ok", "physical_reads", "requests"}`` to the
spec's ``out``.
"""

from __future__ import annotations

import json
import sys
import time
import zlib

from mpi4py import MPI

import patio
import patio.mpi
from patio.reorg import sieve
from patio.reorg.cases import Case, perturb


def _read_original(path: str, extents: list[tuple[int, int]]) -> bytes:
    fh = MPI.File.Open(MPI.COMM_WORLD, path, MPI.MODE_RDONLY)
    try:
        parts = []
        for o, n in extents:
            buf = bytearray(n)
            fh.Read_at(o, buf)
            parts.append(bytes(buf))
        return b"".join(parts)
    finally:
        fh.Close()


def _read_batched(path: str, extents: list[tuple[int, int]],
                  turns: patio.mpi.Turns | None = None) -> tuple[bytes, int]:  # fmt: skip
    """The rank's sieved reads of ``path``; with ``turns``, those of all ranks one at a
    time in file order (``original_ordered``)."""
    fh = MPI.File.Open(MPI.COMM_WORLD, path, MPI.MODE_RDONLY)
    try:

        def pread(o: int, n: int) -> bytes:
            buf = bytearray(n)
            fh.Read_at(o, buf)
            return bytes(buf)

        return sieve.read(extents, pread, schedule=turns.schedule if turns else None)
    finally:
        if turns:
            turns.finish()
        fh.Close()


def _view(case: Case, rank: int, extents: list[tuple[int, int]], perturbed: bool) -> tuple[int, MPI.Datatype]:
    """The rank's file view: the case's own type, or the (perturbed) extents'."""
    if not perturbed:
        return case.file_view(MPI, rank)
    ft = MPI.BYTE.Create_hindexed([n for _, n in extents], [o for o, _ in extents])
    ft.Commit()
    return 0, ft


def _read_collective(path: str, case: Case, rank: int, total: int,
                     extents: list[tuple[int, int]], perturbed: bool) -> bytes:  # fmt: skip
    fh = MPI.File.Open(MPI.COMM_WORLD, path, MPI.MODE_RDONLY)
    try:
        disp, ft = _view(case, rank, extents, perturbed)
        fh.Set_view(disp, MPI.BYTE, ft)
        buf = bytearray(total)
        fh.Read_at_all(0, buf)
        ft.Free()
        return bytes(buf)
    finally:
        fh.Close()


def _write_original(path: str, extents: list[tuple[int, int]], data: bytes) -> None:
    fh = MPI.File.Open(MPI.COMM_WORLD, path, MPI.MODE_WRONLY | MPI.MODE_CREATE)
    try:
        at = 0
        for o, n in extents:
            fh.Write_at(o, data[at : at + n])
            at += n
        fh.Sync()
    finally:
        fh.Close()


def _write_collective(path: str, case: Case, rank: int, data: bytes) -> None:
    fh = MPI.File.Open(MPI.COMM_WORLD, path, MPI.MODE_WRONLY | MPI.MODE_CREATE)
    try:
        disp, ft = case.file_view(MPI, rank)
        fh.Set_view(disp, MPI.BYTE, ft)
        fh.Write_at_all(0, data)
        ft.Free()
        fh.Sync()
    finally:
        fh.Close()


def _write_container(comm: MPI.Comm, path: str, extents: list[tuple[int, int]], data: bytes) -> None:
    with patio.mpi.open(comm, path, "w") as c:
        at = 0
        for o, n in extents:
            c.write_at(o, data[at : at + n])
            at += n


def _written_ok(spec: dict, extents: list[tuple[int, int]], data: bytes) -> bool:
    """Reads back what this rank wrote (outside the timing)."""
    path = spec["path"]
    if spec["mode"] == "write_container":
        with patio.Container(path) as c:
            back = c.read_extents(extents)
    else:
        with open(path, "rb") as f:
            back = b"".join(_pread(f, o, n) for o, n in extents)
    return back == data


def main(argv: list[str]) -> int:
    with open(argv[0]) as f:
        spec = json.load(f)
    comm = MPI.COMM_WORLD
    rank = comm.rank
    case = Case(**spec["case"])
    extents = case.extents(rank)
    if spec.get("perturb"):
        kind, percent = spec["perturb"]
        extents = perturb(extents, kind, percent, case.file_size)
    mode, path = spec["mode"], spec["path"]
    mine = _source_bytes(spec["source"], extents) if mode.startswith("write_") else b""
    total = sum(n for _, n in extents)
    physical = len(extents)
    # Load the MPI-IO components before the clock starts (the first open pays for it).
    MPI.File.Open(comm, spec["source"], MPI.MODE_RDONLY).Close()
    comm.Barrier()
    t0 = time.perf_counter()
    if mode == "original":
        data = _read_original(path, extents)
    elif mode == "original_batched":
        data, physical = _read_batched(path, extents)
    elif mode == "original_ordered":
        data, physical = _read_batched(path, extents, patio.mpi.Turns(comm))
    elif mode == "collective":
        data = _read_collective(path, case, rank, total, extents, bool(spec.get("perturb")))
    elif mode in ("reorganized", "reorganized_ordered", "reorganized_pieces"):
        with patio.mpi.open(comm, path) as c:
            if mode == "reorganized":
                data = c.read_extents(extents)
            elif mode == "reorganized_ordered":
                data = c.read_extents_ordered(extents)
            else:
                data = b"".join(c.read_at(n, o) for o, n in extents)
            physical = c.stats()["physical_reads"] if mode != "reorganized_pieces" else physical
    elif mode == "write_original":
        _write_original(path, extents, mine)
    elif mode == "write_collective":
        _write_collective(path, case, rank, mine)
    elif mode == "write_container":
        _write_container(comm, path, extents, mine)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    comm.Barrier()
    seconds = time.perf_counter() - t0
    if mode.startswith("write_"):
        ok = _written_ok(spec, extents, mine)
    else:
        ok = zlib.crc32(data) == zlib.crc32(_source_bytes(spec["source"], extents)) and len(data) == total
    oks = comm.gather(ok)
    reads = comm.gather(physical)
    requests = comm.gather(len(extents))
    if rank == 0:
        with open(spec["out"], "w") as f:
            json.dump(
                {"seconds": seconds, "ok": all(oks), "physical_reads": sum(reads), "requests": sum(requests)},
                f,
            )
    return 0


def _source_bytes(source: str, extents: list[tuple[int, int]]) -> bytes:
    with open(source, "rb") as f:
        return b"".join(_pread(f, o, n) for o, n in extents)


def _pread(f: object, o: int, n: int) -> bytes:
    f.seek(o)  # type: ignore[attr-defined]
    return f.read(n)  # type: ignore[attr-defined,no-any-return]


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
