"""Region reads across AMR levels: the boxes a region touches, read as merged extents.

A region is an inclusive box ``lo..hi`` in level 0's index space; on level ``L`` it covers
``lo * R_L .. (hi + 1) * R_L - 1`` where ``R_L`` is the refinement of level ``L``
relative to level 0 (the ratio of the problem-domain extents). On every level the boxes
that intersect the region are sorted by file position and runs of boxes stored back to
back are read with one slice each (the thesis' "I/O direction"); the values equal reading
the boxes one by one (:func:`read_region_boxwise`, the reference the tests compare with).
Cells of the region not covered by a box of the level are NaN.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

import h5py
import numpy as np

from patio.amr.chombo import ChomboError, Hierarchy, Level, box_values, read_box
from patio.amr.model import selected

MAX_READ_VALUES = 32 << 20


@dataclass
class LevelRegion:
    """One level's part of a region read."""

    level: int
    lo: np.ndarray
    hi: np.ndarray
    boxes: np.ndarray
    extents: int
    values: np.ndarray


def refinement(hier: Hierarchy, level: int) -> np.ndarray:
    """Cells of ``level`` per cell of level 0, per dimension."""
    l0, lv = hier.levels[0], hier.levels[level]
    return (lv.domain_hi - lv.domain_lo + 1) // (l0.domain_hi - l0.domain_lo + 1)


def level_region(
    hier: Hierarchy, level: int, lo: Sequence[int], hi: Sequence[int]
) -> tuple[np.ndarray, np.ndarray]:
    """The region ``lo..hi`` (level 0 indices) in ``level``'s index space."""
    r = refinement(hier, level)
    return np.asarray(lo, np.int64) * r, (np.asarray(hi, np.int64) + 1) * r - 1


def _check(hier: Hierarchy, lo: Sequence[int], hi: Sequence[int], levels: Sequence[int]) -> None:
    if len(lo) != hier.dim or len(hi) != hier.dim:
        raise ChomboError(hier.path, f"region needs {hier.dim} low and {hier.dim} high indices")
    if any(int(a) > int(b) for a, b in zip(lo, hi)):
        raise ChomboError(hier.path, "region has lo > hi")
    for li in levels:
        if not 0 <= li < len(hier.levels):
            raise ChomboError(hier.path, f"no such level (file has {len(hier.levels)})", li)


def _paste(
    out: np.ndarray, qlo: np.ndarray, qhi: np.ndarray, lev: Level, k: int, vals: np.ndarray
) -> None:
    a = np.maximum(lev.lo[k], qlo)
    b = np.minimum(lev.hi[k], qhi)
    src = tuple(slice(int(x - y), int(z - y) + 1) for x, y, z in zip(a, lev.lo[k], b))
    dst = tuple(slice(int(x - y), int(z - y) + 1) for x, y, z in zip(a, qlo, b))
    out[(slice(None),) + dst] = vals[(slice(None),) + src]


def _empty(lev: Level, qlo: np.ndarray, qhi: np.ndarray) -> np.ndarray:
    shape = (lev.ncomp,) + tuple(int(x) for x in qhi - qlo + 1)
    return np.full(shape, np.nan)


def read_region(
    path: str | os.PathLike[str],
    hier: Hierarchy,
    lo: Sequence[int],
    hi: Sequence[int],
    levels: Sequence[int] | None = None,
) -> list[LevelRegion]:
    """Read region ``lo..hi`` on ``levels`` (default all) with merged extents."""
    levels = list(range(len(hier.levels))) if levels is None else list(levels)
    _check(hier, lo, hi, levels)
    out = []
    with h5py.File(str(path), "r") as f:
        for li in levels:
            lev = hier.levels[li]
            qlo, qhi = level_region(hier, li, lo, hi)
            sel = selected(lev, qlo, qhi)
            values = _empty(lev, qlo, qhi)
            ds = f[f"level_{li}/data:datatype=0"]
            runs = 0
            i = 0
            ks = np.sort(sel)
            while i < ks.size:
                j = i
                while (
                    j + 1 < ks.size
                    and ks[j + 1] == ks[j] + 1
                    and lev.offsets[ks[j + 1] + 1] - lev.offsets[ks[i]] <= MAX_READ_VALUES
                ):
                    j += 1
                base = int(lev.offsets[ks[i]])
                flat = ds[base : int(lev.offsets[ks[j] + 1])]
                runs += 1
                for k in ks[i : j + 1]:
                    a, b = int(lev.offsets[k]) - base, int(lev.offsets[k + 1]) - base
                    _paste(values, qlo, qhi, lev, int(k), box_values(lev, flat[a:b], int(k)))
                i = j + 1
            out.append(LevelRegion(li, qlo, qhi, sel, runs, values))
    return out


def read_region_boxwise(
    path: str | os.PathLike[str],
    hier: Hierarchy,
    lo: Sequence[int],
    hi: Sequence[int],
    levels: Sequence[int] | None = None,
) -> list[LevelRegion]:
    """The reference: the same region, every box read on its own."""
    levels = list(range(len(hier.levels))) if levels is None else list(levels)
    _check(hier, lo, hi, levels)
    out = []
    for li in levels:
        lev = hier.levels[li]
        qlo, qhi = level_region(hier, li, lo, hi)
        sel = selected(lev, qlo, qhi)
        values = _empty(lev, qlo, qhi)
        for k in sel:
            _paste(values, qlo, qhi, lev, int(k), read_box(path, hier, li, int(k)))
        out.append(LevelRegion(li, qlo, qhi, sel, int(sel.size), values))
    return out
