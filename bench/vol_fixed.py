#!/usr/bin/env python3
"""What patio's HDF5 VOL connector costs per process and per open of a file, against
the native connector: an unmodified C program (``bench/vol_fixed.c``) opens a file,
makes one read and closes it (issue 23's fixed costs).

Files (one 256 x 256 dataset of doubles, each row a chunk, read as a 256 x 4 column
block; everything from the page cache): **native** - the file with a knowledge base and
a replica, opened without the connector; **pass** - a copy without a knowledge base,
through the connector; **recorded** - a copy with a knowledge base but no replica (the
read is recorded); **served** - the file with its knowledge base and a transposed
replica (the read is served from the replica and recorded).

Two measurements, the configurations alternated round by round:

* **per process**: the wall time of a process that opens, reads once and closes (exec,
  loading HDF5 and the connector and its layout core, the knowledge base, the replica,
  the close) - medians of ``--processes`` runs per configuration;
* **per open**: ``--iterations`` open + read + close cycles in one process; the first
  (which loads everything) and the median of the others, split into the file open, the
  read (with the dataset open) and the closes.

Every configuration's reads deliver the same bytes (FNV-1a, checked); after the run the
served file's replica has served reads (``served_reads``) and the recorded file's
knowledge base holds the reads made. ``--json`` prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

import h5py
import numpy as np
from patio.layout import replicas
from patio.layout.kb import KnowledgeBase
from patio.layout.vol import VolError, cc_command, vol_env

CONFIGS = ("native", "pass", "recorded", "served")
SHAPE = (256, 256)
#: The read: start and count of a column block.
READ = (0, 100, 256, 4)


def make_files(work: Path) -> dict[str, Path]:
    data = np.random.default_rng(23).random(SHAPE)
    served = work / "served.h5"
    with h5py.File(served, "w") as f:
        f.create_dataset("data", data=data, chunks=(1, SHAPE[1]))
    files = {"native": served, "served": served, "pass": work / "pass.h5",
             "recorded": work / "recorded.h5"}
    for k in ("pass", "recorded"):
        shutil.copyfile(served, files[k])
    KnowledgeBase(files["recorded"]).close()
    with KnowledgeBase(served) as kb:
        replicas.build(kb, served, "/data", "transposed", {"axes": [1, 0]})
    for p in set(files.values()):
        p.read_bytes()
    return files


def run(exe: Path, path: Path, iterations: int, env: dict[str, str]) -> tuple[float, list[list[float]], str, float]:
    """One process: its wall seconds, per iteration (open, dopen, read, dclose, close)
    in µs, the checksum, and its start-to-first-open µs."""
    t0 = time.perf_counter()
    done = subprocess.run([str(exe), str(path), "/data", str(iterations), *map(str, READ)],
                          env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if done.returncode != 0 or done.stderr:
        sys.exit(f"vol_fixed: {path.name} failed or warned:\n{done.stderr}")
    iters, sums, init = [], set(), 0.0
    for line in done.stdout.splitlines():
        parts = line.split()
        if parts[0] == "iter":
            iters.append([float(x) / 1e3 for x in parts[1:6]])
            sums.add(parts[6])
        elif parts[0] == "init":
            init = float(parts[1]) / 1e3
    if len(sums) != 1:
        sys.exit(f"vol_fixed: {path.name}: reads differ between iterations")
    return wall, iters, sums.pop(), init


def summary(per_process: list[float], first: list[list[float]], steady: list[list[float]],
            init: list[float]) -> dict[str, Any]:
    def med(rows: list[list[float]], cols: tuple[int, ...]) -> float:
        return statistics.median(sum(r[c] for c in cols) for r in rows)

    return {
        "process_ms": statistics.median(per_process) * 1e3,
        "process_ms_p10_p90": [float(np.percentile(per_process, 10)) * 1e3,
                               float(np.percentile(per_process, 90)) * 1e3],
        "init_us": statistics.median(init),
        "first": {"open_us": med(first, (0,)), "read_us": med(first, (1, 2)),
                  "close_us": med(first, (3, 4)), "total_us": med(first, (0, 1, 2, 3, 4))},
        "steady": {"open_us": med(steady, (0,)), "read_us": med(steady, (1, 2)),
                   "close_us": med(steady, (3, 4)), "total_us": med(steady, (0, 1, 2, 3, 4))},
    }


def served_reads(path: Path) -> int:
    with KnowledgeBase(path) as kb:
        kb.compact()
        return sum(r.uses for r in kb.replicas())


def recorded_reads(path: Path) -> int:
    with KnowledgeBase(path) as kb:
        kb.compact()
        return kb.raw_rows() + sum(p.reads for p in kb.patterns())


def table(res: dict[str, Any]) -> str:
    native = res["configs"]["native"]
    configs = list(res["configs"])
    head = (f"{'config':<15} {'process ms':>10} {'Δ ms':>7} {'p10..p90 ms':>13} "
            f"{'1st open':>9} {'1st read':>9} {'1st close':>9} {'open µs':>8} {'read µs':>8} "
            f"{'close µs':>8} {'cycle µs':>8} {'Δ µs':>8}")
    lines = [head, "-" * len(head)]
    for k in configs:
        m = res["configs"][k]
        lo, hi = m["process_ms_p10_p90"]
        f, s = m["first"], m["steady"]
        lines.append(
            f"{k:<15} {m['process_ms']:>10.2f} {m['process_ms'] - native['process_ms']:>+7.2f} "
            f"{lo:>6.1f}..{hi:<6.1f} {f['open_us']:>9.0f} {f['read_us']:>9.0f} "
            f"{f['close_us']:>9.0f} {s['open_us']:>8.0f} {s['read_us']:>8.0f} "
            f"{s['close_us']:>8.0f} {s['total_us']:>8.0f} "
            f"{s['total_us'] - native['steady']['total_us']:>+8.0f}")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=30, help="processes per configuration")
    ap.add_argument("--iterations", type=int, default=30,
                    help="open + read + close cycles per process of the per-open runs")
    ap.add_argument("--rounds", type=int, default=5, help="per-open processes per configuration")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--out", help="also write the JSON object to this file")
    ap.add_argument("--workdir", help="scratch directory (default: a temp dir)")
    ap.add_argument("--plugin-dir", help="the connector's directory, with the layout core "
                    "in it or its parent (default: the installed one, as vol-env prints it)")
    ap.add_argument("--compare-plugin-dir", help="another build of the connector (same layout): "
                    "its pass, recorded and served runs are interleaved with the others, "
                    "named CONFIG/other")
    a = ap.parse_args()
    if a.processes < 3 or a.iterations < 2 or a.rounds < 1:
        sys.exit("vol_fixed: --processes ≥ 3, --iterations ≥ 2, --rounds ≥ 1")
    try:
        venv = vol_env()
    except VolError as e:
        sys.exit(f"vol_fixed: {e}")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("HDF5_", "PATIO_LAYOUT"))}
    plugins = str(Path(a.plugin_dir).resolve()) if a.plugin_dir else venv["HDF5_PLUGIN_PATH"]
    dirs = {k: plugins for k in CONFIGS[1:]}
    if a.compare_plugin_dir:
        dirs.update({f"{k}/other": str(Path(a.compare_plugin_dir).resolve())
                     for k in CONFIGS[1:]})
    configs = ["native", *dirs]
    envs = {k: dict(base) for k in configs}
    for k, d in dirs.items():
        envs[k].update(HDF5_PLUGIN_PATH=d, HDF5_VOL_CONNECTOR=venv["HDF5_VOL_CONNECTOR"])
    with tempfile.TemporaryDirectory(dir=a.workdir) as tmp:
        work = Path(tmp)
        exe = work / "vol_fixed"
        subprocess.run(cc_command(REPO / "bench" / "vol_fixed.c", exe), check=True)
        files = make_files(work)
        load0 = os.getloadavg()[0]
        per_process: dict[str, list[float]] = {k: [] for k in configs}
        first: dict[str, list[list[float]]] = {k: [] for k in configs}
        steady: dict[str, list[list[float]]] = {k: [] for k in configs}
        init: dict[str, list[float]] = {k: [] for k in configs}
        sums = set()
        for r in range(a.processes):
            for j in range(len(configs)):
                k = configs[(j + r) % len(configs)]
                wall, iters, h, _ = run(exe, files[k.split("/")[0]], 1, envs[k])
                per_process[k].append(wall)
                sums.add(h)
        for r in range(a.rounds):
            for j in range(len(configs)):
                k = configs[(j + r) % len(configs)]
                _, iters, h, t = run(exe, files[k.split("/")[0]], a.iterations, envs[k])
                first[k].append(iters[0])
                steady[k] += iters[1:]
                init[k].append(t)
                sums.add(h)
        if len(sums) != 1:
            sys.exit("vol_fixed: the configurations read different bytes")
        served = served_reads(files["served"])
        recorded = recorded_reads(files["recorded"])
        runs = (a.processes + a.rounds * a.iterations) * (2 if a.compare_plugin_dir else 1)
        if served < runs or recorded != runs or served_reads(files["recorded"]):
            sys.exit(f"vol_fixed: {served} reads served and {recorded} recorded, "
                     f"expected {runs} each")
        commit = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, check=False).stdout.strip()
        res = {
            "hdf5_version": venv["hdf5_version"], "commit": commit or "unknown",
            "plugin_dir": plugins, "compare_plugin_dir": a.compare_plugin_dir,
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load": [load0, os.getloadavg()[0]], "processes": a.processes,
            "iterations": a.iterations, "rounds": a.rounds, "read": list(READ),
            "served_reads": served, "recorded_reads": recorded,
            "configs": {k: summary(per_process[k], first[k], steady[k], init[k])
                        for k in configs},
        }
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    if a.json:
        print(json.dumps(res, indent=2))
        return
    print(f"HDF5 {res['hdf5_version']}, commit {res['commit']}, {res['date']}, load "
          f"{res['load'][0]:.2f} -> {res['load'][1]:.2f}; {a.processes} processes per "
          f"configuration; {a.rounds} x {a.iterations} open/read/close cycles; "
          f"{served} reads served, {recorded} recorded")
    print(table(res))
    print("process ms: median wall time of a process that opens, reads once and closes "
          "(p10..p90); 1st: its first cycle in a process of many (µs); open/read/close/cycle "
          "µs: medians of the later cycles; Δ: against native")


if __name__ == "__main__":
    main()
