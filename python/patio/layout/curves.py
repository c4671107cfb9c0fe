"""Space-filling-curve orders of chunk grids: the Z-curve (Morton) and Hilbert replicas.

A curve replica stores an array's chunks back to back in the order a curve visits the
chunk grid (row-major inside each chunk). This module computes that order:

* :func:`morton_encode` - bit interleaving. Convention: the code is built from the most
  significant coordinate bit down; within each bit group dimension 0 comes first, i.e. is
  the most significant bit of the group. For ``(x0, x1)`` with 2 bits the code bits are
  ``x0[1] x1[1] x0[0] x1[0]``.
* :func:`hilbert_encode` - the d-dimensional Hilbert index by Skilling's "transpose"
  algorithm (AIP Conf. Proc. 707, 2004), vectorised over points. Coordinate ``i`` of a
  point is Skilling's ``X[i]``, and the transposed index is interleaved with the Morton
  convention above (``X[0]`` most significant), which is exactly the convention of the
  ``hilbertcurve`` package: ``hilbert_encode(p, bits) ==
  HilbertCurve(bits, d).distances_from_points(p)``.
* :func:`curve_rank` - the traversal position of every cell of a grid (any shape: a grid
  that is not a power-of-two cube is padded to one, and the occupied cells' codes are
  compacted to ``0..n-1``).

Everything is numpy, vectorised over points: the Python loops run over bits and
dimensions only (at most 64 iterations of whole-array operations).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

ORDERS = ("row", "morton", "hilbert")


def _check_coords(coords: np.ndarray, bits: int) -> np.ndarray:
    c = np.asarray(coords)
    if c.ndim != 2:
        raise ValueError(f"coords must be a 2-D (n, d) array, got shape {c.shape}")
    if bits < 0:
        raise ValueError(f"bits must be >= 0, got {bits}")
    d = c.shape[1]
    if d * bits > 64:
        raise ValueError(f"{d} dimensions x {bits} bits do not fit a 64-bit code")
    if c.size:
        if not np.issubdtype(c.dtype, np.integer):
            raise ValueError(f"coords must be integers, got {c.dtype}")
        if int(c.min()) < 0:
            raise ValueError("coords must be non-negative")
        if bits < 64 and int(c.max()) >= (1 << bits):
            raise ValueError(f"coordinate {int(c.max())} does not fit {bits} bits")
    return c.astype(np.uint64)


def _interleave(cols: Sequence[np.ndarray], bits: int, n: int) -> np.ndarray:
    """Interleave the low ``bits`` bits of each column, column 0 most significant."""
    code = np.zeros(n, dtype=np.uint64)
    one = np.uint64(1)
    for b in range(bits - 1, -1, -1):
        sb = np.uint64(b)
        for col in cols:
            code = (code << one) | ((col >> sb) & one)
    return code


def morton_encode(coords: np.ndarray, bits: int) -> np.ndarray:
    """Morton (Z-order) code of each row of ``coords`` (``(n, d)`` non-negative ints,
    each ``< 2**bits``), as uint64.

    Bit groups go from the most significant coordinate bit down; inside a group
    dimension 0 is the most significant bit. ``d * bits`` must be at most 64."""
    c = _check_coords(coords, bits)
    return _interleave([c[:, k] for k in range(c.shape[1])], bits, c.shape[0])


def hilbert_encode(coords: np.ndarray, bits: int) -> np.ndarray:
    """Hilbert index of each row of ``coords`` (``(n, d)`` non-negative ints, each
    ``< 2**bits``), as uint64; Skilling's transpose algorithm.

    Equal to ``hilbertcurve.hilbertcurve.HilbertCurve(bits, d).distances_from_points``
    (coordinate ``i`` is that package's ``point[i]``)."""
    c = _check_coords(coords, bits)
    n, d = c.shape
    if bits == 0 or d == 0:
        return np.zeros(n, dtype=np.uint64)
    x = [c[:, k].copy() for k in range(d)]
    zero = np.uint64(0)
    m = 1 << (bits - 1)
    # Inverse undo excess work.
    q = m
    while q > 1:
        uq, up = np.uint64(q), np.uint64(q - 1)
        for i in range(d):
            hit = (x[i] & uq) != 0
            if i == 0:
                x[0] = np.where(hit, x[0] ^ up, x[0])
                continue
            t = np.where(hit, zero, (x[0] ^ x[i]) & up)
            x[0] = np.where(hit, x[0] ^ up, x[0] ^ t)
            x[i] = x[i] ^ t
        q >>= 1
    # Gray encode.
    for i in range(1, d):
        x[i] = x[i] ^ x[i - 1]
    t = np.zeros(n, dtype=np.uint64)
    q = m
    while q > 1:
        t = np.where((x[d - 1] & np.uint64(q)) != 0, t ^ np.uint64(q - 1), t)
        q >>= 1
    x = [xi ^ t for xi in x]
    return _interleave(x, bits, n)


def grid_bits(grid: Sequence[int]) -> int:
    """Bits per dimension of the smallest power-of-two cube holding ``grid`` (at least 1)."""
    return max([1] + [(int(g) - 1).bit_length() for g in grid])


def curve_rank(grid: tuple[int, ...], order: str) -> np.ndarray:
    """Traversal position (int64) of every cell of ``grid``, indexed by the cell's
    row-major linear index, for ``order`` in ``"row"``, ``"morton"``, ``"hilbert"``.

    Grids are padded to a ``2**m`` cube (``m`` bits for the largest dimension); the
    occupied cells are ordered by their code and ranked ``0..n-1``. Grids whose code
    would need more than 64 bits are refused (ValueError)."""
    if order not in ORDERS:
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    grid = tuple(int(g) for g in grid)
    if any(g < 0 for g in grid):
        raise ValueError(f"negative grid dimension in {grid}")
    n = int(np.prod(grid, dtype=np.int64)) if grid else 1
    if order == "row" or n == 0 or len(grid) == 0:
        return np.arange(n, dtype=np.int64)
    bits = grid_bits(grid)
    if bits * len(grid) > 64:
        raise ValueError(f"grid {grid} needs {bits} bits x {len(grid)} dims > 64-bit codes")
    coords = np.indices(grid, dtype=np.int64).reshape(len(grid), -1).T
    enc = morton_encode if order == "morton" else hilbert_encode
    codes = enc(coords, bits)
    rank = np.empty(n, dtype=np.int64)
    rank[np.argsort(codes, kind="stable")] = np.arange(n, dtype=np.int64)
    return rank
