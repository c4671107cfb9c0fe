"""h5py index arguments <-> :class:`~patio.layout.selection.Selection`, and reading a
selection from any HDF5 dataset.

The arguments of ``Dataset.__getitem__`` are parsed by h5py's own selection code, so a
selection means exactly what it means to h5py and a bad one raises exactly h5py's
error. What h5py builds is one of: nothing, everything, one regular hyperslab, a union
of hyperslab blocks that is a Cartesian product of per-axis index sets (fancy indexing),
or a point list (boolean masks). All of them are read here through h5py's low-level
dataspace API, from the original dataset or from a replica of the same shape, or - for a
transposed replica - with the axes permuted and the result transposed back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import h5py
import numpy as np
from h5py import h5s
from h5py._hl import selections as h5py_selections

from .selection import Hyperslab, Selection


def select(dset: h5py.Dataset, args: Any) -> tuple[Selection, Any]:
    """Parses ``args`` as h5py would for ``dset[args]``; returns patio's selection and
    h5py's (whose ``id`` is the file dataspace). Raises h5py's own errors."""
    shape = tuple(int(n) for n in dset.shape)
    hsel = h5py_selections.select(shape, args, dataset=dset)
    return from_space(shape, hsel.id, tuple(hsel.array_shape)), hsel


def from_space(shape: tuple[int, ...], space: Any, out_shape: tuple[int, ...]) -> Selection:
    """patio's selection for an HDF5 file dataspace selection."""
    kind = space.get_select_type()
    nd = len(shape)
    if kind == h5s.SEL_ALL:
        return Selection.hyperslab(shape, Hyperslab.box((0,) * nd, shape), out_shape)
    if kind == h5s.SEL_NONE:
        return Selection.union(shape, [], out_shape)
    if kind == h5s.SEL_POINTS:
        pts = np.asarray(space.get_select_elem_pointlist(), dtype=np.int64).reshape(-1, nd)
        return Selection.from_points(shape, pts, out_shape)
    if space.is_regular_hyperslab():
        start, stride, count, block = space.get_regular_hyperslab()
        slab = Hyperslab(tuple(start), tuple(stride), tuple(count), tuple(block)).normalized()
        return Selection.hyperslab(shape, slab, out_shape)
    blocks = np.asarray(space.get_select_hyper_blocklist(), dtype=np.int64).reshape(-1, 2, nd)
    return Selection.boxes(shape, blocks[:, 0], blocks[:, 1] + 1, out_shape)


def product_axes(sel: Selection) -> list[np.ndarray] | None:
    """The per-axis index sets when the selection is their Cartesian product (a box, a
    regular hyperslab, fancy indexing), else None (points, irregular unions)."""
    if sel.kind == "points":
        return None
    if not sel.slabs:
        return [np.zeros(0, np.int64) for _ in sel.shape]
    if len(sel.slabs) == 1:
        return [sel.slabs[0].axis_indices(a) for a in range(sel.ndim)]
    axes = [
        np.unique(np.concatenate([s.axis_indices(a) for s in sel.slabs]))
        for a in range(sel.ndim)
    ]
    total = int(np.prod([len(a) for a in axes], dtype=np.int64))
    return axes if total == sel.nelements() else None


def space_for(shape: Sequence[int], sel: Selection) -> Any:
    """A file dataspace of ``shape`` with ``sel`` selected."""
    space = h5s.create_simple(tuple(int(n) for n in shape))
    if sel.kind == "points":
        assert sel.points is not None
        if len(sel.points) == 0:
            space.select_none()
        else:
            space.select_elements(np.ascontiguousarray(sel.points, dtype=np.uint64))
        return space
    if not sel.slabs:
        space.select_none()
        return space
    op = h5s.SELECT_SET
    for s in sel.slabs:
        space.select_hyperslab(s.start, s.count, s.stride, s.block, op=op)
        op = h5s.SELECT_OR
    return space


def read_flat(dset: h5py.Dataset, sel: Selection, dtype: Any = None) -> np.ndarray:
    """The selected elements of ``dset`` (same shape as ``sel.shape``) as a 1-D array
    in HDF5's order: row-major over hyperslab unions, list order for points."""
    dtype = np.dtype(dtype if dtype is not None else dset.dtype)
    n = sel.nelements() if sel.kind == "points" or len(sel.slabs) <= 1 else None
    space = space_for(dset.shape, sel)
    if n is None:
        n = int(space.get_select_npoints())
    out = np.empty(n, dtype=dtype)
    if n == 0:
        return out
    mspace = h5s.create_simple((n,))
    dset.id.read(mspace, space, out, h5py.h5t.py_create(dtype))
    return out


def read(dset: h5py.Dataset, sel: Selection, dtype: Any = None) -> np.ndarray:
    """``dset[args]`` for the arguments ``sel`` was parsed from (same shape)."""
    flat = read_flat(dset, sel, dtype)
    return flat.reshape(sel.out_shape)


def read_permuted(
    replica: h5py.Dataset, sel: Selection, axes: Sequence[int], dtype: Any = None
) -> np.ndarray | None:
    """The selection read from ``replica``, which holds ``np.transpose(original, axes)``;
    None when the selection cannot be read that way (an irregular union)."""
    psel = sel.permuted(axes)
    if sel.kind == "points":
        return read_flat(replica, psel, dtype).reshape(sel.out_shape)
    lens = product_axes(sel)
    if lens is None:
        return None
    flat = read_flat(replica, psel, dtype)
    inverse = np.argsort(np.asarray(axes))
    block = flat.reshape(tuple(len(lens[a]) for a in axes))
    return np.ascontiguousarray(np.transpose(block, inverse)).reshape(sel.out_shape)
