"""``patio layout status|advise|build|learn|evict|probe``: the command line of HDF5
layout optimization (run by the ``patio`` binary as ``python -m patio._run layout``).

Every report has ``--json``; errors are one line naming the file, exit status 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from typing import Any

from patio import _progress as progress
from patio._cli_args import StoreOptionError, add_store_options, deprecated_alias, store_model_of

DESCRIPTION = """\
HDF5 layout optimization. Reads made through patio.h5 (or learned from a trace) are
recorded per dataset; `build` keeps replicas of the hot data in better layouts within a
budget, and later reads through patio.h5 are served from the copy the page-level cost
model prices cheapest. The knowledge base lives in .patio-layout/ beside the file, or
under $PATIO_LAYOUT_DIR."""

EPILOG = """\
examples:
  patio layout status run.h5                  what was recorded, hot regions, replicas, budget
  patio layout advise run.h5 --plot cost.png  modelled cost of each layout per hot selection
  patio layout build run.h5 --budget 20%      build/evict replicas within 20 % of the file size
  patio layout learn run.darshan --file run.h5  record the reads of an unmodified program
  patio layout evict run.h5 --stale           drop replicas whose source changed
  patio layout probe --dir /scratch           measure the cost model's constants there
  eval "$(patio layout vol-env)"              record the reads of unmodified HDF5 programs"""


class CliError(Exception):
    """A user mistake or an unusable input: printed as one line, exit 2."""


def _open_kb(path: str, create: bool = False) -> Any:
    from .kb import KnowledgeBase, kb_dir

    _check_hdf5(path)
    try:
        return KnowledgeBase(path, create=create)
    except ValueError as e:  # e.g. a non-numeric schema version
        raise CliError(f"knowledge base {kb_dir(path) / 'kb.sqlite'} is damaged: {e}") from None


def _open_h5(path: str) -> Any:
    """The HDF5 file read-only; a file h5py cannot open is an error naming it."""
    import h5py

    try:
        return h5py.File(path, "r")
    except OSError as e:
        raise CliError(f"{path}: cannot open as HDF5: {e}") from None


def _check_hdf5(path: str) -> None:
    import h5py

    if not os.path.exists(path):
        raise CliError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CliError(f"{path}: is a directory, not an HDF5 file")
    try:
        ok = h5py.is_hdf5(path)
    except OSError as e:
        raise CliError(f"{path}: cannot read: {e.strerror or e}") from None
    if not ok:
        raise CliError(f"{path}: not an HDF5 file")


def _emit(obj: Any, as_json: bool, text: str) -> None:
    if as_json:
        print(json.dumps(obj, indent=2))
    else:
        print(text)


# --------------------------------------------------------------------------- status
def status_report(path: str) -> dict[str, Any]:
    from . import planner

    kb = _open_kb(path, create=True)
    try:
        kb.compact()
        datasets = []
        for name, reads in kb.datasets():
            hot = []
            for p in planner.hot_patterns(kb, name):
                r_lo, r_hi = planner.representative(p).bounds()
                lo, hi = list(r_lo), list(r_hi)
                if p.axis is not None and len(p.starts):  # a family: span every member
                    extent = r_hi[p.axis] - r_lo[p.axis]
                    lo[p.axis] = int(p.starts.min())
                    hi[p.axis] = int(p.starts.max()) + extent
                hot.append({"pattern": p.id, "kind": p.sel.kind, "lo": list(lo), "hi": list(hi),
                            "reads": p.reads, "members": max(1, len(p.starts)),
                            "processes": p.procs, "bytes": p.bytes})
            datasets.append({"name": name, "reads": reads, "hot_regions": hot})
        reps = [{"id": r.id, "dataset": r.dset, "kind": r.kind, "bytes": r.bytes,
                 "meta_bytes": r.meta_bytes, "state": r.state, "uses": r.uses,
                 "served_reads": r.uses,
                 "params": {k: v for k, v in r.params.items() if k != "axes_sets"},
                 "note": r.note, "path": r.path} for r in kb.replicas()]
        size = os.path.getsize(path)
        used = sum(r["bytes"] + r["meta_bytes"] for r in reps if r["state"] == "ready")
        return {"file": os.path.abspath(path), "knowledge_base": str(kb.path),
                "datasets": datasets, "replicas": reps,
                "budget_bytes": planner.budget_bytes(kb, size), "used_bytes": used,
                "patterns": sum(len(d["hot_regions"]) for d in datasets),
                "raw_records": kb.raw_rows()}
    finally:
        kb.close()


def cmd_status(a: argparse.Namespace) -> int:
    rep = status_report(a.file)
    lines = [f"{rep['file']}  (knowledge base {rep['knowledge_base']})"]
    if not rep["datasets"]:
        lines.append("  nothing recorded yet: read the file through patio.h5, or `patio layout "
                     "learn TRACE --file FILE`")
    for d in rep["datasets"]:
        lines.append(f"  {d['name']}: {d['reads']} reads, {len(d['hot_regions'])} hot patterns")
        for h in d["hot_regions"][:8]:
            fam = f" x{h['members']}" if h["members"] > 1 else ""
            lines.append(f"    pattern {h['pattern']:>3} {h['kind']:<9}{fam:<7} "
                         f"[{','.join(map(str, h['lo']))}]..[{','.join(map(str, h['hi']))}) "
                         f"{h['reads']} reads, {h['processes']} procs")
    lines.append(f"  replicas ({rep['used_bytes']:,} of {rep['budget_bytes']:,} budget bytes):")
    for r in rep["replicas"]:
        note = f"  ({r['note']})" if r["note"] else ""
        if "filters" in r["params"]:
            note += f"  (source filters {r['params']['filters']})"
        lines.append(f"    #{r['id']:<3} {r['dataset']:<16} {r['kind']:<10} {r['bytes']:>12,} B "
                     f"{r['state']:<8} served {r['served_reads']} reads{note}")
    if not rep["replicas"]:
        lines.append("    none")
    _emit(rep, a.json, "\n".join(lines))
    return 0


# --------------------------------------------------------------------------- advise
def _ready_replicas(kb: Any) -> dict[str, list[Any]]:
    from .replicas import Replica

    out: dict[str, list[Any]] = {}
    for row in kb.replicas(state="ready"):
        if os.path.isfile(row.path):
            out.setdefault(row.dset, []).append(Replica.load(row))
    return out


def advise_report(path: str) -> tuple[dict[str, Any], list[Any]]:
    from . import device, planner
    from .storage import UnsupportedLayout

    kb = _open_kb(path, create=True)
    try:
        kb.compact()
        model, consts = device.load(kb)
        existing = _ready_replicas(kb)
        plans = []
        skipped: list[dict[str, str]] = []
        with _open_h5(path) as f:
            recorded = kb.datasets()
            for name, _ in recorded:
                if name not in f:
                    raise CliError(f"{path}: dataset {name} was recorded but no longer exists")
                try:
                    plans.append(planner.evaluate(kb, f, name, model, consts,
                                                  existing.get(name, [])))
                except UnsupportedLayout as e:
                    # Its reads stay with h5py; the other datasets go on.
                    skipped.append({"name": name, "reason": str(e)})
            if recorded and len(skipped) == len(recorded):
                raise CliError(f"{path}: no recorded dataset has a layout patio can model "
                               f"({'; '.join(s['reason'] for s in skipped)})")
            for s in skipped:
                print(f"patio layout: {path}: {s['reason']}: not modelled, its reads are left "
                      "to h5py", file=sys.stderr)
        for reps in existing.values():
            for r in reps:
                r.close()
        out = {"file": os.path.abspath(path), "store": model.params(),
               "constants": consts.to_json(), "datasets": [], "skipped": skipped}
        for dp in plans:
            sels = []
            for row in dp.rows:
                valid = {k: v for k, v in row["costs"].items() if v is not None}
                best = min(valid, key=lambda k: valid[k])
                sels.append({**{k: row[k] for k in ("pattern", "reads", "members", "kind",
                                                       "elements", "lo", "hi")},
                             "costs": row["costs"], "best": best,
                             "overhead_us": row["overhead_s"] * 1e6})
            out["datasets"].append({"name": dp.dset, "selections": sels,
                                    "proposals": planner.savings(dp)})
        return out, plans
    finally:
        kb.close()


def cmd_advise(a: argparse.Namespace) -> int:
    rep, _ = advise_report(a.file)
    lines = [(f"{rep['file']}: modelled seconds per read (eq 3.1; store "
             f"{rep['store'].get('targets')} targets)")]
    for d in rep["datasets"]:
        lines.append(f"  {d['name']}")
        for s in d["selections"]:
            lines.append(f"    pattern {s['pattern']} ({s['kind']}, {s['elements']:,} elements, "
                         f"{s['reads']} reads): best {s['best']}, decision overhead "
                         f"{s['overhead_us']:.0f} us per read")
            for k, v in sorted(s["costs"].items(), key=lambda kv: (kv[1] is None, kv[1] or 0)):
                lines.append(f"      {k:<36} {'-' if v is None else f'{v * 1e3:10.3f} ms'}")
    if not rep["datasets"]:
        lines.append("  nothing recorded yet")
    if a.plot:
        from .plot import advise_plot

        advise_plot(rep, a.plot)
        lines.append(f"wrote {a.plot}")
    _emit(rep, a.json, "\n".join(lines))
    return 0


# --------------------------------------------------------------------------- build
def cmd_build(a: argparse.Namespace) -> int:

    from . import planner, replicas

    kb = _open_kb(a.file, create=True)
    try:
        if a.budget is not None:
            try:
                budget_setting = planner.parse_budget(a.budget)
            except (ValueError, OverflowError) as e:  # OverflowError: "inf", "1e400"
                msg = str(e) if str(e).startswith("budget") else (
                    f"budget {a.budget!r}: expected bytes (e.g. 500M, 2GiB) or a percentage "
                    "of the file (e.g. 20%)")
                raise CliError(msg) from None
            kb.set_setting("budget", budget_setting)
        if kb.setting("budget") is None:
            raise CliError(f"{a.file}: no budget set: pass --budget (e.g. 20% or 500M)")
        removed = replicas.cleanup(kb)
        _, plans = advise_report(a.file)
        size = os.path.getsize(a.file)
        budget = planner.budget_bytes(kb, size)
        stale = [r for r in kb.replicas() if r.state in ("stale", "missing", "damaged")]
        for r in stale:
            replicas.evict(kb, r.id)
        build, evict, rejected = planner.plan(plans, kb.replicas(), budget)
        done = []
        if not a.dry_run:
            for rid in evict:
                replicas.evict(kb, rid)
            with progress.bar(sum(p.bytes for p in build), "building", a.json) as shown:
                for i, p in enumerate(build, 1):
                    shown.set_description(f"[{i}/{len(build)}] {p.dset} {p.label()}")
                    rid = replicas.build(kb, a.file, p.dset, p.kind, p.params, sel=p.sel,
                                         axes_sets=p.axes_sets)
                    shown.update(p.bytes)
                    done.append(rid)
        if not build and rejected and not a.dry_run:
            smallest = min(p.bytes + p.meta_bytes for p in rejected)
            gone = f" ({len(evict)} replicas evicted to fit it)" if evict else ""
            raise CliError(f"{a.file}: budget {budget:,} bytes is too small for any useful "
                           f"replica (the smallest needs {smallest:,} bytes){gone}")
        overhead = {(dp.dset, row["pattern"]): row["overhead_s"] for dp in plans
                    for row in dp.rows}

        def overhead_us(p: Any) -> float:
            return max((overhead[(p.dset, s)] for s in p.serves), default=0.0) * 1e6

        out = {"file": os.path.abspath(a.file), "budget_bytes": budget, "dry_run": a.dry_run,
               "built": [{"id": rid, "dataset": p.dset, "kind": p.kind, "layout": p.label(),
                          "bytes": p.bytes, "benefit_s": p.benefit, "serves": p.serves,
                          "overhead_us": overhead_us(p)}
                         for rid, p in zip(done or [None] * len(build), build)],
               "evicted": evict + [r.id for r in stale], "cleaned": removed,
               "rejected": [{"dataset": p.dset, "layout": p.label(), "bytes": p.bytes,
                             "benefit_s": p.benefit} for p in rejected]}
        used = sum(r.bytes + r.meta_bytes for r in kb.replicas(state="ready"))
        out["used_bytes"] = used
    finally:
        kb.close()
    lines = [f"{out['file']}: budget {budget:,} B, used {used:,} B"]
    verb = "would build" if a.dry_run else "built"
    for b in out["built"]:
        lines.append(f"  {verb} {b['dataset']} {b['layout']} ({b['bytes']:,} B, modelled "
                     f"{b['benefit_s'] * 1e3:.2f} ms saved per replay of the history, net of "
                     f"a measured decision overhead of {b['overhead_us']:.0f} us per read)")
    for e in out["evicted"]:
        lines.append(f"  evicted replica {e}")
    for r in out["rejected"]:
        lines.append(f"  not admitted: {r['dataset']} {r['layout']} ({r['bytes']:,} B)")
    if not out["built"] and not out["evicted"]:
        lines.append("  nothing to do")
    _emit(out, a.json, "\n".join(lines))
    return 0


# --------------------------------------------------------------------------- evict
def cmd_evict(a: argparse.Namespace) -> int:
    from . import replicas

    kb = _open_kb(a.file)
    try:
        rows = kb.replicas()
        if a.id is not None:
            chosen = [r for r in rows if r.id in a.id]
            missing = set(a.id) - {r.id for r in chosen}
            if missing:
                raise CliError(f"{a.file}: no replica {min(missing)}")
        elif a.stale:
            chosen = [r for r in rows if r.state != "ready"]
        elif a.all:
            chosen = rows
        else:
            raise CliError("say which replicas: --id N, --stale or --all")
        for r in chosen:
            replicas.evict(kb, r.id)
        out = {"file": os.path.abspath(a.file), "evicted": [r.id for r in chosen],
               "bytes": sum(r.bytes for r in chosen)}
    finally:
        kb.close()
    _emit(out, a.json, f"evicted {len(out['evicted'])} replicas ({out['bytes']:,} B)")
    return 0


# --------------------------------------------------------------------------- probe
def cmd_probe(a: argparse.Namespace) -> int:
    from . import device

    try:
        model = store_model_of(a, dest="model")
    except StoreOptionError as e:
        raise CliError(str(e)) from None
    if model is not None:
        dev = device.model_device(model.params())
    else:
        if not os.path.isdir(a.dir):
            raise CliError(f"{a.dir}: not a directory")
        if a.mib < 1:
            raise CliError(f"--mib {a.mib}: the scratch file needs at least 1 MiB")
        try:
            dev = device.probe(a.dir, size=a.mib << 20)
        except OSError as e:
            raise CliError(f"{a.dir}: probe failed: {e.strerror or e}") from None
    if a.file:
        kb = _open_kb(a.file, create=True)
        try:
            kb.set_setting("device", dev)
        finally:
            kb.close()
    _emit(dev, a.json, device.describe(dev) + (f"; stored for {a.file}" if a.file else ""))
    return 0


# --------------------------------------------------------------------------- learn
def cmd_learn(a: argparse.Namespace) -> int:
    from .learn import LearnError, learn

    _check_hdf5(a.file)
    try:
        out = learn(a.trace, a.file)
    except LearnError as e:
        raise CliError(str(e)) from None
    lines = [(f"{a.trace}: {out['requests']} read requests of {out['trace_file']} mapped to "
             f"{out['selections']} selections")]
    for d, n in out["datasets"].items():
        lines.append(f"  {d}: {n} selections")
    if out["unmapped"]:
        lines.append(f"  {out['unmapped']} requests touched no dataset's data (metadata)")
    _emit(out, a.json, "\n".join(lines))
    return 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="patio layout", description=DESCRIPTION, epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True, metavar="COMMAND")

    def add(name: str, help_: str) -> argparse.ArgumentParser:
        sp = sub.add_parser(name, help=help_, description=help_)
        sp.add_argument("--json", action="store_true", help="print the report as JSON")
        return sp

    s = add("status", "what was recorded, hot regions, replicas and the budget")
    s.add_argument("file", help="the HDF5 file")
    s.set_defaults(run=cmd_status)
    s = add("advise", "modelled cost (eq 3.1) of each candidate layout per hot selection")
    s.add_argument("file", help="the HDF5 file")
    s.add_argument("--plot", metavar="OUT.png", help="draw modelled cost per layout and selection")
    s.set_defaults(run=cmd_advise)
    s = add("build", "build and evict replicas within the budget (never on the read path)")
    s.add_argument("file", help="the HDF5 file")
    s.add_argument("--budget", help="bytes (500M, 2GiB) or a percentage of the file (20%%); "
                   "kept for later builds")
    s.add_argument("--dry-run", action="store_true", help="say what would be built")
    s.set_defaults(run=cmd_build)
    s = add("learn", "record the reads of a patio/Darshan trace as dataset selections")
    s.add_argument("trace", help="a .ptrace, .csv or .darshan trace")
    s.add_argument("--file", required=True, help="the HDF5 file the trace read")
    s.set_defaults(run=cmd_learn)
    s = add("evict", "remove replicas")
    s.add_argument("file", help="the HDF5 file")
    s.add_argument("--id", type=int, action="append", help="replica id (repeatable)")
    s.add_argument("--stale", action="store_true", help="every replica that is not ready")
    s.add_argument("--all", action="store_true", help="every replica")
    s.set_defaults(run=cmd_evict)
    s = add("probe", "measure the cost model's constants on real storage (or fit a model)")
    s.add_argument("--dir", default=".", help="a directory on the storage to measure")
    s.add_argument("--mib", type=int, default=256, help="scratch file size (MiB)")
    add_store_options(s, default=None, dest="model", help="fit to the storage model instead "
                      "(lustre, hdd, ssd, or probed: this machine's, from `patio store probe`)")
    deprecated_alias(s, "--model", "--store", "model", metavar="PRESET")
    s.add_argument("--file", help="store the constants in this HDF5 file's knowledge base")
    s.set_defaults(run=cmd_probe)
    s = add("vol-env", "the environment that loads patio's HDF5 VOL connector into unmodified "
            "programs (their reads recorded)")
    s.set_defaults(run=_vol_env)
    return p


def _vol_env(a: argparse.Namespace) -> int:
    from .vol import cmd_vol_env

    return cmd_vol_env(a)


def main(argv: list[str]) -> int:
    from .kb import KnowledgeBaseError, kb_dir

    args = parser().parse_args(argv)
    try:
        return int(args.run(args))
    except (CliError, KnowledgeBaseError) as e:
        print(f"patio layout: error: {e}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as e:  # found after opening: locked, or damage past the header
        where = f" {kb_dir(args.file) / 'kb.sqlite'}" if getattr(args, "file", None) else ""
        what = "" if isinstance(e, sqlite3.OperationalError) else " is damaged"
        print(f"patio layout: error: knowledge base{where}{what}: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        where = f"{e.filename}: " if e.filename else ""
        print(f"patio layout: error: {where}{e.strerror or e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

