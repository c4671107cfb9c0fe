"""AMR box layouts across regimes: box size x clients x store (issue 25), on the striped
storage model or on the real disk.

For each dataset (``patio.amr.synth`` geometry; box bytes scaled by ``--scales`` against
the thesis-scale bytes per cell of ``patio bench amr``), each store and each client count,
the same experiment as ``patio bench amr``: client ``c`` reads query ``c mod Q`` of the
thesis' query shapes on every level from its own time-step file, once per layout
(original, Morton, Hilbert, cluster) and once as one contiguous extent of the same bytes.
Per cell: the best reordering against the original, the cluster layout's share of the
contiguous read time (throughput ratio), and the original's seek share
``1 - contiguous / original`` (how far the original read is from bandwidth-bound).

Stores:

* ``lustre8``: the ``lustre`` preset (8 targets, 1 MiB stripes and RPCs, 500 MB/s per
  target, 0.2/0.5/1/2 ms seeks, 0.3 ms per request); every file striped over all 8 targets,
  files one after the other (``patio bench amr``'s store).
* ``wide248``: 248 targets with the same per-target parameters and the thesis' placement
  (Cori's 248 OSTs; eq 4.1's text): a file of at most 10 GB on one target (file ``c`` on
  target ``c mod 248``), a larger one striped over all 248 in 1 MiB stripes.
* ``cori248``: ``wide248`` at 3 GB/s per target (Cori's 744 GB/s peak over 248 OSTs).
* ``cori248rpc``: ``cori248`` fetching every 1 MiB RPC a read touches whole
  (``whole_rpc``), the thesis' premise that an RPC-sized cluster is read entirely even
  when a query cuts it.

* ``real`` (``--storage real``): this machine's disk, the clients as processes reading at
  once, cold (``patio bench amr --storage real``'s runner, ``patio._realdisk``); cells
  whose files would exceed ``--real-bytes`` are left out. ``chosen`` is then eq 4.1 on
  ``--model`` (``probed`` by default: this machine's fitted model), and each cell has the
  same reads simulated on it (``model_read_s``) and ``model_error``: the modelled
  speed-up of the layout fastest on the disk over its real speed-up.

The layout choice (``chosen``) is eq 4.1 over ``--advise-queries`` sampled queries, with
weights probed on the file's own view of the store (one target under stripe count 1).

    python bench/amr_regimes.py                       # table
    python bench/amr_regimes.py --json > sweep.json   # one JSON object
    python bench/amr_regimes.py --plot docs/amr_regimes.png
    python bench/amr_regimes.py --from sweep.json --plot out.png   # re-render
    python bench/amr_regimes.py --storage real --datasets bisicles --scales 1/64,1/16,1/4 \
        --clients 1,4,16 --json > real.json
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

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

from patio._native import StorageModel
from patio.amr.bench import (
    level_orders,
    parse_size,
    real_read_s,
    region_extents,
    scaled_hierarchy,
    simulate_clients,
)
from patio.amr.chombo import Hierarchy
from patio.amr.model import choose, probe, query_costs, sample_queries, sampling_level
from patio.amr.order import LAYOUTS
from patio.amr.synth import geometry, queries

PROG = "amr_regimes"
STORES = ("lustre8", "wide248", "cori248", "cori248rpc")
#: The thesis' figures per dataset: (speed-up of the best layout, cluster % of contiguous).
#: The thesis' placement: files up to 10 GB on one target, larger ones on all.
ONE_TARGET_MAX = 10 * 10**9
THESIS = {"bisicles": (1.5, 0.88), "chombo": (1.3, 0.94)}


def make_store(name: str, file_bytes: int) -> tuple[StorageModel, StorageModel, bool]:
    """(simulated store, one-file view for the probe and eq 4.1, one target per file)."""
    base = StorageModel.preset("lustre")
    if name == "lustre8":
        return base, base, False
    rpc = int(base.params()["rpc_size"])
    own = file_bytes <= ONE_TARGET_MAX
    stripe = -(-file_bytes // rpc) * rpc if own else rpc
    bw = 3e9 if name.startswith("cori") else float(base.params()["bandwidth"])
    whole = name == "cori248rpc"
    sim = base.with_params(targets=248, stripe_size=stripe, bandwidth=bw, whole_rpc=whole)
    view = base.with_params(targets=1 if own else 248, bandwidth=bw, whole_rpc=whole)
    return sim, view, own


def advise_choice(
    hier: Hierarchy, perms: dict[str, list[np.ndarray]], view: StorageModel, n: int
) -> tuple[str, dict[str, float]]:
    """Eq 4.1 over ``n`` sampled queries on the sampling level, the thesis' rule."""
    li = sampling_level(hier)
    lev = hier.levels[li]
    qs = sample_queries(lev, min(n, lev.n), np.random.default_rng(0))
    costs = query_costs(view, probe(view), lev, {k: v[li] for k, v in perms.items()}, qs)
    return choose(costs), costs


def cell_row(
    name: str,
    store: str,
    placement: str,
    scale: Fraction,
    cell: int,
    fin: np.ndarray,
    total: int,
    clients: int,
    ext: dict[str, list[tuple[np.ndarray, np.ndarray]]],
    rs: dict[str, float],
    chosen: str,
    storage: str,
) -> dict[str, Any]:
    best = min(LAYOUTS[1:], key=lambda k: rs[k])
    return {
        "dataset": name,
        "store": store,
        "placement": placement,
        "scale": str(scale),
        "cell_bytes": cell,
        "finest_box_bytes": int(np.mean(fin)),
        "file_bytes": total,
        "clients": clients,
        "selected_bytes_mean": float(np.mean([int(n.sum()) for _, n in ext["original"]])),
        "read_s": rs,
        "best": best,
        "best_speedup": rs["original"] / rs[best],
        "cluster_of_contiguous": rs["contiguous"] / rs["cluster"],
        "best_of_contiguous": rs["contiguous"] / rs[best],
        "seek_share": 1.0 - rs["contiguous"] / rs["original"],
        "chosen": chosen,
        "storage": storage,
    }


def real_cells(
    a: argparse.Namespace,
    name: str,
    scale: Fraction,
    hier: Hierarchy,
    cell: int,
    total: int,
    perms: dict[str, list[np.ndarray]],
    ext: dict[str, list[tuple[np.ndarray, np.ndarray]]],
) -> list[dict[str, Any]]:
    """The cells of one dataset and scale on the real disk, one per client count whose
    files fit in ``--real-bytes`` (the files of the largest count, reused by the others)."""
    view = StorageModel.preset(a.model)
    chosen, _ = advise_choice(hier, perms, view, a.advise_queries)
    fits = [c for c in a.clients if c * total <= a.real_bytes]
    if len(fits) < len(a.clients):
        left = [c for c in a.clients if c not in fits]
        print(f"{name} x{scale}: the files of {left} clients would exceed --real-bytes "
              f"({total} bytes each); left out", file=sys.stderr)  # fmt: skip
    out = []
    work = a.real_dir / name / str(scale).replace("/", "_")
    for c in fits:
        rs, resident = real_read_s(ext, c, total, work, a.reps)
        row = cell_row(name, "real", "one file per client", scale, cell,
                       hier.levels[-1].box_bytes, total, c, ext, rs, chosen, "real")  # fmt: skip
        row["resident"] = resident
        modelled = {k: simulate_clients(view, ext[k], c, total) for k in LAYOUTS}
        model_speedup = modelled["original"] / modelled[row["best"]]
        row["model"] = a.model
        row["model_read_s"] = modelled
        row["model_error"] = model_speedup / row["best_speedup"]  # of the real best layout
        out.append(row)
        print(f"{name} x{scale} {c} clients: best {row['best']} {row['best_speedup']:.2f}x",
              file=sys.stderr, flush=True)  # fmt: skip
    shutil.rmtree(work, ignore_errors=True)
    return out


def run(a: argparse.Namespace) -> dict[str, Any]:
    cells: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for name in a.datasets:
        qs = queries(name, geometry(name, a.chombo_r), 0)
        for scale in a.scales:
            hier, cell = scaled_hierarchy(name, scale, a.chombo_r)
            total = sum(int(lev.box_bytes.sum()) for lev in hier.levels)
            fin = hier.levels[-1].box_bytes
            rpc = int(StorageModel.preset("lustre").params()["rpc_size"])
            perms = {layout: level_orders(hier, layout, rpc) for layout in LAYOUTS}
            ext = {
                layout: [region_extents(hier, perms[layout], lo, hi) for lo, hi in qs]
                for layout in LAYOUTS
            }
            if a.storage == "real":
                cells += real_cells(a, name, scale, hier, cell, total, perms, ext)
                continue
            for st in a.stores:
                sim, view, own = make_store(st, total)
                chosen, _ = advise_choice(hier, perms, view, a.advise_queries)
                stride = int(sim.params()["stripe_size"]) if own else total
                placement = "one target per file" if own else "striped over all targets"
                for c in a.clients:
                    rs = {
                        layout: simulate_clients(sim, ext[layout], c, stride) for layout in LAYOUTS
                    }
                    rs["contiguous"] = simulate_clients(
                        sim, ext["original"], c, stride, contiguous=True
                    )
                    cells.append(cell_row(name, st, placement, scale, cell, fin, total, c, ext,
                                          rs, chosen, "model"))  # fmt: skip
    return {
        "datasets": a.datasets,
        "chombo_r": a.chombo_r,
        "scales": [str(s) for s in a.scales],
        "clients": a.clients,
        "stores": ["real"] if a.storage == "real" else a.stores,
        "storage": a.storage,
        "advise_queries": a.advise_queries,
        "thesis": {k: {"speedup": v[0], "cluster_of_contiguous": v[1]} for k, v in THESIS.items()},
        "seconds": time.perf_counter() - t0,
        "cells": cells,
    }


def table(res: dict[str, Any]) -> None:
    print(
        f"{'dataset':9s} {'store':8s} {'scale':>5s} {'box KiB':>8s} {'clients':>7s} "
        f"{'orig s':>9s} {'best':>8s} {'speed-up':>8s} {'cluster%':>8s} {'seek%':>6s} chosen"
    )
    for c in res["cells"]:
        print(
            f"{c['dataset']:9s} {c['store']:8s} {c['scale']:>5s} "
            f"{c['finest_box_bytes'] / 1024:8.0f} {c['clients']:7d} "
            f"{c['read_s']['original']:9.4f} {c['best']:>8s} {c['best_speedup']:7.2f}x "
            f"{c['cluster_of_contiguous']:8.0%} {c['seek_share']:6.0%} {c['chosen']}"
        )
    print(f"({res['seconds']:.1f} s)")


def plot(res: dict[str, Any], out: str) -> None:
    """Heatmaps per dataset and store: best speed-up and cluster % of contiguous."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = [(d, s) for d in res["datasets"] for s in res["stores"]]
    scales, clients = res["scales"], res["clients"]
    fig, axes = plt.subplots(
        len(panels),
        2,
        figsize=(2.0 + 0.75 * len(clients) * 2, 0.6 + 1.9 * len(panels)),
        squeeze=False,
    )
    for row, (d, s) in enumerate(panels):
        sub = [c for c in res["cells"] if c["dataset"] == d and c["store"] == s]
        goal = res["thesis"][d]
        for col, (key, title, fmt, vmin, vmax, target) in enumerate(
            (
                ("best_speedup", "best layout / original", "{:.2f}x", 1.0, 3.0, goal["speedup"]),
                (
                    "cluster_of_contiguous",
                    "cluster % of contiguous",
                    "{:.0%}",
                    0.0,
                    1.0,
                    goal["cluster_of_contiguous"],
                ),
            )
        ):
            grid = np.full((len(scales), len(clients)), np.nan)
            for c in sub:
                grid[scales.index(c["scale"]), clients.index(c["clients"])] = c[key]
            ax = axes[row][col]
            ax.imshow(grid, cmap="viridis", vmin=vmin, vmax=vmax, aspect="auto", origin="lower")
            for i in range(len(scales)):
                for j in range(len(clients)):
                    v = grid[i, j]
                    if np.isnan(v):
                        continue
                    hit = v >= target
                    ax.text(
                        j,
                        i,
                        fmt.format(v),
                        ha="center",
                        va="center",
                        fontsize=7,
                        color="black" if v > (vmin + vmax) / 2 else "white",
                        fontweight="bold" if hit else "normal",
                    )
            kib = {c["scale"]: c["finest_box_bytes"] / 1024 for c in sub}
            ax.set_yticks(range(len(scales)))
            ax.set_yticklabels([f"x{x} ({kib.get(x, 0):.0f} KiB)" for x in scales], fontsize=7)
            ax.set_xticks(range(len(clients)))
            ax.set_xticklabels([str(x) for x in clients], fontsize=7)
            ax.set_xlabel("clients", fontsize=7)
            ax.set_title(f"{d}, {s}: {title} (bold: >= thesis)", fontsize=8)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def _fractions(text: str) -> list[Fraction]:
    return [Fraction(x) for x in text.split(",") if x]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--datasets", default="bisicles,chombo", help="comma-separated datasets")
    p.add_argument("--chombo-r", type=int, default=4, help="Chombo benchmark replication")
    p.add_argument(
        "--scales",
        type=_fractions,
        default=_fractions("1/27,1/4,1,4"),
        help="box-byte scales against the thesis scale",
    )
    p.add_argument("--clients", type=_ints, default=_ints("1,4,8,32,64,256"))
    p.add_argument("--stores", default=",".join(STORES), help="comma-separated stores")
    p.add_argument("--advise-queries", type=int, default=16)
    p.add_argument("--storage", choices=("model", "real"), default="model",
                   help="the striped storage model (--stores) or this machine's disk")
    p.add_argument("--real-bytes", default="8GiB",
                   help="most bytes of files one real-disk cell may write (default 8GiB)")
    p.add_argument("--real-dir", help="directory on the disk to measure (default: under $TMPDIR)")
    p.add_argument("--reps", type=int, default=3, help="real-disk runs per layout (median)")
    p.add_argument("--model", default="probed",
                   help="store preset eq 4.1 chooses with on the real disk (default probed)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    p.add_argument("--plot", help="write heatmaps to this PNG")
    p.add_argument("--from", dest="src", help="re-render a saved --json instead of running")
    a = p.parse_args(argv)
    a.datasets = [d for d in a.datasets.split(",") if d]
    a.stores = [s for s in a.stores.split(",") if s]
    for d in a.datasets:
        if d not in THESIS:
            p.error(f"unknown dataset {d!r} (bisicles, chombo)")
    for s in a.stores:
        if s not in STORES:
            p.error(f"unknown store {s!r} ({', '.join(STORES)})")
    if a.src:
        res = json.loads(Path(a.src).read_text())
    elif a.storage == "real":
        a.real_bytes = parse_size(a.real_bytes)
        made = not a.real_dir
        a.real_dir = Path(a.real_dir or tempfile.mkdtemp(prefix="amr-regimes-"))
        try:
            res = run(a)
        finally:
            if made:
                shutil.rmtree(a.real_dir, ignore_errors=True)
    else:
        res = run(a)
    if a.plot:
        plot(res, a.plot)
    if a.json:
        print(json.dumps(res))
    else:
        table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
