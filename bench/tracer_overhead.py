"""Overhead of patio's LD_PRELOAD tracer, and the size of what it records.

Each case runs a workload with and without ``patio trace`` side by side, alternating
the order (without, with), (with, without), … and reports medians:

* ``fio-randread-4k``, ``fio-read-4k`` — fio, psync engine, 4 KiB random and sequential
  reads of a file that is read into the page cache first (``invalidate=0`` keeps it
  there), so the reads are as cheap as reads get and the tracer's share is largest;
* ``compute+pread`` — ``bench/compute_io.c``: a fixed amount of computation calibrated
  to about N µs, then one 4 KiB pread, many times (the ≤ 5 % goal applies here).

Three measures, each as without / with / overhead % / ns per call = (with − without) /
calls: *elapsed*, the wall time of the whole command (process start, the tracer's
flushes, and for "with" the ``patio trace`` wrapper itself); *CPU*, user + system time
of the command and all its processes (steadier than wall time on a shared machine);
and what the workload measures itself — fio's mean completion latency per read (clat:
the pread call including the tracer's wrapper) and the compute loop's CPU time.

Then the trace size of a strided workload (fio ``rw=read:12k``, 4 KiB reads 16 KiB apart):
bytes per recorded request of the raw per-process capture (.praw) and of the merged
native trace (.ptrace, pattern-encoded), with the records checked against the plan.

    python bench/tracer_overhead.py            # table
    python bench/tracer_overhead.py --json     # one JSON object
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
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

from patio._binary import patio_binary

PROG = "tracer_overhead"


def run(cmd: list[str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system of all its processes) and stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"tracer_overhead: {' '.join(cmd)} failed:\n{done.stderr}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu, done.stdout


def fio_clat_ns(stdout: str) -> float:
    job = json.loads(stdout[stdout.index("{") :])["jobs"][0]
    return float(job["read"]["clat_ns"]["mean"])


def compute_loop_ns(stdout: str) -> float:
    return float(stdout.split()[1])  # the loop's CPU time


def traced_requests(out: Path, work: Path) -> int:
    merged = work / "check.ptrace"
    done = subprocess.run(
        [patio_binary(prog=PROG), "trace", "merge", str(out), "-o", str(merged)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    done = subprocess.run(
        [patio_binary(prog=PROG), "analyze", str(merged), "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return int(json.loads(done.stdout)["totals"]["requests"])


def measure(
    name: str,
    command: list[str],
    data: Path,
    calls: int,
    inner: Any,
    runs: int,
    work: Path,
) -> dict[str, Any]:
    """Alternates plain and traced runs; medians of each measure."""
    samples: dict[tuple[str, bool], list[float]] = {}
    out = work / f"trace-{name}"
    for i in range(runs):
        for traced in (False, True) if i % 2 == 0 else (True, False):
            cmd = command
            if traced:
                shutil.rmtree(out, ignore_errors=True)
                cmd = [
                    patio_binary(prog=PROG),
                    "trace",
                    "-o",
                    str(out),
                    "--only",
                    str(data),
                    "--",
                    *command,
                ]
            wall, cpu, stdout = run(cmd)
            for measure_name, value in (("wall", wall), ("cpu", cpu), ("inner", inner(stdout))):
                samples.setdefault((measure_name, traced), []).append(value)
    recorded = traced_requests(out, work)
    if recorded != calls:
        sys.exit(f"tracer_overhead: {name}: traced {recorded} requests, expected {calls}")
    row: dict[str, Any] = {
        "name": name,
        "calls": calls,
        "runs": runs,
        "inner_metric": "fio clat ns per read" if inner is fio_clat_ns else "loop CPU ns",
    }
    for m, unit in (("wall", 1e9), ("cpu", 1e9), ("inner", 1.0)):
        without = statistics.median(samples[(m, False)])
        with_ = statistics.median(samples[(m, True)])
        per_call = (with_ - without) * unit
        if m != "inner" or inner is compute_loop_ns:
            per_call /= calls  # totals; fio's clat is per read already
        row[m] = {
            "without": without,
            "with": with_,
            "overhead_pct": 100.0 * (with_ - without) / without,
            "ns_per_call": per_call,
        }
    return row


def trace_size(work: Path, data: Path, requests: int) -> dict[str, Any]:
    """Bytes per request of a strided workload's raw capture and merged trace."""
    out = work / "trace-strided"
    shutil.rmtree(out, ignore_errors=True)
    stride = 16384
    size = stride * requests
    with data.open("wb") as f:  # sparse: reads of holes, nothing on disk
        f.truncate(size)
    job = [
        "fio", "--name=strided", f"--filename={data}", "--rw=read:12k", "--bs=4k",
        f"--size={size}", f"--io_size={4096 * requests}", "--ioengine=psync",
        "--invalidate=0", "--output=/dev/null",
    ]  # fmt: skip
    cmd = [patio_binary(prog=PROG), "trace", "-o", str(out), "--only", str(data), "--"]
    run(cmd + job)
    raw = sum(p.stat().st_size for p in out.glob("*.praw"))
    merged = work / "strided.ptrace"
    subprocess.run(
        [patio_binary(prog=PROG), "trace", "merge", str(out), "-o", str(merged)],
        capture_output=True, check=True,
    )  # fmt: skip
    done = subprocess.run(
        [patio_binary(prog=PROG), "analyze", str(merged), "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    report = json.loads(done.stdout)
    (stream,) = report["streams"]
    if stream["requests"] != requests or stream["signature"] != f"[0, ({stride})^{requests - 1}]":
        sys.exit(f"tracer_overhead: strided trace is not what fio did: {stream}")
    return {
        "workload": f"fio rw=read:12k bs=4k ioengine=psync, {requests} reads",
        "requests": requests,
        "praw_bytes": raw,
        "praw_bytes_per_request": raw / requests,
        "ptrace_bytes": merged.stat().st_size,
        "ptrace_bytes_per_request": merged.stat().st_size / requests,
        "offsets_lengths_encoded_bytes": report["totals"]["encoded_bytes"],
        "raw_record_bytes_per_request": 16,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="repetitions of each side (≥ 5)")
    parser.add_argument("--fio-ios", type=int, default=200_000, help="reads per fio run")
    parser.add_argument("--file-mib", type=int, default=64, help="size of the data file")
    parser.add_argument("--iterations", type=int, default=20_000, help="compute+pread loops")
    parser.add_argument("--compute-us", type=int, default=20, help="compute per loop, µs")
    parser.add_argument("--strided-requests", type=int, default=65_536)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--workdir", type=Path, help="scratch directory (default: a temp dir)")
    args = parser.parse_args()
    if args.runs < 5:
        parser.error("--runs must be at least 5")
    for tool in ("fio", "gcc"):
        if not shutil.which(tool):
            sys.exit(f"tracer_overhead: {tool} not found: run scripts/setup.sh")

    with tempfile.TemporaryDirectory(dir=args.workdir) as tmp:
        work = Path(tmp)
        data = work / "data.bin"
        with data.open("wb") as f:
            for _ in range(args.file_mib):
                f.write(os.urandom(1 << 20))
        data.read_bytes()  # into the page cache
        loop = work / "compute_io"
        subprocess.run(
            ["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(loop),
             str(REPO / "bench" / "compute_io.c")],
            check=True,
        )  # fmt: skip

        spins = subprocess.run(
            [str(loop), "--calibrate", str(args.compute_us)],
            capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip

        def fio(rw: str) -> list[str]:
            return [
                "fio", "--name=bench", f"--filename={data}", f"--rw={rw}", "--bs=4k",
                f"--size={args.file_mib}M", f"--number_ios={args.fio_ios}",
                f"--io_size={args.fio_ios * 4096 * 4}", "--ioengine=psync",
                "--invalidate=0", "--randrepeat=1", "--output-format=json",
            ]  # fmt: skip

        cases = [
            measure("fio-randread-4k", fio("randread"), data, args.fio_ios, fio_clat_ns,
                    args.runs, work),
            measure("fio-read-4k", fio("read"), data, args.fio_ios, fio_clat_ns, args.runs,
                    work),
            measure("compute+pread", [str(loop), str(data), str(args.iterations), spins],
                    data, args.iterations, compute_loop_ns, args.runs, work),
        ]  # fmt: skip
        size = trace_size(work, work / "strided.bin", args.strided_requests)

    result = {
        "cases": cases,
        "trace_size": size,
        "environment": {
            "host": platform.node(),
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "load_average": os.getloadavg(),
            "fio": subprocess.run(
                ["fio", "--version"], capture_output=True, text=True, check=False
            ).stdout.strip(),
            "compute_us": args.compute_us,
            "compute_spins": int(spins),
            "file_mib": args.file_mib,
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"tracer overhead: medians of {args.runs} alternating runs each side")
    print(
        f"{'case':<17}{'measure':<16}{'calls':>7}{'without':>12}{'with':>12}"
        f"{'overhead':>10}{'ns/call':>9}"
    )
    for c in cases:
        is_fio = c["inner_metric"].startswith("fio")
        inner = "clat ns/read" if is_fio else "loop CPU s"
        for m, label, scale in (
            ("wall", "elapsed s", 1.0),
            ("cpu", "CPU s", 1.0),
            ("inner", inner, 1.0 if is_fio else 1e-9),
        ):
            r = c[m]
            print(
                f"{c['name'] if m == 'wall' else '':<17}{label:<16}{c['calls']:>7}"
                f"{r['without'] * scale:>12.4g}{r['with'] * scale:>12.4g}"
                f"{r['overhead_pct']:>9.1f}%{r['ns_per_call']:>9.0f}"
            )
    s = size
    print(f"\ntrace size, {s['workload']}:")
    rows = [
        ("raw capture (.praw)", s["praw_bytes"], s["praw_bytes_per_request"], ""),
        ("merged (.ptrace)", s["ptrace_bytes"], s["ptrace_bytes_per_request"], "times included"),
        ("offsets+lengths", s["offsets_lengths_encoded_bytes"],
         s["offsets_lengths_encoded_bytes"] / s["requests"], "analyze encoded_bytes"),
    ]  # fmt: skip
    for label, total, per, note in rows:
        print(f"  {label:<22}{total:>10} bytes {per:>9.3f} bytes/request  {note}")
    print(f"  (a raw (offset, length) record is {s['raw_record_bytes_per_request']} bytes)")


if __name__ == "__main__":
    main()
