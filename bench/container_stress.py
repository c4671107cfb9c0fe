"""Background compaction under stress: ``patio bench stress`` (random writes, reads,
truncations down and up, ``copy_file_range``, fallocate where supported, reopens,
every read checked against a byte model) through ``patio mount container``, many
runs, each on a fresh backend and mount. A stress test, not a benchmark: the figure
is the number of mismatches (goal: 0), beside the operations run and how much the
background compaction did meanwhile.

Two workload shapes alternate from run to run (seed = run number):

* ``fsx`` — one process, one thread, one file of at most 256 KiB, one descriptor for
  the whole run (one writer, rolled over by truncations), the size checked after
  every operation: the shape of xfstests' ``fsx -N 100000 -R -W``;
* ``shared`` — 2 processes × 2 threads on 3 files, reopening (sometimes with
  ``O_TRUNC``): several writers per file, ended and taken over all the time.

and two compaction settings: the mount's defaults, and ``--aggressive`` thresholds
(``--compact-max-logs 2 --compact-min-dead 0``) under which it compacts after
nearly every truncation and close.

    python bench/container_stress.py                   # 100 runs × 100,000 operations, defaults
    python bench/container_stress.py --runs 10 --ops 20000 --aggressive
    python bench/container_stress.py --json
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from container_fuse import Mount, patio_binary

SHAPES = {
    "fsx": ["--procs", "1", "--threads", "1", "--files", "1", "--skip", "reopen", "--size-checks"],
    "shared": ["--procs", "2", "--threads", "2", "--files", "3"],
}
AGGRESSIVE = ["--compact-max-logs", "2", "--compact-min-dead", "0"]


def summary_count(stderr: str, what: str) -> int:
    """A count from the mount's closing summary (``compactions    1,234 (…)``)."""
    m = re.search(rf"^\s*{what}\s+([\d,]+)", stderr, re.MULTILINE)
    return int(m.group(1).replace(",", "")) if m else 0


def one_run(work: Path, run: int, shape: str, ops: int, mount_args: list[str]) -> dict[str, Any]:
    base = Path(tempfile.mkdtemp(prefix=f"run{run}-", dir=work))
    m = Mount(base / "backend", base / "mnt", "pattern", *mount_args)
    try:
        start = time.perf_counter()
        done = subprocess.run(
            [patio_binary(), "bench", "stress", str(m.mnt), "--ops", str(ops),
             "--seed", str(run), "--json", *SHAPES[shape]],
            capture_output=True, text=True, timeout=3600, check=False,
        )
        seconds = time.perf_counter() - start
    finally:
        err = m.stop() if m.running() else ""
        m.cleanup()
    report = json.loads(done.stdout) if done.stdout.strip() else {}
    mismatch = report.get("mismatch") or (done.stderr.strip() if done.returncode else None)
    shutil.rmtree(base, ignore_errors=True)
    return {
        "run": run,
        "shape": shape,
        "ops": report.get("ops", 0),
        "seconds": seconds,
        "mismatch": mismatch,
        "compactions": summary_count(err, "compactions"),
        "truncations": summary_count(err, "truncations"),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--ops", type=int, default=100_000)
    ap.add_argument("--aggressive", action="store_true",
                    help="compact after nearly every truncation and close")
    ap.add_argument("--shape", choices=sorted(SHAPES), help="one workload shape only")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    mount_args = AGGRESSIVE if a.aggressive else []
    shapes = [a.shape] if a.shape else sorted(SHAPES)
    work = Path(tempfile.mkdtemp(prefix="patio-stress-", dir="/tmp"))
    rows = []
    try:
        for run in range(a.runs):
            row = one_run(work, run, shapes[run % len(shapes)], a.ops, mount_args)
            rows.append(row)
            # Progress on stderr, also with --json.
            state = "MISMATCH" if row["mismatch"] else "ok"
            print(f"run {run:3} {row['shape']:6} {row['ops']:8,} ops {row['seconds']:6.1f} s "
                  f"{row['compactions']:6,} compactions  {state}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    bad = [r for r in rows if r["mismatch"]]
    total = {
        "runs": len(rows),
        "ops_per_run": a.ops,
        "compaction": "aggressive" if a.aggressive else "default",
        "ops": sum(r["ops"] for r in rows),
        "compactions": sum(r["compactions"] for r in rows),
        "truncations": sum(r["truncations"] for r in rows),
        "seconds": sum(r["seconds"] for r in rows),
        "mismatches": len(bad),
        "first_mismatch": bad[0]["mismatch"] if bad else None,
        "per_run": rows,
    }
    if a.json:
        print(json.dumps(total, indent=2))
    else:
        print(f"{total['runs']} runs × {a.ops:,} operations ({total['compaction']} compaction): "
              f"{total['ops']:,} operations, {total['truncations']:,} truncations, "
              f"{total['compactions']:,} compactions, {total['seconds']:.0f} s; "
              f"mismatches: {total['mismatches']}")
        if bad:
            print(bad[0]["mismatch"])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
