"""``patio bench amr``: AMR box layouts on the thesis' three datasets, under the striped
storage model (results: docs/BENCHMARKS.md).

For each dataset (:mod:`patio.amr.synth`; box bytes at the thesis' scale, geometry only,
no file is written) and each layout (original, Morton, Hilbert, cluster - every level
ordered by its own geometry, levels stored one after the other):

* ``read_s``: simulated seconds for ``--clients`` clients reading at once, client ``c``
  reading query ``c mod Q`` of the thesis' query shapes on every level (one request of
  merged extents) from its own time-step file (files laid out one after the other);
  ``contiguous`` is the same bytes per client as one contiguous extent;
* ``chosen``: what ``auto`` picks (:func:`patio.amr.model.advise`, sampling capped at
  ``--advise-queries`` queries);
* ``model_error``: eq 4.1's prediction against the simulated single-client time of
  ``--model-queries`` sampled queries (all levels) under every layout: mean, standard
  deviation and maximum of ``|predicted - simulated| / simulated``.

``ordering_s`` times each layout's ordering of the finest BISICLES level (3,262 boxes) and
of the finest level of the Chombo benchmark at ``r = 8`` (98,304 boxes).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

import numpy as np

from patio._native import StorageModel
from patio.amr import reorder
from patio.amr.chombo import Hierarchy
from patio.amr.model import (
    Weights,
    advise,
    file_offsets,
    measure,
    predict,
    probe,
    sample_queries,
    sampling_level,
    selected,
    store,
)
from patio.amr.order import LAYOUTS, order_boxes
from patio.amr.synth import DATASETS, geometry, geometry_hierarchy, queries

PROG = "patio bench amr"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def level_orders(hier: Hierarchy, layout: str, rpc: int) -> list[np.ndarray]:
    """Every level's permutation, in level order."""
    return list(reorder.level_orders(hier, layout, rpc).values())


def level_bases(hier: Hierarchy) -> list[int]:
    """Byte offset of every level's data array (levels stored one after the other)."""
    sizes = [int(lev.box_bytes.sum()) for lev in hier.levels]
    return [int(x) for x in np.concatenate([[0], np.cumsum(sizes)[:-1]])]


def region_extents(
    hier: Hierarchy, perms: list[np.ndarray], lo: np.ndarray, hi: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """File extents of the boxes of every level that a level-0 region touches."""
    offs, lens = [], []
    bases = level_bases(hier)
    l0 = hier.levels[0]
    for lev, perm, base in zip(hier.levels, perms, bases):
        r = (lev.domain_hi - lev.domain_lo + 1) // (l0.domain_hi - l0.domain_lo + 1)
        sel = selected(lev, np.asarray(lo) * r, (np.asarray(hi) + 1) * r - 1)
        offs.append(file_offsets(lev, perm, base)[sel])
        lens.append(lev.box_bytes[sel])
    return np.concatenate(offs).astype(np.int64), np.concatenate(lens).astype(np.int64)


def simulate_clients(
    model: StorageModel,
    per_query: list[tuple[np.ndarray, np.ndarray]],
    clients: int,
    file_bytes: int,
    contiguous: bool = False,
) -> float:
    """Seconds for ``clients`` clients, client ``c`` reading query ``c mod Q`` from file ``c``."""
    reqs = []
    for c in range(clients):
        o, n = per_query[c % len(per_query)]
        base = c * file_bytes
        if contiguous:
            reqs.append([(np.array([base], np.uint64), np.array([int(n.sum())], np.int64))])
            continue
        s = np.argsort(o, kind="stable")
        reqs.append([((o[s] + base).astype(np.uint64), n[s])])
    return float(model.simulate(reqs)["seconds"])


def model_error(
    model: StorageModel,
    w: Weights,
    hier: Hierarchy,
    perms: dict[str, list[np.ndarray]],
    n: int,
    seed: int,
) -> dict[str, Any]:
    """Eq 4.1 against the simulator on ``n`` sampled all-level queries, every layout."""
    li = sampling_level(hier)
    lev = hier.levels[li]
    l0 = hier.levels[0]
    r = (lev.domain_hi - lev.domain_lo + 1) // (l0.domain_hi - l0.domain_lo + 1)
    qs = sample_queries(lev, n, np.random.default_rng(seed + 1))
    errs: dict[str, list[float]] = {}
    for name, perm in perms.items():
        e = []
        for qlo, qhi in qs:
            o, b = region_extents(hier, perm, qlo // r, qhi // r)
            meas = measure(model, o, b)
            e.append(abs(predict(model, w, o, b) - meas) / meas)
        errs[name] = e
    allv = np.concatenate([np.asarray(v) for v in errs.values()])
    return {
        "queries": n,
        "mean": float(allv.mean()),
        "std": float(allv.std()),
        "max": float(allv.max()),
        "per_layout": {k: float(np.mean(v)) for k, v in errs.items()},
    }


def run_dataset(
    name: str,
    model: StorageModel,
    w: Weights,
    clients: int,
    advise_queries: int,
    model_queries: int,
    seed: int = 0,
) -> dict[str, Any]:
    g = geometry(name)
    hier = geometry_hierarchy(g)
    rpc = int(model.params()["rpc_size"])
    qs = queries(name, g, seed)
    perms = {layout: level_orders(hier, layout, rpc) for layout in LAYOUTS}
    total = sum(int(lev.box_bytes.sum()) for lev in hier.levels)
    read_s: dict[str, float] = {}
    per_query: list[tuple[np.ndarray, np.ndarray]] = []
    for layout in LAYOUTS:
        per_query = [region_extents(hier, perms[layout], lo, hi) for lo, hi in qs]
        read_s[layout] = simulate_clients(model, per_query, clients, total)
    read_s["contiguous"] = simulate_clients(model, per_query, clients, total, contiguous=True)
    nq = min(hier.levels[sampling_level(hier)].n, advise_queries)
    adv = advise(hier, model, nq, seed, w)
    return {
        "name": name,
        "boxes": g.counts,
        "bytes": total,
        "queries": len(qs),
        "selected_bytes": [int(n.sum()) for _, n in per_query],
        "clients": clients,
        "chosen": adv["chosen"],
        "advise_costs": adv["costs"],
        "advise_queries": nq,
        "read_s": read_s,
        "model_error": model_error(model, w, hier, perms, model_queries, seed),
    }


def ordering_times(model: StorageModel, reps: int = 3) -> list[dict[str, Any]]:
    """Median seconds of each layout's ordering at 3,262 and 98,304 boxes."""
    rpc = int(model.params()["rpc_size"])
    out = []
    for name in ("bisicles", "chombo"):
        hier = geometry_hierarchy(geometry(name))
        lev = hier.levels[-1]
        for layout in LAYOUTS:
            ts = []
            for _ in range(reps):
                t = time.perf_counter()
                order_boxes(lev.lo, lev.hi, lev.box_bytes, layout, lev.domain_lo, rpc,
                        lev.domain_hi)
                ts.append(time.perf_counter() - t)
            out.append({"boxes": lev.n, "layout": layout, "seconds": float(np.median(ts))})
    return out


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description=__doc__.split("\n\n")[0] if __doc__ else None)
    p.add_argument(
        "--dataset",
        choices=DATASETS,
        action="append",
        help="dataset to run (repeatable; default all three)",
    )
    p.add_argument("--clients", type=int, default=32, help="clients reading at once")
    p.add_argument(
        "--advise-queries",
        type=int,
        default=256,
        help="cap on the sampled queries of the layout choice",
    )
    p.add_argument(
        "--model-queries", type=int, default=25, help="sampled queries of the model-error check"
    )
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return p


def _table(res: dict[str, Any]) -> None:
    st = res["store"]
    print(
        f"store: {st['targets']} targets, {st['stripe_size'] >> 10} KiB stripes, "
        f"{st['rpc_size'] >> 10} KiB RPCs, {st['bandwidth'] / 1e6:.0f} MB/s per target"
    )
    cols = ("original", "morton", "hilbert", "cluster", "contiguous")
    print(
        f"{'dataset':9s} {'boxes per level':>28s} "
        + " ".join(f"{c:>10s}" for c in cols)
        + "  chosen    model err"
    )
    for d in res["datasets"]:
        rs = d["read_s"]
        print(
            f"{d['name']:9s} {'/'.join(map(str, d['boxes'])):>28s} "
            + " ".join(f"{rs[c]:9.3f}s" for c in cols)
            + f"  {d['chosen']:9s} {d['model_error']['mean']:.1%}"
        )
        print(
            f"{'':9s} {'speed-up vs original':>28s} "
            + " ".join(f"{rs['original'] / rs[c]:9.2f}x" for c in cols)
        )
        print(
            f"{'':9s} {'% of contiguous':>28s} "
            + " ".join(f"{rs['contiguous'] / rs[c]:9.0%} " for c in cols)
        )
    print("ordering time (s):")
    for o in res["ordering_s"]:
        print(f"  {o['boxes']:6d} boxes  {o['layout']:9s} {o['seconds']:.4f}")


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    if a.clients < 1 or a.advise_queries < 1 or a.model_queries < 1:
        print(f"{PROG}: error: --clients and the query counts must be at least 1", file=sys.stderr)
        return 2
    model = store("lustre")
    w = probe(model)
    datasets = a.dataset or list(DATASETS)
    res: dict[str, Any] = {"store": model.params(), "weights": w.as_dict(), "datasets": []}
    for name in dict.fromkeys(datasets):
        if not a.json:
            print(f"running {name} ...", file=sys.stderr, flush=True)
        res["datasets"].append(
            run_dataset(name, model, w, a.clients, a.advise_queries, a.model_queries)
        )
    res["ordering_s"] = ordering_times(model)
    if a.json:
        print(json.dumps(res))
    else:
        _table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
