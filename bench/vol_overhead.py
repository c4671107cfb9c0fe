"""Per-``H5Dread`` overhead of patio's HDF5 VOL connector against the native connector,
when nothing is redirected (issue 23: goal ≤ 5 %).

``bench/vol_overhead.c``, built against the HDF5 the connector is built for, opens three
copies of one file in one process: ``native`` (the native connector), ``pass`` (patio's
connector, the file has no knowledge base: pass-through) and ``record`` (patio's
connector, the file has a knowledge base: every read recorded into its record log). Per
case it reads the same selection in rounds, the three files in turn with the order
rotated every round, and times every ``H5Dread`` alone (``clock_gettime``). Cases, on a
2048 x 2048 dataset of doubles, chunked (128 x 128, 128 KiB chunks) and contiguous, all
from the page cache (and HDF5's chunk cache where the chunks fit it): hyperslabs of 8
elements, 4 KiB, 64 KiB and 1 MiB, a strided selection (every 8th element of every 8th
row of a 512 x 512 corner, 32 KiB) and 64 scattered points.

Per case and connector: median, p90 and mean µs per read; overhead % and µs of the
medians against native, and the spread of the per-round overhead (p10–p90 of the
rounds' median ratios). The recorded reads are counted in the knowledge base afterwards
and must equal the reads the ``record`` file got.

    python bench/vol_overhead.py            # table
    python bench/vol_overhead.py --json     # one JSON object
    python bench/vol_overhead.py --out r.json   # the table, and the JSON object in r.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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
from patio.layout.kb import KnowledgeBase
from patio.layout.vol import VolError, cc_command, vol_env

CONFIGS = ("native", "pass", "record")
DATASETS = ("chunked", "contiguous")
SHAPE = (2048, 2048)


def build(work: Path) -> Path:
    """bench/vol_overhead.c with -O2 -Wall -Wextra -Werror against the connector's HDF5."""
    if shutil.which("cc") is None:
        sys.exit("vol_overhead: no C compiler")
    exe = work / "vol_overhead"
    subprocess.run(cc_command(REPO / "bench" / "vol_overhead.c", exe), check=True)
    return exe


def make_files(work: Path) -> dict[str, Path]:
    """Three copies of one file, made alike; only ``record``'s has a knowledge base. All
    read once so they sit in the page cache."""
    data = np.random.default_rng(23).random(SHAPE)
    files = {k: work / f"{k}.h5" for k in CONFIGS}
    source = work / "source.h5"
    with h5py.File(source, "w") as f:
        f.create_dataset("chunked", data=data, chunks=(128, 128))
        f.create_dataset("contiguous", data=data)
    for p in files.values():  # made alike: a copy written by h5py reads differently
        shutil.copyfile(source, p)
    source.unlink()
    KnowledgeBase(files["record"]).close()
    for p in files.values():
        p.read_bytes()
    return files


def parse(stdout: str) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    for line in stdout.splitlines():
        _, case, config, elements, reads, med, p90, mean, rounds = line.split()
        out[(case, config)] = {
            "elements": int(elements),
            "reads": int(reads),
            "median_us": float(med) / 1e3,
            "p90_us": float(p90) / 1e3,
            "mean_us": float(mean) / 1e3,
            "round_medians_us": [float(x) / 1e3 for x in rounds.split(",")],
        }
    return out


def quantile(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def rows_of(dataset: str, measured: dict[tuple[str, str], dict[str, Any]]) -> list[dict[str, Any]]:
    rows = []
    for case in dict.fromkeys(c for c, _ in measured):
        native = measured[(case, "native")]
        row: dict[str, Any] = {
            "dataset": dataset,
            "case": case,
            "elements": native["elements"],
            "bytes": 8 * native["elements"],
            "native": native,
        }
        for k in CONFIGS[1:]:
            m = dict(measured[(case, k)])
            per_round = [
                100.0 * (a / b - 1.0)
                for a, b in zip(m["round_medians_us"], native["round_medians_us"])
            ]
            m["overhead_us"] = m["median_us"] - native["median_us"]
            m["overhead_pct"] = 100.0 * m["overhead_us"] / native["median_us"]
            m["overhead_pct_rounds_p10_p90"] = [quantile(per_round, 0.1), quantile(per_round, 0.9)]
            m["mean_overhead_us"] = m["mean_us"] - native["mean_us"]
            row[k] = m
        rows.append(row)
    return rows


def measure(
    exe: Path,
    files: dict[str, Path],
    ds: str,
    args: argparse.Namespace,
    env: dict[str, str],
    all_native: bool,
) -> dict[tuple[str, str], dict[str, Any]]:
    """One run of the reader on one dataset; ``all_native``: the control, all three
    copies opened with the native connector."""
    cmd = [str(exe), *(["--all-native"] if all_native else []),
           *(str(files[k]) for k in CONFIGS), f"/{ds}", str(args.rounds),
           str(args.batch_ms * 1e3)]  # fmt: skip
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0 or done.stderr:
        sys.exit(f"vol_overhead: {' '.join(cmd)} failed or warned:\n{done.stderr}")
    return parse(done.stdout)


def recorded_reads(path: Path) -> int:
    with KnowledgeBase(path) as kb:
        kb.compact()
        return sum(p.reads for p in kb.patterns())


def git_commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30, help="rounds per case (≥ 5)")
    parser.add_argument(
        "--batch-ms",
        type=float,
        default=20.0,
        help="about how long one batch of reads of one file takes",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--out", type=Path, help="also write the JSON object to this file")
    parser.add_argument("--workdir", type=Path, help="scratch directory (default: a temp dir)")
    args = parser.parse_args()
    if args.rounds < 5:
        parser.error("--rounds must be at least 5")
    try:
        env_vol = vol_env()
    except VolError as e:
        sys.exit(f"vol_overhead: {e}")

    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = Path(tmp)
        exe = build(work)
        files = make_files(work)
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("HDF5_") and not k.startswith("PATIO_LAYOUT")
        }
        env["HDF5_PLUGIN_PATH"] = env_vol["HDF5_PLUGIN_PATH"]
        rows: list[dict[str, Any]] = []
        started = time.perf_counter()
        for ds in DATASETS:
            rows += rows_of(ds, measure(exe, files, ds, args, env, False))
            control = rows_of(ds, measure(exe, files, ds, args, env, True))
            for row, aa in zip(rows[-len(control) :], control):
                row["control"] = {k: aa[k]["overhead_pct"] for k in CONFIGS[1:]}
        elapsed = time.perf_counter() - started
        expected = sum(r["record"]["reads"] + 20 for r in rows)  # + the warm-up reads
        recorded = recorded_reads(files["record"])
        if recorded != expected:
            sys.exit(f"vol_overhead: {recorded} reads recorded, expected {expected}")
        if (files["pass"].parent / ".patio-layout" / "pass.h5").exists():
            sys.exit("vol_overhead: the pass-through file got a knowledge base")

    result = {
        "benchmark": "vol_overhead",
        "commit": git_commit(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "hdf5_version": env_vol["hdf5_version"],
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "load_average_before": load_before, "load_average_after": os.getloadavg()},
        "rounds": args.rounds, "batch_ms": args.batch_ms, "elapsed_s": elapsed,
        "recorded_reads": recorded, "rows": rows,
    }  # fmt: skip
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"HDF5 {result['hdf5_version']}, commit {result['commit']}, {result['date']}, "
        f"load {load_before[0]:.2f} -> {result['machine']['load_average_after'][0]:.2f}, "
        f"{args.rounds} rounds, {recorded} reads recorded"
    )
    cols = [("dataset", 10), ("case", 14), ("native µs", 9), ("pass µs", 8), ("Δ µs", 6),
            ("pass %", 7), ("rounds %", 12), ("record µs", 9), ("Δ µs", 6), ("record %", 8),
            ("rounds %", 14), ("A/A %", 11), ("p90 n/p/r µs", 18), ("mean Δrec", 9)]  # fmt: skip
    head = " ".join(f"{name:<{w}}" if i < 2 else f"{name:>{w}}" for i, (name, w) in enumerate(cols))
    print(head)
    print("-" * len(head))
    for r in rows:
        n, p, c = r["native"], r["pass"], r["record"]

        def spread(m: dict[str, Any]) -> str:
            lo, hi = m["overhead_pct_rounds_p10_p90"]
            return f"{lo:+.1f}..{hi:+.1f}"

        cells = [r["dataset"], r["case"], f"{n['median_us']:.2f}", f"{p['median_us']:.2f}",
                 f"{p['overhead_us']:+.2f}", f"{p['overhead_pct']:+.1f}", spread(p),
                 f"{c['median_us']:.2f}", f"{c['overhead_us']:+.2f}", f"{c['overhead_pct']:+.1f}",
                 spread(c), f"{r['control']['pass']:+.1f}/{r['control']['record']:+.1f}",
                 f"{n['p90_us']:.1f}/{p['p90_us']:.1f}/{c['p90_us']:.1f}",
                 f"{c['mean_overhead_us']:+.2f}"]  # fmt: skip
        print(" ".join(f"{v:<{w}}" if i < 2 else f"{v:>{w}}"
                       for i, (v, (_, w)) in enumerate(zip(cells, cols))))  # fmt: skip
    print(
        "\nµs: median per H5Dread; Δ and %: against native's median; rounds %: p10..p90 of "
        "the per-round overheads; A/A %: the control run (all three copies native), the pass "
        "and record copies against the native one; mean Δrec: record's mean minus native's "
        "(µs, includes the log appends); "
        f"{statistics.mean(r['native']['reads'] for r in rows):.0f} reads per case and "
        "connector on average"
    )


if __name__ == "__main__":
    main()
