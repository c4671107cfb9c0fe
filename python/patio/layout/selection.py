"""Array selections as patio's layout code sees them: the one vocabulary shared by
recording (the knowledge base), flattening (selection x layout -> byte extents), the
cost model and read redirection.

A :class:`Selection` is either a union of *regular hyperslabs* (HDF5's
start/stride/count/block per dimension; a basic slice, a strided slice and a box are
each one hyperslab, a fancy index along one axis is one hyperslab per run of
consecutive indices) or a list of *points* (boolean masks and point selections).
Coordinates are in the dataset's own index space; the element order of a selection is
the order in which h5py places the elements in the result buffer (row-major over each
hyperslab's selected elements for one hyperslab; HDF5's own order for unions and
points).

Everything here is plain numpy and stdlib: no h5py (the conversion from h5py's
dataspaces lives in :mod:`patio.layout.h5sel`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_ALL = slice(None)


@dataclass(frozen=True)
class Hyperslab:
    """HDF5 regular hyperslab: in each dimension ``count`` blocks of ``block`` elements,
    the first at ``start``, successive blocks ``stride`` apart (``stride >= block``)."""

    start: tuple[int, ...]
    stride: tuple[int, ...]
    count: tuple[int, ...]
    block: tuple[int, ...]

    @staticmethod
    def box(lo: Sequence[int], hi: Sequence[int]) -> Hyperslab:
        """The box ``[lo, hi)`` (exclusive upper corner)."""
        n = len(lo)
        return Hyperslab(
            tuple(int(x) for x in lo),
            (1,) * n,
            (1,) * n,
            tuple(int(h) - int(lo_) for lo_, h in zip(lo, hi)),
        )

    @property
    def ndim(self) -> int:
        return len(self.start)

    def extent(self) -> tuple[int, ...]:
        """Selected elements per dimension."""
        return tuple(c * b for c, b in zip(self.count, self.block))

    def nelements(self) -> int:
        return math.prod(c * b for c, b in zip(self.count, self.block))

    def bounds(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Bounding box ``(lo, hi)``, ``hi`` exclusive."""
        hi = tuple(
            s + (c - 1) * st + b if c > 0 and b > 0 else s
            for s, st, c, b in zip(self.start, self.stride, self.count, self.block)
        )
        return self.start, hi

    def is_box(self) -> bool:
        """True when the hyperslab is one dense box (no gaps in any dimension)."""
        return all(c <= 1 or st == b for st, c, b in zip(self.stride, self.count, self.block))

    def axis_indices(self, axis: int) -> np.ndarray:
        """The selected coordinates along ``axis``, ascending."""
        s, st, c, b = self.start[axis], self.stride[axis], self.count[axis], self.block[axis]
        return (s + np.arange(c, dtype=np.int64)[:, None] * st + np.arange(b)[None, :]).ravel()

    def normalized(self) -> Hyperslab:
        """The same elements with dense dimensions written as one block (count 1)."""
        start, stride, count, block = [], [], [], []
        for s, st, c, b in zip(self.start, self.stride, self.count, self.block):
            if c > 1 and st == b:
                c, b = 1, c * b
            if c <= 1:
                st = 1
            start.append(s)
            stride.append(st)
            count.append(c)
            block.append(b)
        return Hyperslab(tuple(start), tuple(stride), tuple(count), tuple(block))

    def permuted(self, axes: Sequence[int]) -> Hyperslab:
        """This hyperslab in an array whose dimension ``i`` is this one's ``axes[i]``."""
        return Hyperslab(
            tuple(self.start[a] for a in axes),
            tuple(self.stride[a] for a in axes),
            tuple(self.count[a] for a in axes),
            tuple(self.block[a] for a in axes),
        )

    def to_json(self) -> list[list[int]]:
        return [list(self.start), list(self.stride), list(self.count), list(self.block)]

    @staticmethod
    def from_json(v: Sequence[Sequence[int]]) -> Hyperslab:
        return Hyperslab(*(tuple(int(x) for x in part) for part in v))


@dataclass(frozen=True, eq=False)
class Selection:
    """A selection in an array of ``shape``: a union of hyperslabs or a point list.

    ``points`` is an ``(k, ndim)`` int64 array in buffer order (only for
    ``kind == "points"``); ``slabs`` the hyperslabs in buffer order (for ``"hyperslab"``
    exactly one, for ``"union"`` several). ``out_shape`` is the shape h5py gives the
    result (integer indices drop their dimension).
    """

    shape: tuple[int, ...]
    kind: str
    slabs: tuple[Hyperslab, ...] = ()
    points: np.ndarray | None = None
    out_shape: tuple[int, ...] = field(default=())

    # -- constructors ------------------------------------------------------------
    @staticmethod
    def hyperslab(shape: Sequence[int], slab: Hyperslab, out_shape: Sequence[int] | None = None):
        return Selection(
            tuple(int(x) for x in shape),
            "hyperslab",
            (slab,),
            None,
            tuple(out_shape) if out_shape is not None else slab.extent(),
        )

    @staticmethod
    def union(shape: Sequence[int], slabs: Sequence[Hyperslab], out_shape: Sequence[int]):
        slabs = tuple(slabs)
        kind = "hyperslab" if len(slabs) == 1 else "union"
        return Selection(tuple(int(x) for x in shape), kind, slabs, None, tuple(out_shape))

    @staticmethod
    def boxes(shape: Sequence[int], lo: np.ndarray, hi: np.ndarray, out_shape: Sequence[int]
              ) -> Selection:
        """The union of the boxes ``[lo[i], hi[i])`` (``(n, ndim)`` arrays, in buffer
        order): :meth:`union` of :meth:`Hyperslab.box` each, made from the arrays at
        once - what h5py hands over for a fancy index is thousands of boxes, and this is
        on every read's path. The core's selection, the element count and the JSON are
        made from the arrays too, when first asked for."""
        lo = np.asarray(lo, np.int64)
        ext = np.asarray(hi, np.int64) - lo
        n, nd = lo.shape
        ones = (1,) * nd
        slabs = [Hyperslab(a, ones, ones, e)
                 for a, e in zip(map(tuple, lo.tolist()), map(tuple, ext.tolist()))]
        sel = Selection.union(shape, slabs, out_shape)
        values = np.empty((n, 4, nd), np.int64)
        values[:, 0], values[:, 1:3], values[:, 3] = lo, 1, ext
        object.__setattr__(sel, "_values", values)
        return sel

    @staticmethod
    def from_points(shape: Sequence[int], points: np.ndarray, out_shape: Sequence[int] | None = None):
        pts = np.ascontiguousarray(points, dtype=np.int64).reshape(-1, len(shape))
        return Selection(
            tuple(int(x) for x in shape),
            "points",
            (),
            pts,
            tuple(out_shape) if out_shape is not None else (len(pts),),
        )

    @staticmethod
    def from_basic_index(shape: tuple[int, ...], args: tuple[Any, ...]) -> Selection | None:
        """The selection h5py makes of ``args`` - ints, slices and at most one Ellipsis
        (``shape`` a tuple of ints) - as its one regular hyperslab, written as
        :meth:`Hyperslab.normalized` writes it; the output drops the dimensions of ints.
        None for whatever h5py should parse itself: too many indices, an int out of
        range, a step below 1, a non-int slice member, or an empty selection. h5py reads
        such arguments on its compiled path; this spares a read h5py's Python parser and
        the dataspace round trip patio made only to learn what the read selects."""
        nd = len(shape)
        ell = -1
        for i, a in enumerate(args):
            if a is Ellipsis:
                if ell >= 0:
                    return None
                ell = i
        if ell >= 0:
            if len(args) - 1 > nd:
                return None
            args = args[:ell] + (slice(None),) * (nd - len(args) + 1) + args[ell + 1:]
        elif len(args) > nd:
            return None
        start, stride, count, block, out = [], [], [], [], []
        for dim, length in enumerate(shape):
            a = args[dim] if dim < len(args) else _ALL
            if type(a) is slice:
                try:
                    lo, hi, step = a.indices(length)
                except (TypeError, ValueError):
                    return None
                if step < 1 or hi <= lo:
                    return None
                c = (hi - lo - 1) // step + 1
                out.append(c)
                start.append(lo)
                if step == 1 or c == 1:
                    stride.append(1)
                    count.append(1)
                    block.append(c)
                else:
                    stride.append(step)
                    count.append(c)
                    block.append(1)
            else:
                try:
                    i = int(a)
                except (TypeError, ValueError):
                    return None
                if i < 0:
                    i += length
                if not 0 <= i < length:
                    return None
                start.append(i)
                stride.append(1)
                count.append(1)
                block.append(1)
        slab = Hyperslab(tuple(start), tuple(stride), tuple(count), tuple(block))
        return Selection(shape, "hyperslab", (slab,), None, tuple(out))

    @staticmethod
    def all(shape: Sequence[int]) -> Selection:
        return Selection.hyperslab(shape, Hyperslab.box((0,) * len(shape), shape))

    # -- properties --------------------------------------------------------------
    @property
    def ndim(self) -> int:
        return len(self.shape)

    def nelements(self) -> int:
        if self.kind == "points":
            assert self.points is not None
            return len(self.points)
        values = self.__dict__.get("_values")
        if values is not None:
            return int(np.prod(values[:, 3], axis=1).sum())
        return sum(s.nelements() for s in self.slabs)

    def bounds(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Bounding box ``(lo, hi)`` of the selected elements (``hi`` exclusive)."""
        if self.kind == "points":
            assert self.points is not None
            if len(self.points) == 0:
                return (0,) * self.ndim, (0,) * self.ndim
            return (
                tuple(int(x) for x in self.points.min(axis=0)),
                tuple(int(x) + 1 for x in self.points.max(axis=0)),
            )
        los, his = zip(*(s.bounds() for s in self.slabs)) if self.slabs else ((), ())
        if not los:
            return (0,) * self.ndim, (0,) * self.ndim
        return tuple(map(min, zip(*los))), tuple(map(max, zip(*his)))

    def iter_slabs(self) -> Iterator[Hyperslab]:
        return iter(self.slabs)

    def permuted(self, axes: Sequence[int]) -> Selection:
        """The selection in the transposed array ``np.transpose(a, axes)``."""
        shape = tuple(self.shape[a] for a in axes)
        if self.kind == "points":
            assert self.points is not None
            return Selection(shape, "points", (), self.points[:, list(axes)], self.out_shape)
        return Selection(shape, self.kind, tuple(s.permuted(axes) for s in self.slabs), None,
                         self.out_shape)

    def native(self) -> Any:
        """The layout core's ``LayoutSelection`` for this selection (made once)."""
        cached = self.__dict__.get("_native")
        if cached is not None:
            return cached
        from patio._native import LayoutSelection

        try:
            if self.ndim == 0:
                cached = LayoutSelection.points(0, np.zeros(self.nelements(), np.int64))
            elif self.kind == "points":
                assert self.points is not None
                cached = LayoutSelection.points(self.ndim, self.points.reshape(-1))
            else:
                values = self.__dict__.get("_values")
                if values is None:
                    values = np.array([s.start + s.stride + s.count + s.block
                                       for s in self.slabs], dtype=np.int64)
                cached = LayoutSelection.slabs(self.ndim, values.reshape(-1))
        except OverflowError as e:  # a negative coordinate
            raise ValueError(f"selection outside the array: {e}") from None
        object.__setattr__(self, "_native", cached)
        return cached

    # -- reference enumeration (tests and small selections only) -------------------
    def element_coords(self) -> np.ndarray:
        """Every selected element's coordinates, ``(n, ndim)``, in buffer order.

        O(elements): the reference the flattening code is tested against, never used on
        a data path for a structured selection."""
        if self.kind == "points":
            assert self.points is not None
            return self.points.copy()
        parts = []
        for s in self.slabs:
            axes = [s.axis_indices(a) for a in range(s.ndim)]
            grid = np.meshgrid(*axes, indexing="ij") if axes else []
            parts.append(np.stack([g.ravel() for g in grid], axis=1) if axes else
                         np.zeros((1, 0), np.int64))
        if not parts:
            return np.zeros((0, self.ndim), np.int64)
        return np.concatenate(parts).astype(np.int64)

    def linear_indices(self) -> np.ndarray:
        """Row-major linear index of every selected element in buffer order (the
        reference for unions; a point list's, which every recorded point read needs, made
        without copying its coordinates)."""
        if self.kind == "points" and self.points is not None and len(self.points):
            return np.ravel_multi_index(tuple(self.points.T), self.shape).astype(np.int64)
        c = self.element_coords()
        if len(c) == 0:
            return np.zeros(0, np.int64)
        return np.ravel_multi_index(tuple(c.T), self.shape).astype(np.int64)

    # -- serialisation (knowledge base) --------------------------------------------
    def to_json(self) -> str:
        """Compact JSON (the layout core's definition, which the VOL connector's records
        use too); points are stored elsewhere (see :mod:`patio.layout.kb`)."""
        from patio._native import layout_selection_json

        values = self.__dict__.get("_values")
        slabs = (None if self.kind == "points" else
                 values.tolist() if values is not None else
                 [(s.start, s.stride, s.count, s.block) for s in self.slabs])
        return layout_selection_json(self.shape, self.kind, self.out_shape, slabs)

    @staticmethod
    def from_json(text: str, points: np.ndarray | None = None) -> Selection:
        d = json.loads(text)
        shape = tuple(d["shape"])
        if d["kind"] == "points":
            return Selection.from_points(shape, points if points is not None else
                                         np.zeros((0, len(shape)), np.int64), d["out"])
        return Selection.union(shape, [Hyperslab.from_json(s) for s in d["slabs"]], d["out"])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Selection):
            return NotImplemented
        if (self.shape, self.kind, self.slabs) != (other.shape, other.kind, other.slabs):
            return False
        if self.kind == "points":
            assert self.points is not None and other.points is not None
            return bool(np.array_equal(self.points, other.points))
        return True

    def __hash__(self) -> int:
        return hash((self.shape, self.kind, self.slabs))


def runs(values: np.ndarray) -> list[tuple[int, int]]:
    """Sorted unique ints as ``(start, length)`` runs of consecutive values."""
    if len(values) == 0:
        return []
    breaks = np.flatnonzero(np.diff(values) != 1) + 1
    starts = np.concatenate([[0], breaks])
    ends = np.concatenate([breaks, [len(values)]])
    return [(int(values[s]), int(e - s)) for s, e in zip(starts, ends)]


def product(shape: Sequence[int], axis_sets: Sequence[np.ndarray]) -> Selection:
    """The Cartesian product of sorted per-axis index sets as a union of boxes (one box
    per combination of runs), read back as the dense array of shape ``len(set)``s."""
    per_axis = [runs(np.asarray(a, np.int64)) for a in axis_sets]
    out = tuple(len(a) for a in axis_sets)
    if any(not r for r in per_axis):
        return Selection.union(shape, [], out)
    grids = np.meshgrid(*[np.arange(len(r)) for r in per_axis], indexing="ij")
    slabs = []
    for combo in zip(*(g.ravel() for g in grids)):
        lo = [per_axis[a][i][0] for a, i in enumerate(combo)]
        hi = [lo_ + per_axis[a][i][1] for a, (lo_, i) in enumerate(zip(lo, combo))]
        slabs.append(Hyperslab.box(lo, hi))
    return Selection.union(shape, slabs, out)
