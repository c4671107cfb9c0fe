"""Data sieving of a plain file, for ``patio bench reorg``'s batched-sieved control.

The reorganized container's ``read_extents`` reads a rank's pieces in disk order and
joins pieces that follow each other across forward gaps of up to ``SIEVE_GAP`` bytes
into one read (patio-container ``reader::Run``: a read through a scratch buffer spans
at most ``SIEVE_SPAN`` bytes, one straight into the caller's buffer any). Reading the
*original* file with the same rule — what ROMIO's data sieving does for independent
non-contiguous reads — separates the gain of batching a rank's requests from the gain
of the layout. :func:`runs` groups extents by that rule; :func:`read` reads them with a
caller's positional read. The rule is the container's: ``tests/test_reorg.py`` checks
that :func:`runs` counts as many reads as the container issues for the same extents.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

SIEVE_GAP = 256 << 10
SIEVE_SPAN = 16 << 20


@dataclass
class Run:
    """Pieces read together: ``(offset, buffer position, length)``, from ``start`` to
    ``end``; ``direct`` while they continue each other on disk and in the buffer."""

    start: int
    end: int
    direct: bool = True
    pieces: list[tuple[int, int, int]] = field(default_factory=list)

    def continued_by(self, piece: tuple[int, int, int]) -> bool:
        _, b, n = self.pieces[-1]
        return piece[0] == self.end and piece[1] == b + n

    def takes(self, piece: tuple[int, int, int], gap: int, span: int) -> bool:
        o, _, n = piece
        if o < self.end or o - self.end > gap:
            return False
        return (self.direct and self.continued_by(piece)) or o + n - self.start <= span


def runs(extents: list[tuple[int, int]], gap: int = SIEVE_GAP, span: int = SIEVE_SPAN) -> list[Run]:
    """The reads that fetch ``extents`` (``(offset, length)`` in request order) with
    data sieving: pieces in offset order, joined across forward gaps ``<= gap``."""
    pieces, at = [], 0
    for o, n in extents:
        if n > 0:
            pieces.append((o, at, n))
        at += n
    pieces.sort()
    out: list[Run] = []
    for p in pieces:
        last = out[-1] if out else None
        if last is not None and last.takes(p, gap, span):
            last.direct &= last.continued_by(p)
            last.end = p[0] + p[2]
            last.pieces.append(p)
        else:
            out.append(Run(p[0], p[0] + p[2], True, [p]))
    return out


def read(extents: list[tuple[int, int]], pread: Callable[[int, int], bytes],
         gap: int = SIEVE_GAP, span: int = SIEVE_SPAN,
         schedule: Callable[[list[tuple[int, int, int]]], Callable[[int, bool], None]] | None = None,
         ) -> tuple[bytes, int]:  # fmt: skip
    """``(the extents' bytes in request order, reads issued)``, read by runs with
    ``pread(offset, length)``. ``schedule`` (e.g. :meth:`patio.mpi.Turns.schedule`)
    gets the runs' places ``(0, start, end)`` and returns ``pace(i, after)``, called
    before and after the ``i``-th read."""
    buf = bytearray(sum(n for _, n in extents))
    done = runs(extents, gap, span)
    pace = schedule([(0, r.start, r.end) for r in done]) if schedule else None
    for i, r in enumerate(done):
        if pace:
            pace(i, False)
        data = pread(r.start, r.end - r.start)
        if pace:
            pace(i, True)
        if len(data) != r.end - r.start:
            raise OSError(f"short read: {len(data)} of {r.end - r.start} bytes at offset {r.start}")
        for o, b, n in r.pieces:
            buf[b : b + n] = data[o - r.start : o - r.start + n]
    return bytes(buf), len(done)
