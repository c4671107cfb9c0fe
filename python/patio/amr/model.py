"""The eq 4.1 read-cost model of a box layout, its probe, and the sampling-based choice.

Eq 4.1 (thesis §4.3, design §B.4): reading a selection of boxes under a layout costs
``T_r = T_c + max_i (alpha C_s^i + beta C_m^i + gamma C_l^i)`` where ``T_c`` is the time of
the same bytes read contiguously and ``C_s/C_m/C_l`` count, per storage target ``i``, the
gaps between successive merged extents of at most one RPC, of up to ten RPCs and longer.
The counts come from ``patio._native.StorageModel.jump_counts`` (the striped storage model
of design §E, presets ``lustre``, ``hdd``, ``ssd``), so the model and the simulated
"measurement" (``StorageModel.simulate``) share one ground truth.

The weights come from a probe on the storage model (design §B.4 [P]): 32 blocks read as
one request, successive gaps drawn inside one category (per target: 0, (0, 1], (1, 10],
(10, 20] RPCs; file gaps are the target gaps times the stripe count); each category's
weight is the extra time over the contiguous probe divided by the largest per-target
count of that category; seconds per contiguous byte come from the contiguous probe.

Sampling (§B.5): on the second-finest level (the finest when there are at most three),
``n`` rounds (default: the number of boxes there) each centre a query on a random box with
sides drawn uniformly between 5x that box's extent and half the domain, clipped to the
domain; the per-layout sum of ``T_r - T_c`` decides. The better curve is preferred when it
is within 10 % of the cluster layout, and the original is kept unless the choice beats
it by more than 10 % (the thesis' "no significant gain", which it leaves unquantified).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from patio._native import StorageModel
from patio.amr.chombo import Hierarchy, Level
from patio.amr.order import LAYOUTS, order_boxes

CURVE_MARGIN = 0.10
GAIN_MARGIN = 0.10


@dataclass
class Weights:
    """Probed eq 4.1 weights (seconds per jump) and contiguous seconds per byte."""

    alpha: float
    beta: float
    gamma: float
    seconds_per_byte: float
    request_seconds: float

    def as_dict(self) -> dict[str, float]:
        return dict(self.__dict__)


def store(name: str = "lustre") -> StorageModel:
    """A storage-model preset by name."""
    return StorageModel.preset(name)


def merge_extents(offsets: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sort extents by offset and merge touching ones."""
    o = np.asarray(offsets, np.int64)
    n = np.asarray(lengths, np.int64)
    keep = n > 0
    o, n = o[keep], n[keep]
    if o.size == 0:
        return o, n
    s = np.argsort(o, kind="stable")
    o, n = o[s], n[s]
    end = np.maximum.accumulate(o + n)
    new = np.concatenate([[True], o[1:] > end[:-1]])
    grp = np.cumsum(new) - 1
    starts = o[new]
    ends = np.zeros(starts.size, dtype=np.int64)
    np.maximum.at(ends, grp, o + n)
    return starts, ends - starts


def probe(model: StorageModel, seed: int = 0) -> Weights:
    """Measure alpha, beta, gamma and contiguous throughput on ``model`` (32 blocks)."""
    p = model.params()
    rpc, stripe, targets = int(p["rpc_size"]), int(p["stripe_size"]), int(p["targets"])
    rng = np.random.default_rng(seed)
    block = 2 * rpc * targets
    nblk = 32

    def run(lo: float, hi: float) -> tuple[float, dict[str, Any]]:
        if hi == 0:
            gaps = np.zeros(nblk - 1, dtype=np.int64)
        else:
            g = rng.uniform(lo, hi, nblk - 1) * rpc * targets
            gaps = np.maximum((np.ceil(g / stripe) * stripe).astype(np.int64), stripe)
        offs = np.concatenate([[0], np.cumsum(block + gaps)]).astype(np.int64)
        lens = np.full(nblk, block, dtype=np.int64)
        t = model.simulate([[(offs.astype(np.uint64), lens)]])["seconds"]
        return float(t), model.jump_counts(offs.tolist(), lens.tolist())

    t0, _ = run(0, 0)
    w = []
    for key, lo, hi in (("short", 0.05, 1.0), ("medium", 1.05, 10.0), ("long", 10.5, 20.0)):
        t, jc = run(lo, hi)
        c = max(jc[key]) if jc[key] else 0
        w.append(max(t - t0, 0.0) / c if c else 0.0)
    empty = float(model.simulate([[([], [])]])["seconds"])
    return Weights(w[0], w[1], w[2], max(t0 - empty, 0.0) / (nblk * block), empty)


def jumps(model: StorageModel, offsets: np.ndarray, lengths: np.ndarray) -> dict[str, Any]:
    o, n = merge_extents(offsets, lengths)
    return model.jump_counts(o.tolist(), n.tolist())


def penalty(jc: dict[str, Any], w: Weights) -> float:
    """``max_i (alpha C_s + beta C_m + gamma C_l)`` from jump counts."""
    s, m, lg = (np.asarray(jc[k], dtype=float) for k in ("short", "medium", "long"))
    if s.size == 0:
        return 0.0
    return float(np.max(w.alpha * s + w.beta * m + w.gamma * lg))


def predict(model: StorageModel, w: Weights, offsets: np.ndarray, lengths: np.ndarray) -> float:
    """Eq 4.1 ``T_r`` of reading these extents."""
    jc = jumps(model, offsets, lengths)
    return w.request_seconds + jc["contiguous_bytes"] * w.seconds_per_byte + penalty(jc, w)


def measure(model: StorageModel, offsets: np.ndarray, lengths: np.ndarray) -> float:
    """Simulated seconds of reading these extents as one request."""
    o, n = merge_extents(offsets, lengths)
    return float(model.simulate([[(o.astype(np.uint64), n)]])["seconds"])


def file_offsets(level: Level, perm: np.ndarray, base: int = 0) -> np.ndarray:
    """Byte offset of every (old) box when the level is written in order ``perm``."""
    b = level.box_bytes
    start = np.concatenate([[0], np.cumsum(b[perm])[:-1]])
    off = np.empty(level.n, dtype=np.int64)
    off[perm] = start
    return off + base


def sampling_level(hier: Hierarchy) -> int:
    """The second-finest level, or the finest when there are at most three."""
    n = len(hier.levels)
    return n - 1 if n <= 3 else n - 2


def sample_queries(
    level: Level, n: int, rng: np.random.Generator
) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n`` thesis-shaped queries (inclusive ``lo``, ``hi``) in the level's index space."""
    dlo, dhi = level.domain_lo, level.domain_hi
    half = np.maximum((dhi - dlo + 1) // 2, 1)
    out = []
    for _ in range(n):
        k = int(rng.integers(level.n))
        ext = level.extent[k]
        centre = (level.lo[k] + level.hi[k] + 1) / 2.0
        lo_side = np.minimum(5 * ext, half)
        side = rng.uniform(lo_side, np.maximum(half, lo_side) + 1e-9)
        qlo = np.maximum(np.floor(centre - side / 2).astype(np.int64), dlo)
        qhi = np.minimum(np.ceil(centre + side / 2).astype(np.int64) - 1, dhi)
        out.append((qlo, np.maximum(qhi, qlo)))
    return out


def selected(level: Level, qlo: np.ndarray, qhi: np.ndarray) -> np.ndarray:
    """Indices of the boxes of ``level`` that intersect the inclusive query box."""
    hit = np.all((level.lo <= qhi) & (level.hi >= qlo), axis=1)
    return np.nonzero(hit)[0]


def query_costs(
    model: StorageModel,
    w: Weights,
    level: Level,
    perms: dict[str, np.ndarray],
    queries: list[tuple[np.ndarray, np.ndarray]],
) -> dict[str, float]:
    """Sum over queries of ``T_r - T_c`` per layout."""
    b = level.box_bytes
    out = {}
    for name, perm in perms.items():
        off = file_offsets(level, perm)
        total = 0.0
        for qlo, qhi in queries:
            sel = selected(level, qlo, qhi)
            total += penalty(jumps(model, off[sel], b[sel]), w)
        out[name] = total
    return out


def total_jumps(
    model: StorageModel,
    level: Level,
    perm: np.ndarray,
    queries: list[tuple[np.ndarray, np.ndarray]],
) -> int:
    """Non-contiguous jumps (all categories, all targets) summed over ``queries``."""
    off = file_offsets(level, perm)
    b = level.box_bytes
    n = 0
    for qlo, qhi in queries:
        sel = selected(level, qlo, qhi)
        jc = jumps(model, off[sel], b[sel])
        n += int(sum(jc["short"]) + sum(jc["medium"]) + sum(jc["long"]))
    return n


def choose(costs: dict[str, float]) -> str:
    """The thesis' rule: cheapest, the curve when within 10 % of cluster, else original."""
    curve = min(("hilbert", "morton"), key=lambda k: (costs[k], k != "hilbert"))
    pick = "cluster" if costs["cluster"] * (1 + CURVE_MARGIN) < costs[curve] else curve
    if costs[pick] >= costs["original"] * (1 - GAIN_MARGIN):
        return "original"
    return pick


def advise(
    hier: Hierarchy,
    model: StorageModel | None = None,
    queries: int | None = None,
    seed: int = 0,
    weights: Weights | None = None,
) -> dict[str, Any]:
    """Modelled cost of every layout on sampled queries and the layout chosen."""
    model = model or store("lustre")
    w = weights or probe(model)
    li = sampling_level(hier)
    lev = hier.levels[li]
    rng = np.random.default_rng(seed)
    nq = lev.n if queries is None else int(queries)
    qs = sample_queries(lev, nq, rng)
    rpc = int(model.params()["rpc_size"])
    perms = {
        name: order_boxes(lev.lo, lev.hi, lev.box_bytes, name, lev.domain_lo, rpc, lev.domain_hi)
        for name in LAYOUTS
    }
    costs = query_costs(model, w, lev, perms, qs)
    return {
        "level": li,
        "queries": nq,
        "weights": w.as_dict(),
        "costs": costs,
        "chosen": choose(costs),
    }
