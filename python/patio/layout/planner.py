"""Which replicas to build and which to evict: candidate layouts for the recorded hot
patterns, their modelled benefit, and admission within the storage budget.

Candidates per dataset: a ``concat`` replica of each hot pattern (a family of boxes
becomes one product replica), a ``transposed`` copy whose innermost axis is the one the
selections span most, and ``chunked``/``zorder``/``hilbert`` copies with a chunk shape
derived from the selections (about one stripe). Each is priced by eq 3.1 on the
pattern's flattened extents *before* anything is built (model layouts at address 0).

Score (REORGANIZATION.md §A.5 [P], made explicit): a replica's score is
``decayed_reads * saved_seconds_per_read / (bytes + meta_bytes)``, reads decaying with
a half-life of 7 days since the pattern was last seen (for a built replica: its uses
since it was last used). The saving is net of overhead: of each served read's measured
decision time, and of the *marginal* decision time the replica adds to every read of
the dataset (each replica is one more candidate to weigh; measured on the heaviest
patterns as the decision's time with the replica's model layout minus without).
Planning is greedy: the candidate with the highest score is admitted when it fits the
free budget; when it does not, the lowest-scoring replicas are evicted for it only if
their combined benefit is smaller than its own. After each admission the patterns it
serves are priced at the new best, so two replicas are never built for the same reads.

Held-out scoring (cross-validation over the recorded reads): the benefit that admits a
candidate is what it saves on reads it was *not* generated from. A dataset's recorded
reads are split into two folds: a pattern read at least twice per member (a selection,
or every box of a family, that recurs) has half its reads in each fold; so has a family
read about once per member (its members alternate between the folds, and a replica of
one fold's members holds none of the other's); a single selection read once lies wholly
in one fold, such patterns alternating between the folds in recording order (pattern
id). A ``concat`` replica is generated from the folds its pattern lies in and earns only
the savings on the *other* fold's reads - its own reads when they recur there (never
for a family read once per member), or other patterns' reads that fall inside it; a
whole-dataset
order (``transposed``, ``chunked``/``zorder``/``hilbert``), whose parameters come only
from the distribution of extents, is generated from either fold and so earns its saving
on both. Summed over the two directions, the held-out benefit of a candidate serving
every fold equals its in-sample benefit; a replica of a selection read once earns
nothing for that read. So workloads that repeat exactly keep their concat replicas, and
ones whose reads vary get the orders that serve reads not yet seen. When the recorded
reads fill only one fold there is nothing to validate on and the in-sample saving stands.
Both savings are reported (``in_sample_saving_s``, ``held_out_saving_s``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import h5py
import numpy as np

from . import cost as costmodel
from .decide import Decider
from .flatten import Chunked, Contiguous, native_layout
from .h5sel import product_axes
from .kb import KnowledgeBase, Pattern
from .replicas import Replica, derive_chunk, transpose_axes
from .selection import Selection, product
from .storage import Layout

HALF_LIFE = 7 * 86400.0
#: Hot patterns considered per dataset.
TOP_PATTERNS = 1024
#: The heaviest patterns on which each proposal's marginal decision cost is measured.
MARGINAL_SAMPLE = 8
#: Folds of the recorded reads (see the module docstring).
FOLDS = 2
#: A pattern read this many times per member recurs in every fold.
RECUR_READS = 2
#: Allocation order of each re-chunked replica kind.
CURVE_ORDER = {"chunked": "row", "zorder": "morton", "hilbert": "hilbert"}


@dataclass
class Proposal:
    """A replica that could be built."""

    dset: str
    kind: str
    params: dict[str, Any]
    bytes: int
    meta_bytes: int = 0
    axes_sets: list[np.ndarray] | None = None
    sel: Selection | None = None
    pattern: int | None = None
    benefit: float = 0.0  # decayed reads x seconds saved
    serves: list[int] = field(default_factory=list)
    #: Measured seconds this replica adds to a decision on its dataset (weighted mean).
    marginal_s: float = 0.0
    #: The benefit on the very reads it was generated from (``benefit`` is held out).
    in_sample: float = 0.0

    def label(self) -> str:
        if self.kind == "transposed":
            return f"transposed{tuple(self.params['axes'])}"
        if self.kind == "concat":
            return f"concat(pattern {self.pattern})"
        return f"{self.kind}{tuple(self.params['chunk'])}"

    def score(self) -> float:
        return self.benefit / max(1, self.bytes + self.meta_bytes)


def decay(last_seen: float, now: float) -> float:
    return math.pow(0.5, max(0.0, now - last_seen) / HALF_LIFE)


def hot_patterns(kb: KnowledgeBase, dset: str) -> list[Pattern]:
    pats = kb.patterns(dset)
    pats.sort(key=lambda p: p.reads * max(1, p.bytes // max(1, p.reads)), reverse=True)
    return pats[:TOP_PATTERNS]


def recurs(p: Pattern) -> bool:
    """Whether the pattern's reads repeat (each member read ``RECUR_READS`` times)."""
    return p.reads >= RECUR_READS * max(1, len(p.starts))


def fold_shares(pats: list[Pattern]) -> dict[int, tuple[float, ...]]:
    """Per pattern id, the share of its reads in each fold (see the module docstring)."""
    out: dict[int, tuple[float, ...]] = {}
    once = 0
    for p in sorted(pats, key=lambda p: p.id):
        if recurs(p) or len(p.starts) > 1:
            out[p.id] = (1.0 / FOLDS,) * FOLDS
        else:
            out[p.id] = tuple(1.0 if k == once % FOLDS else 0.0 for k in range(FOLDS))
            once += 1
    return out


def held_out_weights(prop: Proposal, rows: list[dict[str, Any]]) -> list[float]:
    """Per row, the weight of its reads in the folds ``prop`` was not generated from,
    summed over the folds it was generated from (the in-sample weights when the reads
    fill only one fold)."""
    filled = [any(r["folds"][k] > 0 for r in rows) for k in range(FOLDS)]
    if sum(filled) < 2:
        return [r["weight"] for r in rows]
    own = None
    if prop.pattern is None:  # a whole-dataset order: generated from every fold
        gen = filled
    else:
        own = next((r for r in rows if r["pattern"] == prop.pattern), None)
        gen = [bool(own and own["folds"][k] > 0) for k in range(FOLDS)]
        if own is not None and own["recurs"]:
            own = None
    # A pattern that does not recur: its own reads are other data in every other fold.
    return [0.0 if r is own else
            r["weight"] * sum(r["folds"][j] for k in range(FOLDS) if gen[k]
                              for j in range(FOLDS) if j != k) for r in rows]


def representative(p: Pattern) -> Selection:
    return next(iter(p.members()))


def _concat_layout_and_selection(p_union: Selection, axes_sets: list[np.ndarray] | None,
                                 sel: Selection, itemsize: int, perm: Any = None
                                 ) -> tuple[Layout, Selection] | None:
    """A concat replica's model layout and the part of it ``sel`` reads, or None."""
    if axes_sets is not None:
        axes = product_axes(sel)
        if axes is None:
            return None
        if not all(np.isin(a, s).all() for a, s in zip(axes, axes_sets)):
            return None
        shape = tuple(len(s) for s in axes_sets)
        pos = [np.searchsorted(s, a) for s, a in zip(axes_sets, axes)]
        perm = tuple(perm) if perm is not None else tuple(range(len(shape)))
        sub = product(shape, pos).permuted(perm)
        return Contiguous(sub.shape, itemsize, 0), sub
    if sel.kind != "points" or p_union.kind != "points":
        return None
    lin = np.sort(p_union.linear_indices())
    want = sel.linear_indices()
    pos = np.searchsorted(lin, want)
    if len(lin) == 0 or (np.minimum(pos, len(lin) - 1) != pos).any() or \
            (lin[np.minimum(pos, len(lin) - 1)] != want).any():
        return None
    return Contiguous((len(lin),), itemsize, 0), Selection.from_points((len(lin),),
                                                                       np.sort(pos)[:, None])


def model_cost(model: Any, consts: costmodel.Constants, layout: Layout, sel: Selection) -> float:
    """eq 3.1 of ``sel`` read from ``layout``, priced by the layout core."""
    return costmodel.price(layout, sel, model, consts)


def proposals(dset: h5py.Dataset, pats: list[Pattern]) -> list[Proposal]:
    """Candidate replicas for the hot patterns of ``dset``."""
    shape = tuple(int(n) for n in dset.shape)
    itemsize = dset.dtype.itemsize
    full = int(np.prod(shape, dtype=np.int64)) * itemsize
    out: list[Proposal] = []
    extents, weights = [], []
    for p in pats:
        lo, hi = representative(p).bounds()
        extents.append([max(1, h - lo_) for lo_, h in zip(lo, hi)])
        weights.append(float(p.reads))
        u = p.union()
        axes_sets = product_axes(u)
        nbytes = u.nelements() * itemsize
        if axes_sets is not None:
            params = {}
            if p.axis is not None and len(p.starts) > 1:
                # Members of a family become contiguous pieces, in reading order.
                params["axes"] = [p.axis] + [a for a in range(len(shape)) if a != p.axis]
            out.append(Proposal(dset.name, "concat", params, nbytes, 0, axes_sets=axes_sets,
                                pattern=p.id))
        elif u.kind == "points":
            out.append(Proposal(dset.name, "concat", {}, nbytes, 0, sel=u, pattern=p.id))
    if len(shape) >= 2:
        axes = transpose_axes(shape, extents)
        if axes != tuple(range(len(shape))):
            out.append(Proposal(dset.name, "transposed", {"axes": list(axes)}, full))
    chunk = derive_chunk(shape, itemsize, extents, weights)
    for kind in ("chunked", "zorder", "hilbert"):
        # One axis: a chunked copy of a contiguous source holds the elements in the same
        # order, so it can serve no read better than the original.
        if len(shape) < 2 and (kind != "chunked" or dset.chunks is None):
            continue
        out.append(Proposal(dset.name, kind, {"chunk": list(chunk)}, full))
    return out


def proposal_cost(model: Any, consts: costmodel.Constants, prop: Proposal, dset: h5py.Dataset,
                  sel: Selection, union: Selection | None) -> float | None:
    """Modelled seconds of ``sel`` served by the proposed replica (None: not eligible)."""
    shape = tuple(int(n) for n in dset.shape)
    itemsize = dset.dtype.itemsize
    if prop.kind in ("transposed", "chunked", "zorder", "hilbert"):
        if prop.kind == "transposed" and product_axes(sel) is None and sel.kind != "points":
            return None
        lay = _full_layout(prop, shape, itemsize)
        axes = prop.params.get("axes")
        return model_cost(model, consts, lay, sel.permuted(tuple(axes)) if axes else sel)
    base = union if union is not None else sel
    got = _concat_layout_and_selection(base, prop.axes_sets, sel, itemsize,
                                       prop.params.get("axes"))
    if got is None:
        return None
    return model_cost(model, consts, got[0], got[1])


def _full_layout(prop: Proposal, shape: tuple[int, ...], itemsize: int) -> Layout:
    """The model layout (at address 0) of a transposed or re-chunked proposal."""
    if prop.kind == "transposed":
        return Contiguous(tuple(shape[a] for a in prop.params["axes"]), itemsize, 0)
    return Chunked.in_order(shape, itemsize, tuple(prop.params["chunk"]),
                            CURVE_ORDER[prop.kind], 0)


def proposal_native(prop: Proposal, dset: h5py.Dataset) -> tuple[Any, tuple[Any, ...]] | None:
    """The layout core's view of a proposed replica (its model layout and what it
    holds), as a decider would weigh it once built; None when it would serve nothing."""
    shape = tuple(int(n) for n in dset.shape)
    itemsize = dset.dtype.itemsize
    if prop.kind == "transposed":
        return native_layout(_full_layout(prop, shape, itemsize)), \
            ("transposed", list(prop.params["axes"]))
    if prop.kind in CURVE_ORDER:
        return native_layout(_full_layout(prop, shape, itemsize)), ("everything",)
    if prop.axes_sets is not None:
        perm = list(prop.params.get("axes") or range(len(shape)))
        rshape = tuple(len(prop.axes_sets[a]) for a in perm)
        sets = [np.asarray(a, np.int64) for a in prop.axes_sets]
        return native_layout(Contiguous(rshape, itemsize, 0)), ("product", sets, perm)
    if prop.sel is not None and prop.sel.kind == "points":
        lin = np.unique(prop.sel.linear_indices()).astype(np.int64)
        return native_layout(Contiguous((len(lin),), itemsize, 0)), ("points", lin)
    return None


def marginal_seconds(decider: Decider, prop: Proposal, dset: h5py.Dataset,
                     sels: list[Selection], weights: list[float], without: list[float]
                     ) -> float:
    """The weighted mean over ``sels`` of what weighing ``prop`` adds to a decision."""
    extra = proposal_native(prop, dset)
    if extra is None or not sels:
        return 0.0
    with_ = decider.decision_seconds(sels, extra)
    total = sum(weights) or 1.0
    return sum(w * max(0.0, a - b) for w, a, b in zip(weights, with_, without)) / total


@dataclass
class DatasetPlan:
    dset: str
    rows: list[dict[str, Any]]  # per pattern: costs per layout
    proposals: list[Proposal]


def evaluate(kb: KnowledgeBase, f: h5py.File, dset_name: str, model: Any,
             consts: costmodel.Constants, existing: list[Replica]) -> DatasetPlan:
    """Prices every hot pattern of a dataset under the original, the existing replicas
    and every proposal."""
    dset = f[dset_name]
    pats = hot_patterns(kb, dset_name)
    props = proposals(dset, pats)
    decider = Decider(dset, existing, model, consts)
    now = time.time()
    rows = []
    unions = {p.id: p.union() for p in pats}
    sels = [representative(p) for p in pats]
    # What deciding costs a read of each pattern here (the layout core weighing every
    # current candidate): a replica must save more than this.
    overheads = decider.decision_seconds(sels)
    shares = fold_shares(pats)
    for p, sel, overhead in zip(pats, sels, overheads):
        current = {c.name: c.seconds for c in decider.candidates(sel)}
        # The decider prices the original (always a candidate) and the built replicas.
        costs: dict[str, float | None] = dict(current)
        for prop in props:
            union = unions.get(prop.pattern) if prop.pattern is not None else None
            costs[prop.label()] = proposal_cost(model, consts, prop, dset, sel, union)
        lo, hi = sel.bounds()
        rows.append({"pattern": p.id, "reads": p.reads, "members": max(1, len(p.starts)),
                     "kind": p.sel.kind, "elements": sel.nelements(), "lo": list(lo),
                     "hi": list(hi), "weight": p.reads * decay(p.last_seen, now),
                     "best_now": min(current.values()), "costs": costs,
                     "overhead_s": overhead, "folds": shares[p.id], "recurs": recurs(p)})
    heavy = sorted(range(len(rows)), key=lambda i: rows[i]["weight"],
                   reverse=True)[:MARGINAL_SAMPLE]
    for prop in props:
        prop.marginal_s = marginal_seconds(decider, prop, dset, [sels[i] for i in heavy],
                                           [rows[i]["weight"] for i in heavy],
                                           [overheads[i] for i in heavy])
    return DatasetPlan(dset_name, rows, props)


def plan(plans: list[DatasetPlan], existing: list[Any], budget: int
         ) -> tuple[list[Proposal], list[int], list[Proposal]]:
    """Greedy admission (see the module docstring). Returns ``(build, evict, rejected)``;
    ``existing`` are knowledge-base replica rows."""
    now = time.time()
    kept = {r.id: r for r in existing if r.state == "ready"}
    used = sum(r.bytes + r.meta_bytes for r in kept.values())

    def row_value(r: Any) -> float:  # total benefit of a built replica
        per_use = r.benefit / r.uses if r.uses else 0.0
        return r.uses * per_use * decay(r.last_used or r.created, now)

    build: list[Proposal] = []
    evict: list[int] = []
    # A budget lowered below what is built: the lowest scores go first.
    for r in sorted(kept.values(), key=lambda r: row_value(r) / max(1, r.bytes)):
        if used <= budget:
            break
        used -= r.bytes + r.meta_bytes
        del kept[r.id]
        evict.append(r.id)
    best_now = {(dp.dset, row["pattern"]): row["best_now"] for dp in plans for row in dp.rows}
    rejected: list[Proposal] = []
    pending = [(dp, prop) for dp in plans for prop in dp.proposals]
    held = {id(prop): held_out_weights(prop, dp.rows) for dp, prop in pending}
    while pending:
        for dp, prop in pending:
            price_benefit(dp, prop, held[id(prop)], best_now)
        pending = [(dp, p) for dp, p in pending if p.benefit > 0]
        if not pending:
            break
        pending.sort(key=lambda t: t[1].score(), reverse=True)
        dp, prop = pending.pop(0)
        need = prop.bytes + prop.meta_bytes
        victims: list[int] = []
        free = budget - used
        if need > free:
            for r in sorted(kept.values(), key=lambda r: row_value(r) / max(1, r.bytes)):
                if free >= need:
                    break
                victims.append(r.id)
                free += r.bytes + r.meta_bytes
            if free < need or sum(row_value(kept[v]) for v in victims) >= prop.benefit:
                rejected.append(prop)
                continue
        for v in victims:
            used -= kept[v].bytes + kept[v].meta_bytes
            del kept[v]
            evict.append(v)
        used += need
        build.append(prop)
        for row in dp.rows:
            c = row["costs"].get(prop.label())
            if c is not None:
                key = (dp.dset, row["pattern"])
                best_now[key] = min(best_now[key], c)
    return build, evict, rejected


def price_benefit(dp: DatasetPlan, prop: Proposal, held: list[float],
                  best_now: dict[tuple[str, int], float]) -> None:
    """Sets ``prop.benefit`` (held out), ``prop.in_sample`` and ``prop.serves`` against
    the current best cost of each pattern."""
    # Every later read of the dataset weighs this replica too.
    total = sum(row["weight"] for row in dp.rows)
    prop.benefit = -prop.marginal_s * total
    prop.in_sample = prop.benefit
    prop.serves = []
    for row, h in zip(dp.rows, held):
        c = row["costs"].get(prop.label())
        cur = best_now[(dp.dset, row["pattern"])]
        # Admitted only where the modelled saving exceeds the measured decision
        # overhead of the read (overhead-aware planning).
        gain = cur - c - row.get("overhead_s", 0.0) if c is not None else 0.0
        if gain > 0:
            prop.in_sample += row["weight"] * gain
            prop.benefit += h * gain
            if h > 0:
                prop.serves.append(row["pattern"])


def savings(dp: DatasetPlan) -> list[dict[str, Any]]:
    """Each proposal's modelled saving against the current layouts, weighted seconds:
    on the reads it was generated from and held out (see the module docstring)."""
    best_now = {(dp.dset, row["pattern"]): row["best_now"] for row in dp.rows}
    out = []
    for prop in dp.proposals:
        price_benefit(dp, prop, held_out_weights(prop, dp.rows), best_now)
        out.append({"replica": prop.label(), "kind": prop.kind, "bytes": prop.bytes,
                    "in_sample_saving_s": prop.in_sample,
                    "held_out_saving_s": prop.benefit})
    return out


def budget_bytes(kb: KnowledgeBase, source_size: int) -> int:
    b = kb.setting("budget")
    if not b:
        return 0
    if "percent" in b:
        return int(source_size * float(b["percent"]) / 100.0)
    return int(b["bytes"])


def parse_budget(text: str) -> dict[str, float]:
    """``20%``, ``500M``, ``2GiB``, ``1048576`` -> a budget setting."""
    t = text.strip()
    bad = ValueError(f"budget {text!r}: expected bytes (e.g. 500M, 2GiB) or a percentage")
    if t.endswith("%"):
        try:
            v = float(t[:-1])
        except ValueError:
            raise bad from None
        if not 0 <= v <= 1000:
            raise ValueError(f"budget {text!r}: percentage out of range")
        return {"percent": v}
    units = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "kib": 1024.0, "mib": 1024.0**2,
             "gib": 1024.0**3, "tib": 1024.0**4, "b": 1}
    num = t.rstrip("KMGTBikmgtb")
    unit = t[len(num):].lower()
    if unit in ("ki", "mi", "gi", "ti"):
        unit += "b"
    if unit not in units or not num:
        raise bad
    try:
        v = float(num) * units[unit]
    except ValueError:
        raise bad from None
    if not math.isfinite(v) or v >= 2**63:
        raise ValueError(f"budget {text!r} is too large")
    if v < 0:
        raise ValueError(f"budget {text!r} is negative")
    return {"bytes": float(int(v))}
