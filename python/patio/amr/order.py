"""Box orderings of one AMR level: original, Morton, Hilbert and RPC-sized clusters.

Every ordering returns a permutation ``perm`` of the level's boxes: new file position
``p`` holds old box ``perm[p]``.

**Curves** (thesis §4.2, design §B.2). A virtual regular grid is laid over the level; its
unit is the mean box extent of the level *per dimension* (in cells, rounded, at least 1),
anchored at the problem domain's low corner. Each box first takes the unit it overlaps
most (the per-dimension maximum, so the product is maximal too). A box that covers
several units then takes, among the units it covers, the one with the most boxes (by
first-choice unit) in its 3^d neighbourhood - the thesis' "unit that yields the most
adjacent boxes"; ties go to the larger overlap, then to the smaller curve index. The
unit's Morton or Hilbert index (``patio.layout.curves``) sorts the boxes; boxes that share
a unit keep their original relative order.

**Clusters** (thesis Algorithm 1, design §B.3). Goals kept from the thesis: Chebyshev
geometry (square groups aligned with box queries), clusters closed at the RPC size,
spiral order inside a cluster, clusters walked depth first along a minimum spanning tree.

Departures from the thesis, and why:

* *Grouping.* The thesis merges the closest pair of clusters (average linkage, Chebyshev
  distance) until a cluster exceeds the threshold: O(n^3), 2.17 s at 3,262 boxes and hours
  at 98,304. Here groups come from recursive bisection (design §B.8 [P]): a group whose
  bytes exceed the threshold is split across its longest bounding-box side (in cells,
  which keeps groups square in the Chebyshev sense) at the byte-weighted median of the box
  centres. O(n log n); every cluster holds at most ``threshold`` bytes unless it is a
  single box larger than that (the thesis' clusters close just *above* the threshold, so
  an RPC-aligned read of a thesis cluster always spills into a second RPC). A group in
  which no two boxes fit together becomes singletons at once.
* *No domain partitioning / border fix-up.* The thesis partitions the domain over MPI
  ranks to make O(n^3) affordable and then repairs clusters cut by partition borders;
  bisection is itself a spatial partition, so there is nothing to repair.
* *Spiral.* Unspecified in the thesis (§F.9). Here: inside out from the centre of the
  cluster's bounding box, ring = Chebyshev distance of a box centre in units of the
  cluster's mean box extent, counter-clockwise from the -x direction inside a ring; in 3-D
  the ring is the 3-D Chebyshev shell, ordered by z then by angle in the x-y plane.
* *MST.* Edge weight = Chebyshev distance between cluster centres (bounding-box centres).
  The tree is the MST of the 8-nearest-neighbour graph (k-d tree, scipy), with
  disconnected parts joined by their closest pair; this equals the exact Euclidean-graph
  MST in all but degenerate cases and costs O(k log k) instead of O(k^2). The walk starts
  at the cluster nearest the domain's low corner and visits children nearest first.
"""

from __future__ import annotations

from itertools import product

import numpy as np

from patio.layout.curves import grid_bits, hilbert_encode, morton_encode

LAYOUTS = ("original", "morton", "hilbert", "cluster")
RPC_SIZE = 1 << 20
_MAX_CANDIDATES = 4


def virtual_units(
    lo: np.ndarray, hi: np.ndarray, domain_lo: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """The virtual-grid unit of every box, ``(n, dim)`` int64, and the unit size."""
    lo = np.asarray(lo, np.int64)
    hi = np.asarray(hi, np.int64)
    n, dim = lo.shape
    base = lo.min(axis=0) if domain_lo is None else np.minimum(np.asarray(domain_lo), lo.min(0))
    unit = np.maximum(np.rint((hi - lo + 1).mean(axis=0)).astype(np.int64), 1)
    rlo, rhi = lo - base, hi - base
    ulo, uhi = rlo // unit, rhi // unit
    # First choice: the most-overlapped unit per dimension.
    best = ulo.copy()
    best_ov = np.full((n, dim), -1, dtype=np.int64)
    span = uhi - ulo + 1
    for off in range(int(span.max())):
        c = ulo + off
        ov = np.minimum(rhi, (c + 1) * unit - 1) - np.maximum(rlo, c * unit) + 1
        ov = np.where(off < span, ov, -1)
        better = ov > best_ov
        best = np.where(better, c, best)
        best_ov = np.where(better, ov, best_ov)
    multi = np.any(span > 1, axis=1)
    if not multi.any():
        return best, unit
    shape = tuple(int(g) for g in best.max(axis=0) + 3)
    keys = np.ravel_multi_index(tuple((best + 1).T), shape)
    uniq, counts = np.unique(keys, return_counts=True)

    def occupancy(cells: np.ndarray) -> np.ndarray:
        k = np.ravel_multi_index(tuple((cells + 1).T), shape, mode="clip")
        pos = np.minimum(np.searchsorted(uniq, k), uniq.size - 1)
        inside = np.all((cells >= -1) & (cells + 1 < np.array(shape)), axis=1)
        return np.where((uniq[pos] == k) & inside, counts[pos], 0)

    idx = np.nonzero(multi)[0]
    blo, bhi, own = ulo[idx], uhi[idx], best[idx]
    # Candidate window: up to _MAX_CANDIDATES units per dimension around the first choice.
    wlo = np.clip(own - _MAX_CANDIDATES // 2, blo, np.maximum(blo, bhi - _MAX_CANDIDATES + 1))
    shifts = np.array(list(product((-1, 0, 1), repeat=dim)), dtype=np.int64)
    top = np.full(idx.size, -1, dtype=np.int64)
    top_ov = np.full(idx.size, -1, dtype=np.int64)
    choice = own.copy()
    r_lo, r_hi = rlo[idx], rhi[idx]
    for off in product(range(_MAX_CANDIDATES), repeat=dim):
        cand = wlo + np.array(off, dtype=np.int64)
        valid = np.all(cand <= bhi, axis=1)
        cand = np.minimum(cand, bhi)
        score = np.zeros(idx.size, dtype=np.int64)
        for s in shifts:
            score += occupancy(cand + s)
        score -= (np.abs(cand - own).max(axis=1) <= 1).astype(np.int64)
        ov = np.prod(
            np.minimum(r_hi, (cand + 1) * unit - 1) - np.maximum(r_lo, cand * unit) + 1, axis=1
        )
        better = valid & ((score > top) | ((score == top) & (ov > top_ov)))
        choice = np.where(better[:, None], cand, choice)
        top = np.where(better, score, top)
        top_ov = np.where(better, ov, top_ov)
    best[idx] = choice
    return best, unit


def curve_order(
    lo: np.ndarray, hi: np.ndarray, curve: str, domain_lo: np.ndarray | None = None,
    domain_hi: np.ndarray | None = None,
) -> np.ndarray:
    """Boxes sorted by the Morton or Hilbert index of their virtual-grid unit. The curve
    spans the virtual grid of the whole domain (``domain_hi`` inclusive) when it is given
    - a Hilbert order depends on the curve's size, so the same boxes in the same domain
    get the same order whichever boxes happen to exist - else the boxes' extent."""
    lo = np.asarray(lo, np.int64)
    if lo.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    units, unit = virtual_units(lo, hi, domain_lo)
    grid = units.max(axis=0) + 1
    if domain_hi is not None:
        base = lo.min(axis=0) if domain_lo is None else np.minimum(np.asarray(domain_lo),
                                                                  lo.min(0))
        grid = np.maximum(grid, (np.asarray(domain_hi, np.int64) - base) // unit + 1)
    bits = grid_bits(tuple(int(g) for g in grid))
    enc = {"morton": morton_encode, "hilbert": hilbert_encode}[curve]
    code = enc(units, bits)
    return np.lexsort((np.arange(lo.shape[0]), code)).astype(np.int64)


def cluster_groups(
    lo: np.ndarray, hi: np.ndarray, nbytes: np.ndarray, threshold: int = RPC_SIZE
) -> np.ndarray:
    """Cluster label of every box by recursive bisection (labels ``0..k-1``)."""
    lo = np.asarray(lo, np.int64)
    hi = np.asarray(hi, np.int64)
    nbytes = np.asarray(nbytes, np.int64)
    n = lo.shape[0]
    labels = np.full(n, -1, dtype=np.int64)
    centre = (lo + hi + 1) / 2.0
    nxt = 0
    stack = [np.arange(n, dtype=np.int64)]
    while stack:
        g = stack.pop()
        b = nbytes[g]
        if g.size == 1 or int(b.sum()) <= threshold:
            labels[g] = nxt
            nxt += 1
            continue
        if g.size >= 2 and int(np.partition(b, 1)[:2].sum()) > threshold:
            labels[g] = nxt + np.arange(g.size)
            nxt += g.size
            continue
        side = hi[g].max(axis=0) - lo[g].min(axis=0)
        axis = int(np.argmax(side))
        o = np.argsort(centre[g, axis], kind="stable")
        g = g[o]
        cum = np.cumsum(nbytes[g])
        k = int(np.searchsorted(cum, cum[-1] / 2.0))
        k = min(max(k + 1 if cum[k] <= cum[-1] / 2.0 else k, 1), g.size - 1)
        stack.append(g[k:])
        stack.append(g[:k])
    return labels


def spiral_keys(lo: np.ndarray, hi: np.ndarray, labels: np.ndarray) -> list[np.ndarray]:
    """Sort keys (least significant first) putting each cluster's boxes in spiral order."""
    lo = np.asarray(lo, np.int64)
    hi = np.asarray(hi, np.int64)
    dim = lo.shape[1]
    k = int(labels.max()) + 1
    cmin = np.full((k, dim), np.iinfo(np.int64).max)
    cmax = np.full((k, dim), np.iinfo(np.int64).min)
    np.minimum.at(cmin, labels, lo)
    np.maximum.at(cmax, labels, hi + 1)
    ext_sum = np.zeros((k, dim))
    np.add.at(ext_sum, labels, (hi - lo + 1).astype(float))
    size = np.bincount(labels, minlength=k).astype(float)
    unit = np.maximum(ext_sum / size[:, None], 1.0)
    rel = ((lo + hi + 1) / 2.0 - (cmin + cmax)[labels] / 2.0) / unit[labels]
    ring = np.rint(np.abs(rel).max(axis=1)).astype(np.int64)
    angle = np.arctan2(-rel[:, 1], -rel[:, 0])
    keys = [angle]
    if dim == 3:
        keys.append(rel[:, 2])
    keys.append(ring)
    return keys


def mst_walk(points: np.ndarray) -> np.ndarray:
    """Depth-first order of ``points`` along a Chebyshev minimum spanning tree."""
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components, minimum_spanning_tree
    from scipy.spatial import cKDTree

    pts = np.asarray(points, dtype=float)
    m = pts.shape[0]
    if m <= 2:
        return np.arange(m, dtype=np.int64)
    tree = cKDTree(pts)
    kk = min(m, 9)
    dist, nb = tree.query(pts, k=kk, p=np.inf)
    rows = np.repeat(np.arange(m), kk)
    cols, w = nb.ravel(), dist.ravel()
    keep = cols != rows
    rows, cols, w = list(rows[keep]), list(cols[keep]), list(w[keep])
    graph = coo_matrix((np.asarray(w) + 1e-9, (rows, cols)), shape=(m, m)).tocsr()
    ncomp, comp = connected_components(graph, directed=False)
    while ncomp > 1:
        a = np.nonzero(comp == comp[0])[0]
        b = np.nonzero(comp != comp[0])[0]
        d, j = cKDTree(pts[b]).query(pts[a], k=1, p=np.inf)
        i = int(np.argmin(d))
        rows.append(int(a[i]))
        cols.append(int(b[j[i]]))
        w.append(float(d[i]))
        graph = coo_matrix((np.asarray(w) + 1e-9, (rows, cols)), shape=(m, m)).tocsr()
        ncomp, comp = connected_components(graph, directed=False)
    mst = minimum_spanning_tree(graph).tocoo()
    u = np.concatenate([mst.row, mst.col])
    v = np.concatenate([mst.col, mst.row])
    wt = np.concatenate([mst.data, mst.data])
    o = np.lexsort((v, wt, u))
    u, v = u[o], v[o]
    start = np.searchsorted(u, np.arange(m + 1))
    root = int(np.argmin(pts.sum(axis=1)))
    seen = np.zeros(m, dtype=bool)
    out: list[int] = []
    stack = [root]
    vl = v.tolist()
    st = start.tolist()
    while stack:
        x = stack.pop()
        if seen[x]:
            continue
        seen[x] = True
        out.append(x)
        for y in reversed(vl[st[x] : st[x + 1]]):
            if not seen[y]:
                stack.append(y)
    return np.asarray(out, dtype=np.int64)


def cluster_order(
    lo: np.ndarray, hi: np.ndarray, nbytes: np.ndarray, threshold: int = RPC_SIZE
) -> tuple[np.ndarray, np.ndarray]:
    """The cluster layout: ``(perm, labels)``."""
    lo = np.asarray(lo, np.int64)
    n = lo.shape[0]
    if n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    labels = cluster_groups(lo, hi, nbytes, threshold)
    k = int(labels.max()) + 1
    cmin = np.full((k, lo.shape[1]), np.iinfo(np.int64).max)
    cmax = np.full((k, lo.shape[1]), np.iinfo(np.int64).min)
    np.minimum.at(cmin, labels, lo)
    np.maximum.at(cmax, labels, np.asarray(hi, np.int64) + 1)
    walk = mst_walk((cmin + cmax) / 2.0)
    rank = np.empty(k, dtype=np.int64)
    rank[walk] = np.arange(k)
    keys = [np.arange(n)] + spiral_keys(lo, hi, labels) + [rank[labels]]
    return np.lexsort(tuple(keys)).astype(np.int64), labels


def order_boxes(
    lo: np.ndarray,
    hi: np.ndarray,
    nbytes: np.ndarray,
    layout: str,
    domain_lo: np.ndarray | None = None,
    threshold: int = RPC_SIZE,
    domain_hi: np.ndarray | None = None,
) -> np.ndarray:
    """The permutation of one level's boxes under ``layout`` (one of :data:`LAYOUTS`)."""
    n = np.asarray(lo).shape[0]
    if layout == "original":
        return np.arange(n, dtype=np.int64)
    if layout in ("morton", "hilbert"):
        return curve_order(lo, hi, layout, domain_lo, domain_hi)
    if layout == "cluster":
        return cluster_order(lo, hi, nbytes, threshold)[0]
    raise ValueError(f"unknown layout {layout!r}; expected one of {', '.join(LAYOUTS)}")
