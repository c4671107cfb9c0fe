"""The layout decision for one read of a dataset, made by the layout core
(``patio-layout``'s ``Decider`` through ``patio._native.LayoutDecider``): every eligible
way to serve it (the original, always; each current replica that holds the data; a
split read taking part from a partial replica and the rest from the original; several
concatenated replicas combined), each priced by eq 3.1 on its flattened byte extents,
the cheapest chosen and remembered per selection. The eligibility rules are stated in
the core (``crates/patio-layout/src/decide.rs``).

This module turns the core's plan into the h5py reads that execute it: every plan
returns exactly what h5py returns on the original for the same arguments.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import h5py
import numpy as np

from patio._native import LayoutDecider

from . import cost as costmodel
from .flatten import Extents, native_layout
from .h5sel import product_axes, read, read_flat, read_permuted
from .replicas import Replica
from .selection import Selection, product
from .storage import Layout, UnsupportedLayout, physical_layout


class _Price:
    """The original's modelled seconds for one selection, priced when first asked for
    (a decision without replicas has nothing to weigh it against)."""

    __slots__ = ("decider", "sel", "value")

    def __init__(self, decider: Any, sel: Selection) -> None:
        self.decider, self.sel, self.value = decider, sel, None

    def __call__(self) -> float:
        if self.value is None:
            self.value = float(self.decider.candidates(self.sel.native())[0][1])
        return self.value


@dataclass
class Candidate:
    """One way to serve a read: its name, modelled seconds and how to do it."""

    name: str
    replica: Replica | None
    #: Modelled seconds (or, for an unpriced original, what prices it on demand).
    cost: float | _Price
    run: Callable[[], np.ndarray]
    #: The parts as priced: the layout of each copy read and the core's selection in it.
    priced: list[tuple[Layout, Any]] = field(default_factory=list)
    #: Modelled seconds saved against the original (set by :meth:`Decider.choose`).
    saved: float = 0.0
    #: Where each part comes from (None: the original).
    parts: list[Replica | None] = field(default_factory=list)
    #: An unpriced original's layout and request (``priced`` is then made from them
    #: when the extents are asked for).
    request: tuple[Layout, Selection] | None = None

    @property
    def seconds(self) -> float:
        return self.cost() if isinstance(self.cost, _Price) else self.cost

    @property
    def extents(self) -> list[Extents]:
        """Each part's sorted, merged byte extents (flattened on demand: the decision
        itself only prices them)."""
        if self.request is not None and not self.priced:
            self.priced = [(self.request[0], self.request[1].native())]
        return [Extents(*native_layout(lay).flatten_sorted(nsel)) for lay, nsel in self.priced]

    @property
    def sources(self) -> list[Replica | None]:
        """The copy each entry of ``extents`` is read from (None: the original)."""
        return self.parts


def _holds(rep: Replica) -> tuple[Any, ...] | None:
    """What ``rep`` holds, as the layout core describes it (None: serves nothing)."""
    if rep.kind in ("chunked", "zorder", "hilbert"):
        return ("everything",)
    if rep.kind == "transposed" and rep.perm is not None:
        return ("transposed", list(rep.perm))
    if rep.axes_sets is not None:
        perm = rep.perm or tuple(range(len(rep.axes_sets)))
        return ("product", [np.asarray(a, np.int64) for a in rep.axes_sets], list(perm))
    if rep.linear is not None:
        return ("points", np.asarray(rep.linear, np.int64))
    return None


class Decider:
    """Chooses among the original and the replicas of one dataset. Replicas whose
    layout cannot be read are left out and noted (``row.note``)."""

    def __init__(self, original: h5py.Dataset, replicas: list[Replica], model: Any,
                 consts: costmodel.Constants) -> None:
        self.original = original
        self.model = model
        self.consts = consts
        self._orig_layout = physical_layout(original)
        self._layouts: dict[int, Layout] = {}
        self.replicas: list[Replica] = []
        natives = []
        for rep in replicas:
            holds = _holds(rep)
            if holds is None:
                continue
            try:
                lay = physical_layout(rep.dataset())
            except (OSError, KeyError, UnsupportedLayout) as e:
                rep.row.note = f"unreadable: {e}"
                continue
            self._layouts[rep.row.id] = lay
            self.replicas.append(rep)
            natives.append((native_layout(lay), holds))
        #: The core's view of the original and of each replica (layout, what it holds).
        self.native_original = native_layout(self._orig_layout)
        self.natives: list[tuple[Any, tuple[Any, ...]]] = natives
        self._native = LayoutDecider(self.native_original, natives, model, consts.as_tuple())

    def decision_seconds(self, sels: list[Selection],
                         extra: tuple[Any, tuple[Any, ...]] | None = None,
                         repeat: int = 3) -> list[float]:
        """The seconds the core takes to decide each selection anew (best of ``repeat``,
        so a busy moment does not count), among the original and these replicas and,
        when given, one more (``(StoredLayout, holds)``, e.g. a model of a replica not
        built yet): what a decision costs a read, and what a replica would add to it."""
        natives = self.natives + ([extra] if extra is not None else [])
        d = LayoutDecider(self.native_original, natives, self.model, self.consts.as_tuple())
        out = []
        for sel in sels:
            nsel = sel.native()
            best = float("inf")
            for _ in range(repeat):
                d.forget()
                t0 = time.perf_counter()
                d.choose(nsel)
                best = min(best, time.perf_counter() - t0)
            out.append(best)
        return out

    def layout_of(self, rep: Replica | None) -> Layout:
        return self._orig_layout if rep is None else self._layouts[rep.row.id]

    def candidates(self, sel: Selection, dtype: Any = None) -> list[Candidate]:
        """Every eligible candidate, the original first."""
        return [self._candidate(sel, plan, secs, parts, dtype)
                for plan, secs, parts in self._native.candidates(sel.native())]

    def choose(self, sel: Selection, dtype: Any = None) -> Candidate:
        """The cheapest eligible candidate (the original on ties); the core remembers
        the decision per selection. Without a replica the original is the only
        candidate: chosen unpriced (its ``seconds`` priced when first asked for)."""
        if not self.replicas:
            orig = self.original
            return Candidate("original", None, _Price(self._native, sel),
                             lambda: read(orig, sel, dtype), parts=[None],
                             request=(self._orig_layout, sel))
        plan, secs, parts, saved = self._native.choose(sel.native())
        best = self._candidate(sel, plan, secs, parts, dtype)
        best.saved = saved
        return best

    # -- plans -> h5py reads -----------------------------------------------------------
    def _candidate(self, sel: Selection, plan: tuple[Any, ...], seconds: float,
                   parts: list[tuple[int | None, Any]], dtype: Any) -> Candidate:
        sources = [None if i is None else self.replicas[i] for i, _ in parts]
        priced = [(self.layout_of(src), nsel) for src, (_, nsel) in zip(sources, parts)]
        kind = plan[0]
        orig = self.original
        if kind == "original":
            return Candidate("original", None, seconds, lambda: read(orig, sel, dtype), priced,
                             parts=sources)
        if kind == "combined":
            reps = [self.replicas[i] for i in plan[1]]
            ids = "+".join(f"#{r.row.id}" for r in reps)
            name = f"combined({ids}{'+original' if plan[3] else ''})"
            return Candidate(name, reps[0], seconds,
                             lambda: self._run_combined(sel, reps, plan[2], dtype), priced,
                             parts=sources)
        rep = self.replicas[plan[1]]
        name = f"{rep.kind}#{rep.row.id}"
        run: Callable[[], np.ndarray]
        if kind == "whole" and rep.kind == "transposed":
            perm = rep.perm
            assert perm is not None

            def run_t() -> np.ndarray:
                got = read_permuted(rep.dataset(), sel, perm, dtype)
                assert got is not None
                return got
            run = run_t
        elif kind == "whole":
            def run_whole() -> np.ndarray:
                return read(rep.dataset(), sel, dtype)
            run = run_whole
        elif kind == "sub":
            def run_sub() -> np.ndarray:
                return self._run_sub(sel, rep, dtype)
            run = run_sub
        elif kind == "split":
            name += "+original"

            def run_split() -> np.ndarray:
                return self._run_split(sel, rep, plan[2], dtype)
            run = run_split
        else:  # points
            name += "+original" if plan[2] else ""

            def run_points() -> np.ndarray:
                return self._run_points(sel, rep, dtype)
            run = run_points
        return Candidate(name, rep, seconds, run, priced, parts=sources)

    def _run_sub(self, sel: Selection, rep: Replica, dtype: Any) -> np.ndarray:
        sets = rep.axes_sets
        axes = product_axes(sel)
        assert sets is not None and axes is not None
        perm = rep.perm or tuple(range(len(sets)))
        pos = [np.searchsorted(s, a) for s, a in zip(sets, axes)]
        got = read_permuted(rep.dataset(), product(tuple(len(s) for s in sets), pos), perm,
                            dtype)
        assert got is not None
        return got.reshape(sel.out_shape)

    def _run_split(self, sel: Selection, rep: Replica, k: int, dtype: Any) -> np.ndarray:
        sets = rep.axes_sets
        axes = product_axes(sel)
        assert sets is not None and axes is not None
        perm = rep.perm or tuple(range(len(sets)))
        inside = np.isin(axes[k], sets[k], assume_unique=True)
        pos = [np.searchsorted(s, a) for s, a in zip(sets, axes)]
        pos[k] = np.searchsorted(sets[k], axes[k][inside])
        rest_axes = list(axes)
        rest_axes[k] = axes[k][~inside]
        a = read_permuted(rep.dataset(), product(tuple(len(s) for s in sets), pos), perm, dtype)
        assert a is not None
        b = read(self.original, product(tuple(self.original.shape), rest_axes), dtype)
        shape = tuple(len(x) for x in axes)
        out = np.empty(shape, dtype=a.dtype)
        index: list[Any] = [slice(None)] * len(shape)
        index[k] = np.flatnonzero(inside)
        out[tuple(index)] = a
        index[k] = np.flatnonzero(~inside)
        out[tuple(index)] = b
        return out.reshape(sel.out_shape)

    def _run_points(self, sel: Selection, rep: Replica, dtype: Any) -> np.ndarray:
        linear = rep.linear
        assert linear is not None
        want = sel.linear_indices()
        pos = np.searchsorted(linear, want)
        pos_c = np.minimum(pos, max(len(linear) - 1, 0))
        held = (linear[pos_c] == want) if len(linear) else np.zeros(len(want), bool)
        order = np.argsort(pos[held], kind="stable")
        rep_sel = Selection.from_points((len(linear),), pos[held][order][:, None])
        a = read_flat(rep.dataset(), rep_sel, dtype)
        out = np.empty(len(want), dtype=a.dtype)
        out[np.flatnonzero(held)[order]] = a
        if not held.all():
            assert sel.points is not None
            rest = Selection.from_points(sel.shape, sel.points[~held])
            out[~held] = read_flat(self.original, rest, dtype)
        return out.reshape(sel.out_shape)

    def _run_combined(self, sel: Selection, reps: list[Replica], k: int,
                      dtype: Any) -> np.ndarray:
        """The replicas in the core's greedy order, each reading what it adds along
        axis ``k``; the original the rest."""
        axes = product_axes(sel)
        assert axes is not None
        shape = tuple(len(a) for a in axes)
        missing = np.ones(len(axes[k]), bool)
        out: np.ndarray | None = None
        plans: list[tuple[Replica | None, np.ndarray]] = []
        for rep in reps:
            assert rep.axes_sets is not None
            gain = missing & np.isin(axes[k], rep.axes_sets[k], assume_unique=True)
            plans.append((rep, gain))
            missing &= ~gain
        if missing.any():
            plans.append((None, missing))
        for rep, mask in plans:
            if rep is None:
                rest = list(axes)
                rest[k] = axes[k][mask]
                got = read(self.original, product(tuple(self.original.shape), rest), dtype)
            else:
                sets = rep.axes_sets
                assert sets is not None
                pos = [np.searchsorted(s_, a) for s_, a in zip(sets, axes)]
                pos[k] = np.searchsorted(sets[k], axes[k][mask])
                got = read_permuted(rep.dataset(), product(tuple(len(s_) for s_ in sets), pos),
                                    rep.perm or tuple(range(len(sets))), dtype)
            assert got is not None
            if out is None:
                out = np.empty(shape, dtype=got.dtype)
            index: list[Any] = [slice(None)] * len(shape)
            index[k] = np.flatnonzero(mask)
            out[tuple(index)] = got.reshape(
                tuple(int(mask.sum()) if j == k else n for j, n in enumerate(shape)))
        assert out is not None
        return out.reshape(sel.out_shape)
