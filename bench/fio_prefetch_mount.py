"""fio strided reads through ``patio mount prefetch`` over the slow-store model.

One source file (256 MiB of random bytes by default) is mounted with ``patio mount
prefetch`` over the slow store (``--latency-ms 2 --bandwidth-mbps 200`` by default: every
backend request costs 2 ms + bytes / 200 MB/s, at most 4 at a time), and fio reads it
with a strided pattern: ``rw=read:<gap>`` with ``bs`` — one ``bs`` read, then a hole of
``gap`` bytes, one pass over the file (``io_size`` = the reads of one pass), ``psync``
engine, one job, ``direct=0`` (the FUSE mode alone decides whether the kernel's page
cache takes part). Cases, each on a fresh mount (so the kernel's page cache of the
mount starts empty):

* ``none-direct`` — ``--policy none --direct-io``: every fio read reaches the daemon and
  costs one backend request (the floor of what prefetching must beat);
* ``pattern-direct`` — ``--policy pattern --direct-io``: patio's online analyzer sees
  fio's reads and prefetches the next strides;
* ``none-cached`` — ``--policy none`` in cached mode: the kernel's page cache and its
  readahead sit in front; the daemon serves only what the kernel asks for;
* ``readahead-direct``, ``stride-direct`` — the Linux-like and Lustre-like policies of
  the engine, direct I/O;
* ``pattern-direct-4w`` — as ``pattern-direct`` with 4 prefetch workers instead of 2
  (a worker waits out each backend request it makes, so 2 workers keep at most 2 of
  the store's 4 requests in flight);
* ``pattern-cached`` — ``--policy pattern`` in cached mode: the policy sees the
  kernel's readahead requests instead of fio's reads.

All mounts use the engine's other defaults (64 MiB cache, 2 workers).

Each case runs ``--runs`` times (alternating the cases within a round); the table shows
the median of fio's bandwidth and completion time, fio's mean completion latency per
read, and the mount's counters of the median run (``--stats-json``): backend requests
and bytes, hits / late hits / misses, coverage and accuracy.

    python bench/fio_prefetch_mount.py            # table
    python bench/fio_prefetch_mount.py --json     # one JSON object
    python bench/fio_prefetch_mount.py --patio /path/to/patio   # another build
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

from patio._binary import patio_binary
from patio._mount_harness import MountError, MountProcess

PROG = "fio_prefetch_mount"

# name -> (policy, direct I/O, further mount options)
CASES: dict[str, tuple[str, bool, list[str]]] = {
    "none-direct": ("none", True, []),
    "pattern-direct": ("pattern", True, []),
    "none-cached": ("none", False, []),
    "readahead-direct": ("readahead", True, []),
    "stride-direct": ("stride", True, []),
    "pattern-direct-4w": ("pattern", True, ["--workers", "4"]),
    "pattern-cached": ("pattern", False, []),
}


def share(x: float | None) -> str:
    """Accuracy as a percentage; null (–) when nothing was prefetched."""
    return "–" if x is None else f"{x:.1%}"


def size_arg(text: str) -> int:
    """``64k``, ``1m``, ``4096`` → bytes."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    t = text.strip().lower()
    try:
        if t and t[-1] in units:
            return int(t[:-1]) * units[t[-1]]
        return int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r}") from None


class Mount(MountProcess):
    """A ``patio mount prefetch`` of ``src`` at ``mnt``, stopped with SIGINT; a failure
    ends the benchmark with the mount's stderr."""

    def __init__(self, src: Path, mnt: Path, stats: Path, options: list[str]):
        self.mnt, self.stats_file = mnt, stats
        mnt.mkdir()
        cmd = [patio_binary(prog=PROG), "mount", "prefetch", str(src), str(mnt), "--stats-json",
               str(stats), *options]  # fmt: skip
        try:
            self.start(cmd)
        except MountError as e:
            sys.exit(f"fio_prefetch_mount: {e}")

    def stop(self) -> dict[str, Any]:
        try:
            self.end("SIGINT")
            counters = self.stats()
        except MountError as e:
            sys.exit(f"fio_prefetch_mount: {e}")
        self.mnt.rmdir()
        return counters


def fio_read(path: Path, size: int, bs: int, gap: int) -> dict[str, Any]:
    reads = -(-size // (bs + gap))
    cmd = [
        "fio", "--name=strided", f"--filename={path}", f"--rw=read:{gap}", f"--bs={bs}",
        f"--size={size}", f"--io_size={reads * bs}", "--ioengine=psync", "--direct=0",
        "--invalidate=0", "--numjobs=1", "--output-format=json",
    ]  # fmt: skip
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"fio_prefetch_mount: fio failed:\n{done.stderr}")
    job = json.loads(done.stdout[done.stdout.index("{") :])["jobs"][0]["read"]
    if job["total_ios"] != reads:
        sys.exit(f"fio_prefetch_mount: fio made {job['total_ios']} reads, expected {reads}")
    return {
        "reads": reads,
        "bytes": job["io_bytes"],
        "bw_mib_s": job["bw_bytes"] / (1 << 20),
        "runtime_s": job["runtime"] / 1e3,
        "clat_mean_us": job["clat_ns"]["mean"] / 1e3,
        "wall_s": wall,
    }


def run_case(name: str, src: Path, work: Path, args: argparse.Namespace, k: int) -> dict:
    policy, direct, extra = CASES[name]
    options = [*extra, "--policy", policy, "--latency-ms", str(args.latency_ms),
               "--bandwidth-mbps", str(args.bandwidth_mbps)]  # fmt: skip
    options += ["--direct-io"] if direct else []
    mount = Mount(src, work / f"mnt-{name}-{k}", work / f"stats-{name}-{k}.json", options)
    try:
        fio = fio_read(mount.mnt / "data.bin", args.size, args.bs, args.gap)
    finally:
        counters = mount.stop() if mount.running() else {}
        mount.cleanup()
    return {"fio": fio, "mount": counters}


def summarize(name: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    policy, direct, extra = CASES[name]
    by_time = sorted(runs, key=lambda r: r["fio"]["runtime_s"])
    median = by_time[len(by_time) // 2]
    m = median["mount"]
    return {
        "case": name,
        "policy": policy,
        "fuse_mode": "direct_io" if direct else "cached",
        "mount_options": extra,
        "runs": len(runs),
        "bw_mib_s": statistics.median(r["fio"]["bw_mib_s"] for r in runs),
        "runtime_s": statistics.median(r["fio"]["runtime_s"] for r in runs),
        "runtime_min_s": by_time[0]["fio"]["runtime_s"],
        "runtime_max_s": by_time[-1]["fio"]["runtime_s"],
        "clat_mean_us": statistics.median(r["fio"]["clat_mean_us"] for r in runs),
        "fio_reads": median["fio"]["reads"],
        "daemon_requests": m["requests"],
        "daemon_read_mib": m["read_bytes"] / (1 << 20),
        "backend_requests": m["backend_requests"],
        "backend_mib": m["backend_bytes"] / (1 << 20),
        "hits": m["hits"],
        "late_hits": m["late_hits"],
        "misses": m["misses"],
        "coverage": m["coverage"],
        "accuracy": m["accuracy"],
        "io_mode": m["io_mode"],
        "all_runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=size_arg, default=256 << 20, help="file size")
    parser.add_argument("--bs", type=size_arg, default=64 << 10, help="fio block size")
    parser.add_argument("--gap", type=size_arg, default=64 << 10, help="hole after a read")
    parser.add_argument("--latency-ms", type=float, default=2.0)
    parser.add_argument("--bandwidth-mbps", type=float, default=200.0)
    parser.add_argument("--runs", type=int, default=3, help="runs of each case")
    parser.add_argument(
        "--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--workdir", type=Path, help="scratch directory (default: a temp dir)")
    parser.add_argument("--patio", type=Path, help="patio binary (default: the repository's)")
    args = parser.parse_args()
    if args.patio:
        if not os.access(args.patio, os.X_OK):
            parser.error(f"--patio {args.patio}: not an executable")
        os.environ["PATIO_BIN"] = str(args.patio.resolve())
    cases = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = [c for c in cases if c not in CASES]
    if unknown or not cases:
        parser.error(f"--cases: unknown {', '.join(unknown) or '(none given)'}")
    if args.runs < 1 or args.bs <= 0 or args.gap < 0 or args.size < args.bs:
        parser.error("need --runs ≥ 1, --bs > 0, --gap ≥ 0 and --size ≥ --bs")
    for tool in ("fio", "fusermount3"):
        if not shutil.which(tool):
            sys.exit(f"fio_prefetch_mount: {tool} not found: run scripts/setup.sh")
    if not Path("/dev/fuse").exists():
        sys.exit("fio_prefetch_mount: /dev/fuse is missing (FUSE unavailable)")

    with tempfile.TemporaryDirectory(prefix="patio-fio-", dir=args.workdir) as tmp:
        work = Path(tmp)
        src = work / "src"
        src.mkdir()
        with (src / "data.bin").open("wb") as f:
            left = args.size
            while left > 0:
                f.write(os.urandom(min(left, 1 << 20)))
                left -= 1 << 20
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in cases}
        for k in range(args.runs):
            order = cases if k % 2 == 0 else list(reversed(cases))
            for name in order:
                runs[name].append(run_case(name, src, work, args, k))
                if not args.json:
                    r = runs[name][-1]["fio"]
                    print(f"  run {k + 1} {name}: {r['runtime_s']:.2f} s", file=sys.stderr)

    rows = [summarize(c, runs[c]) for c in cases]
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    result = {
        "workload": {
            "file_bytes": args.size,
            "bs": args.bs,
            "gap": args.gap,
            "fio": f"rw=read:{args.gap} bs={args.bs} ioengine=psync direct=0, one pass",
            "slow_store": {
                "latency_ms": args.latency_ms,
                "bandwidth_mbps": args.bandwidth_mbps,
                "concurrency": 4,
            },
        },
        "cases": rows,
        "environment": {
            "commit": commit,
            "patio": patio_binary(prog=PROG),
            "date": time.strftime("%Y-%m-%d"),
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "fio": subprocess.run(
                ["fio", "--version"], capture_output=True, text=True, check=False
            ).stdout.strip(),
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    w = result["workload"]
    print(
        f"fio strided reads through patio mount prefetch: {args.size >> 20} MiB file, "
        f"{w['fio']}; slow store {args.latency_ms} ms + {args.bandwidth_mbps} MB/s, "
        f"4 concurrent; medians of {args.runs} runs"
    )
    header = (
        f"{'case':<17}{'FUSE mode':<11}{'MiB/s':>8}{'time s':>8}{'clat µs':>9}"
        f"{'daemon reqs':>12}{'backend reqs':>13}{'backend MiB':>12}"
        f"{'hit/late/miss':>19}{'cover':>7}{'accur':>7}"
    )
    print(header)
    for r in rows:
        hlm = f"{r['hits']}/{r['late_hits']}/{r['misses']}"
        print(
            f"{r['case']:<17}{r['fuse_mode']:<11}{r['bw_mib_s']:>8.1f}{r['runtime_s']:>8.2f}"
            f"{r['clat_mean_us']:>9.0f}{r['daemon_requests']:>12}{r['backend_requests']:>13}"
            f"{r['backend_mib']:>12.1f}{hlm:>19}{r['coverage']:>7.1%}{share(r['accuracy']):>7}"
        )


if __name__ == "__main__":
    main()
