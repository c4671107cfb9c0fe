"""Replays of the read streams of the real Darshan logs through every prefetch policy.

For each log in ``../shared/traces/`` the script picks the POSIX read streams of the file
with the most read requests (all its ranks; ties go to the first file name), writes them
as a patio CSV trace, creates a data file as large as their extent (random bytes up to
256 MiB, a sparse file above), and runs ``patio replay`` on it with each policy:

* ``none``, ``readahead``, ``stride``, ``pattern``, ``oracle``;
* ``markov`` untrained (it learns while it reads), and ``markov+model``: Markov started
  from the model a first replay of the same streams saved (``--save-model``/``--model``),
  i.e. trained on an identical earlier run, the most favourable training there is;
* ``pattern+model``: likewise for the pattern analyzer.

The streams of several ranks are replayed interleaved by their start times, one request
at a time, each rank with its own policy, all through one engine (one cache budget). The
MPI-IO records of the same requests are left out (they would read every byte twice).
Every read is verified against the data file (outside the timed regions).

    python bench/replay_traces.py                 # table
    python bench/replay_traces.py --json          # one JSON object
    python bench/replay_traces.py --trace ior_hdf5_4ranks --reps 1
    python bench/replay_traces.py --max-streams 16   # at most 16 ranks' streams per log
    python bench/replay_traces.py --policies readahead,pattern --latency-ms 5

``--max-streams N`` keeps the streams of the N lowest ranks (the replay is one request
at a time, so the 192 ranks of io_test5 would take an hour per policy and repetition).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "traces"
POLICIES = [
    "none",
    "readahead",
    "stride",
    "markov",
    "markov+model",
    "pattern",
    "pattern+model",
    "oracle",
]
RANDOM_LIMIT = 256 << 20

sys.path.insert(0, str(REPO / "python"))

from patio._binary import patio_binary

PROG = "replay_traces"


def select(trace: Path, out_csv: Path, max_streams: int | None = None) -> dict[str, Any]:
    """Writes the chosen streams of ``trace`` to ``out_csv`` (those of the
    ``max_streams`` lowest ranks, if given); returns what was chosen."""
    from patio.dxt import read_dxt, write_csv

    reads = [s for s in read_dxt(trace) if s.op == "read" and s.module == "POSIX" and len(s)]
    if not reads:
        sys.exit(f"replay_traces: {trace}: no POSIX read requests")
    per_file: dict[str, int] = {}
    for s in reads:
        per_file[s.file] = per_file.get(s.file, 0) + len(s)
    file = min(per_file, key=lambda f: (-per_file[f], f))
    chosen = sorted((s for s in reads if s.file == file), key=lambda s: s.rank)
    ranks = len(chosen)
    if max_streams is not None:
        chosen = chosen[:max_streams]
    write_csv(chosen, out_csv)
    extent = max(int((s.offset + s.length).max()) for s in chosen)
    return {
        "file": file,
        "files_with_reads": len(per_file),
        "streams": len(chosen),
        "streams_of_file": ranks,
        "requests": sum(len(s) for s in chosen),
        "zero_length_requests": sum(int((s.length == 0).sum()) for s in chosen),
        "read_bytes": sum(int(s.length.sum()) for s in chosen),
        "extent": extent,
    }


def data_file(directory: Path, name: str, extent: int) -> Path:
    """A data file of at least ``extent`` bytes (rounded up to 4 KiB)."""
    size = max(-(-extent // 4096) * 4096, 4096)
    path = directory / f"{name}.data"
    if path.exists() and path.stat().st_size == size:
        return path
    with path.open("wb") as f:
        if size <= RANDOM_LIMIT:
            left = size
            while left:
                n = min(left, 16 << 20)
                f.write(os.urandom(n))
                left -= n
        else:
            f.truncate(size)
    return path


def replay(
    patio: str, csv: Path, data: Path, policy: str, args: argparse.Namespace, extra: list[str]
) -> dict[str, Any]:
    cmd = [
        patio, "replay", str(csv), "--data", str(data), "--policy", policy,
        "--latency-ms", str(args.latency_ms), "--bandwidth-mbps", str(args.bandwidth_mbps),
        "--compute-ratio", str(args.compute_ratio), "--verify", "--json", *extra,
    ]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"replay_traces: {' '.join(cmd)} failed:\n{done.stderr}")
    return json.loads(done.stdout)


def run_trace(patio: str, trace: Path, work: Path, args: argparse.Namespace) -> dict[str, Any]:
    name = trace.name.removesuffix(".darshan")
    csv = work / f"{name}.csv"
    chosen = select(trace, csv, args.max_streams)
    data = data_file(args.data_dir, name, chosen["extent"])
    models = {k: work / f"{name}.{k}.model" for k in ("markov", "pattern")}
    # Training: a first replay of the same streams saves each learning policy's model.
    for kind, path in models.items():
        if f"{kind}+model" in args.policies:
            replay(patio, csv, data, kind, args, ["--save-model", str(path)])
    runs: dict[str, list[dict[str, Any]]] = {p: [] for p in args.policies}
    for rep in range(args.reps):
        order = args.policies if rep % 2 == 0 else args.policies[::-1]
        for p in order:
            base = p.removesuffix("+model")
            extra = ["--model", str(models[base])] if p.endswith("+model") else []
            runs[p].append(replay(patio, csv, data, base, args, extra))
    median = {p: sorted(r, key=lambda j: j["io_time_s"])[len(r) // 2] for p, r in runs.items()}
    none = median["none"]["io_time_s"]
    result: dict[str, Any] = {"trace": name, **chosen, "data_bytes": data.stat().st_size}
    result["policies"] = {
        p: {
            "io_time_s": j["io_time_s"],
            "io_time_s_all": [r["io_time_s"] for r in runs[p]],
            "total_time_s": j["total_time_s"],
            "cut": 1.0 - j["io_time_s"] / none if none > 0 else 0.0,
            "accuracy": j["accuracy"],
            "coverage": j["coverage"],
            "hits": j["hits"],
            "late_hits": j["late_hits"],
            "misses": j["misses"],
            "wasted_bytes": j["wasted_bytes"],
            "model_bytes": j["max_stream_model_bytes"],
            "io_mode": j["io_mode"],
        }
        for p, j in median.items()
    }
    result["mean_latency_ms"] = median["none"]["mean_latency_ms"]
    result["io_time_spread"] = {
        p: (max(v["io_time_s_all"]) - min(v["io_time_s_all"])) / none if none > 0 else 0.0
        for p, v in result["policies"].items()
    }
    return result


def share(x: float | None) -> str:
    """A share as a percentage; accuracy is null (–) when nothing was prefetched."""
    return "–" if x is None else f"{x * 100:.1f} %"


def table(results: list[dict[str, Any]]) -> str:
    out = []
    for r in results:
        out.append(
            f"{r['trace']}: {r['file']} — {r['streams']} of {r['streams_of_file']} stream(s), "
            f"{r['requests']} reads "
            f"({r['zero_length_requests']} of 0 bytes), {r['read_bytes']} bytes, "
            f"extent {r['extent']} bytes; none: {r['policies']['none']['io_time_s']:.3f} s"
        )
        out.append("| policy | I/O time | cut | accuracy | coverage | hits / late / misses |")
        out.append("|---|---|---|---|---|---|")
        for p, v in r["policies"].items():
            out.append(
                f"| {p} | {v['io_time_s']:.3f} s | {v['cut'] * 100:.1f} % "
                f"| {share(v['accuracy'])} | {share(v['coverage'])} "
                f"| {v['hits']} / {v['late_hits']} / {v['misses']} |"
            )
        out.append("")
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--traces", type=Path, default=TRACES, help="directory of .darshan logs")
    ap.add_argument("--trace", action="append", default=None, help="only this log (name)")
    ap.add_argument("--data-dir", type=Path, default=Path(tempfile.gettempdir()) / "patio-replay")
    ap.add_argument("--latency-ms", type=float, default=2.0)
    ap.add_argument("--bandwidth-mbps", type=float, default=200.0)
    ap.add_argument("--compute-ratio", type=float, default=1.0)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument(
        "--max-streams", type=int, default=None, help="replay the N lowest ranks' streams"
    )
    ap.add_argument(
        "--policies",
        default=",".join(POLICIES),
        help=f"comma-separated subset of {','.join(POLICIES)} (none is always run)",
    )
    ap.add_argument("--patio", default=None, help="patio binary (default: target/release)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args()
    wanted = {p.strip() for p in args.policies.split(",") if p.strip()}
    unknown = wanted - set(POLICIES)
    if unknown:
        sys.exit(f"replay_traces: unknown policies {sorted(unknown)} (one of {POLICIES})")
    # In the order tables list them; `none` is what every cut is measured against.
    args.policies = [p for p in POLICIES if p in wanted or p == "none"]
    if args.reps < 1:
        sys.exit("replay_traces: --reps must be at least 1")
    patio = patio_binary(args.patio, prog=PROG)
    args.data_dir.mkdir(parents=True, exist_ok=True)
    traces = sorted(args.traces.glob("*.darshan"))
    if args.trace:
        traces = [t for t in traces if t.name.removesuffix(".darshan") in args.trace]
        if not traces:
            sys.exit(f"replay_traces: no log named {args.trace} in {args.traces}")
    results = []
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="patio-replay-") as tmp:
        for trace in traces:
            t, load = time.time(), os.getloadavg()[0]
            result = run_trace(patio, trace, Path(tmp), args)
            # The machine's load: other work on the cores makes the timings noisy.
            result["load_1min"] = max(load, os.getloadavg()[0])
            results.append(result)
            print(
                f"replay_traces: {trace.name} in {time.time() - t:.0f} s "
                f"(load {result['load_1min']:.1f})",
                file=sys.stderr,
            )
    meta = {
        "command": " ".join(sys.argv),
        "latency_ms": args.latency_ms,
        "bandwidth_mbps": args.bandwidth_mbps,
        "compute_ratio": args.compute_ratio,
        "reps": args.reps,
        "policies": args.policies,
        "seconds": round(time.time() - started, 1),
    }
    if args.json:
        print(json.dumps({**meta, "traces": results}, indent=2))
    else:
        print(table(results))
        spread = max((v for r in results for v in r["io_time_spread"].values()), default=0.0)
        print(f"largest spread of I/O time across repetitions: {spread * 100:.1f} % of none")


if __name__ == "__main__":
    main()
