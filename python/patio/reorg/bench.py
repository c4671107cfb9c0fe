"""``patio bench reorg``: reading an IOR-like and an mpi-tile-io-like file with real MPI
processes over the striped storage model, from the original file and from its
reorganized container (REORGANIZATION.md §C.3-C.4, §E).

For each case and store preset, in one run:

1. the file (random bytes) and the trace of the ranks' reads (MPI-IO requests, CSV)
   are written to a scratch directory; ``patio reorg apply`` reorganizes the file
   from the trace into a container beside it (its plan is reported);
2. the scratch directory is served by ``patio mount prefetch --policy none
   --direct-io --store PRESET --store-targets N`` (every read a real read of the file,
   paced by the storage model; a fresh mount per measurement, so no measurement
   inherits another's target clocks);
3. ``mpirun -n RANKS --oversubscribe python -m patio.reorg.ranks`` reads through the
   mount in each mode (:mod:`patio.reorg.ranks`): ``original`` (independent
   ``Read_at`` per request), ``collective`` (file view + ``Read_at_all``, the
   strongest baseline the MPI library offers on the original), ``reorganized``
   (``patio.mpi`` + ``read_extents``) and ``reorganized_pieces`` (the container read
   request by request). Seconds are barrier to barrier, opens included; every rank
   checks its bytes against the source.

``--sweeps`` adds the robustness sweeps (requests X % smaller than planned; starts
shifted by X % of the request) and the gain against the number of pieces per rank
(IOR transfers per block). Output: a table, or ``--json``
``{"cases": [{"name", "store", "ranks", "original_s", "collective_s",
"reorganized_s", "speedup", ...}], "sweeps": [...]}``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Self

import numpy as np

from patio import _mpirun
from patio._binary import patio_binary
from patio.reorg.cases import CASES, Case, ior, tile

PROG = "patio bench reorg"
MODES = ("original", "collective", "reorganized", "reorganized_pieces")
WRITE_MODES = ("write_original", "write_collective", "write_container")
STORES = ("hdd", "ssd")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message}\n")


def mpirun(ranks: int) -> list[str]:
    cmd = _mpirun.command(ranks)
    if cmd is None:
        raise SystemExit(f"{PROG}: error: mpirun is missing (OpenMPI: run scripts/setup.sh)")
    return cmd


class StoreMount:
    """``patio mount prefetch`` of ``source`` on ``mnt`` behind the storage model."""

    def __init__(self, source: Path, mnt: Path, store: str, targets: int):
        self.mnt = mnt
        self.proc = subprocess.Popen(
            [patio_binary(prog=PROG), "mount", "prefetch", str(source), str(mnt), "--policy", "none",
             "--direct-io", "--store", store, "--store-targets", str(targets)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 20
        while not os.path.ismount(mnt):
            if self.proc.poll() is not None:
                raise SystemExit(f"{PROG}: error: the mount failed: {self.proc.communicate()[1].strip()}")
            if time.monotonic() > deadline:
                self.proc.kill()
                raise SystemExit(f"{PROG}: error: the mount did not appear within 20 s")
            time.sleep(0.02)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["fusermount3", "-u", str(self.mnt)], check=False, capture_output=True)
        try:
            self.proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()


def write_inputs(case: Case, src: Path) -> tuple[Path, Path]:
    """The data file and the trace of the ranks' reads."""
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


def reorganize(data: Path, trace: Path, out: Path, store: str) -> dict[str, Any]:
    done = subprocess.run(
        [patio_binary(prog=PROG), "reorg", "apply", str(data), "--trace", str(trace), "-o", str(out),
         "--store", store, "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{PROG}: error: {done.stderr.strip()}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def run_mode(case: Case, mode: str, work: Path, store: str, targets: int,
             perturbation: tuple[str, float] | None = None) -> dict[str, Any]:  # fmt: skip
    """One measurement: a fresh mount, one ``mpirun``."""
    src, mnt = work / "src", work / "mnt"
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
        "case": case.to_dict(), "mode": mode, "path": str(mnt / name),
        "source": str(src / "data.bin"), "out": str(out), "perturb": perturbation,
    }  # fmt: skip
    spec_path = work / "spec.json"
    spec_path.write_text(json.dumps(spec))
    with StoreMount(src, mnt, store, targets):
        done = subprocess.run(
            [*mpirun(case.ranks), sys.executable, "-m", "patio.reorg.ranks", str(spec_path)],
            capture_output=True, text=True, env=_mpirun.environment(), check=False, timeout=3600,
        )  # fmt: skip
    if done.returncode != 0 or not out.exists():
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        raise SystemExit(f"{PROG}: error: {mode} run failed: {' | '.join(tail)}")
    result: dict[str, Any] = json.loads(out.read_text())
    if not result["ok"]:
        raise SystemExit(f"{PROG}: error: {mode} read wrong bytes")
    return result


def measure_case(case: Case, store: str, targets: int, work: Path, modes: tuple[str, ...],
                 repeat: int, log: Any) -> dict[str, Any]:  # fmt: skip
    src = work / "src"
    src.mkdir(parents=True, exist_ok=True)
    (work / "mnt").mkdir(exist_ok=True)
    data, trace = write_inputs(case, src)
    applied = reorganize(data, trace, src / "data.pc", store)
    plan = applied["plan"]
    row: dict[str, Any] = {
        "name": case.name, "store": store, "targets": targets, "ranks": case.ranks,
        "file_bytes": case.file_size, "pieces_per_rank": case.pieces_per_rank(),
        "remap_bytes": plan["remap_bytes"], "table_bytes": plan["table_bytes"],
        "index_bytes": applied["index_bytes"], "apply_s": applied["seconds"],
        "physical_extents_before": plan["physical_extents_before"],
        "physical_extents_after": plan["physical_extents_after"],
        "model_seconds_before": plan["model_seconds_before"],
        "model_seconds_after": plan["model_seconds_one_request"],
    }  # fmt: skip
    for mode in modes:
        times = []
        for _ in range(repeat):
            r = run_mode(case, mode, work, store, targets)
            times.append(r["seconds"])
            row[f"{mode}_physical_reads"] = r["physical_reads"]
        row[f"{mode}_s"] = min(times)
        log(f"  {case.name} {store} {mode}: {min(times):.3f} s")
    if "original_s" in row and "reorganized_s" in row:
        row["speedup"] = row["original_s"] / row["reorganized_s"]
    if "collective_s" in row and "reorganized_s" in row:
        row["speedup_vs_collective"] = row["collective_s"] / row["reorganized_s"]
    if "write_original_s" in row and "write_container_s" in row:
        row["write_speedup"] = row["write_original_s"] / row["write_container_s"]
    shutil.rmtree(src)
    return row


def sweeps(case: Case, store: str, targets: int, work: Path, log: Any) -> list[dict[str, Any]]:
    """Requests smaller than planned and shifted starts, original against reorganized."""
    src = work / "src"
    src.mkdir(parents=True, exist_ok=True)
    (work / "mnt").mkdir(exist_ok=True)
    data, trace = write_inputs(case, src)
    reorganize(data, trace, src / "data.pc", store)
    out = []
    for kind in ("smaller", "shifted"):
        for pct in (0, 10, 25, 50, 75):
            o = run_mode(case, "original", work, store, targets, (kind, pct))
            r = run_mode(case, "reorganized", work, store, targets, (kind, pct))
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
        row = measure_case(case, store, args.targets, work, ("original", "collective", "reorganized"), 1, log)
        row["sweep"] = "pieces"
        out.append(row)
    return out


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--case", choices=CASES, action="append", help="ior and/or tile (default both)")
    p.add_argument("--store", choices=STORES, action="append", help="hdd and/or ssd (default both)")
    p.add_argument("--targets", type=int, default=4, help="storage targets (servers), default 4")
    p.add_argument("--ranks", type=int, default=16, help="IOR ranks (default 16)")
    p.add_argument("--segments", type=int, default=16, help="IOR segments (default 16)")
    p.add_argument("--block-kib", type=int, default=1024, help="IOR block per rank and segment")
    p.add_argument("--transfer-kib", type=int, default=64, help="IOR transfer size")
    p.add_argument("--tiles", type=int, default=8, help="tiles per side (ranks = tiles^2, default 8)")
    p.add_argument("--tile-elems", type=int, default=1024, help="elements per tile side (default 1024)")
    p.add_argument("--elem-bytes", type=int, default=8, help="bytes per element (default 8)")
    p.add_argument("--repeat", type=int, default=1, help="runs per measurement (the fastest is kept)")
    p.add_argument("--sweeps", action="store_true", help="also the robustness and pieces-per-rank sweeps")
    p.add_argument("--no-writes", action="store_true", help="skip the IOR write measurements")
    p.add_argument("--dir", help="scratch directory (default: a temporary one)")
    p.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return p


def table(rows: list[dict[str, Any]]) -> str:
    cols = [
        ("case", "name", "6"), ("store", "store", "5"), ("ranks", "ranks", ">5"),
        ("pieces", "pieces_per_rank", ">6"), ("original", "original_s", ">9.3f"),
        ("collective", "collective_s", ">10.3f"), ("reorg", "reorganized_s", ">8.3f"),
        ("reorg/req", "reorganized_pieces_s", ">9.3f"), ("speedup", "speedup", ">7.2f"),
        ("vs coll", "speedup_vs_collective", ">7.2f"), ("w-orig", "write_original_s", ">8.3f"),
        ("w-coll", "write_collective_s", ">8.3f"), ("w-cont", "write_container_s", ">8.3f"),
        ("remap B", "remap_bytes", ">8"), ("table B", "table_bytes", ">9"),
    ]  # fmt: skip
    width = {k: "".join(ch for ch in f.split(".")[0] if ch.isdigit()) for _, k, f in cols}
    lines = [" ".join(f"{h:>{width[k]}}" if ">" in f else f"{h:{width[k]}}" for h, k, f in cols)]
    for r in rows:
        cells = []
        for _, k, f in cols:
            v = r.get(k)
            cells.append(f"{'-':>{width[k]}}" if v is None else f"{v:{f}}")
        lines.append(" ".join(cells))
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    for name in ("targets", "ranks", "segments", "block_kib", "transfer_kib", "tiles", "tile_elems",
                 "elem_bytes", "repeat"):  # fmt: skip
        if getattr(args, name) < 1:
            parser().error(f"--{name.replace('_', '-')} must be at least 1")
    if args.block_kib % args.transfer_kib:
        parser().error("--block-kib must be a multiple of --transfer-kib")
    cases = args.case or list(CASES)
    stores = args.store or list(STORES)

    def log(msg: str) -> None:  # progress, on stderr also with --json
        print(msg, file=sys.stderr, flush=True)

    made = {
        "ior": ior(args.ranks, args.segments, args.block_kib * 1024, args.transfer_kib * 1024),
        "tile": tile(args.tiles, args.tiles, args.tile_elems, args.elem_bytes),
    }
    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="patio-reorg-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    sweep_rows: list[dict[str, Any]] = []
    try:
        for store in stores:
            for name in cases:
                case = made[name]
                log(f"{name} on {store} ({case.ranks} ranks, {case.file_size >> 20} MiB)")
                modes = MODES + (WRITE_MODES if name == "ior" and not args.no_writes else ())
                rows.append(measure_case(case, store, args.targets, work, modes, args.repeat, log))
            if args.sweeps:
                sweep_rows += sweeps(made["ior"], store, args.targets, work, log)
                sweep_rows += pieces_sweep(args, store, work, log)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    result = {
        "store_targets": args.targets,
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
