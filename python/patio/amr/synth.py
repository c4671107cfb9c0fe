"""Synthetic AMR hierarchies shaped like the thesis' three experiments (design §B.6, §B.7).

The generator is deliberately simple: every level ``L >= 1`` is tiled with fixed-size,
aligned candidate boxes; a candidate is eligible only when its footprint lies inside one
box of level ``L - 1`` (so levels nest by construction), and the eligible candidates
nearest to the tagged features (thin curves, wake centre lines, the centre of a unit
region) are kept until the level holds its target number of boxes. Keeping the ``N``
nearest is tagging a band whose width is chosen so that exactly ``N`` boxes result.

* :func:`bisicles` - a BISICLES-like 2-D ice sheet: 5 levels, 768x768 base, refinement
  2, 128x128 boxes on level 0 and 32x32 boxes above on thin bands around a wiggly
  grounding line and five ice-shelf fronts; 36 / 557 / 662 / 1,512 / 3,262 boxes (the
  thesis' Table 4.2 exactly). Original order: row-major by box corner (``j`` slowest),
  as a tiling generator emits boxes. The thesis' ~1.3 GB per step is kept *in the model*
  (:data:`BISICLES_MODEL_COMPONENTS` float64 components, 216 KB per 32x32 box); files
  written by :func:`write` hold ``components`` (default 1) of them, i.e. 1/27 of the data.
* :func:`chombo_benchmark` - the Chombo I/O benchmark: a unit region (32^3 cells on level
  0, one 32^3 box; 32 boxes of 16^3 on level 1; 192 boxes of 16^3 on level 2, each the
  boxes nearest the unit's centre) replicated ``r^3`` times. ``r = 8`` gives the thesis'
  256^3 base and 512 / 16,384 / 98,304 boxes (model only: :func:`geometry_hierarchy`,
  :data:`CHOMBO_MODEL_COMPONENTS` components, ~341 GB); ``r = 2`` (8 / 256 / 1,536 boxes)
  or ``r = 1`` can be written with data. Original order: row-major over the whole domain
  (``k`` slowest), which scatters each unit region's boxes.
* :func:`cylinder` - 2-D flow past a cylinder: 3 levels, 1024x256 coarsest (64x64 boxes),
  32x32 boxes on a thin vortex-street wake (level 1, 240 boxes, ~4 per column) and its
  vortex cores (level 2, 500 boxes, ~4 per column); 4 model components. Original
  order: column-major (``i`` slowest, ``j`` fastest), so any window taller than the wake
  - the thesis' middle 512x256 window in particular - is one contiguous run per level.

Queries (level-0 inclusive boxes) for each case are in :func:`queries`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from patio.amr.chombo import Hierarchy, Level, LevelSpec, write_chombo

BISICLES_COUNTS = (36, 557, 662, 1512, 3262)
BISICLES_MODEL_COMPONENTS = 27
CHOMBO_MODEL_COMPONENTS = 88
CYLINDER_MODEL_COMPONENTS = 4
CYLINDER_COUNTS = (240, 500)
DATASETS = ("bisicles", "chombo", "cylinder")


@dataclass
class Geometry:
    """Box geometry of a synthetic hierarchy: per level inclusive ``lo``/``hi`` and domain."""

    name: str
    dim: int
    lo: list[np.ndarray]
    hi: list[np.ndarray]
    domain: list[np.ndarray]
    model_components: int
    ratio: int = 2

    @property
    def counts(self) -> list[int]:
        return [int(x.shape[0]) for x in self.lo]


def _tiles(domain: np.ndarray, size: int) -> np.ndarray:
    """Low corners of the aligned ``size`` tiling of ``0..domain-1``, row-major (x fastest)."""
    grid = np.indices(tuple(int(d) // size for d in domain[::-1])).reshape(len(domain), -1).T
    return grid[:, ::-1] * size


def _nested(
    cand_lo: np.ndarray, size: int, plo: np.ndarray, phi: np.ndarray, ratio: int
) -> np.ndarray:
    """Candidates (level ``L``) whose coarsened footprint lies inside one parent box."""
    clo = cand_lo // ratio
    chi = (cand_lo + size) // ratio - 1
    ok = np.zeros(cand_lo.shape[0], dtype=bool)
    for a, b in zip(plo, phi):
        ok |= np.all((clo >= a) & (chi <= b), axis=1)
    return ok


def _nested_fast(
    cand_lo: np.ndarray, size: int, plo: np.ndarray, phi: np.ndarray, psize: int, ratio: int
) -> np.ndarray:
    """:func:`_nested` for aligned parents of one size ``psize`` (a hash lookup)."""
    if (size // ratio) == 0 or psize % max(size // ratio, 1):
        return _nested(cand_lo, size, plo, phi, ratio)
    parent = (cand_lo // ratio) // psize
    have = {tuple(x) for x in (plo // psize).tolist()}
    return np.fromiter((tuple(p) in have for p in parent.tolist()), bool, parent.shape[0])


def _pick(
    domain: np.ndarray,
    size: int,
    count: int,
    parents: tuple[np.ndarray, np.ndarray, int],
    score: Callable[[np.ndarray], np.ndarray],
    ratio: int = 2,
) -> tuple[np.ndarray, np.ndarray]:
    """The ``count`` eligible tiles of ``size`` with the lowest ``score`` of their centres."""
    cand = _tiles(domain, size)
    ok = _nested_fast(cand, size, parents[0], parents[1], parents[2], ratio)
    cand = cand[ok]
    if cand.shape[0] < count:
        raise ValueError(f"only {cand.shape[0]} nested boxes available, {count} wanted")
    centre = (cand + size / 2.0) / domain
    s = score(centre)
    keep = np.sort(np.argsort(s, kind="stable")[:count])
    lo = cand[keep]
    return lo, lo + size - 1


def _curve_distance(points: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    from scipy.spatial import cKDTree

    tree = cKDTree(points)

    def score(c: np.ndarray) -> np.ndarray:
        return tree.query(c, k=1)[0]

    return score


def _ice_curves() -> np.ndarray:
    """Points (unit square) on a grounding line and five ice-shelf fronts."""
    t = np.linspace(0, 2 * np.pi, 4000, endpoint=False)
    r = 0.30 * (1 + 0.12 * np.sin(3 * t) + 0.07 * np.cos(5 * t + 1.0) + 0.04 * np.sin(11 * t))
    pts = [np.stack([0.5 + r * np.cos(t), 0.5 + 0.9 * r * np.sin(t)], axis=1)]
    for ang, rad, width in (
        (0.3, 0.13, 1.1),
        (1.9, 0.10, 0.9),
        (2.9, 0.15, 1.3),
        (4.2, 0.09, 0.8),
        (5.3, 0.11, 1.0),
    ):
        cx = 0.5 + 0.33 * np.cos(ang)
        cy = 0.5 + 0.30 * np.sin(ang)
        s = np.linspace(ang - width, ang + width, 600)
        pts.append(np.stack([cx + rad * np.cos(s), cy + rad * np.sin(s)], axis=1))
    return np.clip(np.concatenate(pts), 0.0, 1.0)


def _row_major(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    o = np.lexsort(tuple(lo[:, d] for d in range(lo.shape[1])))
    return lo[o], hi[o]


def _column_major(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    o = np.lexsort(tuple(lo[:, d] for d in range(lo.shape[1] - 1, -1, -1)))
    return lo[o], hi[o]


def bisicles(counts: Sequence[int] = BISICLES_COUNTS) -> Geometry:
    """The BISICLES-like ice sheet (5 levels, 768^2 base, ratio 2)."""
    base = np.array([768, 768], dtype=np.int64)
    score = _curve_distance(_ice_curves())
    lo0 = _tiles(base, 128)
    los, his, doms = [lo0], [lo0 + 127], [base]
    if counts[0] != lo0.shape[0]:
        raise ValueError("level 0 of the ice sheet is a 6x6 tiling (36 boxes)")
    psize = 128
    for li, n in enumerate(counts[1:], start=1):
        dom = base * 2**li
        lo, hi = _pick(dom, 32, n, (los[-1], his[-1], psize), score)
        lo, hi = _row_major(lo, hi)
        los.append(lo)
        his.append(hi)
        doms.append(dom)
        psize = 32
    return Geometry("bisicles", 2, los, his, doms, BISICLES_MODEL_COMPONENTS)


def chombo_benchmark(r: int = 2) -> Geometry:
    """The Chombo I/O benchmark hierarchy: a unit region replicated ``r^3`` times."""
    if r < 1:
        raise ValueError("the replication factor r must be at least 1")
    unit0 = 32
    base = np.full(3, unit0 * r, dtype=np.int64)
    los = [_tiles(base, unit0)]
    his = [los[0] + unit0 - 1]
    doms = [base]
    psize = unit0
    for li, per_unit in ((1, 32), (2, 192)):
        dom = base * 2**li
        unit = unit0 * 2**li

        def score(c: np.ndarray, unit: int = unit, dom: np.ndarray = dom) -> np.ndarray:
            cells = c * dom
            rel = (cells % unit) / unit - 0.5
            # Distance to the unit's centre; a tiny deterministic tie-break by direction.
            return np.sqrt((rel**2).sum(axis=1)) + 1e-6 * (rel @ np.array([1.0, 1e-2, 1e-4]))

        lo, hi = _pick(dom, 16, per_unit * r**3, (los[-1], his[-1], psize), score)
        lo, hi = _row_major(lo, hi)
        los.append(lo)
        his.append(hi)
        doms.append(dom)
        psize = 16
    return Geometry("chombo", 3, los, his, doms, CHOMBO_MODEL_COMPONENTS)


def cylinder(counts: Sequence[int] = CYLINDER_COUNTS) -> Geometry:
    """Flow past a cylinder: 3 levels, 1024x256 coarsest, vortex-street wake refined."""
    base = np.array([1024, 256], dtype=np.int64)
    lo0, hi0 = _column_major(_tiles(base, 64), _tiles(base, 64) + 63)
    los, his, doms = [lo0], [hi0], [base]
    x = np.linspace(0.12, 1.0, 3000)
    wake = np.stack([x, 0.5 + 0.08 * (x - 0.12) ** 0.5 * np.sin(18 * x)], axis=1)
    ring = np.linspace(0, 2 * np.pi, 200)
    body = np.stack([0.12 + 0.02 * np.cos(ring), 0.5 + 0.08 * np.sin(ring)], axis=1)
    score1 = _curve_distance(np.concatenate([wake, body]))
    cores = []
    for k, xc in enumerate(np.arange(0.18, 0.98, 0.055)):
        yc = 0.5 + (0.06 if k % 2 else -0.06) * min(1.0, (xc - 0.1) * 4)
        cores.append([xc, yc])
    score2 = _curve_distance(np.concatenate([np.asarray(cores), wake[::10]]))
    psize = 64
    for li, (n, score) in enumerate(zip(counts, (score1, score2)), start=1):
        dom = base * 2**li
        lo, hi = _pick(dom, 32, n, (los[-1], his[-1], psize), score)
        lo, hi = _column_major(lo, hi)
        los.append(lo)
        his.append(hi)
        doms.append(dom)
        psize = 32
    return Geometry("cylinder", 2, los, his, doms, CYLINDER_MODEL_COMPONENTS)


def geometry(name: str, r: int = 8) -> Geometry:
    """A dataset's geometry by name (``chombo`` with replication ``r``)."""
    if name == "bisicles":
        return bisicles()
    if name == "chombo":
        return chombo_benchmark(r)
    if name == "cylinder":
        return cylinder()
    raise ValueError(f"unknown dataset {name!r}; expected one of {', '.join(DATASETS)}")


def geometry_hierarchy(g: Geometry, components: int | None = None, itemsize: int = 8) -> Hierarchy:
    """An in-memory :class:`Hierarchy` (no file) with ``components`` values per cell
    (default: the model's thesis-scale count), for the model and the simulator."""
    ncomp = g.model_components if components is None else components
    levels = []
    for li, (lo, hi, dom) in enumerate(zip(g.lo, g.hi, g.domain)):
        cells = np.prod(hi - lo + 1, axis=1)
        offsets = np.concatenate([[0], np.cumsum(cells * ncomp)]).astype(np.int64)
        zero = np.zeros(g.dim, dtype=np.int64)
        levels.append(
            Level(
                li,
                lo.astype(np.int64),
                hi.astype(np.int64),
                zero,
                dom - 1,
                zero.copy(),
                ncomp,
                offsets,
                itemsize,
                g.ratio,
            )
        )
    return Hierarchy(f"<synthetic {g.name}>", g.dim, ncomp, levels, [f"c{i}" for i in range(ncomp)])


def cell_values(lo: np.ndarray, hi: np.ndarray, level: int, components: int) -> np.ndarray:
    """Deterministic values of a box, ``(components, nx, ny[, nz])``: a function of the
    cell's position, level and component, so every cell is distinguishable."""
    axes = np.meshgrid(
        *[np.arange(a, b + 1, dtype=np.float64) for a, b in zip(lo, hi)], indexing="ij"
    )
    base = sum(
        (1.0 + 0.37 * d) * np.sin(0.013 * (d + 1) * x + 0.1 * level) for d, x in enumerate(axes)
    )
    return np.stack([base + 10.0 * c + 100.0 * level for c in range(components)])


def write(path: str | os.PathLike[str], g: Geometry, components: int = 1) -> None:
    """Write ``g`` as a Chombo plot file with ``components`` float64 components."""
    specs = []
    for li, (lo, hi, dom) in enumerate(zip(g.lo, g.hi, g.domain)):
        data = [cell_values(a, b, li, components) for a, b in zip(lo, hi)]
        specs.append(
            LevelSpec(
                lo,
                hi,
                [0] * g.dim,
                (dom - 1).tolist(),
                data,
                dx=1.0 / float(dom[0]),
                ref_ratio=g.ratio,
            )
        )
    write_chombo(path, specs, [f"c{i}" for i in range(components)])


def queries(name: str, g: Geometry, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """The thesis' query shapes, inclusive level-0 boxes.

    * ``bisicles``: 11 boxes on the bands (ice shelves), 48-112 cells a side, centred on
      points of the ice-shelf fronts and the grounding line.
    * ``chombo``: 5 boxes of 5, 10, 15, 20 and 25 % of the domain volume.
    * ``cylinder``: the middle 512x256 window.
    """
    rng = np.random.default_rng(seed)
    dom = g.domain[0]
    out = []
    if name == "bisicles":
        pts = _ice_curves()
        idx = np.linspace(0, pts.shape[0] - 1, 11).astype(int)
        for p in pts[idx]:
            side = rng.integers(48, 113, size=2)
            c = (p * dom).astype(np.int64)
            lo = np.clip(c - side // 2, 0, dom - 1)
            out.append((lo, np.clip(lo + side - 1, 0, dom - 1)))
    elif name == "chombo":
        for frac in (0.05, 0.10, 0.15, 0.20, 0.25):
            side = np.maximum((frac ** (1 / 3) * dom).astype(np.int64), 1)
            lo = np.array([int(rng.integers(0, int(d - s) + 1)) for d, s in zip(dom, side)])
            out.append((lo, lo + side - 1))
    elif name == "cylinder":
        out.append((np.array([256, 0]), np.array([767, 255])))
    else:
        raise ValueError(f"unknown dataset {name!r}")
    return out
