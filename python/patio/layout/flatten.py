"""Flattening: a selection under a physical layout -> the byte extents a read touches.

The layout cost model (REORGANIZATION.md A.4) counts pages and non-contiguous pieces per
storage target; both come from the byte extents a selection occupies in a candidate
layout. This module defines the physical layouts of one stored array and computes those
extents:

* :class:`Contiguous` - row-major at ``base`` (HDF5 contiguous storage, a transposed
  replica is a Contiguous layout of the permuted array with the permuted selection).
* :class:`Chunked` - chunked storage, row-major inside each full-size chunk (edge chunks
  padded as HDF5 does), one byte address per chunk (``-1`` = not allocated: reads the
  fill value and costs nothing). :meth:`Chunked.in_order` models a replica whose chunks
  were written back to back in row, Morton or Hilbert order.

:func:`flatten` returns the extents in *buffer order* (the order of
:meth:`Selection.element_coords`) with consecutive extents merged; for hyperslabs it
works per run in closed form (never per element), so flattening a box of a huge array
costs what its output costs. :func:`flatten_sorted` gives the offset-sorted, merged
extents a cost model needs, :func:`describe` the size of their pattern description, and
:func:`flatten_reference` the brute-force per-element reference the tests compare with.

How a hyperslab is cut into runs: per dimension the selected indices are split into
*pieces* (a block of the hyperslab, cut again at chunk boundaries: the intersection of a
regular hyperslab with a chunk is a regular hyperslab up to a partial first and last
block). The trailing dimensions whose selection is exactly one whole chunk (for
Contiguous: the whole dimension) fold into the run length; the last other dimension
contributes its pieces and every dimension before it its single indices. Enumerating
(outer indices, pieces) row-major is buffer order, so no sort is needed; runs that
happen to abut in the file (chunks written back to back) are merged afterwards.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from .curves import curve_rank
from .selection import Hyperslab, Selection


@dataclass(frozen=True)
class Contiguous:
    """Row-major storage: element ``i`` at ``base + itemsize * ravel(i, shape)``."""

    shape: tuple[int, ...]
    itemsize: int
    base: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(n) for n in self.shape))
        _check_shape_itemsize(self.shape, self.itemsize)


@dataclass(frozen=True, eq=False)
class Chunked:
    """Chunked storage: chunks of shape ``chunk`` (full-size, row-major inside), chunk
    ``c`` (row-major index in the chunk grid) at byte ``addresses[c]``; ``-1`` marks a
    chunk that is not allocated (fill value, no I/O)."""

    shape: tuple[int, ...]
    itemsize: int
    chunk: tuple[int, ...]
    addresses: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(n) for n in self.shape))
        object.__setattr__(self, "chunk", tuple(int(n) for n in self.chunk))
        _check_shape_itemsize(self.shape, self.itemsize)
        if len(self.chunk) != len(self.shape) or any(c < 1 for c in self.chunk):
            raise ValueError(f"chunk {self.chunk} must have {len(self.shape)} positive sides")
        addr = np.ascontiguousarray(self.addresses, dtype=np.int64).reshape(-1)
        if len(addr) != int(np.prod(self.grid, dtype=np.int64)):
            raise ValueError(f"{len(addr)} addresses for a chunk grid of {self.grid}")
        object.__setattr__(self, "addresses", addr)

    @property
    def grid(self) -> tuple[int, ...]:
        """Chunks per dimension (edge chunks included)."""
        return tuple(-(-n // c) for n, c in zip(self.shape, self.chunk))

    @property
    def chunk_bytes(self) -> int:
        return int(np.prod(self.chunk, dtype=np.int64)) * self.itemsize

    @staticmethod
    def in_order(shape: Sequence[int], itemsize: int, chunk: Sequence[int],
                 order: str = "row", base: int = 0) -> Chunked:
        """All chunks allocated back to back from ``base`` in ``order`` (``"row"``,
        ``"morton"`` or ``"hilbert"`` over the chunk grid)."""
        shape_t = tuple(int(n) for n in shape)
        chunk_t = tuple(int(c) for c in chunk)
        if any(c < 1 for c in chunk_t):
            raise ValueError(f"chunk {chunk_t} must have positive sides")
        grid = tuple(-(-n // c) for n, c in zip(shape_t, chunk_t))
        nbytes = int(np.prod(chunk_t, dtype=np.int64)) * int(itemsize)
        addr = int(base) + curve_rank(grid, order) * nbytes
        return Chunked(shape_t, int(itemsize), chunk_t, addr)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Chunked):
            return NotImplemented
        return ((self.shape, self.itemsize, self.chunk) == (other.shape, other.itemsize,
                                                             other.chunk)
                and bool(np.array_equal(self.addresses, other.addresses)))

    def __hash__(self) -> int:
        return hash((self.shape, self.itemsize, self.chunk, self.addresses.tobytes()))


Layout = Union[Contiguous, Chunked]


@dataclass(frozen=True, eq=False)
class Extents:
    """Byte extents: ``offsets[i]``, ``lengths[i]`` (int64)."""

    offsets: np.ndarray
    lengths: np.ndarray

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", np.ascontiguousarray(self.offsets, np.int64))
        object.__setattr__(self, "lengths", np.ascontiguousarray(self.lengths, np.int64))
        if self.offsets.shape != self.lengths.shape or self.offsets.ndim != 1:
            raise ValueError("offsets and lengths must be 1-D arrays of the same length")

    def __len__(self) -> int:
        return len(self.offsets)

    def nbytes(self) -> int:
        """Total bytes covered (counting overlaps as often as they occur)."""
        return int(self.lengths.sum())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Extents):
            return NotImplemented
        return (bool(np.array_equal(self.offsets, other.offsets))
                and bool(np.array_equal(self.lengths, other.lengths)))

    def __repr__(self) -> str:
        return f"Extents(n={len(self)}, offsets={self.offsets!r}, lengths={self.lengths!r})"


# -- helpers -----------------------------------------------------------------------------

def _check_shape_itemsize(shape: tuple[int, ...], itemsize: int) -> None:
    if any(n < 0 for n in shape):
        raise ValueError(f"negative dimension in {shape}")
    if int(itemsize) < 1:
        raise ValueError(f"itemsize must be >= 1, got {itemsize}")


def _storage(layout: Layout) -> tuple[tuple[int, ...], int, tuple[int, ...], np.ndarray]:
    """``(shape, itemsize, chunk, addresses)``: Contiguous is one chunk the size of the array."""
    if isinstance(layout, Contiguous):
        return (layout.shape, int(layout.itemsize), tuple(max(n, 1) for n in layout.shape),
                np.array([layout.base], dtype=np.int64))
    if isinstance(layout, Chunked):
        return layout.shape, int(layout.itemsize), layout.chunk, layout.addresses
    raise TypeError(f"not a layout: {type(layout).__name__}")


def _row_major_strides(dims: Sequence[int]) -> list[int]:
    strides = [1] * len(dims)
    for j in range(len(dims) - 2, -1, -1):
        strides[j] = strides[j + 1] * int(dims[j + 1])
    return strides


def _check_selection(shape: tuple[int, ...], sel: Selection) -> None:
    if tuple(sel.shape) != shape:
        raise ValueError(f"selection of shape {sel.shape} on a layout of shape {shape}")
    if sel.kind == "points":
        assert sel.points is not None
        pts = sel.points
        if len(pts) and (pts.min() < 0 or np.any(pts >= np.asarray(shape, dtype=np.int64))):
            raise ValueError("point outside the array")
        return
    for slab in sel.slabs:
        if slab.ndim != len(shape):
            raise ValueError(f"hyperslab of rank {slab.ndim} in an array of rank {len(shape)}")
        if slab.nelements() == 0:
            continue
        for s, st, c, b, n in zip(slab.start, slab.stride, slab.count, slab.block, shape):
            if s < 0 or st < 1 or (c > 1 and st < b) or s + (c - 1) * st + b > n:
                raise ValueError(f"hyperslab {slab} does not fit shape {shape}")


def _merge_consecutive(off: np.ndarray, length: np.ndarray) -> Extents:
    """Merge each extent into its predecessor when it starts where that one ended."""
    if len(off) == 0:
        return Extents(np.zeros(0, np.int64), np.zeros(0, np.int64))
    brk = np.empty(len(off), dtype=bool)
    brk[0] = True
    np.not_equal(off[1:], off[:-1] + length[:-1], out=brk[1:])
    starts = np.flatnonzero(brk)
    return Extents(off[starts], np.add.reduceat(length, starts))


def _dim_pieces(s: int, st: int, c: int, b: int, csize: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One dimension of a hyperslab cut into pieces (blocks cut at chunk boundaries), in
    selection order: ``(first index, length, chunk coordinate)`` per piece."""
    lo = s + np.arange(c, dtype=np.int64) * st
    first = lo // csize
    npieces = (lo + b - 1) // csize - first + 1
    blk = np.repeat(np.arange(c, dtype=np.int64), npieces)
    within = np.arange(int(npieces.sum()), dtype=np.int64) - np.repeat(
        np.cumsum(npieces) - npieces, npieces)
    ca = first[blk] + within
    plo = np.maximum(lo[blk], ca * csize)
    phi = np.minimum(lo[blk] + b, (ca + 1) * csize)
    return plo, phi - plo, ca


def _slab_runs(slab: Hyperslab, shape: tuple[int, ...], itemsize: int, chunk: tuple[int, ...],
               addresses: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Runs of one non-empty hyperslab in buffer order (unallocated chunks dropped)."""
    h = slab.normalized()
    d = len(shape)
    grid = tuple(-(-n // c) for n, c in zip(shape, chunk))
    gstr = _row_major_strides(grid)
    cstr = _row_major_strides(chunk)
    whole = [c == 1 and b == cs and s % cs == 0
             for s, c, b, cs in zip(h.start, h.count, h.block, chunk)]
    k = max([j for j in range(d) if not whole[j]], default=0)
    inner = int(np.prod(chunk[k + 1:], dtype=np.int64))

    def along(v: np.ndarray, axis: int) -> np.ndarray:
        return v.reshape((1,) * axis + (-1,) + (1,) * (k - axis))

    chunk_lin: Any = 0
    local_lin: Any = 0
    for j in range(k):
        g = h.axis_indices(j)
        ca = g // chunk[j]
        chunk_lin = chunk_lin + along(ca * gstr[j], j)
        local_lin = local_lin + along((g - ca * chunk[j]) * cstr[j], j)
    plo, plen, ca = _dim_pieces(h.start[k], h.stride[k], h.count[k], h.block[k], chunk[k])
    chunk_lin = chunk_lin + along(ca * gstr[k], k)
    local_lin = local_lin + along((plo - ca * chunk[k]) * cstr[k], k)
    for j in range(k + 1, d):
        chunk_lin = chunk_lin + (h.start[j] // chunk[j]) * gstr[j]
    full = np.broadcast_shapes(np.shape(chunk_lin), np.shape(local_lin))
    chunk_lin = np.broadcast_to(chunk_lin, full).reshape(-1)
    local_lin = np.broadcast_to(local_lin, full).reshape(-1)
    length = np.broadcast_to(along(plen * (inner * itemsize), k), full).reshape(-1)
    base = addresses[chunk_lin]
    keep = base >= 0
    return base[keep] + local_lin[keep] * itemsize, length[keep]


def _point_addresses(points: np.ndarray, shape: tuple[int, ...], itemsize: int,
                     chunk: tuple[int, ...], addresses: np.ndarray) -> np.ndarray:
    """Byte address of each point (``-1`` in an unallocated chunk)."""
    grid = tuple(-(-n // c) for n, c in zip(shape, chunk))
    c = np.asarray(chunk, dtype=np.int64)
    cc = points // c
    chunk_lin = cc @ np.asarray(_row_major_strides(grid), dtype=np.int64)
    local_lin = (points - cc * c) @ np.asarray(_row_major_strides(chunk), dtype=np.int64)
    base = addresses[chunk_lin]
    return np.where(base >= 0, base + local_lin * itemsize, -1)


# -- public API --------------------------------------------------------------------------

def flatten(layout: Layout, selection: Selection) -> Extents:
    """The byte extents of ``selection`` under ``layout`` in buffer order, consecutive
    extents merged (the next starts where the previous ended). Hyperslabs cost O(runs),
    points O(k); elements in unallocated chunks produce no extent."""
    shape, itemsize, chunk, addresses = _storage(layout)
    _check_selection(shape, selection)
    if selection.nelements() == 0:
        return _merge_consecutive(np.zeros(0, np.int64), np.zeros(0, np.int64))
    if len(shape) == 0:  # scalar: every selected element is the one element
        n = selection.nelements()
        off = np.full(n, addresses[0], dtype=np.int64)
        keep = off >= 0
        return _merge_consecutive(off[keep], np.full(int(keep.sum()), itemsize, np.int64))
    if selection.kind == "points":
        assert selection.points is not None
        addr = _point_addresses(selection.points, shape, itemsize, chunk, addresses)
        addr = addr[addr >= 0]
        return _merge_consecutive(addr, np.full(len(addr), itemsize, dtype=np.int64))
    if isinstance(layout, Contiguous) and len(selection.slabs) > 8 \
            and all(s.is_box() for s in selection.slabs):
        o, n = _box_union_runs(selection.slabs, shape, itemsize, layout.base)
        return _merge_consecutive(o, n)
    offs, lens = [], []
    for slab in selection.slabs:
        if slab.nelements() == 0:
            continue
        o, n = _slab_runs(slab, shape, itemsize, chunk, addresses)
        offs.append(o)
        lens.append(n)
    return _merge_consecutive(np.concatenate(offs), np.concatenate(lens))


def _box_union_runs(slabs: Sequence[Hyperslab], shape: tuple[int, ...], itemsize: int,
                    base: int) -> tuple[np.ndarray, np.ndarray]:
    """Runs of a union of boxes (e.g. fancy-indexed row blocks) in a contiguous layout,
    vectorised over the boxes: a box is ``prod(extent[:k])`` runs of ``extent[k] x
    prod(shape[k+1:])`` elements, ``k`` its last dimension narrower than the array;
    boxes with the same ``k`` and ``extent[:k + 1]`` are computed together. Buffer order
    (box by box) is restored at the end."""
    d = len(shape)
    strides = np.asarray(_row_major_strides(shape), np.int64)
    lo = np.array([s.start for s in slabs], np.int64).reshape(len(slabs), d)
    ext = np.array([s.extent() for s in slabs], np.int64).reshape(len(slabs), d)
    keep = ext.prod(axis=1) > 0
    idx_all = np.flatnonzero(keep)
    partial = (ext != np.asarray(shape, np.int64)) | (lo != 0)
    last = np.where(partial.any(axis=1), d - 1 - np.argmax(partial[:, ::-1], axis=1), 0)
    offs, lens, order = [], [], []
    groups: dict[tuple[int, ...], list[int]] = {}
    for i in idx_all:
        k = int(last[i])
        groups.setdefault((k,) + tuple(ext[i, :k + 1]), []).append(int(i))
    for key, members in groups.items():
        k, outer = key[0], key[1:-1]
        m = np.asarray(members)
        run_len = int(ext[m[0], k]) * int(strides[k]) * itemsize
        start = (lo[m] @ strides) * itemsize + base
        if outer:
            grids = np.meshgrid(*[np.arange(e, dtype=np.int64) for e in outer], indexing="ij")
            rel = sum(g.ravel() * strides[j] for j, g in enumerate(grids)) * itemsize
        else:
            rel = np.zeros(1, np.int64)
        offs.append((start[:, None] + rel[None, :]).ravel())
        lens.append(np.full(len(m) * len(rel), run_len, np.int64))
        order.append((m[:, None] * (1 << 32) + np.arange(len(rel))[None, :]).ravel())
    off = np.concatenate(offs)
    sort = np.argsort(np.concatenate(order), kind="stable")
    return off[sort], np.concatenate(lens)[sort]


def merge_sorted(extents: Extents) -> Extents:
    """``extents`` sorted by offset, overlapping and adjacent extents merged."""
    if len(extents) == 0:
        return extents
    order = np.argsort(extents.offsets, kind="stable")
    off = extents.offsets[order]
    end = off + extents.lengths[order]
    reach = np.maximum.accumulate(end)
    brk = np.empty(len(off), dtype=bool)
    brk[0] = True
    np.greater(off[1:], reach[:-1], out=brk[1:])
    starts = np.flatnonzero(brk)
    return Extents(off[starts], np.maximum.reduceat(end, starts) - off[starts])


def flatten_sorted(layout: Layout, selection: Selection) -> Extents:
    """The extents of ``selection`` under ``layout`` sorted by offset, overlapping and
    adjacent ones merged: the set of bytes a read must fetch (what the cost model
    counts pages and pieces of)."""
    return merge_sorted(flatten(layout, selection))


def describe(extents: Extents) -> dict[str, int]:
    """Size of the extents as pattern sequences (``patio.detect`` over the offsets and
    over the lengths): ``{"runs", "encoded_bytes", "raw_bytes"}``; a structured selection
    flattens to a description far smaller than its 16 raw bytes per run."""
    from patio import detect

    n = len(extents)
    encoded = len(detect(extents.offsets).encode()) + len(detect(extents.lengths).encode())
    return {"runs": n, "encoded_bytes": encoded, "raw_bytes": 16 * n}


def flatten_reference(layout: Layout, selection: Selection) -> Extents:
    """Brute-force :func:`flatten`: enumerate every selected element
    (:meth:`Selection.element_coords`), map it to its byte address, drop those in
    unallocated chunks and merge consecutive ones. O(elements) with a Python loop: the
    test reference, for small arrays only."""
    shape, itemsize, chunk, addresses = _storage(layout)
    _check_selection(shape, selection)
    coords = selection.element_coords()
    if len(shape) == 0:
        addr = np.full(len(coords), addresses[0], dtype=np.int64)
    elif len(coords) == 0:
        addr = np.zeros(0, dtype=np.int64)
    else:
        grid = tuple(-(-n // c) for n, c in zip(shape, chunk))
        cidx = np.ravel_multi_index(tuple((coords // np.asarray(chunk)).T), grid)
        local = np.ravel_multi_index(tuple((coords % np.asarray(chunk)).T), chunk)
        base = addresses[cidx]
        addr = np.where(base >= 0, base + itemsize * local, -1)
    offsets: list[int] = []
    lengths: list[int] = []
    for a in addr.tolist():
        if a < 0:
            continue
        if offsets and offsets[-1] + lengths[-1] == a:
            lengths[-1] += itemsize
        else:
            offsets.append(a)
            lengths.append(itemsize)
    return Extents(np.array(offsets, dtype=np.int64), np.array(lengths, dtype=np.int64))
