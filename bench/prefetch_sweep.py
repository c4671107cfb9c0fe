"""Prefetch policies across slow-store latencies and compute ratios.

Runs ``patio bench prefetch`` once per (latency, compute ratio) cell for the chosen
workloads and reports, per cell and workload, the I/O-time cut of ``pattern`` relative
to ``none`` next to those of ``markov`` and ``oracle`` (and the others), pattern's
accuracy and coverage, and pattern's cut as a share of the oracle's.

    python bench/prefetch_sweep.py                      # the default sweep, a table
    python bench/prefetch_sweep.py --json               # one JSON object
    python bench/prefetch_sweep.py --latencies 2 --ratios 1 --workloads strided
    python bench/prefetch_sweep.py --from sweep.json --grid   # re-render saved --json

Defaults: latency 0.5, 2 and 5 ms; compute ratio 0.5, 1 and 2; workloads strided,
strided-2d, deltas, pagoda, random; 1000 requests, median of 3 alternating repetitions;
200 MB/s, 4 concurrent backend requests, compute sleeps. ``--raw FILE`` keeps every
cell's full ``patio bench prefetch --json`` output (appended as each cell finishes).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "python"))

from patio._binary import patio_binary

PROG = "prefetch_sweep"
POLICIES = ["none", "readahead", "stride", "markov", "pattern", "oracle"]
WORKLOADS = ["strided", "strided-2d", "deltas", "pagoda", "random"]


def run_cell(
    patio: str, latency: float, ratio: float, args: argparse.Namespace
) -> list[dict[str, Any]]:
    cmd = [patio, "bench", "prefetch"]
    for w in args.workloads:
        cmd += ["--workload", w]
    cmd += [
        "--requests", str(args.requests),
        "--reps", str(args.reps),
        "--latency-ms", str(latency),
        "--bandwidth-mbps", str(args.bandwidth_mbps),
        "--concurrency", str(args.concurrency),
        "--compute-ratio", str(ratio),
        "--json",
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"prefetch_sweep: {' '.join(cmd)} failed:\n{done.stderr}")
    out = json.loads(done.stdout)
    return out.get("workloads", [out])


def summarise(latency: float, ratio: float, w: dict[str, Any]) -> dict[str, Any]:
    p = w["policies"]
    cut = {k: p[k]["io_time_reduction"] for k in POLICIES if k in p}
    row: dict[str, Any] = {
        "latency_ms": latency,
        "compute_ratio": ratio,
        "workload": w["workload"],
        "io_time_s": {k: p[k]["io_time_s"] for k in POLICIES if k in p},
        "cut": cut,
        "pattern_accuracy": p["pattern"]["accuracy"],
        "pattern_coverage": p["pattern"]["coverage"],
        "pattern_prefetched_bytes": p["pattern"]["prefetched_bytes"],
        "pattern_wasted_bytes": p["pattern"]["wasted_bytes"],
    }
    oracle = cut.get("oracle", 0.0)
    row["pattern_of_oracle"] = cut["pattern"] / oracle if oracle > 0 else None
    return row


def pct(x: float | None) -> str:
    return "–" if x is None else f"{x * 100:.1f} %"


def table(rows: list[dict[str, Any]]) -> str:
    head = (
        "| latency | compute | workload | pattern | markov | oracle | stride | readahead "
        "| pattern / oracle | pattern accuracy | pattern coverage |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
    )
    lines = [
        f"| {r['latency_ms']:g} ms | {r['compute_ratio']:g} | {r['workload']} "
        f"| {pct(r['cut']['pattern'])} | {pct(r['cut'].get('markov'))} "
        f"| {pct(r['cut'].get('oracle'))} | {pct(r['cut'].get('stride'))} "
        f"| {pct(r['cut'].get('readahead'))} | {pct(r['pattern_of_oracle'])} "
        f"| {pct(r['pattern_accuracy'])} | {pct(r['pattern_coverage'])} |"
        for r in rows
    ]
    return head + "\n".join(lines) + "\n"


def grid(rows: list[dict[str, Any]]) -> str:
    """One row per workload and latency, one column per compute ratio; each cell is
    pattern's cut (markov's / oracle's) and pattern's accuracy."""
    ratios = sorted({r["compute_ratio"] for r in rows})
    keys = sorted(
        {(r["workload"], r["latency_ms"]) for r in rows},
        key=lambda k: (WORKLOADS.index(k[0]) if k[0] in WORKLOADS else 99, k[0], k[1]),
    )
    by = {(r["workload"], r["latency_ms"], r["compute_ratio"]): r for r in rows}
    out = [
        "| workload | latency | "
        + " | ".join(f"compute {x:g}: pattern (markov / oracle) [accuracy]" for x in ratios)
        + " |",
        "|---|---|" + "---|" * len(ratios),
    ]
    for w, lat in keys:
        cells = []
        for x in ratios:
            r = by.get((w, lat, x))
            if r is None:
                cells.append("")
                continue
            c = r["cut"]
            cells.append(
                f"{pct(c['pattern'])} ({pct(c.get('markov'))} / {pct(c.get('oracle'))}) "
                f"[{pct(r['pattern_accuracy'])}]"
            )
        out.append(f"| {w} | {lat:g} ms | " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latencies", type=float, nargs="+", default=[0.5, 2.0, 5.0])
    ap.add_argument("--ratios", type=float, nargs="+", default=[0.5, 1.0, 2.0])
    ap.add_argument("--workloads", nargs="+", default=WORKLOADS)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--bandwidth-mbps", type=float, default=200.0)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--patio", default=None, help="patio binary (default: target/release)")
    ap.add_argument("--raw", type=Path, default=None, help="append raw JSON per cell here")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--grid", action="store_true", help="one column per compute ratio")
    ap.add_argument(
        "--from",
        dest="source",
        type=Path,
        default=None,
        help="render a saved --json output (or --raw file) instead of running",
    )
    args = ap.parse_args()
    if args.source:
        text = args.source.read_text()
        if text.lstrip().startswith('{"latency_ms"'):  # --raw: one cell per line
            cells = [json.loads(line) for line in text.splitlines() if line.strip()]
            rows = [
                summarise(c["latency_ms"], c["compute_ratio"], w) for c in cells for w in c["runs"]
            ]
        else:
            rows = json.loads(text)["rows"]
        sys.stdout.write(grid(rows) if args.grid else table(rows))
        return
    patio = patio_binary(args.patio, prog=PROG)

    rows: list[dict[str, Any]] = []
    started = time.time()
    for latency in args.latencies:
        for ratio in args.ratios:
            t, load_before = time.time(), os.getloadavg()[0]
            workloads = run_cell(patio, latency, ratio, args)
            # The machine's load while the cell ran: other work on the two cores makes
            # the timings noisy.
            load = max(load_before, os.getloadavg()[0])
            if args.raw:
                with args.raw.open("a") as f:
                    cell = {
                        "latency_ms": latency,
                        "compute_ratio": ratio,
                        "load_1min": load,
                        "runs": workloads,
                    }
                    f.write(json.dumps(cell) + "\n")
            rows += [{**summarise(latency, ratio, w), "load_1min": load} for w in workloads]
            print(
                f"prefetch_sweep: {latency:g} ms × {ratio:g} done in {time.time() - t:.0f} s "
                f"(load {load:.1f})",
                file=sys.stderr,
            )
    meta = {
        "command": " ".join(sys.argv),
        "requests": args.requests,
        "reps": args.reps,
        "bandwidth_mbps": args.bandwidth_mbps,
        "concurrency": args.concurrency,
        "seconds": round(time.time() - started, 1),
    }
    if args.json:
        print(json.dumps({**meta, "rows": rows}, indent=2))
    else:
        sys.stdout.write(grid(rows) if args.grid else table(rows))


if __name__ == "__main__":
    main()
