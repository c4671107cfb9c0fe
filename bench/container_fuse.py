"""End-to-end bandwidth of N-1 strided writes through ``patio mount container``.

P processes (8 and 16 by default) write one shared file: process ``r`` writes ``W``
blocks of 4 KiB at blocks ``r, r+P, r+2P, …`` (every P-th block, one ``os.pwrite``
each), so together they write ``P·W·4 KiB`` with no holes. Three targets, each on a
fresh directory of the same (backend) file system:

* ``pattern`` — the file is created under ``patio mount container --index pattern``:
  every process appends to its own data and index log in the backend container;
* ``raw`` — the same with ``--index raw`` (one index entry per write);
* ``passthrough`` — the same processes write one ordinary file through a FUSE
  passthrough mount of the same kind (``patio mount trace``: direct I/O, each request
  served with ``pwrite``/``pread`` on the real file and recorded in memory): the cost of
  FUSE alone, without the container;
* ``direct`` — the same processes ``pwrite`` into one ordinary file on the backend
  file system itself (the N-1 file without patio).

Phases, each timed from the moment all P processes (started and with the file open)
are released to the moment the last one has exited:

* ``write`` — the strided writes, then durability: ``close`` on the mount (which
  flushes that process's writer: data and index fsync), ``fsync`` + ``close`` on the
  plain file (directly or through the passthrough);
* ``read cold`` — every process reads back its own blocks (the same offsets, 4 KiB
  each) and checks each block's tag, after every backend file of the target (the
  plain file; the container's data and index logs) was evicted from the page cache
  with ``posix_fadvise(POSIX_FADV_DONTNEED)`` (clean pages only: everything was
  synced). This is the file-by-file stand-in for dropping the page cache; the disk
  is a virtual disk whose host may cache too;
* ``read warm`` — the same reads again, page cache warm: the software path alone.

Through the mount, the first read of the file builds its reader (every index log
read and merged), inside the timed read. Each (P, W, target) runs ``--runs`` times,
targets alternating within a round; the table shows medians (the JSON also the best
run: on a shared machine the least disturbed one). The workers are small
Python programs (the same for every target; their per-call overhead is part of every
figure). The index sizes come from ``patio container stat --json`` after unmounting.

    python bench/container_fuse.py             # table
    python bench/container_fuse.py --json      # one JSON object
    python bench/container_fuse.py --procs 8 --writes 1k --runs 1   # a quick look
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

PROG = "container_fuse"
BS = 4096
TARGETS = ["pattern", "raw", "passthrough", "direct"]

WORKER = """
import os, struct, sys
path, mode, rank, procs, writes, bs, sync = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
fd = os.open(path, os.O_WRONLY if mode == "write" else os.O_RDONLY)
buf = bytearray(bs)
print("ready", flush=True)
sys.stdin.readline()
if mode == "write":
    for i in range(writes):
        struct.pack_into("<II", buf, 0, rank, i)
        os.pwrite(fd, buf, (i * procs + rank) * bs)
    if sync:
        os.fsync(fd)
else:
    bad = 0
    for i in range(writes):
        b = os.pread(fd, bs, (i * procs + rank) * bs)
        if len(b) != bs or struct.unpack_from("<II", b) != (rank, i):
            bad += 1
    if bad:
        sys.exit(f"rank {rank}: {bad} of {writes} blocks read back wrong")
os.close(fd)
"""


def count_arg(text: str) -> int:
    """``1k`` → 1024, ``16k``, ``4096``."""
    t = text.strip().lower()
    try:
        return int(t[:-1]) << 10 if t.endswith("k") else int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a count: {text!r}") from None


class Mount(MountProcess):
    """A ``patio mount container`` (or, for ``index=None``, ``patio mount trace``) of
    ``backend`` at ``mnt``, stopped with ``fusermount3 -u``; a failure ends the benchmark
    with the mount's stderr."""

    def __init__(self, backend: Path, mnt: Path, index: str | None, *extra: str):
        self.mnt = mnt
        backend.mkdir()
        mnt.mkdir()
        if index is None:
            out = backend.parent / "trace.ptrace"
            cmd = [patio_binary(prog=PROG), "mount", "trace", str(backend), str(mnt), "--output", str(out)]
        else:
            cmd = [patio_binary(prog=PROG), "mount", "container", str(backend), str(mnt), "--index", index]
            cmd += extra
        try:
            self.start(cmd)
        except MountError as e:
            sys.exit(f"container_fuse: {e}")

    def stop(self) -> str:
        try:
            err = self.end("fusermount", timeout=120)
        except MountError as e:
            sys.exit(f"container_fuse: {e}")
        if "failures" in err:
            sys.exit(f"container_fuse: the mount reported failures: {err}")
        self.mnt.rmdir()
        return err


def phase(path: Path, mode: str, procs: int, writes: int, sync: bool) -> float:
    """Runs the P workers released together; seconds from release to the last exit."""
    argv = [sys.executable, "-c", WORKER, str(path), mode]
    tail = [str(procs), str(writes), str(BS), str(int(sync))]
    workers = [
        subprocess.Popen(
            [*argv, str(r), *tail], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for r in range(procs)
    ]
    for w in workers:
        assert w.stdout is not None
        if w.stdout.readline() != "ready\n":
            sys.exit(f"container_fuse: a {mode} worker did not start")
    start = time.perf_counter()
    for w in workers:
        assert w.stdin is not None
        w.stdin.write("go\n")
        w.stdin.flush()
    codes = [w.wait() for w in workers]
    elapsed = time.perf_counter() - start
    if any(codes):
        sys.exit(f"container_fuse: {mode} workers failed on {path}: exit codes {codes}")
    return elapsed


def evict(files: list[Path]) -> None:
    """Drops the (clean) page-cache pages of `files`."""
    for f in files:
        fd = os.open(f, os.O_RDONLY)
        try:
            os.fsync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def run_case(target: str, procs: int, writes: int, work: Path) -> dict[str, Any]:
    total = procs * writes * BS
    case = work / f"{target}-{procs}-{writes}"
    case.mkdir()
    mount = None
    try:
        container = target in ("pattern", "raw")
        if target == "direct":
            path = case / "shared.dat"
        else:
            mount = Mount(case / "backend", case / "mnt", target if container else None)
            path = mount.mnt / "shared.dat"
        path.touch()
        t_write = phase(path, "write", procs, writes, sync=not container)
        size = os.stat(path).st_size
        if size != total:
            sys.exit(f"container_fuse: {target}: size {size} after the writes, expected {total}")
        real = path if target == "direct" else case / "backend" / "shared.dat"
        evict(sorted(real.iterdir()) if container else [real])
        t_cold = phase(path, "read", procs, writes, sync=False)
        t_warm = phase(path, "read", procs, writes, sync=False)
        index: dict[str, Any] = {}
        if mount:
            mount.stop()
            mount = None
        if container:
            done = subprocess.run(
                [patio_binary(prog=PROG), "container", "stat", str(case / "backend" / "shared.dat"),
                 "--json"],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            s = json.loads(done.stdout)
            index = {k: s[k] for k in ("writers", "index_disk_bytes", "tiles", "compression_ratio")}
    finally:
        if mount:
            mount.cleanup()
        shutil.rmtree(case, ignore_errors=True)
    mib = total / (1 << 20)
    return {
        "write_mib_s": mib / t_write,
        "read_cold_mib_s": mib / t_cold,
        "read_warm_mib_s": mib / t_warm,
        "write_s": t_write,
        "read_cold_s": t_cold,
        "read_warm_s": t_warm,
        "index": index,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--procs", default="8,16", help="comma-separated process counts")
    parser.add_argument(
        "--writes", default="1k,4k,16k", help="comma-separated writes per process (1k = 1024)"
    )
    parser.add_argument("--runs", type=int, default=3, help="runs of each case (median)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--workdir", type=Path, help="scratch directory on the backend file system (default: /tmp)"
    )
    parser.add_argument("--patio", type=Path, help="patio binary (default: the repository's)")
    args = parser.parse_args()
    if args.patio:
        if not os.access(args.patio, os.X_OK):
            parser.error(f"--patio {args.patio}: not an executable")
        os.environ["PATIO_BIN"] = str(args.patio.resolve())
    try:
        procs = [int(p) for p in args.procs.split(",")]
        writes = [count_arg(w) for w in args.writes.split(",")]
    except (ValueError, argparse.ArgumentTypeError) as e:
        parser.error(str(e))
    if args.runs < 1 or min(procs) < 1 or min(writes) < 1:
        parser.error("need --runs, --procs and --writes ≥ 1")
    for tool in ("fusermount3",):
        if not shutil.which(tool):
            sys.exit(f"container_fuse: {tool} not found: run scripts/setup.sh")
    if not Path("/dev/fuse").exists():
        sys.exit("container_fuse: /dev/fuse is missing (FUSE unavailable)")

    rows = []
    with tempfile.TemporaryDirectory(prefix="patio-cfuse-", dir=args.workdir) as tmp:
        work = Path(tmp)
        for p in procs:
            for w in writes:
                runs: dict[str, list[dict[str, Any]]] = {t: [] for t in TARGETS}
                for k in range(args.runs):
                    order = TARGETS if k % 2 == 0 else list(reversed(TARGETS))
                    for t in order:
                        runs[t].append(run_case(t, p, w, work))
                        if not args.json:
                            r = runs[t][-1]
                            print(
                                f"  P={p} W={w} {t} run {k + 1}: write {r['write_s']:.2f} s, "
                                f"cold read {r['read_cold_s']:.2f} s, "
                                f"warm read {r['read_warm_s']:.2f} s",
                                file=sys.stderr,
                            )
                row: dict[str, Any] = {"procs": p, "writes": w, "bytes": p * w * BS}
                for t in TARGETS:
                    rs = runs[t]
                    keys = ("write_mib_s", "read_cold_mib_s", "read_warm_mib_s")
                    row[t] = {key: statistics.median(r[key] for r in rs) for key in keys}
                    row[t]["best"] = {key: max(r[key] for r in rs) for key in keys}
                    row[t]["index"] = rs[-1]["index"]
                    row[t]["runs"] = rs
                rows.append(row)

    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    result = {
        "workload": {
            "block": BS,
            "pattern": "process r writes blocks r, r+P, r+2P, … (every P-th 4 KiB block)",
            "runs": args.runs,
        },
        "cases": rows,
        "environment": {
            "commit": commit,
            "patio": patio_binary(prog=PROG),
            "date": time.strftime("%Y-%m-%d"),
            "cpus": os.cpu_count(),
            "kernel": platform.release(),
            "python": platform.python_version(),
        },
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(
        f"N-1 strided 4 KiB writes by P processes: patio mount container (pattern, raw "
        f"index), a FUSE passthrough (pt) and the plain file (direct); MiB/s, medians of "
        f"{args.runs} runs; index bytes on disk"
    )
    cols = [("pat", "pattern"), ("raw", "raw"), ("pt", "passthrough"), ("direct", "direct")]
    header = f"{'P':>3}{'W/proc':>8}{'MiB':>6}"
    for phase_name in ("write", "cold", "warm"):
        header += f" | {phase_name + ' ' + cols[0][0]:>10}" + "".join(
            f"{c:>8}" for c, _ in cols[1:]
        )
    print(header + f" | {'pat/dir':>7} | {'index pat':>10}{'raw':>10}")
    for r in rows:
        line = f"{r['procs']:>3}{r['writes']:>8}{r['bytes'] >> 20:>6}"
        for key in ("write_mib_s", "read_cold_mib_s", "read_warm_mib_s"):
            line += f" | {r['pattern'][key]:>10.0f}" + "".join(
                f"{r[t][key]:>8.0f}" for _, t in cols[1:]
            )
        ratio = r["pattern"]["write_mib_s"] / r["direct"]["write_mib_s"]
        index = (r["pattern"]["index"]["index_disk_bytes"], r["raw"]["index"]["index_disk_bytes"])
        print(line + f" | {ratio:>7.2f} | {index[0]:>10}{index[1]:>10}")


if __name__ == "__main__":
    main()
