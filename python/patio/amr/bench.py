"""``patio bench amr``: AMR box layouts on the thesis' three datasets, under the striped
storage model and on the real disk (results: docs/BENCHMARKS.md).

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

Every row says its ``storage``. With ``--storage real`` (or ``both``) each dataset also
gets a row read on the real disk (:mod:`patio._realdisk`): ``--real-clients`` processes,
each its own time-step file of the dataset on local storage (``--real-dir``), read at
once and cold, once per layout and once contiguously, ``--reps`` times, medians. The
files hold the dataset at the largest scale ``1/2^k`` of the thesis' bytes per cell that
keeps all of them within ``--real-bytes`` (the finest box size is reported: the regime
changes with it). A layout's extents are read from the same files (the disk sees the
offsets, not what the bytes mean). The row gives the real speed-ups, the model's for the
same scale and clients (``model_read_s``, simulated on ``--store``), and ``model_error``:
per layout, the modelled speed-up over the real one.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from patio._cli_args import StoreOptionError, add_store_options, store_model_of
from patio._native import StorageModel
from patio._realdisk import ClientRead, run_clients, write_files
from patio.amr import reorder
from patio.amr.chombo import Hierarchy
from patio.amr.model import (
    Weights,
    advise,
    file_offsets,
    measure,
    merge_extents,
    predict,
    probe,
    sample_queries,
    sampling_level,
    selected,
)
from patio.amr.order import LAYOUTS, order_boxes
from patio.amr.synth import DATASETS, geometry, geometry_hierarchy, queries
from patio.layout.planner import parse_budget

PROG = "patio bench amr"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def level_orders(hier: Hierarchy, layout: str, rpc: int) -> list[np.ndarray]:
    """Every level's permutation, in level order."""
    return list(reorder.level_orders(hier, layout, rpc).values())


def scaled_hierarchy(name: str, scale: Fraction, chombo_r: int = 8) -> tuple[Hierarchy, int]:
    """The dataset's hierarchy with ``scale`` x the thesis-scale bytes per cell, and the
    bytes per cell."""
    g = geometry(name, chombo_r)
    cell = max(1, round(g.model_components * 8 * scale))
    return geometry_hierarchy(g, components=1, itemsize=cell), cell


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


def real_read_s(
    per_layout: dict[str, list[tuple[np.ndarray, np.ndarray]]],
    clients: int,
    file_bytes: int,
    work: Path,
    reps: int,
) -> tuple[dict[str, float], float]:
    """The real-disk counterpart of :func:`simulate_clients` for every layout of
    ``per_layout`` and ``contiguous``: median seconds of ``reps`` cold runs (every rep
    runs each once, starting one later in the order than the rep before), and the largest page-cache fraction left by a drop."""
    files = [work / f"step{c}.bin" for c in range(clients)]
    write_files(files, file_bytes)
    names = [*per_layout, "contiguous"]
    times: dict[str, list[float]] = {k: [] for k in names}
    resident = 0.0
    for rep in range(reps):
        for layout in names[rep % len(names):] + names[: rep % len(names)]:  # rotated
            src = per_layout["original" if layout == "contiguous" else layout]
            reads = []
            for c in range(clients):
                o, n = src[c % len(src)]
                if layout == "contiguous":
                    o, n = np.array([0], np.int64), np.array([int(n.sum())], np.int64)
                else:
                    o, n = merge_extents(o, n)
                reads.append(ClientRead(files[c], o, n))
            r = run_clients(reads)
            times[layout].append(r["seconds"])
            resident = max(resident, r["resident"])
    return {k: float(np.median(v)) for k, v in times.items()}, resident


def real_scale(name: str, clients: int, budget: int) -> Fraction:
    """The largest ``1/2^k`` (at most 1) of the thesis' bytes per cell at which
    ``clients`` files of the dataset fit in ``budget`` bytes."""
    thesis = sum(int(lev.box_bytes.sum()) for lev in geometry_hierarchy(geometry(name)).levels)
    scale = Fraction(1)
    while clients * thesis * scale > budget and scale > Fraction(1, 1 << 30):
        scale /= 2
    return scale


def run_real(
    name: str, model: StorageModel, clients: int, budget: int, work: Path, reps: int
) -> dict[str, Any]:
    """The dataset's real-disk row (see the module text)."""
    scale = real_scale(name, clients, budget)
    hier, cell = scaled_hierarchy(name, scale)
    rpc = int(model.params()["rpc_size"])
    qs = queries(name, geometry(name), 0)
    per_layout = {
        layout: [region_extents(hier, level_orders(hier, layout, rpc), lo, hi) for lo, hi in qs]
        for layout in LAYOUTS
    }
    total = sum(int(lev.box_bytes.sum()) for lev in hier.levels)
    read_s, resident = real_read_s(per_layout, clients, total, work / name, reps)
    modelled = {k: simulate_clients(model, v, clients, total) for k, v in per_layout.items()}
    modelled["contiguous"] = simulate_clients(model, per_layout["original"], clients, total, True)
    speedup = {k: read_s["original"] / v for k, v in read_s.items()}
    model_speedup = {k: modelled["original"] / v for k, v in modelled.items()}
    return {
        "name": name,
        "storage": "real",
        "scale": str(scale),
        "cell_bytes": cell,
        "finest_box_bytes": int(np.mean(hier.levels[-1].box_bytes)),
        "bytes": total,
        "clients": clients,
        "reps": reps,
        "read_s": read_s,
        "resident": resident,
        "speedup": speedup,
        "model_read_s": modelled,
        "model_speedup": model_speedup,
        "model_error": {k: model_speedup[k] / speedup[k] for k in speedup},
    }


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
        "storage": "model",
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


def parse_size(text: str) -> int:
    """``--real-bytes``: bytes with a unit (``2GiB``, ``500M``)."""
    b = parse_budget(text)
    if "bytes" not in b:
        raise ValueError(f"--real-bytes {text!r}: expected bytes (e.g. 2GiB, 500M)")
    return int(b["bytes"])


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
    add_store_options(p, help="striped storage model preset of the simulated reads: lustre, "
                      "hdd, ssd, or probed (this machine's, `patio store probe`); default lustre")
    p.add_argument("--storage", choices=("model", "real", "both"), default="model",
                   help="the storage model, the real local disk (clients as processes, page "
                   "cache dropped and checked), or both; default model")
    p.add_argument("--real-clients", type=int, default=8, metavar="N",
                   help="client processes of a real-disk row (default 8)")
    p.add_argument("--real-bytes", default="2GiB", metavar="SIZE",
                   help="most bytes the real-disk files of one dataset may take (default 2GiB; "
                   "the dataset is scaled down to fit)")
    p.add_argument("--real-dir", metavar="DIR",
                   help="directory for the real-disk files, on the disk to measure (default: "
                   "a new directory under $TMPDIR, removed afterwards)")
    p.add_argument("--reps", type=int, default=3, help="real-disk runs per layout (median)")
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
        if d["storage"] == "real":
            continue
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
    real = [d for d in res["datasets"] if d["storage"] == "real"]
    if real:
        print("real disk (clients as processes, cold; model = the same reads simulated):")
        for d in real:
            rs = d["read_s"]
            print(
                f"{d['name']:9s} scale {d['scale']:>6s}, {d['finest_box_bytes'] / 1024:.0f} KiB "
                f"finest boxes, {d['clients']} clients, resident after drop "
                f"{d['resident']:.0%}"
            )
            print(f"{'':9s} {'seconds':>28s} " + " ".join(f"{rs[c]:9.3f}s" for c in cols))
            print(
                f"{'':9s} {'real speed-up':>28s} "
                + " ".join(f"{d['speedup'][c]:9.2f}x" for c in cols)
            )
            print(
                f"{'':9s} {'model speed-up':>28s} "
                + " ".join(f"{d['model_speedup'][c]:9.2f}x" for c in cols)
            )
    print("ordering time (s):")
    for o in res["ordering_s"]:
        print(f"  {o['boxes']:6d} boxes  {o['layout']:9s} {o['seconds']:.4f}")


def main(argv: list[str] | None = None) -> int:
    a = build_parser().parse_args(argv)
    if a.clients < 1 or a.advise_queries < 1 or a.model_queries < 1:
        print(f"{PROG}: error: --clients and the query counts must be at least 1", file=sys.stderr)
        return 2
    if a.real_clients < 1 or a.reps < 1:
        print(f"{PROG}: error: --real-clients and --reps must be at least 1", file=sys.stderr)
        return 2
    try:
        model = store_model_of(a)
        budget = parse_size(a.real_bytes)
    except (StoreOptionError, ValueError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    w = probe(model)
    datasets = list(dict.fromkeys(a.dataset or list(DATASETS)))
    res: dict[str, Any] = {"store": model.params(), "weights": w.as_dict(), "datasets": []}
    if a.storage in ("model", "both"):
        for name in datasets:
            print(f"running {name} on the model ...", file=sys.stderr, flush=True)
            res["datasets"].append(
                run_dataset(name, model, w, a.clients, a.advise_queries, a.model_queries)
            )
    if a.storage in ("real", "both"):
        work = Path(a.real_dir) if a.real_dir else Path(tempfile.mkdtemp(prefix="patio-bench-amr-"))
        try:
            for name in datasets:
                print(f"running {name} on the real disk in {work} ...", file=sys.stderr, flush=True)
                res["datasets"].append(
                    run_real(name, model, a.real_clients, budget, work, a.reps)
                )
        except OSError as e:
            print(f"{PROG}: error: {e}", file=sys.stderr)
            return 1
        finally:
            if not a.real_dir:
                shutil.rmtree(work, ignore_errors=True)
    res["ordering_s"] = ordering_times(model)
    if a.json:
        print(json.dumps(res))
    else:
        _table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
