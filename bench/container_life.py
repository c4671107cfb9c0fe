"""Long-lived files through ``patio mount container`` against the same operations on
a plain directory (ext4, or whatever file system holds the work directory).

Four workloads, each on a fresh backend and mount (compaction with the mount's
default thresholds) and on a fresh plain directory, run one after the other:

* ``rewrite`` — a 1 MiB checkpoint rewritten with ``open(path, "wb")`` + one write +
  close, N times;
* ``truncate`` — one descriptor kept open; N cycles of {``ftruncate`` to 64 KiB,
  ``pwrite`` 4 KiB at a random place below 64 KiB, ``pread`` of the same 4 KiB,
  checked};
* ``append`` — a log line appended by ``open(path, "ab")`` + write + close, N times;
* ``exerciser`` — E random operations on one file of at most 256 KiB (writes of up
  to 16 KiB, reads checked against a byte-array model, truncations, close and
  reopen), the same seed on both sides.

For the first three, the per-operation time of the first 100 operations and of the
last 100 (of N) are reported (median; goal: last within 2× of first). After each
workload the backend's files and allocated bytes are counted against the live data
(goal: within 2× of the live data plus one log set per writer still open — none at
that point — i.e. ≤ 2× live + 3 files + the container's fixed files). For the
exerciser, its total time against the plain directory (goal: within 10×).

Neither side syncs at ``close`` or truncation (the mount's durability contract is a
local file system's: ``fsync`` and unmount sync). Both sides run the same Python
loop, so its per-call overhead is part of both. With ``--fuse-floor`` the selected
workloads also run through ``patio mount trace`` (a FUSE passthrough with direct
I/O, as the container mount uses: every call a round trip to a daemon that does
``pwrite``/``pread`` on one plain file), the cost of FUSE alone.

    python bench/container_life.py                 # table, N = 10,000, E = 20,000
    python bench/container_life.py --json
    python bench/container_life.py --ops 500 --exerciser 2000   # a quick look
    python bench/container_life.py --only exerciser --fuse-floor
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from container_fuse import Mount

MIB = 1 << 20
# A container's files besides its log sets: marker, truncation log, two lock files.
FIXED_FILES = 4
# Allocation slack of the bytes goal: a log set's three files and the fixed files,
# a few blocks each.
SLACK = 64 << 10
WORKLOADS = ["rewrite", "truncate", "append", "exerciser"]


def rewrite(path: Path, n: int, rng: random.Random) -> tuple[list[float], bytes]:
    times = []
    data = b""
    for i in range(n):
        data = bytes([i % 251]) * MIB
        t = time.perf_counter()
        with open(path, "wb") as f:
            f.write(data)
        times.append(time.perf_counter() - t)
    return times, data


def truncate_loop(path: Path, n: int, rng: random.Random) -> tuple[list[float], bytes]:
    size = 64 << 10
    model = bytearray(size)
    path.touch()
    fd = os.open(path, os.O_RDWR)
    times = []
    try:
        for i in range(n):
            at = rng.randrange(0, size - 4096)
            block = bytes([(i % 250) + 1]) * 4096
            t = time.perf_counter()
            os.ftruncate(fd, size)
            os.pwrite(fd, block, at)
            got = os.pread(fd, 4096, at)
            times.append(time.perf_counter() - t)
            model[at : at + 4096] = block
            if got != block:
                sys.exit(f"container_life: truncate cycle {i} read back wrong data")
    finally:
        os.close(fd)
    return times, bytes(model)


def append(path: Path, n: int, rng: random.Random) -> tuple[list[float], bytes]:
    times = []
    out = bytearray()
    for i in range(n):
        line = f"line {i:08d}\n".encode()
        t = time.perf_counter()
        with open(path, "ab") as f:
            f.write(line)
        times.append(time.perf_counter() - t)
        out += line
    return times, bytes(out)


def exerciser(path: Path, n: int, rng: random.Random) -> tuple[list[float], bytes]:
    """Random writes, checked reads, truncations and reopens against a model."""
    limit = 256 << 10
    model = bytearray()
    path.touch()
    fd = os.open(path, os.O_RDWR)
    times = []
    try:
        for i in range(n):
            op = rng.random()
            t = time.perf_counter()
            if op < 0.45:
                at = rng.randrange(0, limit)
                length = rng.randrange(1, min(16 << 10, limit - at) + 1)
                data = bytes([(i % 253) + 1]) * length
                os.pwrite(fd, data, at)
                if len(model) < at + length:
                    model.extend(bytes(at + length - len(model)))
                model[at : at + length] = data
            elif op < 0.85:
                at = rng.randrange(0, limit)
                length = rng.randrange(1, 16 << 10)
                got = os.pread(fd, length, at)
                if got != bytes(model[at : at + length]):
                    sys.exit(f"container_life: exerciser op {i}: read at {at}+{length} differs")
            elif op < 0.95:
                size = rng.randrange(0, limit)
                os.ftruncate(fd, size)
                if size < len(model):
                    del model[size:]
                else:
                    model.extend(bytes(size - len(model)))
            else:
                os.close(fd)
                fd = os.open(path, os.O_RDWR)
            times.append(time.perf_counter() - t)
    finally:
        os.close(fd)
    return times, bytes(model)


RUNS: dict[str, Callable[[Path, int, random.Random], tuple[list[float], bytes]]] = {
    "rewrite": rewrite,
    "truncate": truncate_loop,
    "append": append,
    "exerciser": exerciser,
}


def footprint(d: Path) -> tuple[int, int]:
    """Files and allocated bytes under `d`."""
    files = 0
    used = 0
    for root, _, names in os.walk(d):
        for name in names:
            files += 1
            used += os.lstat(os.path.join(root, name)).st_blocks * 512
    return files, used


def ms(xs: list[float]) -> float:
    return statistics.median(xs) * 1e3 if xs else 0.0


def run_one(work: Path, name: str, target: str, n: int, seed: int) -> dict[str, Any]:
    case = work / f"{name}-{target}"
    case.mkdir()
    rng = random.Random(seed)
    mount = None
    err = ""
    try:
        if target in ("mount", "fuse"):
            index = "pattern" if target == "mount" else None
            mount = Mount(case / "backend", case / "mnt", index)
            path = mount.mnt / "file"
        else:
            (case / "plain").mkdir()
            path = case / "plain" / "file"
        start = time.perf_counter()
        times, expect = RUNS[name](path, n, rng)
        total = time.perf_counter() - start
        if path.read_bytes() != expect:
            sys.exit(f"container_life: {name} on {target}: the file differs from the model")
        if mount is not None:
            err = mount.stop()
            mount = None
        store = case / ("plain" if target == "plain" else "backend")
        files, used = footprint(store)
    finally:
        if mount is not None:
            mount.cleanup()
    first, last = times[:100], times[-100:]
    row: dict[str, Any] = {
        "workload": name,
        "target": target,
        "ops": n,
        "total_s": total,
        "first100_ms": ms(first),
        "last100_ms": ms(last),
        "growth": ms(last) / ms(first) if ms(first) else 0.0,
        "live_bytes": len(expect),
        "backend_files": files,
        "backend_bytes": used,
    }
    if target == "mount":
        row["mount_summary"] = [line.strip() for line in err.splitlines() if line.startswith("  ")]
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=10_000, help="N of rewrite, truncate, append")
    parser.add_argument("--exerciser", type=int, default=20_000, help="E of the exerciser")
    parser.add_argument("--only", choices=WORKLOADS, action="append", help="run only these")
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--fuse-floor",
        action="store_true",
        help="also run each workload through a FUSE passthrough (patio mount trace)",
    )
    parser.add_argument("--patio", type=Path, help="patio binary (default: the repository's)")
    args = parser.parse_args()
    if args.ops < 200 or args.exerciser < 1:
        parser.error("--ops must be at least 200 (first and last 100), --exerciser at least 1")
    if args.patio:
        if not os.access(args.patio, os.X_OK):
            parser.error(f"--patio {args.patio}: not an executable")
        os.environ["PATIO_BIN"] = str(args.patio.resolve())
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="patio-life-", dir=os.environ.get("PATIO_BENCH_DIR")) as t:
        work = Path(t)
        for name in args.only or WORKLOADS:
            n = args.exerciser if name == "exerciser" else args.ops
            for target in ("mount", "plain", *(["fuse"] if args.fuse_floor else [])):
                row = run_one(work, name, target, n, args.seed)
                rows.append(row)
                if not args.json:
                    print(
                        f"  {name:<9} {target:<5} {row['total_s']:8.1f} s  "
                        f"first {row['first100_ms']:.3f} ms  last {row['last100_ms']:.3f} ms",
                        file=sys.stderr,
                    )
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
    ).stdout.strip()
    goals = []
    by = {(r["workload"], r["target"]): r for r in rows}
    for name in args.only or WORKLOADS:
        m, p = by[(name, "mount")], by[(name, "plain")]
        entry = {
            "workload": name,
            "flat": m["growth"] <= 2.0 if name != "exerciser" else None,
            "bounded_bytes": m["backend_bytes"] <= 2 * m["live_bytes"] + SLACK,
            "bounded_files": m["backend_files"] <= FIXED_FILES + 3,
            "vs_plain": m["total_s"] / p["total_s"] if p["total_s"] else 0.0,
        }
        fuse = by.get((name, "fuse"))
        if fuse is not None:
            entry["fuse_vs_plain"] = fuse["total_s"] / p["total_s"] if p["total_s"] else 0.0
        goals.append(entry)
    result = {
        "commit": commit,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_before": load_before,
        "load_after": os.getloadavg(),
        "rows": rows,
        "goals": goals,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"container lifecycle: commit {commit}, {result['date']}, load "
        f"{load_before[0]:.1f} → {result['load_after'][0]:.1f}"
    )
    print(
        f"{'workload':<10} {'target':<6} {'ops':>6} {'total s':>8} {'first100 ms':>12} "
        f"{'last100 ms':>11} {'last/first':>10} {'live B':>9} {'files':>6} {'store B':>10}"
    )
    for r in rows:
        print(
            f"{r['workload']:<10} {r['target']:<6} {r['ops']:>6} {r['total_s']:>8.2f} "
            f"{r['first100_ms']:>12.3f} {r['last100_ms']:>11.3f} {r['growth']:>10.2f} "
            f"{r['live_bytes']:>9} {r['backend_files']:>6} {r['backend_bytes']:>10}"
        )
    for g in goals:
        flat = "-" if g["flat"] is None else ("met" if g["flat"] else "NOT met")
        print(
            f"goals {g['workload']:<10} flat (≤2×): {flat}; store ≤ 2× live + 64 KiB: "
            f"{'met' if g['bounded_bytes'] else 'NOT met'}; files ≤ {FIXED_FILES + 3}: "
            f"{'met' if g['bounded_files'] else 'NOT met'}; time vs plain {g['vs_plain']:.1f}×"
            + (f" (FUSE passthrough {g['fuse_vs_plain']:.1f}×)" if "fuse_vs_plain" in g else "")
        )


if __name__ == "__main__":
    main()
