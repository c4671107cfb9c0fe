"""The access patterns of ``patio bench reorg``: which bytes of the shared file each
rank reads, as ``(offset, length)`` extents in request order, and the MPI file view
that describes the same bytes for a collective read.

* ``ior``: IOR segmented layout (``-s S -b B -t T``): segment ``s`` holds every rank's
  block of ``B`` bytes in rank order; rank ``r`` reads its block of every segment in
  transfers of ``T`` bytes.
* ``tile``: mpi-tile-io: a 2-D array of ``tiles_x * tiles_y`` tiles of ``E x E``
  elements of ``elem`` bytes, row-major; rank ``r`` reads tile ``(r mod tiles_x,
  r div tiles_x)`` one tile row at a time.

``perturb`` derives the robustness sweeps' requests: each request ``X`` % smaller
than planned (same start), or every start shifted by ``X`` % of the request.

``plan_run`` is the held-out benchmark's first run, whose trace the plan comes from: the
same file read by another rank count with other request sizes (IOR: twice the ranks,
half the block and transfer; tile: twice the tiles per side, half the tile side). The
measured second run is the case itself with every start shifted (``perturb``), so the
plan has seen neither its rank count, nor its request sizes, nor its offsets.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

CASES = ("ior", "tile")


@dataclass(frozen=True)
class Case:
    name: str
    ranks: int
    # ior
    segments: int = 0
    block: int = 0
    transfer: int = 0
    # tile
    tiles_x: int = 0
    tiles_y: int = 0
    elems: int = 0
    elem: int = 0

    @property
    def file_size(self) -> int:
        if self.name == "ior":
            return self.segments * self.ranks * self.block
        return self.tiles_x * self.tiles_y * self.elems * self.elems * self.elem

    def extents(self, rank: int) -> list[tuple[int, int]]:
        """Rank ``rank``'s requests in order."""
        if self.name == "ior":
            per = self.block // self.transfer
            return [
                ((s * self.ranks + rank) * self.block + k * self.transfer, self.transfer)
                for s in range(self.segments)
                for k in range(per)
            ]
        tx, ty = rank % self.tiles_x, rank // self.tiles_x
        row = self.tiles_x * self.elems
        return [
            (((ty * self.elems + y) * row + tx * self.elems) * self.elem, self.elems * self.elem)
            for y in range(self.elems)
        ]

    def pieces_per_rank(self) -> int:
        return len(self.extents(0))

    def file_view(self, mpi: Any, rank: int) -> tuple[int, Any]:
        """``(displacement, filetype)`` of rank ``rank``'s bytes (committed), for
        ``File.Set_view(disp, MPI.BYTE, filetype)`` and one ``Read_at_all``."""
        if self.name == "ior":
            ft = mpi.BYTE.Create_vector(self.segments, self.block, self.ranks * self.block)
            disp = rank * self.block
        else:
            tx, ty = rank % self.tiles_x, rank // self.tiles_x
            rows, cols = self.tiles_y * self.elems, self.tiles_x * self.elems * self.elem
            ft = mpi.BYTE.Create_subarray(
                [rows, cols],
                [self.elems, self.elems * self.elem],
                [ty * self.elems, tx * self.elems * self.elem],
            )
            disp = 0
        ft.Commit()
        return disp, ft

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def ior(ranks: int, segments: int, block: int, transfer: int) -> Case:
    if block % transfer:
        raise ValueError(f"the block ({block}) must be a multiple of the transfer ({transfer})")
    return Case("ior", ranks, segments=segments, block=block, transfer=transfer)


def tile(tiles_x: int, tiles_y: int, elems: int, elem: int) -> Case:
    return Case("tile", tiles_x * tiles_y, tiles_x=tiles_x, tiles_y=tiles_y, elems=elems, elem=elem)


def perturb(extents: list[tuple[int, int]], kind: str, percent: float, size: int) -> list[tuple[int, int]]:
    """The robustness sweeps' requests: ``kind`` ``smaller`` (each ``percent`` %
    shorter) or ``shifted`` (each start moved ``percent`` % of its length, clipped to
    the file)."""
    out = []
    for o, n in extents:
        if kind == "smaller":
            o2, n2 = o, max(1, round(n * (1 - percent / 100)))
        elif kind == "shifted":
            o2 = o + round(n * percent / 100)
            n2 = min(n, size - o2)
        else:
            raise ValueError(f"unknown perturbation {kind!r}")
        if n2 > 0:
            out.append((o2, n2))
    return out


def plan_run(case: Case) -> Case:
    """The run a held-out plan is made from (see the module's text): the same file and
    bytes, twice the ranks per dimension, half-size requests."""
    if case.name == "ior":
        if case.block % 2 or case.transfer % 2:
            raise ValueError("a held-out IOR run needs an even block and transfer")
        return ior(case.ranks * 2, case.segments, case.block // 2, case.transfer // 2)
    if case.elems % 2:
        raise ValueError("a held-out tile run needs an even tile side")
    return tile(case.tiles_x * 2, case.tiles_y * 2, case.elems // 2, case.elem)
