"""``patio amr``: inspect, advise on, reorder and read regions of Chombo AMR files.

Bad input (not a Chombo file, missing datasets, inconsistent offsets, overlapping or
out-of-domain boxes, empty levels, unsupported dimensionality, an output equal to the
input) prints one line naming the file and level and exits 2; outputs are written to a
temporary file and renamed only when complete.
"""

from __future__ import annotations

import argparse
import io
import json
import sys
from typing import Any

import numpy as np

from patio import _files
from patio import _progress as progress
from patio._cli_args import StoreOptionError, add_store_options, store_model_of
from patio.amr.chombo import ChomboError, Hierarchy, Level, read_hierarchy, same_file
from patio.amr.model import advise
from patio.amr.order import LAYOUTS
from patio.amr.region import read_region
from patio.amr.reorder import reorder

PROG = "patio amr"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def order_quality(lev: Level) -> float:
    """Fraction of successive boxes (file order) that touch (faces, edges or corners)."""
    if lev.n < 2:
        return 1.0
    a_lo, a_hi, b_lo, b_hi = lev.lo[:-1], lev.hi[:-1], lev.lo[1:], lev.hi[1:]
    touch = np.all((b_lo <= a_hi + 1) & (a_lo <= b_hi + 1), axis=1)
    return float(touch.mean())


def describe(hier: Hierarchy) -> dict[str, Any]:
    levels = []
    for lev in hier.levels:
        ext = lev.extent
        levels.append(
            {
                "level": lev.index,
                "boxes": lev.n,
                "cells": int(np.prod(ext, axis=1).sum()),
                "bytes": int(lev.box_bytes.sum()),
                "box_bytes_mean": float(lev.box_bytes.mean()),
                "box_extent_mean": [float(x) for x in ext.mean(axis=0)],
                "domain": [lev.domain_lo.tolist(), lev.domain_hi.tolist()],
                "ghost": lev.ghost.tolist(),
                "adjacent_successors": round(order_quality(lev), 4),
            }
        )
    return {"file": hier.path, "dim": hier.dim, "components": hier.components, "levels": levels}


def _write_atomic(dst: str, write: Any) -> None:
    with _files.replacing(dst, prefix=".patio-amr-") as tmp:
        write(tmp)


def plot(hier: Hierarchy, out: str) -> None:
    """Boxes of every level (x-y projection in 3-D), joined in file order."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    n = len(hier.levels)
    fig, axes = plt.subplots(1, n, figsize=(4.2 * n, 4.2), squeeze=False)
    for ax, lev in zip(axes[0], hier.levels):
        for lo, hi in zip(lev.lo, lev.hi):
            ax.add_patch(
                Rectangle(
                    (lo[0], lo[1]),
                    hi[0] - lo[0] + 1,
                    hi[1] - lo[1] + 1,
                    fill=False,
                    lw=0.5,
                    color="0.4",
                )
            )
        c = (lev.lo + lev.hi + 1) / 2.0
        ax.plot(c[:, 0], c[:, 1], "-", lw=0.7, color="tab:red")
        ax.set_xlim(lev.domain_lo[0], lev.domain_hi[0] + 1)
        ax.set_ylim(lev.domain_lo[1], lev.domain_hi[1] + 1)
        ax.set_aspect("equal")
        ax.set_title(f"level {lev.index}: {lev.n} boxes, file order")
    fig.tight_layout()

    def save(tmp: str) -> None:
        fig.savefig(tmp, format="png", dpi=110)

    _write_atomic(out, save)
    plt.close(fig)


def _ints(text: str, what: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x != ""]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{what} must be comma-separated integers") from None


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description="AMR box layouts for Chombo HDF5 plot files")
    sub = p.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    def add(name: str, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_[0].upper() + help_[1:] + ".")
        sp.add_argument("file", help="the Chombo HDF5 plot file")
        return sp

    queries = ("queries sampled on the sampling level (thesis-shaped boxes of cells; "
               "default one per box of that level)")
    s = add("inspect", "levels, boxes, bytes and order quality (the share of boxes that "
            "touch their successor in file order)")
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s.add_argument("--plot", metavar="OUT.png", help="draw every level's boxes (x-y "
                   "projection in 3-D), joined in file order, as a PNG")
    s = add("advise", "modelled cost of each layout (original, morton, hilbert, cluster) on "
            "sampled queries under the striped storage model, and the layout chosen")
    s.add_argument("--queries", type=int, metavar="N", help=queries)
    add_store_options(s)
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s = add("reorder", "rewrite the file with every level's boxes in a new order (written to "
            "a temporary file, renamed when complete)")
    s.add_argument("-o", "--output", required=True, help="the reordered file to write")
    s.add_argument("--layout", choices=("auto",) + LAYOUTS, default="auto",
                   help="the box order; auto: the one `patio amr advise` chooses (default)")
    s.add_argument("--queries", type=int, metavar="N", help=f"with --layout auto: {queries}")
    add_store_options(s)
    s.add_argument("--json", action="store_true", help="print the report as JSON")
    s = add("read", "read a region (level 0 indices, inclusive) across levels")
    s.add_argument(
        "--region",
        nargs=2,
        required=True,
        metavar=("LO", "HI"),
        help="comma-separated level-0 cell indices, e.g. 0,0 15,15",
    )
    s.add_argument("--level", type=int, help="only this level (default every level)")
    s.add_argument("-o", "--output", help=".npy (one level) or an .npz archive (all levels)")
    s.add_argument("--json", action="store_true",
                   help="report each level's region, boxes, reads and value shape as JSON")
    return p


def _inspect(a: argparse.Namespace) -> int:
    hier = read_hierarchy(a.file)
    info = describe(hier)
    if a.plot:
        plot(hier, a.plot)
    if a.json:
        print(json.dumps(info))
        return 0
    print(f"{hier.path}: {hier.dim}-D, {len(hier.levels)} levels, {hier.ncomp} components")
    for lv in info["levels"]:
        print(
            f"  level {lv['level']}: {lv['boxes']} boxes, {lv['cells']} cells, "
            f"{lv['bytes']} bytes, mean box {lv['box_bytes_mean']:.0f} B, "
            f"adjacent successors {lv['adjacent_successors']:.0%}"
        )
    return 0


def _store_text(a: argparse.Namespace) -> str:
    """The model's name as given: the preset and the overrides on it."""
    parts = [a.store]
    if a.store_targets is not None:
        parts.append(f"{a.store_targets} targets")
    if a.store_stripe_kib is not None:
        parts.append(f"{a.store_stripe_kib} KiB stripes")
    return parts[0] if len(parts) == 1 else f"{parts[0]} ({', '.join(parts[1:])})"


def _store_json(a: argparse.Namespace) -> dict[str, Any]:
    """The model priced on, as `patio reorg plan --json` names it."""
    return {"store": a.store, "store_targets": a.store_targets,
            "store_stripe_kib": a.store_stripe_kib}


def _advise(a: argparse.Namespace) -> int:
    if a.queries is not None and a.queries < 1:
        raise ChomboError(a.file, "--queries must be at least 1")
    model = store_model_of(a)
    hier = read_hierarchy(a.file)
    res = advise(hier, model, a.queries)
    res.update(_store_json(a))
    if a.json:
        print(json.dumps(res))
        return 0
    print(
        f"{hier.path}: level {res['level']}, {res['queries']} sampled queries, "
        f"{_store_text(a)} store model"
    )
    base = res["costs"]["original"]
    for name, cost in res["costs"].items():
        rel = f"{cost / base:.2f}x original" if base > 0 else ""
        print(f"  {name:9s} {cost * 1e3:10.3f} ms of jumps  {rel}")
    print(f"  chosen: {res['chosen']}")
    return 0


def _reorder(a: argparse.Namespace) -> int:
    if a.queries is not None and a.queries < 1:
        raise ChomboError(a.file, "--queries must be at least 1")
    if same_file(a.output, a.file):
        raise ChomboError(a.file, "output path equals the input")
    model = store_model_of(a)
    with progress.bar(0, f"reordering {a.file}", a.json, unit="box") as shown:

        def advance(done: int, total: int) -> None:
            shown.total = total
            shown.update(done - shown.n)

        res = reorder(a.file, a.output, a.layout, model, a.queries, progress=advance)
    res.update(_store_json(a))
    if a.json:
        print(json.dumps(res))
        return 0
    print(f"{a.output}: layout {res['layout']} (chosen by {res['chosen_by']})")
    for lv in res["levels"]:
        print(
            f"  level {lv['level']}: {lv['boxes']} boxes, jumps on sampled queries "
            f"{lv['jumps_before']} -> {lv['jumps_after']}"
        )
    return 0


def _read(a: argparse.Namespace) -> int:
    lo, hi = _ints(a.region[0], "LO"), _ints(a.region[1], "HI")
    hier = read_hierarchy(a.file)
    levels = None if a.level is None else [a.level]
    parts = read_region(a.file, hier, lo, hi, levels)
    if a.json:
        report = {
            "file": a.file,
            "output": a.output,
            "levels": [
                {
                    "level": part.level,
                    "lo": part.lo.tolist(),
                    "hi": part.hi.tolist(),
                    "boxes": int(part.boxes.size),
                    "reads": int(part.extents),
                    "shape": list(part.values.shape),
                }
                for part in parts
            ],
        }
        print(json.dumps(report))
    else:
        for part in parts:
            print(
                f"level {part.level}: region {part.lo.tolist()}..{part.hi.tolist()}, "
                f"{part.boxes.size} boxes in {part.extents} reads, "
                f"values {list(part.values.shape)}"
            )
    if a.output:

        def write(tmp: str) -> None:
            with open(tmp, "wb") as fh:
                if len(parts) == 1:
                    np.save(fh, parts[0].values)
                else:
                    buf = io.BytesIO()
                    np.savez(buf, **{f"level_{p.level}": p.values for p in parts})
                    fh.write(buf.getvalue())

        _write_atomic(a.output, write)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = {"inspect": _inspect, "advise": _advise, "reorder": _reorder, "read": _read}
    try:
        return handler[args.cmd](args)
    except (ChomboError, StoreOptionError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except (OSError, ValueError, argparse.ArgumentTypeError) as e:
        where = getattr(args, "file", "")
        print(f"{PROG}: error: {where}: {e}".replace("\n", " "), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
