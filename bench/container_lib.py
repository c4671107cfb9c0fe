"""Library-level bandwidth of patio's container: N-1 strided writes from P processes.

P processes (``multiprocessing``, fork) write one logical file with 4 KiB blocks, rank
strided: process p writes blocks p, p+P, p+2P, ... (W writes each). Three ways, side by
side in one run, alternating, median of ``--reps``:

* ``plain``   — every process ``os.pwrite``s into one shared plain file, then ``fsync``;
* ``pattern`` — every process writes through its own ``patio.Container(path, "a")``
  writer (pattern index), and closes it (close = flush: data and index synced);
* ``raw``     — the same with a ``raw`` index (one entry per write).

Then the page cache of the files written is dropped (``posix_fadvise DONTNEED`` on
those files only, after they were synced) and every process reads its own blocks back
(4 KiB ``pread`` / ``Container.read_at``; containers are opened by each process, the
open is timed): the *cold* read. A second pass reads again from the page cache (*warm*).
Every block read is compared with what was written. Finally one process opens each
container alone (warm cache, best of 20) to time the reader open without contention.

Bandwidths are end to end: total bytes / (last process done - first process started),
a write phase includes the final sync (also reported: the bandwidth until the last
process's last write returned, before its sync). The backend is this machine's local disk
(ext4 on a virtual disk) and its page cache: writes are absorbed by the page cache and
bounded by the final sync, warm reads never touch the disk.

    python bench/container_lib.py                         # P = 8, 16; W = 1, 4, 16, 64 Ki
    python bench/container_lib.py --procs 8 --writes 1024 --reps 1 --json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
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

import patio

BLOCK = 4096
VARIANTS = ["plain", "pattern", "raw"]


def block_bytes(p: int) -> bytes:
    return bytes([p % 251 + 1]) * BLOCK


def offsets(p: int, procs: int, writes: int) -> range:
    return range(p * BLOCK, procs * writes * BLOCK, procs * BLOCK)


# ------------------------------------------------------------------ child processes


def write_child(
    variant: str, path: str, p: int, procs: int, writes: int, barrier: Any, q: Any
) -> None:
    data = block_bytes(p)
    offs = offsets(p, procs, writes)
    barrier.wait()
    t0 = time.perf_counter()
    if variant == "plain":
        fd = os.open(path, os.O_WRONLY)
        pwrite = os.pwrite
        for off in offs:
            pwrite(fd, data, off)
        t_loop = time.perf_counter()
        os.fsync(fd)
        os.close(fd)
    else:
        c = patio.Container(path, "a")
        write = c.write_at
        for off in offs:
            write(off, data)
        t_loop = time.perf_counter()
        c.close()
    q.put((p, t0, time.perf_counter(), t_loop))


def read_child(
    variant: str, path: str, p: int, procs: int, writes: int, barrier: Any, q: Any
) -> None:
    expect = block_bytes(p)
    offs = offsets(p, procs, writes)
    bad = 0
    barrier.wait()
    t0 = time.perf_counter()
    if variant == "plain":
        fd = os.open(path, os.O_RDONLY)
        t_open = time.perf_counter()
        pread = os.pread
        for off in offs:
            if pread(fd, BLOCK, off) != expect:
                bad += 1
        os.close(fd)
    else:
        c = patio.Container(path)
        t_open = time.perf_counter()
        read = c.read_at
        for off in offs:
            if read(BLOCK, off) != expect:
                bad += 1
        c.close()
    q.put((p, t0, time.perf_counter(), t_open - t0, bad))


def run_phase(
    target: Any, variant: str, path: str, procs: int, writes: int
) -> list[tuple[Any, ...]]:
    ctx = multiprocessing.get_context("fork")
    barrier = ctx.Barrier(procs)
    q = ctx.Queue()
    children = [
        ctx.Process(target=target, args=(variant, path, p, procs, writes, barrier, q))
        for p in range(procs)
    ]
    for c in children:
        c.start()
    results = [q.get(timeout=3600) for _ in children]
    for c in children:
        c.join()
        if c.exitcode != 0:
            sys.exit(f"container_lib: a {variant} process failed (exit {c.exitcode})")
    return results


def drop_cache(path: Path) -> None:
    """Drops the (synced) pages of the files at ``path`` from the page cache."""
    files = [path] if path.is_file() else [f for f in path.iterdir() if f.is_file()]
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


# ------------------------------------------------------------------------- one run


def one(variant: str, root: Path, procs: int, writes: int) -> dict[str, Any]:
    path = root / ("shared.bin" if variant == "plain" else f"shared.{variant}")
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    if variant == "plain":
        path.touch()
    else:
        patio.Container(path, "w", index=variant).close()
    total = procs * writes * BLOCK
    w = run_phase(write_child, variant, str(path), procs, writes)
    write_s = max(x[2] for x in w) - min(x[1] for x in w)
    loop_s = max(x[3] for x in w) - min(x[1] for x in w)
    out: dict[str, Any] = {"variant": variant, "procs": procs, "writes": writes, "bytes": total}
    out["write_mbps"] = total / write_s / 1e6
    # Until the last process's last write returned, before the final sync.
    out["write_unsynced_mbps"] = total / loop_s / 1e6
    for temp in ("cold", "warm"):
        if temp == "cold":
            drop_cache(path)
        r = run_phase(read_child, variant, str(path), procs, writes)
        if sum(x[4] for x in r):
            sys.exit(f"container_lib: {variant}: {sum(x[4] for x in r)} blocks read back wrong")
        read_s = max(x[2] for x in r) - min(x[1] for x in r)
        out[f"read_{temp}_mbps"] = total / read_s / 1e6
        out[f"open_{temp}_max_ms"] = max(x[3] for x in r) * 1e3
    if variant == "plain":
        out["open_1_ms"] = 0.0
        out["index_disk_bytes"] = 0
        out["index_mem_bytes"] = 0
    else:
        opens = []
        for _ in range(20):
            t0 = time.perf_counter()
            patio.Container(path).close()
            opens.append(time.perf_counter() - t0)
        out["open_1_ms"] = min(opens) * 1e3
        with patio.Container(path) as c:
            s = c.stats()
            assert s["size"] == total and s["writes"] == procs * writes, s
            out["index_disk_bytes"] = s["index_disk_bytes"]
            out["index_mem_bytes"] = s["index_mem_bytes"]
            out["tiles"] = s["tiles"]
    if path.is_dir():
        shutil.rmtree(path)
    else:
        path.unlink()
    return out


def median_of(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out = dict(runs[0])
    for k, v in runs[0].items():
        if isinstance(v, float):
            out[k] = statistics.median(r[k] for r in runs)
    out["reps"] = len(runs)
    return out


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def table(cells: list[dict[str, Any]]) -> str:
    lines = [
        (
            "| P | writes/proc | data | variant | write MB/s | writes before sync MB/s "
            "| read cold MB/s | read warm MB/s "
            "| open alone ms | open all-P cold ms (max) | index on disk | index in memory |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        lines.append(
            f"| {c['procs']} | {c['writes'] // 1024} Ki | {human(c['bytes'])} | {c['variant']} "
            f"| {c['write_mbps']:.0f} | {c['write_unsynced_mbps']:.0f} "
            f"| {c['read_cold_mbps']:.0f} | {c['read_warm_mbps']:.0f} "
            f"| {c['open_1_ms']:.2f} | {c['open_cold_max_ms']:.1f} "
            f"| {human(c['index_disk_bytes'])} | {human(c['index_mem_bytes'])} |"
        )
    lines += [
        "",
        (
            "| P | writes/proc | pattern/plain write | raw/plain write | pattern/plain read cold "
            "| raw/plain read cold | pattern/plain read warm | raw/plain read warm "
            "| raw/pattern open alone | raw/pattern index on disk |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    by = {(c["procs"], c["writes"], c["variant"]): c for c in cells}
    for procs, writes in sorted({(c["procs"], c["writes"]) for c in cells}):
        pl, pa, ra = (by.get((procs, writes, v)) for v in VARIANTS)
        if not (pl and pa and ra):
            continue

        def ratio(a: dict[str, Any], b: dict[str, Any], key: str) -> str:
            return f"{a[key] / b[key]:.2f}×"

        lines.append(
            f"| {procs} | {writes // 1024} Ki | {ratio(pa, pl, 'write_mbps')} "
            f"| {ratio(ra, pl, 'write_mbps')} | {ratio(pa, pl, 'read_cold_mbps')} "
            f"| {ratio(ra, pl, 'read_cold_mbps')} | {ratio(pa, pl, 'read_warm_mbps')} "
            f"| {ratio(ra, pl, 'read_warm_mbps')} "
            f"| {ra['open_1_ms'] / pa['open_1_ms']:.1f}× "
            f"| {ra['index_disk_bytes'] / pa['index_disk_bytes']:.0f}× |"
        )
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--procs", type=int, nargs="+", default=[8, 16])
    ap.add_argument("--writes", type=int, nargs="+", default=[1024, 4096, 16384, 65536],
                    help="writes (4 KiB blocks) per process")  # fmt: skip
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--dir", type=Path, default=None,
                    help="where to write (default: a temporary directory under /tmp)")  # fmt: skip
    ap.add_argument("--json", action="store_true", help="one JSON object instead of tables")
    args = ap.parse_args()
    if min(args.procs) < 1 or min(args.writes) < 1 or args.reps < 1:
        sys.exit("container_lib: --procs, --writes and --reps must be at least 1")
    root = Path(tempfile.mkdtemp(prefix="patio-container-lib-", dir=args.dir))
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    cells = []
    try:
        for procs in args.procs:
            for writes in args.writes:
                runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
                for rep in range(args.reps):
                    order = VARIANTS[rep % 3 :] + VARIANTS[: rep % 3]
                    for v in order:
                        runs[v].append(one(v, root, procs, writes))
                for v in VARIANTS:
                    cells.append(median_of(runs[v]))
                    if not args.json:
                        c = cells[-1]
                        print(
                            f"P={procs} W={writes} {v}: write {c['write_mbps']:.0f} MB/s, "
                            f"read cold {c['read_cold_mbps']:.0f} MB/s, "
                            f"warm {c['read_warm_mbps']:.0f} MB/s, open {c['open_1_ms']:.2f} ms",
                            file=sys.stderr,
                            flush=True,
                        )
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {
        "commit": commit,
        "date": time.strftime("%Y-%m-%d"),
        "block": BLOCK,
        "reps": args.reps,
        "backend": str(args.dir or tempfile.gettempdir()),
        "cells": cells,
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"commit {commit}, {result['date']}, median of {args.reps}\n")
        print(table(cells))


if __name__ == "__main__":
    main()
