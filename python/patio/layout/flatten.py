"""Flattening: a selection under a physical layout -> the byte extents a read touches.

The layout cost model (REORGANIZATION.md A.4) counts pages and non-contiguous pieces per
storage target; both come from the byte extents a selection occupies in a candidate
layout. This module describes the physical layouts of one stored array for Python and
hands the work to the layout core (``patio-layout``, through
``patio._native.StoredLayout``):

* :class:`Contiguous` - row-major at ``base`` (HDF5 contiguous storage, a transposed
  replica is a Contiguous layout of the permuted array with the permuted selection).
* :class:`Chunked` - chunked storage, row-major inside each full-size chunk (edge chunks
  padded as HDF5 does), one byte address per chunk (``-1`` = not allocated: reads the
  fill value and costs nothing) and, for filtered (compressed) chunks, each chunk's
  stored size: such a chunk is read and decompressed whole. An unfiltered chunk that
  fits the reader's chunk cache (``chunk_cache``; HDF5 brings such a chunk into its
  cache whole) is read whole too, a larger one in part. :meth:`Chunked.in_order`
  models a replica whose chunks were written back to back in row, Morton or Hilbert
  order.

:func:`flatten` returns the extents in *buffer order* (the order of
:meth:`Selection.element_coords`; for chunks read whole, the stored chunks in
first-touch order) with consecutive extents merged; the core works per run in closed form (never per
element of a hyperslab). :func:`flatten_sorted` gives the offset-sorted, merged extents
a cost model needs, :func:`describe` the size of their pattern description, and
:func:`flatten_reference` the brute-force per-element reference the tests compare with.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .curves import curve_rank
from .selection import Selection


@dataclass(frozen=True)
class Contiguous:
    """Row-major storage: element ``i`` at ``base + itemsize * ravel(i, shape)``."""

    shape: tuple[int, ...]
    itemsize: int
    base: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(n) for n in self.shape))
        _check_shape_itemsize(self.shape, self.itemsize)


#: HDF5's default raw-data chunk cache per dataset (``rdcc_nbytes``; h5py's too).
HDF5_CHUNK_CACHE_BYTES = 1 << 20


@dataclass(frozen=True, eq=False)
class Chunked:
    """Chunked storage: chunks of shape ``chunk`` (full-size, row-major inside), chunk
    ``c`` (row-major index in the chunk grid) at byte ``addresses[c]``; ``-1`` marks a
    chunk that is not allocated (fill value, no I/O). A read brings each chunk it touches
    in whole when the chunks are filtered or fit the reader's chunk cache."""

    shape: tuple[int, ...]
    itemsize: int
    chunk: tuple[int, ...]
    addresses: np.ndarray
    #: Stored bytes per chunk (grid order) when the chunks are filtered, else None.
    stored: np.ndarray | None = None
    #: The reader's chunk cache (bytes): HDF5 reads an unfiltered chunk no larger whole
    #: into its cache, a larger one in part (HDF5's and h5py's default: 1 MiB).
    chunk_cache: int = HDF5_CHUNK_CACHE_BYTES

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
        if self.stored is not None:
            stored = np.ascontiguousarray(self.stored, dtype=np.int64).reshape(-1)
            if len(stored) != len(addr) or (len(stored) and stored.min() < 0):
                raise ValueError(f"{len(stored)} stored sizes for {len(addr)} chunks")
            object.__setattr__(self, "stored", stored)

    @property
    def grid(self) -> tuple[int, ...]:
        """Chunks per dimension (edge chunks included)."""
        return tuple(-(-n // c) for n, c in zip(self.shape, self.chunk))

    @property
    def chunk_bytes(self) -> int:
        return int(np.prod(self.chunk, dtype=np.int64)) * self.itemsize

    @staticmethod
    def in_order(shape: Sequence[int], itemsize: int, chunk: Sequence[int],
                 order: str = "row", base: int = 0,
                 chunk_cache: int = HDF5_CHUNK_CACHE_BYTES) -> Chunked:
        """All chunks allocated back to back from ``base`` in ``order`` (``"row"``,
        ``"morton"`` or ``"hilbert"`` over the chunk grid), read with ``chunk_cache``."""
        shape_t = tuple(int(n) for n in shape)
        chunk_t = tuple(int(c) for c in chunk)
        if any(c < 1 for c in chunk_t):
            raise ValueError(f"chunk {chunk_t} must have positive sides")
        grid = tuple(-(-n // c) for n, c in zip(shape_t, chunk_t))
        nbytes = int(np.prod(chunk_t, dtype=np.int64)) * int(itemsize)
        addr = int(base) + curve_rank(grid, order) * nbytes
        return Chunked(shape_t, int(itemsize), chunk_t, addr, None, int(chunk_cache))

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Chunked):
            return NotImplemented
        return ((self.shape, self.itemsize, self.chunk) == (other.shape, other.itemsize,
                                                             other.chunk)
                and bool(np.array_equal(self.addresses, other.addresses))
                and (self.stored is None) == (other.stored is None)
                and (self.stored is None or bool(np.array_equal(self.stored, other.stored)))
                and self.chunk_cache == other.chunk_cache)

    def __hash__(self) -> int:
        return hash((self.shape, self.itemsize, self.chunk, self.addresses.tobytes()))

    @property
    def filtered(self) -> bool:
        """True when chunks are filtered (read and decompressed whole)."""
        return self.stored is not None

    @property
    def whole_chunks(self) -> bool:
        """True when a read brings every chunk it touches in whole: filtered chunks, and
        unfiltered ones that fit the reader's chunk cache (the core's
        ``Layout::whole_chunks``)."""
        return self.stored is not None or self.chunk_bytes <= self.chunk_cache


Layout = Contiguous | Chunked


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


def native_layout(layout: Layout) -> Any:
    """The layout core's ``StoredLayout`` for ``layout`` (made once per layout object)."""
    cached = layout.__dict__.get("_native")
    if cached is not None:
        return cached
    from patio._native import StoredLayout

    if isinstance(layout, Contiguous):
        nat = StoredLayout(list(layout.shape), int(layout.itemsize), int(layout.base))
    elif isinstance(layout, Chunked):
        nat = StoredLayout(list(layout.shape), int(layout.itemsize), 0, list(layout.chunk),
                           layout.addresses, layout.stored, int(layout.chunk_cache))
    else:
        raise TypeError(f"not a layout: {type(layout).__name__}")
    object.__setattr__(layout, "_native", nat)
    return nat


def _check_selection(shape: tuple[int, ...], sel: Selection) -> None:
    if tuple(sel.shape) != shape:
        raise ValueError(f"selection of shape {sel.shape} on a layout of shape {shape}")


# -- public API --------------------------------------------------------------------------

def flatten(layout: Layout, selection: Selection) -> Extents:
    """The byte extents of ``selection`` under ``layout`` in buffer order, consecutive
    extents merged (the next starts where the previous ended). Hyperslabs cost O(runs),
    points O(k); elements in unallocated chunks produce no extent; filtered chunks are
    touched whole."""
    _check_selection(tuple(_storage(layout)[0]), selection)
    off, length, _ = native_layout(layout).flatten(selection.native())
    return Extents(off, length)


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
    _check_selection(tuple(_storage(layout)[0]), selection)
    return Extents(*native_layout(layout).flatten_sorted(selection.native()))


def describe(extents: Extents) -> dict[str, int]:
    """Size of the extents as pattern sequences (``patio.detect`` over the offsets and
    over the lengths): ``{"runs", "encoded_bytes", "raw_bytes"}``; a structured selection
    flattens to a description far smaller than its 16 raw bytes per run."""
    from patio import detect

    n = len(extents)
    encoded = len(detect(extents.offsets).encode()) + len(detect(extents.lengths).encode())
    return {"runs": n, "encoded_bytes": encoded, "raw_bytes": 16 * n}


def _merged(pieces: Iterable[tuple[int, int]]) -> Extents:
    """``(offset, length)`` pieces in order, each one that starts where the previous
    ended merged into it."""
    offsets: list[int] = []
    lengths: list[int] = []
    for a, n in pieces:
        if offsets and offsets[-1] + lengths[-1] == a:
            lengths[-1] += n
        else:
            offsets.append(a)
            lengths.append(n)
    return Extents(np.array(offsets, dtype=np.int64), np.array(lengths, dtype=np.int64))


def _whole_chunks_reference(layout: Chunked, coords: np.ndarray) -> Extents:
    """Chunks read whole (filtered, or fitting the chunk cache): each allocated chunk an
    element touches, once, in first-touch order, at its stored size."""
    seen: set[int] = set()
    pieces = []
    for p in coords:
        c = int(np.ravel_multi_index(tuple(int(x) // k for x, k in zip(p, layout.chunk)),
                                     layout.grid))
        if c in seen or layout.addresses[c] < 0:
            continue
        seen.add(c)
        n = int(layout.stored[c]) if layout.stored is not None else layout.chunk_bytes
        pieces.append((int(layout.addresses[c]), n))
    return _merged(pieces)


def flatten_reference(layout: Layout, selection: Selection) -> Extents:
    """Brute-force :func:`flatten`: enumerate every selected element
    (:meth:`Selection.element_coords`), map it to its byte address, drop those in
    unallocated chunks and merge consecutive ones. O(elements) with a Python loop: the
    test reference, for small arrays only."""
    shape, itemsize, chunk, addresses = _storage(layout)
    _check_selection(shape, selection)
    coords = selection.element_coords()
    if isinstance(layout, Chunked) and layout.whole_chunks:
        return _whole_chunks_reference(layout, coords)
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
    return _merged((a, itemsize) for a in addr.tolist() if a >= 0)
