"""``patio bench reorg``: reading an IOR-like and an mpi-tile-io-like file with real MPI
processes, over the striped storage model and on the real disk, from the original file
and from its reorganized container (results: docs/BENCHMARKS.md).

For each case, store preset and run kind (``in-sample``: the plan comes from the
measured run's own trace; ``held-out``: from another run, :func:`patio.reorg.cases.
plan_run` — twice the ranks per dimension, half-size requests — while the measured run
has every start shifted by ``--shift`` % of its request), in one run:

1. the file (random bytes) and the trace of the planning run's reads (MPI-IO requests,
   CSV) are written to a scratch directory; ``patio reorg apply --store PRESET``
   reorganizes the file from the trace into a container beside it;
2. ``--storage model``: the scratch directory is served by ``patio mount prefetch
   --policy none --direct-io --store PRESET --store-targets N`` (every read a real read
   of the file, paced by the storage model, every file in its own modelled address
   range; a fresh mount per measurement, so none inherits another's target clocks).
   ``--storage real``: the ranks use the files on the local file system directly; before
   every measurement each file is fsynced and dropped from the page cache
   (``POSIX_FADV_DONTNEED``), and the fraction still resident (``mincore``) is reported;
   each real-disk time is the fastest of ``--real-repeat`` runs (3 by default);
3. ``mpirun -n RANKS --oversubscribe python -m patio.reorg.ranks`` reads in each mode
   (:mod:`patio.reorg.ranks`): ``original`` (independent ``Read_at`` per request),
   ``original_batched`` (the rank's requests at once, with the reorganized read's data
   sieving), ``original_ordered`` (those sieved reads, of all ranks one at a time in
   file order), ``collective`` (file view + ``Read_at_all``), ``reorganized``
   (``patio.mpi`` + ``read_extents``), ``reorganized_ordered`` (the same read collective,
   every rank's physical reads issued one at a time in container order:
   ``read_extents_ordered``) and ``reorganized_pieces`` (the container read request by
   request); ``mpiio`` is the unmodified collective program (file view +
   ``Read_at_all``) run under ``patio run --mpiio`` with the container registered for
   the file (``mpiio_ordered``: with ``--ordered``, its collective reads taking turns) (``patio reorg register``, through the mount on the model), so the MPI-IO
   layer serves its reads from the container, ``mpiio_independent`` the
   request-by-request program the same way, ``mpiio_readahead`` that program with
   ``--prefetch pattern`` (each miss read from the container together with the policy's
   predicted next reads), and ``original_prefetch`` that program on the original file
   (unregistered) with ``--prefetch pattern`` (the prefetch engine reads ahead); all fail
   unless the layer's statistics show calls it answered. Seconds are barrier to barrier, opens included; every rank
   checks its bytes against the source.

``speedup`` is original over reorganized; ``speedup_vs_best`` the best (fastest) of the
original methods measured (per request, batched, ordered, collective) over reorganized; ``ordered_speedup``, ``ordered_vs_collective``
and ``ordered_vs_best`` the same for ``reorganized_ordered_s``; ``mpiio_speedup``, ``mpiio_vs_collective`` and
``mpiio_vs_best`` the same for the program served through the MPI-IO layer; with ``--storage both`` each case has a model
and a real row and both carry ``model_error`` = model ``speedup_vs_best`` / real
``speedup_vs_best``. ``--sweeps`` adds the robustness sweeps (requests X % smaller than
planned; starts shifted by X % of the request) and the gain against the number of pieces
per rank (IOR transfers per block), on the model. Output: a table, or ``--json``
``{"cases": [{"name", "store", "storage", "held_out", "ranks", "original_s",
"original_batched_s", "collective_s", "reorganized_s", "speedup", "speedup_vs_best",
"mpiio_s", "mpiio_speedup", "mpiio_vs_collective", "model_error", ...}],
"sweeps": [...]}``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from patio import _coldcache, _mpirun
from patio._binary import patio_binary
from patio._cli_args import StoreOptionError, deprecated_alias, store_model
from patio._mount_harness import MountError, MountProcess
from patio.reorg.cases import CASES, Case, ior, plan_run, tile

PROG = "patio bench reorg"
MODES = ("original", "original_batched", "original_ordered", "collective", "reorganized", "reorganized_ordered",
         "reorganized_pieces", "mpiio", "mpiio_ordered", "mpiio_independent", "mpiio_readahead",
         "original_prefetch")  # fmt: skip
#: Modes run through the MPI-IO layer: the program (``patio.reorg.ranks`` mode) each runs,
#: whether the container is registered for the file (served), the prefetch policy, and
#: whether collective reads take turns (``patio run --mpiio --ordered``).
MPIIO_PROGRAMS: dict[str, tuple[str, bool, str | None, bool]] = {
    "mpiio": ("collective", True, None, False),
    "mpiio_ordered": ("collective", True, None, True),
    "mpiio_independent": ("original", True, None, False),
    "mpiio_readahead": ("original", True, "pattern", False),
    "original_prefetch": ("original", False, "pattern", False),
}
ORIGINAL_METHODS = ("original", "original_batched", "original_ordered", "collective")
WRITE_MODES = ("write_original", "write_collective", "write_container")
STORES = ("hdd", "ssd")
STORAGES = ("model", "real")
RUNS = ("in-sample", "held-out")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def mpirun(ranks: int) -> list[str]:
    cmd = _mpirun.command(ranks)
    if cmd is None:
        raise SystemExit(f"{PROG}: error: mpirun is missing (OpenMPI: run scripts/setup.sh)")
    return cmd


def store_mount(source: Path, mnt: Path, store: str, targets: int,
                stripe_kib: int | None = None) -> MountProcess:
    """``patio mount prefetch`` of ``source`` on ``mnt`` behind the storage model (removed
    on leaving its ``with``); ``stripe_kib``: the preset's stripe size when None."""
    argv = [patio_binary(prog=PROG), "mount", "prefetch", str(source), str(mnt), "--policy", "none",
            "--direct-io", "--store", store, "--store-targets", str(targets)]  # fmt: skip
    if stripe_kib is not None:
        argv += ["--store-stripe-kib", str(stripe_kib)]
    try:
        return MountProcess(argv, mnt, timeout=20)
    except MountError as e:
        raise SystemExit(f"{PROG}: error: {e}") from None


def write_inputs(case: Case, src: Path) -> tuple[Path, Path]:
    """The data file and the trace of ``case``'s reads (the run the plan comes from)."""
    data = src / "data.bin"
    rng = np.random.default_rng(7)
    chunk = 16 << 20
    with open(data, "wb") as f:
        left = case.file_size
        while left:
            n = min(chunk, left)
            f.write(rng.integers(0, 256, n, dtype=np.uint8).tobytes())
            left -= n
    trace = src.parent / f"{case.name}.csv"
    with open(trace, "w") as f:
        f.write("module,file,rank,op,offset,length,start,end\n")
        for r in range(case.ranks):
            for i, (o, n) in enumerate(case.extents(r)):
                f.write(f"MPIIO,{data},{r},read,{o},{n},{i},{i + 0.5}\n")
    return data, trace


def reorganize(data: Path, trace: Path, out: Path, store: str, targets: int,
               stripe_kib: int | None = None) -> dict[str, Any]:
    """``patio reorg apply``, planned on the model the mounts measure on (the same
    ``--store``, ``--store-targets`` and ``--store-stripe-kib``)."""
    argv = [patio_binary(prog=PROG), "reorg", "apply", str(trace), "--file", str(data), "-o",
            str(out), "--store", store, "--store-targets", str(targets), "--json"]  # fmt: skip
    if stripe_kib is not None:
        argv += ["--store-stripe-kib", str(stripe_kib)]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{PROG}: error: {done.stderr.strip()}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def register(data: Path, container: Path | None) -> None:
    """``patio reorg register``: the container serves ``data`` as this path sees it (a
    mount shows the file with another device and inode); ``None``: ``patio reorg
    unregister`` (the original is read)."""
    args = ["register", str(data), str(container), "--samples", "16"] if container else ["unregister", str(data)]
    done = subprocess.run([patio_binary(prog=PROG), "reorg", *args], capture_output=True, text=True,
                          check=False)  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{PROG}: error: {done.stderr.strip()}")


def served(stats: Path) -> dict[str, int]:
    """What the MPI-IO layer's ranks served, summed over their statistics files."""
    total = {"served_calls": 0, "served_bytes": 0, "physical_reads": 0, "passed_calls": 0}
    for f in stats.glob("*.json"):
        one = json.loads(f.read_text())
        for k in total:
            total[k] += int(one.get(k, 0))
    return total


def run_mode(case: Case, mode: str, work: Path, store: str, targets: int,
             perturbation: tuple[str, float] | None = None, storage: str = "model",
             stripe_kib: int | None = None) -> dict[str, Any]:  # fmt: skip
    """One measurement: a fresh mount (model) or a dropped page cache (real), one
    ``mpirun``. The result has ``resident``: the page-cache fraction of the scratch
    files before the run (real storage; ``None`` on the model)."""
    src = work / "src"
    mnt = work / "mnt" if storage == "model" else src
    name = {"write_original": "written.bin", "write_collective": "written.bin",
            "write_container": "written.pc"}.get(mode, "data.pc" if mode.startswith("reorganized") else "data.bin")  # fmt: skip
    for stale in (src / "written.bin", src / "written.pc"):
        if stale.is_dir():
            shutil.rmtree(stale)
        else:
            stale.unlink(missing_ok=True)
    out = work / "result.json"
    out.unlink(missing_ok=True)
    spec = {
        "case": case.to_dict(), "mode": MPIIO_PROGRAMS[mode][0] if mode in MPIIO_PROGRAMS else mode,
        "path": str(mnt / name),
        "source": str(src / "data.bin"), "out": str(out), "perturb": perturbation,
    }  # fmt: skip
    spec_path = work / "spec.json"
    spec_path.write_text(json.dumps(spec))
    cmd = [*mpirun(case.ranks), sys.executable, "-m", "patio.reorg.ranks", str(spec_path)]
    stats = work / "mpiio-stats"
    through_layer = mode in MPIIO_PROGRAMS
    if through_layer:
        _, serve, policy, ordered = MPIIO_PROGRAMS[mode]
        shutil.rmtree(stats, ignore_errors=True)
        prefetch = ["--prefetch", policy] if policy else []
        order = ["--ordered"] if ordered else []
        cmd = [patio_binary(prog=PROG), "run", "--mpiio", *prefetch, *order, "--stats", str(stats), "--", *cmd]

    def launch() -> subprocess.CompletedProcess[str]:
        if through_layer:
            register(mnt / "data.bin", mnt / "data.pc" if serve else None)
        return subprocess.run(cmd, capture_output=True, text=True, env=_mpirun.environment(),
                              check=False, timeout=3600)  # fmt: skip

    resident = None
    if storage == "model":
        with store_mount(src, mnt, store, targets, stripe_kib):
            done = launch()
    else:
        if through_layer:
            register(src / "data.bin", src / "data.pc" if serve else None)
        resident = _coldcache.drop(p for p in src.rglob("*") if p.is_file())
        done = subprocess.run(cmd, capture_output=True, text=True, env=_mpirun.environment(),
                              check=False, timeout=3600)  # fmt: skip
    if done.returncode != 0 or not out.exists():
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise SystemExit(f"{PROG}: error: {mode} run failed: {' | '.join(tail)}")
    result: dict[str, Any] = json.loads(out.read_text())
    if not result["ok"]:
        raise SystemExit(f"{PROG}: error: {mode} read wrong bytes")
    if through_layer:
        got = served(stats)
        if got["served_calls"] == 0:
            warning = next((ln for ln in done.stderr.splitlines() if "MPI-IO" in ln), "no statistics")
            raise SystemExit(f"{PROG}: error: {mode}: the MPI-IO layer served nothing ({warning})")
        result["physical_reads"] = got["physical_reads"]
    result["resident"] = resident
    return result


def ratios(row: dict[str, Any]) -> None:
    """The row's speedups from its seconds: for the reorganized read (``reorganized_s``)
    ``speedup`` (over original), ``speedup_vs_collective``, ``speedup_vs_best`` (over the
    fastest original method, named in ``best_original``); the same for the program served
    by the MPI-IO layer (``mpiio_s``): ``mpiio_speedup``, ``mpiio_vs_collective``,
    ``mpiio_vs_best``, and for the ordered reorganized read (``reorganized_ordered_s``)
    ``ordered_speedup``, ``ordered_vs_collective``, ``ordered_vs_best``, and for the
    program served by the layer taking turns (``mpiio_ordered_s``) ``mpiio_ordered_speedup``,
    ``mpiio_ordered_vs_collective``, ``mpiio_ordered_vs_best``."""
    present = [m for m in ORIGINAL_METHODS if f"{m}_s" in row]
    best = min(present, key=lambda m: row[f"{m}_s"]) if present else None
    if best:
        row["best_original"] = best
    for seconds, prefix in (("reorganized_s", "speedup"), ("reorganized_ordered_s", "ordered"),
                            ("mpiio_s", "mpiio"), ("mpiio_ordered_s", "mpiio_ordered")):  # fmt: skip
        t = row.get(seconds)
        if not t:
            continue
        over_original = "speedup" if prefix == "speedup" else f"{prefix}_speedup"
        if "original_s" in row:
            row[over_original] = row["original_s"] / t
        if "collective_s" in row:
            row[f"{prefix}_vs_collective"] = row["collective_s"] / t
        if best:
            row[f"{prefix}_vs_best"] = row[f"{best}_s"] / t


def model_errors(rows: list[dict[str, Any]]) -> None:
    """``model_error`` (model ``speedup_vs_best`` / real ``speedup_vs_best``) on both rows
    of every case measured on both storages."""
    key = ("name", "store", "held_out", "ranks", "pieces_per_rank")
    by: dict[tuple[Any, ...], dict[str, dict[str, Any]]] = {}
    for r in rows:
        by.setdefault(tuple(r[k] for k in key), {})[r["storage"]] = r
    for pair in by.values():
        m, r = pair.get("model"), pair.get("real")
        if m and r and m.get("speedup_vs_best") and r.get("speedup_vs_best"):
            err = m["speedup_vs_best"] / r["speedup_vs_best"]
            for x in (m, r):
                x["model_speedup_vs_best"] = m["speedup_vs_best"]
                x["real_speedup_vs_best"] = r["speedup_vs_best"]
                x["model_error"] = err


def measure_case(case: Case, store: str, targets: int, work: Path, modes: tuple[str, ...],
                 repeat: int, log: Any, held_out: bool = False, shift: float = 10.0,
                 storages: tuple[str, ...] = ("model",), real_repeat: int = 3,
                 stripe_kib: int | None = None) -> list[dict[str, Any]]:  # fmt: skip
    """One row per storage: ``case`` read in each of ``modes``; the plan from ``case``'s
    own trace, or (``held_out``) from :func:`plan_run`'s with ``case``'s starts shifted
    by ``shift`` % of their request."""
    src = work / "src"
    src.mkdir(parents=True, exist_ok=True)
    (work / "mnt").mkdir(exist_ok=True)
    planned = plan_run(case) if held_out else case
    perturbation = ("shifted", shift) if held_out else None
    data, trace = write_inputs(planned, src)
    applied = reorganize(data, trace, src / "data.pc", store, targets, stripe_kib)
    plan = applied["plan"]
    base: dict[str, Any] = {
        "name": case.name, "store": store, "targets": targets, "stripe_kib": stripe_kib,
        "ranks": case.ranks,
        "held_out": held_out, "plan_ranks": planned.ranks,
        "plan_request_bytes": planned.extents(0)[0][1], "request_bytes": case.extents(0)[0][1],
        "shift_percent": shift if held_out else 0.0,
        "file_bytes": case.file_size, "pieces_per_rank": case.pieces_per_rank(),
        "remap_bytes": plan["remap_bytes"], "table_bytes": plan["table_bytes"],
        "index_bytes": applied["index_bytes"], "apply_s": applied["seconds"],
        "physical_extents_before": plan["physical_extents_before"],
        "physical_extents_after": plan["physical_extents_after"],
        "model_seconds_before": plan["model_seconds_before"],
        "model_seconds_after": plan["model_seconds_one_request"],
        "plan_store_targets": plan["store_targets"],
    }  # fmt: skip
    rows = []
    for storage in storages:
        row = dict(base, storage=storage)
        resident = []
        for mode in modes:
            times = []
            for _ in range(real_repeat if storage == "real" else repeat):
                r = run_mode(case, mode, work, store, targets, perturbation, storage, stripe_kib)
                times.append(r["seconds"])
                row[f"{mode}_physical_reads"] = r["physical_reads"]
                if r["resident"] is not None:
                    resident.append(r["resident"])
            row[f"{mode}_s"] = min(times)
            log(f"  {case.name} {store} {'held-out' if held_out else 'in-sample'} {storage} {mode}: "
                f"{min(times):.3f} s")  # fmt: skip
        if resident:
            row["resident_before_max"] = max(resident)
        ratios(row)
        if "write_original_s" in row and "write_container_s" in row:
            row["write_speedup"] = row["write_original_s"] / row["write_container_s"]
        rows.append(row)
    shutil.rmtree(src)
    return rows


def sweeps(case: Case, store: str, targets: int, work: Path, log: Any,
           stripe_kib: int | None = None) -> list[dict[str, Any]]:
    """Requests smaller than planned and shifted starts, original against reorganized."""
    src = work / "src"
    src.mkdir(parents=True, exist_ok=True)
    (work / "mnt").mkdir(exist_ok=True)
    data, trace = write_inputs(case, src)
    reorganize(data, trace, src / "data.pc", store, targets, stripe_kib)
    out = []
    for kind in ("smaller", "shifted"):
        for pct in (0, 10, 25, 50, 75):
            o = run_mode(case, "original", work, store, targets, (kind, pct), stripe_kib=stripe_kib)
            r = run_mode(case, "reorganized", work, store, targets, (kind, pct), stripe_kib=stripe_kib)
            out.append({
                "name": case.name, "store": store, "sweep": kind, "percent": pct,
                "original_s": o["seconds"], "reorganized_s": r["seconds"],
                "speedup": o["seconds"] / r["seconds"],
                "physical_reads": r["physical_reads"], "requests": r["requests"],
            })  # fmt: skip
            log(f"  sweep {kind} {pct} %: {o['seconds']:.3f} s → {r['seconds']:.3f} s")
    shutil.rmtree(src)
    return out


def pieces_sweep(args: argparse.Namespace, store: str, work: Path, log: Any) -> list[dict[str, Any]]:
    """IOR with the same bytes per rank in more, smaller transfers."""
    out = []
    for transfer_kib in sorted({min(t, args.block_kib) for t in (1024, 256, 64, 16, 4)}, reverse=True):
        case = ior(args.ranks, args.segments, args.block_kib * 1024, transfer_kib * 1024)
        modes = ("original", "original_batched", "collective", "reorganized")
        for row in measure_case(case, store, args.targets, work, modes, 1, log,
                                stripe_kib=args.store_stripe_kib):
            row["sweep"] = "pieces"
            out.append(row)
    return out


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--case", choices=CASES, action="append", help="ior and/or tile (default both)")
    p.add_argument("--store", choices=STORES, action="append", help="hdd and/or ssd (default both)")
    p.add_argument("--store-targets", dest="targets", type=int, default=4, metavar="N",
                   help="storage targets (servers) of the mount's model, default 4")
    p.add_argument("--store-stripe-kib", type=int, metavar="KIB",
                   help="the stripe size in KiB of the mount's model instead of the preset's "
                        "(RPCs stay at most one stripe)")
    deprecated_alias(p, "--targets", "--store-targets", "targets", type=int)
    p.add_argument("--ranks", type=int, default=16, help="IOR ranks (default 16)")
    p.add_argument("--segments", type=int, default=16, help="IOR segments (default 16)")
    p.add_argument("--block-kib", type=int, default=1024, help="IOR block per rank and segment")
    p.add_argument("--transfer-kib", type=int, default=64, help="IOR transfer size")
    p.add_argument("--tiles", type=int, default=8, help="tiles per side (ranks = tiles^2, default 8)")
    p.add_argument("--tile-elems", type=int, default=1024, help="elements per tile side (default 1024)")
    p.add_argument("--elem-bytes", type=int, default=8, help="bytes per element (default 8)")
    p.add_argument("--storage", choices=(*STORAGES, "both"), default="model",
                   help="the striped storage model (a FUSE mount), the real local disk with the page "
                        "cache dropped, or both (default model)")
    p.add_argument("--run", choices=RUNS, action="append",
                   help="in-sample (plan from the measured run) and/or held-out (default both)")
    p.add_argument("--shift", type=float, default=10.0,
                   help="held-out run: starts shifted by this %% of the request (default 10)")
    p.add_argument("--mode", choices=MODES, action="append", help="read modes (default all)")
    p.add_argument("--reps", dest="repeat", type=int, default=1, metavar="N",
                   help="runs per measurement (the fastest is kept)")
    deprecated_alias(p, "--repeat", "--reps", "repeat", type=int)
    p.add_argument("--real-repeat", type=int, default=3,
                   help="runs per real-disk measurement, each after a page-cache drop (default 3)")
    p.add_argument("--sweeps", action="store_true", help="also the robustness and pieces-per-rank sweeps")
    p.add_argument("--no-writes", action="store_true", help="skip the IOR write measurements")
    p.add_argument("--dir", help="scratch directory (default: a temporary one)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return p


def table(rows: list[dict[str, Any]]) -> str:
    cols = [
        ("case", "name", "6"), ("store", "store", "5"), ("storage", "storage", "7"),
        ("run", "run", "9"), ("ranks", "ranks", ">5"),
        ("pieces", "pieces_per_rank", ">6"), ("original", "original_s", ">9.3f"),
        ("batched", "original_batched_s", ">8.3f"), ("orig ordered", "original_ordered_s", ">12.3f"),
        ("collective", "collective_s", ">10.3f"), ("reorg", "reorganized_s", ">8.3f"),
        ("ordered", "reorganized_ordered_s", ">8.3f"), ("reorg/req", "reorganized_pieces_s", ">9.3f"), ("mpiio", "mpiio_s", ">8.3f"),
        ("mpiio ord", "mpiio_ordered_s", ">9.3f"), ("mpiio/req", "mpiio_independent_s", ">9.3f"), ("mpiio/ra", "mpiio_readahead_s", ">8.3f"),
        ("orig/pf", "original_prefetch_s", ">8.3f"), ("speedup", "speedup", ">7.2f"),
        ("vs coll", "speedup_vs_collective", ">7.2f"), ("vs best", "speedup_vs_best", ">7.2f"),
        ("ordered vs best", "ordered_vs_best", ">15.2f"), ("mpiio vs coll", "mpiio_vs_collective", ">13.2f"),
        ("model err", "model_error", ">9.2f"), ("w-orig", "write_original_s", ">8.3f"),
        ("w-coll", "write_collective_s", ">8.3f"), ("w-cont", "write_container_s", ">8.3f"),
        ("remap B", "remap_bytes", ">8"), ("table B", "table_bytes", ">9"),
    ]  # fmt: skip
    width = {k: "".join(ch for ch in f.split(".")[0] if ch.isdigit()) for _, k, f in cols}
    lines = [" ".join(f"{h:>{width[k]}}" if ">" in f else f"{h:{width[k]}}" for h, k, f in cols)]
    for r in rows:
        r = dict(r, run="held-out" if r.get("held_out") else "in-sample")
        cells = []
        for _, k, f in cols:
            v = r.get(k)
            cells.append(f"{'-':>{width[k]}}" if v is None else f"{v:{f}}")
        lines.append(" ".join(cells))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    # Named as --help spells them (the retired --targets and --repeat set the same values).
    flags = {"targets": "--store-targets", "repeat": "--reps"}
    for name in ("targets", "ranks", "segments", "block_kib", "transfer_kib", "tiles", "tile_elems",
                 "elem_bytes", "repeat", "real_repeat"):  # fmt: skip
        if getattr(args, name) < 1:
            parser().error(f"{flags.get(name, '--' + name.replace('_', '-'))} must be at least 1")
    if args.block_kib % args.transfer_kib:
        parser().error("--block-kib must be a multiple of --transfer-kib")
    if not 0 <= args.shift < 100:
        parser().error("--shift must be in [0, 100)")
    cases = args.case or list(CASES)
    stores = args.store or list(STORES)
    for store in stores:  # the mounts' model, checked by its one rule before any work
        try:
            store_model(store, args.targets, args.store_stripe_kib)
        except StoreOptionError as e:
            parser().error(str(e))
    runs = args.run or list(RUNS)
    storages = STORAGES if args.storage == "both" else (args.storage,)
    reads = tuple(m for m in MODES if m in (args.mode or MODES))

    def log(msg: str) -> None:  # progress, on stderr also with --json
        print(msg, file=sys.stderr, flush=True)

    made = {
        "ior": ior(args.ranks, args.segments, args.block_kib * 1024, args.transfer_kib * 1024),
        "tile": tile(args.tiles, args.tiles, args.tile_elems, args.elem_bytes),
    }
    if "held-out" in runs:
        for name in cases:
            try:
                plan_run(made[name])
            except ValueError as e:
                parser().error(str(e))
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="patio-reorg-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    sweep_rows: list[dict[str, Any]] = []
    try:
        for store in stores:
            for name in cases:
                case = made[name]
                for run in runs:
                    held = run == "held-out"
                    log(f"{name} on {store}, {run} ({case.ranks} ranks, {case.file_size >> 20} MiB)")
                    writes = name == "ior" and not held and not args.no_writes
                    modes = reads + (WRITE_MODES if writes else ())
                    rows += measure_case(case, store, args.targets, work, modes, args.repeat, log,
                                         held, args.shift, storages, args.real_repeat,
                                         args.store_stripe_kib)  # fmt: skip
            if args.sweeps:
                sweep_rows += sweeps(made["ior"], store, args.targets, work, log,
                                     args.store_stripe_kib)
                sweep_rows += pieces_sweep(args, store, work, log)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    model_errors(rows)
    result = {
        "store_targets": args.targets,
        "store_stripe_kib": args.store_stripe_kib,
        "cases": rows,
        "sweeps": sweep_rows,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(table(rows))
        if sweep_rows:
            print()
            for s in sweep_rows:
                if s.get("sweep") == "pieces":
                    print(f"pieces/rank {s['pieces_per_rank']:5d} ({s['store']}): original "
                          f"{s['original_s']:.3f} s, collective {s['collective_s']:.3f} s, "
                          f"reorganized {s['reorganized_s']:.3f} s, speedup {s['speedup']:.2f}")  # fmt: skip
                else:
                    print(f"{s['sweep']:8} {s['percent']:3d} % ({s['store']}): original "
                          f"{s['original_s']:.3f} s, reorganized {s['reorganized_s']:.3f} s, "
                          f"speedup {s['speedup']:.2f}, {s['physical_reads']} reads for "
                          f"{s['requests']} requests")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
