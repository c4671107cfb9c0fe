"""The layout decision maker: for one read of a dataset, every eligible way to serve it
(the original, always; each current replica that holds the data; a split read taking
part from a partial replica and the rest from the original), each costed by eq 3.1 on
its flattened byte extents, and the cheapest one executed.

Eligibility (REORGANIZATION.md §A.4, with the partial-overlap gap closed for the cases
that can be computed exactly):

* full replicas (``transposed``, ``chunked``, ``zorder``, ``hilbert``) hold everything;
  a transposed one serves product selections and point lists;
* a ``concat`` replica of a product selection serves a product request whose index set
  along every axis lies inside the replica's (read as the sub-product at the matching
  positions), and splits a request that leaves the replica along one axis only (the
  replica's part plus the remainder from the original);
* a ``concat`` replica of points serves the request's points it holds and, when some
  are missing, splits with the original;
* several ``concat`` replicas that each hold a product request along all axes but one
  are combined, greedily, with the original for what none holds.

Every plan returns exactly what h5py returns on the original for the same arguments.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable

import h5py
import numpy as np

from patio._native import LayoutSelection

from . import cost as costmodel
from .flatten import Extents, native_layout
from .h5sel import product_axes, read, read_flat, read_permuted
from .replicas import Replica
from .selection import Selection, product
from .storage import Layout, physical_layout


@dataclass
class Candidate:
    """One way to serve a read: its name, modelled seconds and how to do it."""

    name: str
    replica: Replica | None
    seconds: float
    run: Callable[[], np.ndarray]
    #: The parts as priced: the layout of each copy read and the core's selection in it.
    priced: list[tuple[Layout, Any]] = field(default_factory=list)
    #: Modelled seconds saved against the original (set by :meth:`Decider.choose`).
    saved: float = 0.0
    #: Where each entry of ``extents`` comes from, for plans of several parts.
    parts: list[Replica | None] | None = None

    @property
    def extents(self) -> list[Extents]:
        """Each part's sorted, merged byte extents (flattened on demand: the decision
        itself only prices them)."""
        return [Extents(*native_layout(lay).flatten_sorted(nsel)) for lay, nsel in self.priced]

    @property
    def sources(self) -> list[Replica | None]:
        """The copy each entry of ``extents`` is read from (None: the original)."""
        if self.parts is not None:
            return self.parts
        if self.replica is None:
            return [None]
        return [self.replica, None] if self.name.endswith("+original") else [self.replica]


class Decider:
    """Chooses among the original and the replicas of one dataset."""

    def __init__(self, original: h5py.Dataset, replicas: list[Replica], model: Any,
                 consts: costmodel.Constants) -> None:
        self.original = original
        self.replicas = replicas
        self.model = model
        self.consts = consts
        self._layouts: dict[int, Layout] = {}
        self._orig_layout: Layout | None = None
        self._ranges: dict[int, tuple[np.ndarray, np.ndarray] | None] = {}
        self._memo: OrderedDict[tuple[str, str], Candidate] = OrderedDict()

    def layout_of(self, rep: Replica | None) -> Layout:
        if rep is None:
            if self._orig_layout is None:
                self._orig_layout = physical_layout(self.original)
            return self._orig_layout
        if rep.row.id not in self._layouts:
            self._layouts[rep.row.id] = physical_layout(rep.dataset())
        return self._layouts[rep.row.id]

    def _seconds(self, parts: list[tuple[Replica | None, Any]]
                 ) -> tuple[float, list[tuple[Layout, Any]]]:
        """Modelled time of reading ``parts`` (each a copy and the core's selection in
        it) one after the other, priced by the layout core."""
        total, priced = 0.0, []
        consts = self.consts.as_tuple()
        for rep, nsel in parts:
            lay = self.layout_of(rep)
            priced.append((lay, nsel))
            total += native_layout(lay).price(nsel, self.model, consts)
        return total, priced

    def candidates(self, sel: Selection, dtype: Any = None) -> list[Candidate]:
        orig = self.original
        out = []
        secs, exts = self._seconds([(None, sel.native())])
        out.append(Candidate("original", None, secs, lambda: read(orig, sel, dtype), exts))
        axes = product_axes(sel)
        lo, hi = (np.asarray(b, np.int64) for b in sel.bounds())
        for rep in self.replicas:
            if not self._may_hold(rep, sel, lo, hi):
                continue
            try:
                cand = self._candidate(rep, sel, axes, dtype)
            except (OSError, KeyError) as e:  # damaged replica: never used, reported
                rep.row.note = f"unreadable: {e}"
                continue
            if cand is not None:
                out.append(cand)
        if axes is not None:
            combined = self._combined(sel, axes, [r for r in self.replicas if
                                                  r.axes_sets is not None and
                                                  self._may_hold(r, sel, lo, hi)], dtype)
            if combined is not None:
                out.append(combined)
        return out

    def _combined(self, sel: Selection, axes: list[np.ndarray], reps: list[Replica],
                  dtype: Any) -> Candidate | None:
        """Several concatenated replicas (and the original for what none holds) serving
        one product request that they cover along one axis between them: greedily, the
        replica holding most of what is still missing first. The cheapest such plan over
        the axes, or None when no axis has two replicas to combine."""
        best: Candidate | None = None
        for k in range(len(axes)):
            usable = [r for r in reps if len(r.axes_sets or []) == len(axes) and all(
                np.isin(axes[j], r.axes_sets[j], assume_unique=True).all()  # type: ignore[index]
                for j in range(len(axes)) if j != k)]
            if len(usable) < 2:
                continue
            missing = np.ones(len(axes[k]), bool)
            chosen: list[tuple[Replica, np.ndarray]] = []
            while usable and missing.any():
                gains = [missing & np.isin(axes[k], r.axes_sets[k], assume_unique=True)  # type: ignore[index]
                         for r in usable]
                i = int(np.argmax([g.sum() for g in gains]))
                if not gains[i].any():
                    break
                chosen.append((usable.pop(i), gains[i]))
                missing &= ~gains[i]
            if len(chosen) < 2:
                continue
            parts: list[tuple[Replica | None, Any]] = []
            plans: list[tuple[Replica | None, np.ndarray, tuple[int, ...], list[np.ndarray],
                              tuple[int, ...]]] = []
            for rep, mask in chosen:
                sets = rep.axes_sets
                assert sets is not None
                pos = [np.searchsorted(s_, a) for s_, a in zip(sets, axes)]
                pos[k] = np.searchsorted(sets[k], axes[k][mask])
                perm = rep.perm or tuple(range(len(sets)))
                parts.append((rep, LayoutSelection.product(pos).permuted(list(perm))))
                plans.append((rep, mask, tuple(len(s_) for s_ in sets), pos, perm))
            if missing.any():
                rest = list(axes)
                rest[k] = axes[k][missing]
                parts.append((None, LayoutSelection.product(rest)))
                plans.append((None, missing, tuple(self.original.shape), rest, ()))
            secs, exts = self._seconds(parts)
            if best is not None and secs >= best.seconds:
                continue
            shape = tuple(len(a) for a in axes)

            def run(plans: Any = plans, k: int = k, shape: Any = shape) -> np.ndarray:
                out: np.ndarray | None = None
                for rep, mask, space, pos, perm in plans:
                    sub = product(space, pos)
                    got = (read(self.original, sub, dtype) if rep is None else
                           read_permuted(rep.dataset(), sub, perm, dtype))
                    assert got is not None
                    if out is None:
                        out = np.empty(shape, dtype=got.dtype)
                    index: list[Any] = [slice(None)] * len(shape)
                    index[k] = np.flatnonzero(mask)
                    out[tuple(index)] = got.reshape(
                        tuple(int(mask.sum()) if j == k else n for j, n in enumerate(shape)))
                assert out is not None
                return out.reshape(sel.out_shape)

            ids = "+".join(f"#{rep.row.id}" for rep, _ in chosen)
            name = f"combined({ids}{'+original' if missing.any() else ''})"
            best = Candidate(name, chosen[0][0], secs, run, exts,
                             parts=[rep for rep, _ in parts])
        return best

    def _may_hold(self, rep: Replica, sel: Selection, lo: np.ndarray, hi: np.ndarray) -> bool:
        """Coarse pruning by bounding boxes (the thesis' per-dataset range catalogue):
        False when the replica cannot hold any element of the request."""
        if rep.row.id not in self._ranges:
            box = None
            if rep.axes_sets is not None and all(len(a) for a in rep.axes_sets):
                box = (np.array([a[0] for a in rep.axes_sets]),
                       np.array([a[-1] + 1 for a in rep.axes_sets]))
            elif rep.linear is not None and len(rep.linear):
                box = (np.array([rep.linear[0]]), np.array([rep.linear[-1] + 1]))
            self._ranges[rep.row.id] = box
        box = self._ranges[rep.row.id]
        if box is None or not np.all(hi > lo):
            return box is None
        if rep.linear is not None:
            shape = sel.shape
            first = int(np.ravel_multi_index(tuple(lo), shape))
            last = int(np.ravel_multi_index(tuple(hi - 1), shape))
            return first < int(box[1][0]) and last >= int(box[0][0])
        return bool(np.all(lo < box[1]) and np.all(hi > box[0]))

    def _candidate(self, rep: Replica, sel: Selection, axes: list[np.ndarray] | None,
                   dtype: Any) -> Candidate | None:
        name = f"{rep.kind}#{rep.row.id}"
        if rep.kind in ("chunked", "zorder", "hilbert"):
            secs, exts = self._seconds([(rep, sel.native())])
            return Candidate(name, rep, secs, lambda: read(rep.dataset(), sel, dtype), exts)
        if rep.kind == "transposed":
            if axes is None and sel.kind != "points":
                return None
            perm = rep.perm
            assert perm is not None
            secs, exts = self._seconds([(rep, sel.native().permuted(list(perm)))])

            def run_t() -> np.ndarray:
                got = read_permuted(rep.dataset(), sel, perm, dtype)
                assert got is not None
                return got

            return Candidate(name, rep, secs, run_t, exts)
        if rep.axes_sets is not None and axes is not None:
            return self._concat_product(rep, sel, axes, dtype, name)
        if rep.linear is not None and sel.kind == "points":
            return self._concat_points(rep, sel, dtype, name)
        return None

    def _concat_product(self, rep: Replica, sel: Selection, axes: list[np.ndarray],
                        dtype: Any, name: str) -> Candidate | None:
        sets = rep.axes_sets
        assert sets is not None
        if len(sets) != len(axes):
            return None
        inside = [np.isin(a, s, assume_unique=True) for a, s in zip(axes, sets)]
        outside = [k for k, m in enumerate(inside) if not m.all()]
        rshape = tuple(len(s) for s in sets)
        perm = rep.perm or tuple(range(len(sets)))
        if not outside:
            pos = [np.searchsorted(s, a) for s, a in zip(sets, axes)]
            secs, exts = self._seconds([(rep, LayoutSelection.product(pos).permuted(list(perm)))])

            def run_sub() -> np.ndarray:
                got = read_permuted(rep.dataset(), product(rshape, pos), perm, dtype)
                assert got is not None
                return got.reshape(sel.out_shape)

            return Candidate(name, rep, secs, run_sub, exts)
        if len(outside) > 1:
            return None
        k = outside[0]
        if not inside[k].any():
            return None
        held = axes[k][inside[k]]
        rest = axes[k][~inside[k]]
        pos = [np.searchsorted(s, a) for s, a in zip(sets, axes)]
        pos[k] = np.searchsorted(sets[k], held)
        rest_axes = list(axes)
        rest_axes[k] = rest
        secs, exts = self._seconds([(rep, LayoutSelection.product(pos).permuted(list(perm))),
                                    (None, LayoutSelection.product(rest_axes))])
        shape = tuple(len(a) for a in axes)

        def run_split() -> np.ndarray:
            a = read_permuted(rep.dataset(), product(rshape, pos), perm, dtype)
            assert a is not None
            b = read(self.original, product(tuple(self.original.shape), rest_axes), dtype)
            out = np.empty(shape, dtype=a.dtype)
            index: list[Any] = [slice(None)] * len(shape)
            index[k] = np.flatnonzero(inside[k])
            out[tuple(index)] = a
            index[k] = np.flatnonzero(~inside[k])
            out[tuple(index)] = b
            return out.reshape(sel.out_shape)

        return Candidate(name + "+original", rep, secs, run_split, exts)

    def _concat_points(self, rep: Replica, sel: Selection, dtype: Any,
                       name: str) -> Candidate | None:
        linear = rep.linear
        assert linear is not None
        want = sel.linear_indices()
        pos = np.searchsorted(linear, want)
        pos_c = np.minimum(pos, max(len(linear) - 1, 0))
        held = (linear[pos_c] == want) if len(linear) else np.zeros(len(want), bool)
        if not held.any():
            return None
        rshape = (len(linear),)
        order = np.argsort(pos[held], kind="stable")
        rep_sel = Selection.from_points(rshape, pos[held][order][:, None])
        parts: list[tuple[Replica | None, Any]] = [(rep, rep_sel.native())]
        rest_sel = None
        if not held.all():
            assert sel.points is not None
            rest_sel = Selection.from_points(sel.shape, sel.points[~held])
            parts.append((None, rest_sel.native()))
        secs, exts = self._seconds(parts)

        def run_points() -> np.ndarray:
            a = read_flat(rep.dataset(), rep_sel, dtype)
            out = np.empty(len(want), dtype=a.dtype)
            idx = np.flatnonzero(held)[order]
            out[idx] = a
            if rest_sel is not None:
                out[~held] = read_flat(self.original, rest_sel, dtype)
            return out.reshape(sel.out_shape)

        return Candidate(name if rest_sel is None else name + "+original", rep, secs,
                         run_points, exts)

    def choose(self, sel: Selection, dtype: Any = None) -> Candidate:
        """The cheapest eligible candidate (the original on ties). A selection read again
        reuses its decision (the last :data:`MEMO` distinct selections are kept)."""
        key = (str(np.dtype(dtype)) if dtype is not None else "", _selection_key(sel))
        hit = self._memo.get(key)
        if hit is not None:
            self._memo.move_to_end(key)
            return hit
        cands = self.candidates(sel, dtype)
        best = min(cands, key=lambda c: (c.seconds, c.replica is not None))
        best.saved = cands[0].seconds - best.seconds
        self._memo[key] = best
        if len(self._memo) > MEMO:
            self._memo.popitem(last=False)
        return best


#: Decisions remembered per dataset and open file.
MEMO = 1024


def _selection_key(sel: Selection) -> str:
    """Identifies a selection with its result shape (equal keys read the same)."""
    text = sel.to_json()
    if sel.kind == "points":
        assert sel.points is not None
        text += hashlib.sha1(np.ascontiguousarray(sel.points).tobytes()).hexdigest()
    return text
